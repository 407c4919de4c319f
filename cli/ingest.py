"""`graphpipe ingest SOURCE DEST`: turn a dataset into a store."""

from __future__ import annotations

import time
from typing import Any

import click
from graphpipe.cli._common import friendly_errors, human_bytes
from graphpipe.cli.ingest_text import text_options


@click.command("ingest")
@click.argument("source", type=click.Path(path_type=str))
@click.argument("dest", type=click.Path(path_type=str))
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
@click.option("--split", "split_name", default=None, help="OGB: which split/<name> to use.")
@click.option("--from-raw", "from_raw", is_flag=True,
              help="OGB: read only raw/ (never processed/) and split CSVs rather than split_dict.pt.")
@click.option("--src", default="src", show_default=True, help="Edge list: source column.")
@click.option("--dst", default="dst", show_default=True, help="Edge list: destination column.")
@click.option("--weight", default=None,
              help="Edge list: weight column (stored as an edge feature in its own type: "
                   "int64 for integers, so large integer weights stay exact).")
@click.option("--time-column", default=None,
              help="Edge list: integer timestamp column of each edge (stored as csc/time, for "
                   "temporal sampling).")
@click.option("--nodes", default=None, type=click.Path(), help="Edge list: node table (CSV/Parquet).")
@click.option("--node-id", default="id", show_default=True, help="Node table: external ID column.")
@click.option("--features", "feature_columns", default=None,
              help="Node table: one list column, comma-separated numeric columns, or a glob "
                   "pattern such as 'f*' (the matching columns in table order).")
@click.option("--label", default=None, help="Node table: label column.")
@click.option("--split-dir", default=None, type=click.Path(),
              help="Edge list: a folder of split files train/valid/test.{csv,tsv,parquet} "
                   "(one node ID column: --node-id or the only column).")
@click.option("--node-features", "node_features_npy", default=None, type=click.Path(),
              help="A .npy (N, F) matrix to use as node features.")
@click.option("--target-type", default=None,
              help="Typed datasets: the node type with labels and splits (default: the labelled type).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
@text_options
@friendly_errors
def command(source: str, dest: str, overwrite: bool, name: str | None, add_reverse_edges: bool,
            remove_self_loops: bool, deduplicate: bool, no_sort: bool, build_csr: bool, edge_ids: str,
            feature_dtype: str, compression: str, memory_limit: str | None, allow_nonfinite: bool,
            clamp_float16: bool, allow_isolated_nodes: bool, split_name: str | None, from_raw: bool,
            src: str, dst: str, weight: str | None, time_column: str | None, nodes: str | None,
            node_id: str, feature_columns: str | None, label: str | None, split_dir: str | None,
            node_features_npy: str | None, target_type: str | None, quiet: bool,
            **text: Any) -> None:
    """Ingest SOURCE (an OGB folder, a GraphBolt on-disk dataset, a DGL chunked
    graph (metadata.json), a .npz, a CSV/TSV/Parquet edge list, or a folder written
    by `graphpipe generate`) into the store DEST."""

    from graphpipe.ingest.dgl_chunked import is_dgl_chunked_folder
    from graphpipe.ingest.graphbolt import is_graphbolt_folder
    from graphpipe.ingest.pipeline import (
        IngestOptions,
        attach_npy_features,
        ingest,
        is_ogb_folder,
        open_source,
    )
    from graphpipe.progress import Progress

    options = IngestOptions(
        overwrite=overwrite, add_reverse_edges=add_reverse_edges, remove_self_loops=remove_self_loops,
        deduplicate=deduplicate, sort_neighbors=not no_sort, build_csr=build_csr,
        feature_dtype=feature_dtype, compression=None if compression == "none" else compression,
        memory_limit=memory_limit, allow_nonfinite=allow_nonfinite, name=name,
        clamp_float16=clamp_float16, allow_isolated_nodes=allow_isolated_nodes, edge_ids=edge_ids,
    )
    from graphpipe.ingest.typed import is_typed_source

    if is_typed_source(source):  # a heterogeneous dataset: a typed store (cli/ingest_typed.py)
        from graphpipe.cli.ingest_text import refuse_text
        refuse_text(text, "a typed (heterogeneous) dataset")
        from graphpipe.cli.ingest_typed import ingest_typed_command

        ingest_typed_command(source, dest, options, split_name=split_name, target_type=target_type,
                             quiet=quiet, extra={"--nodes": nodes, "--split-dir": split_dir,
                                                 "--node-features": node_features_npy})
        return
    if target_type is not None:
        raise click.UsageError("--target-type applies to typed (heterogeneous) datasets")
    from graphpipe.ingest.generated import is_generated_folder

    if split_dir is not None and (is_generated_folder(source) or is_ogb_folder(source)
                                  or source.endswith(".npz")):
        raise click.UsageError("--split-dir applies to edge-list sources (this source has its "
                               "own splits)")
    if time_column is not None and (is_generated_folder(source) or is_ogb_folder(source)
                                    or source.endswith(".npz")):
        raise click.UsageError("--time-column applies to edge-list sources (an .npz has its "
                               "edge_time key, an OGB folder its raw/node_year.csv.gz)")
    if is_generated_folder(source):
        reader_options = {}
    elif is_ogb_folder(source):
        reader_options = {"split": split_name, **({"from_raw": True} if from_raw else {})}
    elif source.endswith(".npz") or is_graphbolt_folder(source) or is_dgl_chunked_folder(source):
        reader_options = {}
    else:
        cols = None
        if feature_columns:
            cols = feature_columns.split(",") if "," in feature_columns else feature_columns
        reader_options = {"src": src, "dst": dst, "weight": weight, "nodes": nodes, "node_id": node_id,
                          "feature_columns": cols, "label": label, "time_column": time_column}
        if split_dir is not None:
            from graphpipe.ingest.splitfiles import find_split_files

            reader_options["split_files"] = find_split_files(split_dir)
    started = time.perf_counter()
    from graphpipe.cli import ingest_text

    from graphpipe.store.atomic import check_destination

    check_destination(dest, overwrite=overwrite, sources=[source, nodes, node_features_npy,
                                                          *ingest_text.text_inputs(text)])
    dataset = open_source(source, **reader_options)
    if node_features_npy:
        attach_npy_features(dataset, node_features_npy)
    ingest_text.attach(dataset, source, text)
    with Progress(None if not quiet else False) as bars:
        store = ingest(dataset, dest, options, progress=bars.callback())
    seconds = time.perf_counter() - started
    from graphpipe.store.summary import summarize

    info = summarize(store)
    click.echo(f"ingested {store.name}: {store.num_nodes:,} nodes, {store.num_edges:,} edges, "
               f"{human_bytes(info['total_bytes'])} in {seconds:.2f} s → {dest}")
