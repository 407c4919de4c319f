"""`graphpipe generate`: write a synthetic dataset to a folder (rmat, community, papers100m-bin,
link, mag, mag240m).

    graphpipe generate rmat DEST --scale 21 --edge-factor 16 [--feature-dim 100]
        [--num-classes 10] [--binary] [--seed 0]
    graphpipe generate community DEST --nodes 20000 --num-classes 10 --avg-degree 10
        --feature-dim 64 [--homophily 0.8] [--binary] [--seed 0]
    graphpipe generate papers100m-bin DEST --nodes 8400000 --edges-per-node 5 --dim 128
        [--num-classes 172] [--label-frac 0.014] [--seed 0]
    graphpipe generate link DEST [--style collab|citation2] --nodes 4000 --avg-degree 6
        [--feature-dim 32] [--num-neg 3000] [--seed 0]
    graphpipe generate mag DEST [--papers 20000 --authors 30000 --institutions 500
        --fields 2000 --num-classes 20 --feature-dim 64] [--seed 0]
    graphpipe generate mag240m DEST [--papers 20000 --authors 30000 --institutions 500
        --num-classes 20 --feature-dim 64 --label-frac 0.3] [--seed 0]
    graphpipe generate tag DEST [--nodes 4000 --num-classes 8 --text-noise 0.4
        --feature-noise 2.5] [--seed 0]

``papers100m-bin`` writes OGB's ``papers100M-bin`` layout (``raw/data.npz`` deflated as
``ogb.io.DatasetSaver`` writes it, ``raw/node-label.npz`` with NaN for unlabelled nodes,
``split/time/``) in bounded memory: see :mod:`graphpipe.synthetic.papers`.

Every generator takes ``--num-classes`` (``--classes`` is an alias).

``--format`` picks the layout of DEST:

- ``ogb`` (default): OGB's node-property raw folder (``raw/``, ``split/random/``);
  ``--binary`` writes ``raw/data.npz`` instead of the CSV files. The release note
  ``RELEASE_v1.txt`` records the generator and its arguments.
- ``csv`` / ``tsv`` / ``parquet``: ``edges.<ext>`` (src, dst), ``nodes.<ext>``
  (id, label, f0..f{F-1}), ``split/{train,valid,test}.<ext>`` (id), with IDs of
  ``--id-kind``, and ``generate.json`` describing them.
- ``npz``: ``graph.npz`` (edge_index, x, y, train_idx, valid_idx, test_idx,
  num_nodes) and ``generate.json``.

DEST is written into a temporary sibling folder and renamed into place when
complete. An existing DEST is an error (exit code 2) unless ``--overwrite``.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

FORMATS = ("ogb", "csv", "tsv", "parquet", "npz")
ID_KINDS = ("dense", "sparse-int", "string")


class GenerateError(Exception):
    """A one-line error for the user; ``exit_code`` 2 for bad arguments or destinations."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def _fail(message: str, exit_code: int) -> None:
    click.echo(f"Error: {message}", err=True)
    click.get_current_context().exit(exit_code)


# ---------------------------------------------------------------------------
# progress


class _Progress:
    """Progress bars on stderr (rich), or nothing when quiet or stderr is not a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._progress = None
        self._tasks: dict[str, Any] = {}

    @contextmanager
    def running(self):
        if not self.enabled:
            yield self
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            SpinnerColumn,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
            TaskProgressColumn(), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False,
        )
        with self._progress:
            yield self
        self._progress = None

    @contextmanager
    def stage(self, description: str):
        """An indeterminate bar for one step, completed when the block ends."""
        if self._progress is None:
            yield
            return
        task = self._progress.add_task(description, total=None)
        yield
        self._progress.update(task, total=1, completed=1)

    def update(self, label: str, done: int, total: int) -> None:
        if self._progress is None:
            return
        task = self._tasks.get(label)
        if task is None:
            task = self._tasks[label] = self._progress.add_task(f"writing {label}", total=total)
        self._progress.update(task, completed=done, total=total)

    @property
    def callback(self) -> Callable[[str, int, int], None] | None:
        return self.update if self.enabled else None


# ---------------------------------------------------------------------------
# writing


def _write_dataset(graph, folder: Path, *, name: str, fmt: str, binary: bool, id_kind: str,
                   feature_layout: str, seed: int, progress: _Progress) -> dict[str, Any]:
    """Write ``graph`` into the (empty) ``folder``; returns a description for generate.json."""
    from graphpipe import synthetic as gen

    params = dict(graph.params)
    counts = {"num_nodes": graph.num_nodes, "num_edges": graph.num_edges,
                  "feature_dim": graph.feature_dim, "num_classes": graph.num_classes,
                  "splits": {name: len(ids) for name, ids in graph.splits.items()}}
    if fmt == "ogb":
        note = (f"# Release note for {name}\n\n### v1: generated by graphpipe\n\n"
                + json.dumps({"params": params, **counts}, indent=2) + "\n")
        gen.write_ogb_raw(folder, graph, binary=binary, release_note=note,
                          progress=progress.callback)
        return {}
    description: dict[str, Any] = {"format": fmt, "params": params, **counts}
    if fmt == "npz":
        with progress.stage("writing graph.npz"):
            gen.write_npz(folder / "graph.npz", graph)
        description["files"] = {"graph": "graph.npz"}
        return description
    ext = fmt
    ids = gen.external_ids(graph.num_nodes, id_kind, seed=seed)
    with progress.stage(f"writing edges.{ext}"):
        gen.write_edge_list(folder / f"edges.{ext}", graph.src, graph.dst, format=fmt, ids=ids)
    with progress.stage(f"writing nodes.{ext}"):
        gen.write_node_table(folder / f"nodes.{ext}", ids, graph.features, graph.labels,
                             format=fmt, feature_layout=feature_layout)
    for split, split_ids in graph.splits.items():
        gen.write_table_file(folder / "split" / f"{split}.{ext}", {"id": ids[split_ids]},
                             format=fmt)
    description.update(
        id_kind=id_kind,
        feature_layout=feature_layout,
        files={
            "edges": {"path": f"edges.{ext}", "columns": ["src", "dst"]},
            "nodes": {"path": f"nodes.{ext}", "id_column": "id",
                      "label_column": "label" if graph.labels is not None else None,
                      "feature_columns": (
                          [f"f{j}" for j in range(graph.feature_dim)]
                          if feature_layout == "columns" else ["features"]
                      ) if graph.features is not None else []},
            "splits": {name: f"split/{name}.{ext}" for name in graph.splits},
        },
    )
    return description


def _run(dest: str, make_graph: Callable[[], Any], *, fmt: str, binary: bool, overwrite: bool,
         quiet: bool, id_kind: str, feature_layout: str, seed: int) -> None:
    if binary and fmt != "ogb":
        _fail(f"--binary applies to --format ogb only (got --format {fmt})", 2)
    if feature_layout != "columns" and fmt != "parquet":
        _fail(f"--feature-layout {feature_layout} needs --format parquet (got --format {fmt})", 2)
    made = {}

    def write(folder: Path, progress: _Progress) -> None:
        with progress.stage("generating graph"):
            try:
                graph = made["graph"] = make_graph()
            except ValueError as exc:
                raise GenerateError(str(exc)) from None
        description = _write_dataset(graph, folder, name=Path(dest).name, fmt=fmt,
                                     binary=binary, id_kind=id_kind,
                                     feature_layout=feature_layout, seed=seed,
                                     progress=progress)
        if description:
            (folder / "generate.json").write_text(json.dumps(description, indent=2) + "\n")

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        graph = made["graph"]
        layout = f"{fmt}{' (binary)' if binary else ''}"
        click.echo(f"wrote {dest}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
                   f"{graph.feature_dim} features, {graph.num_classes or 0} classes, {layout}")


def _commit(dest: str, write: Callable[[Path, _Progress], None], *, overwrite: bool,
            quiet: bool) -> None:
    """Run ``write(folder, progress)`` into a temporary sibling of ``dest``, then rename it
    into place; errors become one line and exit code 2."""
    from graphpipe.store.atomic import (
        check_destination,
        commit_directory,
        remove_stale_temps,
        temp_sibling,
    )
    from graphpipe.store.errors import StoreError

    dest_path = Path(dest)
    try:
        try:
            check_destination(dest_path, overwrite=overwrite, require_store=False)  # a dataset, not a store
        except StoreError as exc:
            raise GenerateError(str(exc)) from None
        remove_stale_temps(dest_path)
        progress = _Progress(enabled=not quiet and sys.stderr.isatty())
        with progress.running():
            tmp = temp_sibling(dest_path)
            try:
                write(tmp, progress)
                with progress.stage("committing"):
                    commit_directory(tmp, dest_path, overwrite=overwrite, require_store=False)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
    except GenerateError as exc:
        _fail(str(exc), exc.exit_code)
    except (StoreError, OSError) as exc:
        _fail(str(exc), 2)


# ---------------------------------------------------------------------------
# the commands


def _common_options(fn):
    options = [
        click.argument("dest", type=click.Path(file_okay=True, dir_okay=True)),
        click.option("--format", "fmt", type=click.Choice(FORMATS), default="ogb",
                     show_default=True, help="Layout of DEST."),
        click.option("--binary", is_flag=True,
                     help="OGB layout with raw/data.npz instead of the CSV files."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--train-frac", type=float, default=0.6, show_default=True),
        click.option("--valid-frac", type=float, default=0.2, show_default=True),
        click.option("--id-kind", type=click.Choice(ID_KINDS), default="dense",
                     show_default=True, help="External node IDs (csv / tsv / parquet formats)."),
        click.option("--feature-layout", type=click.Choice(("columns", "list", "fixed_list")),
                     default="columns", show_default=True,
                     help="Node features as columns f0.. or one list column (parquet)."),
        click.option("--overwrite", is_flag=True, help="Replace DEST if it exists."),
        click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.group(name="generate", context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Write a synthetic dataset to a folder, ready for `graphpipe ingest`: one of the six
    generators below (homogeneous: rmat, community, papers100m-bin, link; typed: mag,
    mag240m)."""


@command.command()
@_common_options
@click.option("--scale", type=click.IntRange(1, 40), default=16, show_default=True,
              help="2**SCALE nodes.")
@click.option("--edge-factor", type=click.IntRange(0), default=16, show_default=True,
              help="EDGE_FACTOR * 2**SCALE edges.")
@click.option("--feature-dim", type=click.IntRange(0), default=100, show_default=True)
@click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(0), default=10,
              show_default=True, help="Number of classes (--classes is the same).")
@click.option("--no-permute", is_flag=True, help="Keep R-MAT's vertex IDs (hubs near 0).")
@click.option("--threads", type=click.IntRange(1), default=None, help="Threads (default: all).")
def rmat(dest, fmt, binary, seed, train_frac, valid_frac, id_kind, feature_layout, overwrite,
         quiet, scale, edge_factor, feature_dim, num_classes, no_permute, threads) -> None:
    """R-MAT power-law topology with random features, labels and splits."""
    from graphpipe.synthetic import rmat_graph

    def make():
        return rmat_graph(scale, edge_factor, feature_dim=feature_dim, num_classes=num_classes,
                          train_frac=train_frac, valid_frac=valid_frac, seed=seed,
                          permute=not no_permute, num_threads=threads)

    _run(dest, make, fmt=fmt, binary=binary, overwrite=overwrite, quiet=quiet, id_kind=id_kind,
         feature_layout=feature_layout, seed=seed)


@command.command()
@_common_options
@click.option("--nodes", type=click.IntRange(2), default=20000, show_default=True)
@click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(1), default=10,
              show_default=True, help="Number of classes (--classes is the same).")
@click.option("--avg-degree", type=click.FloatRange(0), default=10.0, show_default=True)
@click.option("--feature-dim", type=click.IntRange(0), default=64, show_default=True)
@click.option("--homophily", type=click.FloatRange(0, 1), default=0.8, show_default=True)
@click.option("--feature-noise", type=click.FloatRange(0), default=0.8, show_default=True)
@click.option("--degree-skew", type=click.FloatRange(0), default=1.0, show_default=True)
@click.option("--directed", is_flag=True, help="One edge per pair instead of both directions.")
def community(dest, fmt, binary, seed, train_frac, valid_frac, id_kind, feature_layout,
              overwrite, quiet, nodes, num_classes, avg_degree, feature_dim, homophily,
              feature_noise, degree_skew, directed) -> None:
    """Community graph: class-homophilous edges and a noisy class signal in the features."""
    from graphpipe.synthetic import community_graph

    def make():
        return community_graph(nodes, num_classes, avg_degree=avg_degree, feature_dim=feature_dim,
                               homophily=homophily, feature_noise=feature_noise,
                               degree_skew=degree_skew, undirected=not directed,
                               train_frac=train_frac, valid_frac=valid_frac, seed=seed)

    _run(dest, make, fmt=fmt, binary=binary, overwrite=overwrite, quiet=quiet, id_kind=id_kind,
         feature_layout=feature_layout, seed=seed)


@command.command(name="papers100m-bin")
@click.argument("dest", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--nodes", type=click.IntRange(2), default=1 << 20, show_default=True,
              help="Number of nodes N (the real papers100M: 111059956).")
@click.option("--edges-per-node", type=click.IntRange(0), default=5, show_default=True,
              help="E = N * EDGES_PER_NODE R-MAT edges.")
@click.option("--dim", "--feature-dim", "dim", type=click.IntRange(1), default=128,
              show_default=True, help="Feature dimension (--feature-dim is the same).")
@click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(1), default=172,
              show_default=True, help="Number of classes (--classes is the same).")
@click.option("--label-frac", type=click.FloatRange(0, 1), default=0.014, show_default=True,
              help="Fraction of labelled nodes (the rest have NaN labels).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--compress-level", type=click.IntRange(1, 9), default=1, show_default=True,
              help="zlib level of the deflated npz members (the format is the same at each).")
@click.option("--overwrite", is_flag=True, help="Replace DEST if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars or summary.")
def papers100m_bin(dest, nodes, edges_per_node, dim, num_classes, label_frac, seed,
                   compress_level, overwrite, quiet) -> None:
    """An ogbn-papers100M-like folder in OGB's papers100M-bin layout (raw/data.npz,
    raw/node-label.npz with NaN for unlabelled nodes, split/time/), written in bounded
    memory whatever N."""
    from graphpipe.synthetic.papers import PapersSpec, write_papers100m_bin

    try:
        spec = PapersSpec(nodes, edges_per_node, dim, num_classes, label_frac, seed)
    except ValueError as exc:
        _fail(str(exc), 2)

    def write(folder: Path, progress: _Progress) -> None:
        write_papers100m_bin(folder, spec, compresslevel=compress_level,
                             progress=progress.callback)

    if not quiet:  # --nodes 8400000 writes 4.1 GB: say so before it starts
        raw = spec.num_nodes * (spec.dim * 4 + 4 + 8) + spec.num_edges * 16
        size = f"{raw / 1e9:.1f} GB" if raw >= 1e9 else f"{raw / 1e6:.0f} MB"
        click.echo(f"writing {dest}: up to {size} (float32 features, int64 edges, "
                   f"before deflate); a store ingested from it takes about as much", err=True)
    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {spec.num_nodes} nodes, {spec.num_edges} edges, "
                   f"{spec.dim} features, {spec.num_classes} classes, papers100M-bin")


@command.command(name="link")
@click.argument("dest", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--style", type=click.Choice(("collab", "citation2")), default="collab",
              show_default=True, help="ogbl-collab layout (undirected, weight + year, edge_neg "
                                      "pairs) or ogbl-citation2 (directed, target_node_neg).")
@click.option("--nodes", type=click.IntRange(4), default=4000, show_default=True)
@click.option("--avg-degree", type=click.FloatRange(1), default=6.0, show_default=True)
@click.option("--feature-dim", type=click.IntRange(1), default=32, show_default=True)
@click.option("--pool", type=click.IntRange(1), default=100, show_default=True,
              help="Partners are drawn from each node's POOL nearest nodes in latent space.")
@click.option("--noise", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Feature noise (0: features are a linear image of the latent positions).")
@click.option("--num-neg", type=click.IntRange(1), default=3000, show_default=True,
              help="collab: negative pairs in valid and test.")
@click.option("--neg-per-source", type=click.IntRange(1), default=100, show_default=True,
              help="citation2: negatives per valid/test edge.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace DEST if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
def link(dest, style, nodes, avg_degree, feature_dim, pool, noise, num_neg, neg_per_source, seed,
         overwrite, quiet) -> None:
    """A link-prediction folder in OGB's link-property layout (ogbl-collab-like or
    ogbl-citation2-like): raw/ and split/time/{train,valid,test}.pt
    (:mod:`graphpipe.synthetic.link`)."""
    from graphpipe.synthetic.link import link_dataset, write_ogb_link

    if pool >= nodes:
        _fail(f"'--pool' must be below '--nodes' (got {pool} >= {nodes})", 2)
    data = link_dataset(nodes, avg_degree=avg_degree, feature_dim=feature_dim, pool=pool,
                        noise=noise, seed=seed)

    def write(folder: Path, progress: _Progress) -> None:
        write_ogb_link(folder, data, style=style, num_neg=num_neg, neg_per_source=neg_per_source,
                       seed=seed)

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {data.num_nodes} nodes, {data.num_edges} edges, "
                   f"{feature_dim} features, ogbl-{style} layout")


def _mag_options(fn):
    options = [
        click.argument("dest", type=click.Path(file_okay=True, dir_okay=True)),
        click.option("--papers", type=click.IntRange(1), default=20000, show_default=True),
        click.option("--authors", type=click.IntRange(1), default=30000, show_default=True),
        click.option("--institutions", type=click.IntRange(1), default=500, show_default=True),
        click.option("--fields", type=click.IntRange(1), default=2000, show_default=True,
                     help="Number of field_of_study nodes."),
        click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(1),
                     default=20, show_default=True),
        click.option("--feature-dim", type=click.IntRange(1), default=64, show_default=True),
        click.option("--homophily", type=click.FloatRange(0, 1), default=0.75, show_default=True,
                     help="Share of a paper's authors, fields and citations drawn from its class."),
        click.option("--feature-signal", type=click.FloatRange(0), default=0.12, show_default=True,
                     help="Weight of the class prototype in the paper features (noise is 1)."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--overwrite", is_flag=True, help="Replace DEST if it exists."),
        click.option("--quiet", "-q", is_flag=True, help="No summary."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _mag_data(papers, authors, institutions, fields, num_classes, feature_dim, homophily,
              feature_signal, seed):
    from graphpipe.synthetic.mag import mag_dataset

    return mag_dataset(papers, authors, institutions, fields, num_classes, feature_dim,
                       homophily=homophily, feature_signal=feature_signal, seed=seed)


@command.command(name="mag")
@_mag_options
def mag(dest, overwrite, quiet, **params) -> None:
    """An ogbn-mag-like typed graph (paper, author, institution, field_of_study) in OGB's
    heterogeneous raw layout: raw/num-node-dict.csv.gz, raw/relations/<src>___<rel>___<dst>/,
    raw/node-feat/paper/, raw/node-label/paper/, split/time/paper/
    (:mod:`graphpipe.synthetic.mag`)."""
    from graphpipe.synthetic.mag import write_ogb_mag

    data = _mag_data(**params)

    def write(folder: Path, progress: _Progress) -> None:
        write_ogb_mag(folder, data)

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {sum(data.num_nodes_dict.values())} nodes of "
                   f"{len(data.num_nodes_dict)} types, {data.num_edges} edges of {len(data.edges)} "
                   f"relations, {data.num_classes} classes, ogbn-mag layout")


@command.command(name="mag240m")
@click.argument("dest", type=click.Path(file_okay=True, dir_okay=True))
@click.option("--papers", type=click.IntRange(1), default=20000, show_default=True)
@click.option("--authors", type=click.IntRange(1), default=30000, show_default=True)
@click.option("--institutions", type=click.IntRange(1), default=500, show_default=True)
@click.option("--num-classes", "--classes", "num_classes", type=click.IntRange(1), default=20,
              show_default=True)
@click.option("--feature-dim", type=click.IntRange(1), default=64, show_default=True,
              help="Width of the float16 paper features (MAG240M: 768).")
@click.option("--label-frac", type=click.FloatRange(0, 1, min_open=True), default=0.3,
              show_default=True, help="Fraction of labelled papers (the rest: NaN labels).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace DEST if it exists.")
@click.option("--quiet", "-q", is_flag=True, help="No summary.")
def mag240m(dest, papers, authors, institutions, num_classes, feature_dim, label_frac, seed,
            overwrite, quiet) -> None:
    """A MAG240M-like typed graph in the OGB-LSC layout: DEST/mag240m_kddcup2021/ with
    meta.pt, split_dict.pt, processed/<src>___<rel>___<dst>/edge_index.npy and
    processed/paper/node_feat.npy (float16) (:mod:`graphpipe.synthetic.mag240m`)."""
    from graphpipe.synthetic.mag240m import mag240m_dataset, write_mag240m

    data = mag240m_dataset(papers, authors, institutions, num_classes, feature_dim,
                           label_frac=label_frac, seed=seed)

    def write(folder: Path, progress: _Progress) -> None:
        write_mag240m(folder, data)

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {sum(data.num_nodes_dict.values())} nodes of "
                   f"{len(data.num_nodes_dict)} types, {data.num_edges} edges of {len(data.edges)} "
                   f"relations, {data.num_classes} classes, MAG240M layout")


@command.command(name="tag")
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
    """A text-attributed graph in the ogbn-arxiv-with-text layout (OGB raw folder,
    mapping/nodeidx2paperid.csv.gz, titleabs.tsv): the class lives partly in the text,
    partly in the neighbourhood (:mod:`graphpipe.synthetic.tag`). Ingest it with
    `graphpipe ingest DEST STORE --text DEST/titleabs.tsv`."""
    from graphpipe.synthetic.tag import tag_graph, write_tag

    graph, titles, abstracts = tag_graph(nodes, num_classes, avg_degree=avg_degree,
                                         feature_dim=feature_dim, homophily=homophily,
                                         feature_noise=feature_noise, text_noise=text_noise,
                                         seed=seed)

    def write(folder: Path, progress: _Progress) -> None:
        write_tag(folder, graph, titles, abstracts, seed=seed)

    _commit(dest, write, overwrite=overwrite, quiet=quiet)
    if not quiet:
        click.echo(f"wrote {dest}: {graph.num_nodes} nodes, {graph.num_edges} edges, "
                   f"{feature_dim} features, {num_classes} classes, text in {dest}/titleabs.tsv")
