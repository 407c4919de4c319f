"""``build_store(source, dest)``: the one store builder, which streams any source into a new store, atomically.

A :class:`~graphpipe.ingest.source.TypedSource` is written by its typed stages
(:func:`graphpipe.ingest.typed_build.write_typed`) inside the same checks
(destination, full disk, memory); a homogeneous :class:`DatasetSource` goes through the
stages below. Stages, each with its own progress bar: topology (edge list → CSC through
:func:`graphpipe.ingest.csc_builder.build_csc`), node features (row blocks →
``node/feat``), edge features, labels, splits, ID map; then checksums and the
atomic rename. Any error leaves ``dest`` exactly as it was.

Checks made before any work (see :mod:`graphpipe.ingest.labels` for the labels):

- ``dest``: with ``overwrite`` only an existing graphpipe store is replaced, never a
  plain directory or an input of this ingest (:func:`graphpipe.store.atomic.check_destination`).
- Node count: a declared ``N`` that the data does not back (no labels, node table or
  feature rows read up front) must not exceed ``max(ISOLATED_NODES_FLOOR,
  ISOLATED_NODES_FACTOR * 2 * E)``, i.e. at least one node in eight could have an edge;
  ``allow_isolated_nodes`` lifts this.
- Splits: integer IDs in ``[0, N)``, no ID twice in one split, splits pairwise disjoint.
- float16 features: a finite value beyond float16's range (65504) is refused, or clamped
  to it with ``clamp_float16``.

A full disk (ENOSPC) or too little memory ends the ingest with one line naming
``dest``; the temporary tree is removed and ``dest`` stays as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from graphpipe.ingest.csc_builder import CscOptions, build_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.labels import normalize_labels
from graphpipe.ingest.options import IngestOptions
from graphpipe.ingest.random_split import (
    labelled_nodes,
    parse_fractions,
    random_split,
    record_random_split,
)
from graphpipe.ingest.rows import write_rows
from graphpipe.ingest.source import DatasetSource, RowBlock, TypedSource
from graphpipe.ingest.timestamps import write_times
from graphpipe.ingest.typed_build import write_typed
from graphpipe.store import GraphStore, StoreWriter
from graphpipe.store.atomic import check_destination
from graphpipe.store.errors import StoreError

ProgressFn = Callable[[str, int, int], None]
CONCURRENT_STAGES_MIN_MEMORY = 2 << 30
"""Memory limit (bytes) from which topology and node features are ingested side by side."""
ISOLATED_NODES_FLOOR = 1 << 20
"""Declared node counts up to this are accepted whatever the number of edges."""
ISOLATED_NODES_FACTOR = 8
"""Above the floor, a declared N may be at most this many times the 2E nodes edges can touch."""
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
EDGE_ID_CHOICES = ("auto", "always", "never")
FEATURE_STAGE_BYTES = 4 * (64 << 20)
"""Working set of the node-feature stage (a block being inflated, converted and written)."""


def wants_edge_ids(choice: str, source: DatasetSource) -> bool:
    """Whether an ingest with ``--edge-ids choice`` stores ``csc/edge_id`` for ``source``:
    always, never, or (``"auto"``) when per-edge data (``edge/feat``) is indexed by input
    edge order.

    >>> from graphpipe.ingest.source import DatasetSource
    >>> plain = DatasetSource("g", "npz", "g.npz", 3, edge_chunks=lambda: iter(()))
    >>> wants_edge_ids("auto", plain), wants_edge_ids("always", plain)
    (False, True)
    """
    if choice not in EDGE_ID_CHOICES:
        raise ValueError(f"'edge_ids' must be one of {', '.join(EDGE_ID_CHOICES)} (got {choice!r})")
    per_edge_data = source.edge_features is not None or source.edge_time is not None
    if source.needs_edge_ids:
        return True
    if choice == "never" and per_edge_data:
        what = "edge features" if source.edge_features is not None else "edge timestamps"
        raise ValueError(f"{source.extra.get('edge_file', source.source_path)}: --edge-ids never, but "
                         f"the dataset has {what}, which are read in edge-list order and "
                         f"need csc/edge_id to be matched to edges; use --edge-ids auto")
    return choice == "always" or per_edge_data


def attach_npy_features(source: DatasetSource, path: str | os.PathLike) -> DatasetSource:
    """Use the ``.npy`` matrix at ``path`` (``(N, F)``, streamed in row blocks) as the node
    features of ``source``."""
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: file not found")
    try:
        with open(path, "rb") as fh:
            major, _minor = np.lib.format.read_magic(fh)
            read_header = (np.lib.format.read_array_header_1_0 if major == 1
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(fh)
            data_offset = fh.tell()
    except Exception as exc:
        raise IngestError(f"{path}: not a .npy array ({exc})") from exc
    if len(shape) != 2 or fortran or dtype.hasobject:
        raise IngestError(f"{path}: features must be a C-ordered 2-D (N, F) numeric array, got shape "
                          f"{shape}{' (Fortran order)' if fortran else ''}, dtype {dtype}")
    num_rows, dim = int(shape[0]), int(shape[1])
    if num_rows > source.num_nodes and source.external_ids is None and source.labels is None:
        # Dense IDs taken from an edge list: nodes past the largest ID seen have no edges,
        # and the feature matrix is what says how many nodes there are.
        source.num_nodes = num_rows
    if num_rows != source.num_nodes:
        raise IngestError(f"{path}: {num_rows} feature rows, but the graph has {source.num_nodes} nodes")
    rows = max(1, (32 << 20) // max(1, dim * dtype.itemsize))

    def blocks() -> Iterator[RowBlock]:
        # Plain reads, not a memory map: mapped pages of a large file would count toward
        # the process's resident set and defeat the memory limit.
        with open(path, "rb") as fh:
            for start in range(0, num_rows, rows):
                count = min(rows, num_rows - start)
                fh.seek(data_offset + start * dim * dtype.itemsize)
                values = np.fromfile(fh, dtype=dtype, count=count * dim)
                if values.size != count * dim:
                    raise IngestError(f"{path}: truncated at row {start + values.size // max(1, dim)}")
                yield RowBlock(start, values.reshape(count, dim), str(path), start + 1)

    source.node_features, source.feature_dim = blocks, dim
    source.num_nodes_backed = True
    source.extra["node_features_file"] = str(path)
    return source


def input_paths(source: DatasetSource | TypedSource) -> list[str]:
    """Every file or folder ``source`` reads (an overwrite must never replace one of them)."""
    paths = [source.source_path]
    for key in ("edge_files", "node_table", "node_features_file"):
        value = source.extra.get(key)
        if isinstance(value, str) and value:
            paths.extend(value.split(";") if key == "edge_files" else [value])
    return paths


def build_store(source: DatasetSource | TypedSource, dest: str | os.PathLike,
                options: IngestOptions | None = None, *, progress: ProgressFn | None = None) -> GraphStore:
    """Stream ``source`` (homogeneous or typed) into a new local store at ``dest``; the
    front door, which opens paths and also writes ``s3://`` stores, is
    :func:`graphpipe.ingest.ingest`.

    Returns the opened store. Raises :class:`IngestError` (bad input, naming the
    file and line/field) or :class:`graphpipe.store.StoreError` (destination, full
    disk); in every failure ``dest`` is left as it was.

    >>> import os, tempfile
    >>> from graphpipe.ingest.chunks import EdgeChunk
    >>> tmp = tempfile.TemporaryDirectory()
    >>> chunk = EdgeChunk(np.array([0, 1]), np.array([1, 0]), 0, "pair.csv", 1)
    >>> source = DatasetSource("pair", "edge-list", "pair.csv", 2, lambda: iter([chunk]))
    >>> store = build_store(source, os.path.join(tmp.name, "pair"))
    >>> store.num_nodes, store.indptr.tolist(), store.indices.tolist()
    (2, [0, 1, 2], [1, 0])
    >>> tmp.cleanup()
    """
    options = options or IngestOptions()
    check_destination(dest, overwrite=options.overwrite, sources=input_paths(source))
    report = progress or (lambda stage, done, total: None)
    if isinstance(source, TypedSource):
        build, size = (lambda: write_typed(source, dest, options, report)), sum(
            nodes.count for nodes in source.node_types.values())
    else:
        build, size = _homogeneous_build(source, dest, options, report), source.num_nodes
    try:
        build()
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            raise
        raise StoreError(f"{dest}: cannot write the store: {exc.strerror.lower()} "
                         f"(errno {errno.errorcode.get(exc.errno, exc.errno)}); nothing was written, "
                         f"{dest} is as it was") from None
    except MemoryError:
        raise StoreError(f"{dest}: not enough memory to build the store of {size:,} nodes "
                         f"(try --memory-limit); nothing was written, {dest} is as it was") from None
    return GraphStore.open(dest)


def _homogeneous_build(source: DatasetSource, dest: str | os.PathLike, options: IngestOptions,
                       report: ProgressFn) -> Callable[[], None]:
    """The checks made before any work, then the build to run."""
    memory_limit = options.memory_bytes()
    feature_dtype = options.feature_numpy_dtype()
    wants_edge_ids(options.edge_ids, source)
    _check_node_count(source, options)
    labels = normalize_labels(source)
    if options.random_split is not None:
        _random_splits(source, options, labels)
    _check_splits(source)
    return lambda: _build_store(source, dest, options, memory_limit, feature_dtype, labels, report)


def _build_store(source: DatasetSource, dest: str | os.PathLike, options: IngestOptions,
                 memory_limit: int, feature_dtype: np.dtype, labels, report: ProgressFn) -> None:
    """Write every stage into a temporary tree and commit it to ``dest``."""
    with StoreWriter(dest, name=options.name or source.name, overwrite=options.overwrite) as writer:
        stats, dim = _write_topology_and_features(source, writer, options, memory_limit,
                                                  feature_dtype, report)
        m = writer.manifest
        m["num_nodes"], m["num_edges"] = int(source.num_nodes), int(stats.num_edges)
        m["graph"].update(
            reverse_edges_added=options.add_reverse_edges, self_loops_removed=options.remove_self_loops,
            deduplicated=options.deduplicate, sorted_neighbors=options.sort_neighbors,
            has_csr=options.build_csr, num_input_edges=int(stats.num_input_edges),
            edge_ids=wants_edge_ids(options.edge_ids, source),
            self_loops_dropped=int(stats.self_loops_removed),
            duplicates_dropped=int(stats.duplicates_removed),
        )
        if source.node_features is not None:
            m["node_features"] = {"dim": dim, "dtype": str(feature_dtype)}
        if source.edge_features is not None:
            edge_dtype = _edge_feature_dtype(source, feature_dtype)
            dim = write_rows(writer, "edge/feat", source.edge_features(), stats.num_input_edges,
                             source.edge_feature_dim, edge_dtype, options, report, "edge features",
                             what="edges", expected_from=source.extra.get("edge_file"))
            m["edge_features"] = {"dim": dim, "dtype": str(edge_dtype),
                                  "rows": "edge-list order; csc/edge_id >= num_input_edges is the "
                                          "reverse of edge (edge_id - num_input_edges)"}
        times = write_times(writer, source, int(stats.num_input_edges))
        if times is not None:
            m["time"] = times
        if labels is not None:
            writer.write_array("node/label", labels.values)
            m["labels"] = labels.manifest_entry()
            if source.extra.get("label_classes") is not None:
                m["labels"]["classes"] = list(source.extra["label_classes"])
        if source.splits:
            writer.write_splits(source.splits)
        if source.external_ids is not None:
            writer.write_id_map(source.external_ids)
        if source.node_table is not None:
            writer.write_table("tables/nodes.parquet", source.node_table)
        m["provenance"] = {"source_format": source.source_format, "source_path": str(source.source_path),
                           **{k: v for k, v in source.extra.items() if isinstance(v, (str, int, float))}}
        if options.random_split is not None:
            record_random_split(m, parse_fractions(options.random_split), options.seed)
        m["build"] = {"memory_limit": memory_limit, "out_of_core": bool(stats.out_of_core),
                      "compression": options.compression}
        if source.finish is not None:  # what only the reader knows (e.g. link splits)
            source.finish(writer)
        report("writing", 0, 1)
        writer.commit()
        report("writing", 1, 1)


def _write_topology_and_features(source: DatasetSource, writer: StoreWriter, options: IngestOptions,
                                 memory_limit: int, feature_dtype: np.dtype, report: ProgressFn):
    """Build the CSC and, side by side when memory allows, the node features; ``(stats, dim)``."""
    # Node features stream into their array in a second thread while the topology is
    # built: both stages release the GIL (inflate, Numba parsing and scattering).
    features_job = None
    # Under a tight memory limit the stages run one after the other, so their working
    # sets do not add up; side by side, the builder gets the budget less the feature stage's.
    concurrent = memory_limit >= CONCURRENT_STAGES_MIN_MEMORY
    pool = ThreadPoolExecutor(1, thread_name_prefix="ingest-features") if (
        concurrent and source.node_features is not None and _threadsafe_numba()) else None
    csc_options = CscOptions(
        add_reverse_edges=options.add_reverse_edges, remove_self_loops=options.remove_self_loops,
        deduplicate=options.deduplicate, sort_neighbors=options.sort_neighbors,
        build_csr=options.build_csr,
        memory_limit=memory_limit - (FEATURE_STAGE_BYTES if pool is not None else 0),
        edge_ids=wants_edge_ids(options.edge_ids, source),
    )
    stop = threading.Event()
    dim = None

    def write_node_features() -> int:
        return write_rows(writer, "node/feat", source.node_features(), source.num_nodes,
                          source.feature_dim, feature_dtype, options, report, "node features",
                          what="nodes", expected_from=source.extra.get("num_nodes_file"), stop=stop)

    try:
        if pool is not None:
            features_job = pool.submit(write_node_features)
        stats = build_csc(_non_empty(source), source.num_nodes, writer, csc_options, progress=report)
        if source.num_input_edges is not None and stats.num_input_edges != source.num_input_edges:
            where = source.extra.get("edge_file", "edge list")
            declared_in = source.extra.get("num_edges_file", "the dataset's metadata")
            raise IngestError(f"{where}: {stats.num_input_edges} edges, but {declared_in} says "
                              f"{source.num_input_edges}")
        if source.node_features is not None:
            dim = features_job.result() if features_job is not None else write_node_features()
    except BaseException:
        stop.set()
        if features_job is not None:
            features_job.cancel()
            with contextlib.suppress(BaseException):  # the first error is the one reported
                features_job.result()
        raise
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    return stats, dim


def _random_splits(source: DatasetSource, options: IngestOptions, labels) -> None:
    """Replace the source's (absent) splits by a seeded random split of its labelled nodes."""
    if source.splits:
        raise IngestError(f"{source.source_path}: has its own splits ({', '.join(source.splits)}); "
                          f"drop --random-split, or replace them after the ingest with graphpipe "
                          f"split STORE --random 0.8,0.1,0.1 --replace")
    candidates = labelled_nodes(None if labels is None else labels.values, source.num_nodes)
    source.splits = random_split(candidates, parse_fractions(options.random_split), options.seed)
    source.split_sources = {name: f"--random-split (seed {options.seed})" for name in source.splits}


def _check_node_count(source: DatasetSource, options: IngestOptions) -> None:
    """Refuse a declared N far above the nodes the edges can touch (unless allowed)."""
    edges = source.num_input_edges
    if options.allow_isolated_nodes or source.num_nodes_backed or edges is None:
        return
    if source.labels is not None and len(source.labels) == source.num_nodes:
        return
    touchable = 2 * int(edges)
    if source.num_nodes <= max(ISOLATED_NODES_FLOOR, ISOLATED_NODES_FACTOR * touchable):
        return
    origin = source.extra.get("num_nodes_from")
    where = source.extra.get("num_nodes_file") or (
        f"{source.source_path}: {origin}" if origin else source.extra.get("edge_file", source.source_path))
    raise IngestError(f"{where}: {source.num_nodes:,} nodes declared, but the {edges:,} edges touch at "
                      f"most {touchable:,}; pass --allow-isolated-nodes to keep the others as isolated "
                      f"nodes")


def _non_empty(source: DatasetSource) -> Iterator:
    """The source's edge chunks; an edge list without a single edge is an error naming the file."""
    seen = False
    for chunk in source.edge_chunks():
        seen = seen or len(chunk) > 0
        yield chunk
    if not seen:
        raise IngestError(f"{source.extra.get('edge_file', source.source_path)}: edge list is empty")


def _threadsafe_numba() -> bool:
    """Whether Numba's parallel kernels may be entered from two threads at once
    (true for the OpenMP and TBB threading layers, not for 'workqueue')."""
    import numba

    from graphpipe.ingest.csvparse import warm_up

    warm_up()
    try:
        return numba.threading_layer() in ("omp", "tbb")
    except ValueError:
        return False


def _check_splits(source: DatasetSource) -> None:
    """Split IDs must be in range and the splits pairwise disjoint."""
    n = source.num_nodes
    seen: dict[str, np.ndarray] = {}
    for name, ids in source.splits.items():
        ids = np.asarray(ids)
        where = source.split_sources.get(name, f"split {name!r}")
        if ids.dtype.kind not in "iu":
            raise IngestError(f"{where}: split IDs must be integers (got dtype {ids.dtype})")
        bad = np.flatnonzero((ids < 0) | (ids >= n))
        if bad.size:
            raise IngestError(f"{where}: line {bad[0] + 1}: node id {ids[bad[0]]} out of range [0, {n})")
        _check_unique_split(ids, name, where)
        for other, other_ids in seen.items():
            common = np.intersect1d(ids, other_ids)
            if common.size:
                raise IngestError(f"{where}: {common.size} node(s) also in split {other!r}, "
                                  f"first: {common[:5].tolist()}")
        seen[name] = ids


def _check_unique_split(ids: np.ndarray, name: str, where: str) -> None:
    """An ID listed twice in one split would weigh that node twice: refuse it."""
    if ids.size < 2:
        return
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    repeats = np.flatnonzero(ordered[1:] == ordered[:-1])
    if repeats.size:
        later = int(order[repeats + 1].min())        # the first entry repeating an earlier one
        node = int(ids[later])
        first = int(np.flatnonzero(ids == node)[0])
        raise IngestError(f"{where}: split {name!r}: node {node} listed twice (lines {first + 1} "
                          f"and {later + 1})")


def _edge_feature_dtype(source: DatasetSource, feature_dtype: np.dtype) -> np.dtype:
    """Edge features keep the source's dtype (int64 weights stay exact); ``float16`` asked
    for applies to float columns only."""
    dtype = np.dtype(source.edge_feature_dtype or np.float32)
    if dtype.kind == "f" and np.dtype(feature_dtype) == np.float16:
        return np.dtype(np.float16)
    return dtype
