"""`graphpipe generate tag DEST`: a text-attributed graph in the ogbn-arxiv-with-text layout
(OGB raw folder + ``mapping/nodeidx2paperid.csv.gz`` + ``titleabs.tsv``;
:mod:`graphpipe.synthetic.tag`). Ingest it with
``graphpipe ingest DEST STORE --text DEST/titleabs.tsv``."""

from __future__ import annotations

from pathlib import Path

import click


@click.command(name="tag")
@click.argument("dest", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--nodes", type=click.IntRange(16), default=4000, show_default=True)
@click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(2), default=8,
              show_default=True)
@click.option("--avg-degree", type=click.FloatRange(1), default=10.0, show_default=True)
@click.option("--feature-dim", type=click.IntRange(1), default=32, show_default=True)
@click.option("--homophily", type=click.FloatRange(0, 1), default=0.8, show_default=True)
@click.option("--feature-noise", type=click.FloatRange(0), default=2.5, show_default=True,
              help="Raw-feature noise (higher: the raw features say less).")
@click.option("--text-noise", type=click.FloatRange(0, 1), default=0.4, show_default=True,
              help="Fraction of nodes whose text is about a random class.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace DEST if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
def tag(dest, nodes, num_classes, avg_degree, feature_dim, homophily, feature_noise, text_noise,
        seed, overwrite, quiet) -> None:
    """A text-attributed graph: class partly in the text, partly in the neighbourhood."""
    from graphpipe.cli.generate import _commit

    from graphpipe.synthetic.tag import tag_graph, write_tag

    graph, titles, abstracts = tag_graph(nodes, num_classes, avg_degree=avg_degree,
                                         feature_dim=feature_dim, homophily=homophily,
                                         feature_noise=feature_noise, text_noise=text_noise,
                                         seed=seed)

    def write(folder: Path, progress) -> None:
        write_tag(folder, graph, titles, abstracts, seed=seed)

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
                   f"{feature_dim} features, {num_classes} classes, text in {dest}/titleabs.tsv")
