"""`graphpipe ingest SOURCE DEST`: turn a dataset (homogeneous or typed) into a store.

The flags map to reader options (the format's) and :class:`IngestOptions`; the format
registry (:mod:`graphpipe.ingest.formats`) detects the format once, or takes ``--format``,
and refuses in one line the options that format does not take.
"""

from __future__ import annotations

import time
from typing import Any

import click
from graphpipe.cli import ingest_text
from graphpipe.cli._common import friendly_errors, human_bytes

from graphpipe.ingest.formats import FORMATS, names


def _help() -> str:
    rows = "\n".join(f"  {fmt.name:<15} {fmt.summary}" for fmt in FORMATS)
    return ("Ingest SOURCE (a dataset; its format is detected, or given with --format) into "
            "the store DEST.\n\n\b\nFormats, in the order they are detected:\n" + rows)


def _column(value: str | None) -> str | int | None:
    """``--src 0`` is the first column; any other value is a column name."""
    return int(value) if value is not None and value.isdigit() else value


@click.command("ingest", help=_help())
@click.argument("source", type=click.Path(path_type=str))
@click.argument("dest", type=click.Path(path_type=str))
@click.option("--format", "format_name", type=click.Choice(names()), default=None,
              help="The format of SOURCE (default: detected; see the list above).")
@click.option("--overwrite", is_flag=True,
              help="Replace DEST if it is a graphpipe store (only once the new store is complete; "
                   "never a plain folder or an input).")
@click.option("--name", default=None, help="Dataset name recorded in the manifest.")
@click.option("--add-reverse-edges", is_flag=True,
              help="Add d→s for every s→d (OGB's add_inverse_edge); typed datasets: a relation "
                   "(dst, rev_<rel>, src) for every (src, rel, dst), as PyG's ToUndirected(merge=False).")
@click.option("--remove-self-loops", is_flag=True, help="Drop edges v→v.")
@click.option("--dedup", "deduplicate", is_flag=True, help="Keep one copy of repeated edges.")
@click.option("--no-sort", "no_sort", is_flag=True, help="Keep edge-list order within each row.")
@click.option("--csr", "build_csr", is_flag=True, help="Also store the CSR (by source) topology.")
@click.option("--edge-ids", "edge_ids", type=click.Choice(["auto", "always", "never"]), default="auto",
              show_default=True,
              help="Store csc/edge_id (each slot's input edge): auto = only when the dataset has "
                   "edge features or weights, which need it.")
@click.option("--feature-dtype", type=click.Choice(["float32", "float16"]), default="float32", show_default=True)
@click.option("--compression", type=click.Choice(["none", "zstd"]), default="none", show_default=True,
              help="Feature compression (none keeps features memory-mappable).")
@click.option("--memory-limit", default=None, help="Bound on the working set, e.g. 2GB (out-of-core build).")
@click.option("--allow-nonfinite", is_flag=True, help="Keep NaN/inf features instead of refusing them.")
@click.option("--clamp-float16", is_flag=True,
              help="With --feature-dtype float16, clamp values beyond ±65504 instead of refusing them.")
@click.option("--allow-isolated-nodes", is_flag=True,
              help="Accept a declared node count far above what the edges touch (isolated nodes).")
@click.option("--split", "split", default=None, help="OGB: which split/<name> to use.")
@click.option("--from-raw", "from_raw", is_flag=True,
              help="OGB: read only raw/ (never processed/) and split CSVs rather than split_dict.pt.")
@click.option("--src", default=None, help="Edge list: source column, a name or a 0-based position "
              "[default: src, or the first column without a header].")
@click.option("--dst", default=None, help="Edge list: destination column [default: dst, or the "
              "second column without a header].")
@click.option("--header/--no-header", "header", default=None,
              help="Edge list: whether the first line names the columns [default: detected: a "
                   "first line of numbers only is an edge].")
@click.option("--delimiter", default=None,
              help="Edge list: field separator [default: by extension, else sniffed; runs of "
                   "spaces and tabs are one separator].")
@click.option("--weight", default=None,
              help="Edge list: weight column (stored as an edge feature in its own type: "
                   "int64 for integers, so large integer weights stay exact).")
@click.option("--time-column", default=None,
              help="Edge list: integer timestamp column of each edge (stored as csc/time, for "
                   "temporal sampling).")
@click.option("--nodes", default=None, type=click.Path(), help="Edge list: node table (CSV/Parquet).")
@click.option("--node-id", default=None, help="Node table: external ID column [default: id].")
@click.option("--features", "feature_columns", default=None,
              help="Node table: one list column, comma-separated numeric columns, or a glob "
                   "pattern such as 'f*' (the matching columns in table order).")
@click.option("--label", default=None, help="Node table: label column.")
@click.option("--split-dir", default=None, type=click.Path(),
              help="Edge list: a folder of split files train/valid/test.{csv,tsv,parquet} "
                   "(one node ID column: --node-id or the only column).")
@click.option("--node-features", "node_features", default=None, type=click.Path(),
              help="A .npy (N, F) matrix to use as node features.")
@click.option("--target-type", default=None,
              help="Typed datasets: the node type with labels and splits (default: the labelled type).")
@click.option("--random-split", default=None, metavar="TRAIN,VALID,TEST",
              help="Store a seeded random node split, e.g. 0.8,0.1,0.1 (of the labelled nodes; "
                   "PyG's RandomNodeSplit sizes), for a dataset without splits.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --random-split.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
@ingest_text.text_options
@friendly_errors
def command(source: str, dest: str, format_name: str | None, overwrite: bool, name: str | None,
            add_reverse_edges: bool, remove_self_loops: bool, deduplicate: bool, no_sort: bool,
            build_csr: bool, edge_ids: str, feature_dtype: str, compression: str,
            memory_limit: str | None, allow_nonfinite: bool, clamp_float16: bool,
            allow_isolated_nodes: bool, random_split: str | None, seed: int, quiet: bool,
            **reader_flags: Any) -> None:
    from graphpipe.ingest import IngestOptions, ingest
    from graphpipe.ingest.api import open_dataset
    from graphpipe.ingest.random_split import parse_fractions
    from graphpipe.ingest.source import TypedSource
    from graphpipe.progress import Progress

    options = IngestOptions(
        overwrite=overwrite, add_reverse_edges=add_reverse_edges, remove_self_loops=remove_self_loops,
        deduplicate=deduplicate, sort_neighbors=not no_sort, build_csr=build_csr,
        feature_dtype=feature_dtype, compression=None if compression == "none" else compression,
        memory_limit=memory_limit, allow_nonfinite=allow_nonfinite, name=name,
        clamp_float16=clamp_float16, allow_isolated_nodes=allow_isolated_nodes, edge_ids=edge_ids,
        random_split=None if random_split is None else parse_fractions(random_split), seed=seed,
    )
    started = time.perf_counter()
    text = {key: reader_flags.pop(key) for key in ingest_text.TEXT_OPTIONS}
    dataset = open_dataset(source, dest, options, format=format_name,
                           reader_options=_reader_options(reader_flags),
                           inputs=ingest_text.text_inputs(text))
    if isinstance(dataset, TypedSource):
        ingest_text.refuse_text(text, f"a typed (heterogeneous) dataset ({dataset.source_format})")
    else:
        ingest_text.attach(dataset, source, text)
    with Progress(None if not quiet else False) as bars:
        store = ingest(dataset, dest, options, progress=bars.callback())
    click.echo(_summary(store, dest, time.perf_counter() - started))


def _reader_options(flags: dict[str, Any]) -> dict[str, Any]:
    """The reader options the user gave (unset flags are None and left out)."""
    given = {key: value for key, value in flags.items() if value is not None and value is not False}
    for key in ("src", "dst"):
        if key in given:
            given[key] = _column(given[key])
    columns = given.get("feature_columns")
    if columns is not None and "," in columns:
        given["feature_columns"] = columns.split(",")
    return given


def _summary(store: Any, dest: str, seconds: float) -> str:
    """One line: what was ingested, its size, how long it took."""
    from graphpipe.store.summary import summarize

    size = human_bytes(summarize(store)["total_bytes"])
    if store.is_typed:
        return (f"ingested {store.name}: {store.num_nodes:,} nodes of {len(store.node_types)} types, "
                f"{store.num_edges:,} edges of {len(store.edge_types)} relations, target type "
                f"{store.target_type}, {size} in {seconds:.2f} s → {dest}")
    return (f"ingested {store.name}: {store.num_nodes:,} nodes, {store.num_edges:,} edges, "
            f"{size} in {seconds:.2f} s → {dest}")
