"""The typed stages of the store builder: a :class:`~graphpipe.ingest.source.TypedSource` into a typed store.

:func:`write_typed` runs inside :func:`graphpipe.ingest.pipeline.build_store`'s checks
(destination, full disk, memory), into one atomic
:class:`~graphpipe.store.writer.TypedStoreWriter`: every relation through the out-of-core
CSC builder (IDs checked against their own type's count, naming file and line; built over
``max(N_src, N_dst)`` nodes, ``indptr`` cut to ``N_dst + 1``: the CSC ``add_relation``
builds in memory), then per node type its features (the row stage of
:mod:`graphpipe.ingest.rows`), times, labels, splits and ID map. ``add_reverse_edges``
adds ``(dst, rev_<rel>, src)`` per relation (PyG's ``ToUndirected(merge=False)`` naming)
with the forward edge features and times; float16 sources stay float16; the options that
rewrite a topology otherwise are refused (:func:`graphpipe.ingest.options.refuse_for_typed`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, build_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.options import IngestOptions, refuse_for_typed
from graphpipe.ingest.rows import write_rows
from graphpipe.ingest.source import TypedNodes, TypedRelation, TypedSource
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError
from graphpipe.store.writer import TypedStoreWriter, indices_dtype

ProgressFn = Callable[[str, int, int], None]
REVERSE_PREFIX = "rev_"
"""A reverse relation ``(dst, "rev_" + rel, src)``: PyG's ``ToUndirected(merge=False)`` naming."""


def write_typed(source: TypedSource, dest: str | os.PathLike, options: IngestOptions,
                report: ProgressFn) -> None:
    """Write ``source`` as a typed store at ``dest`` (atomically: on any error ``dest`` is
    as it was). The front door is :func:`graphpipe.ingest.ingest`.

    >>> import tempfile
    >>> from graphpipe.ingest.source import RowBlock
    >>> from graphpipe.store import GraphStore
    >>> tmp = tempfile.TemporaryDirectory()
    >>> edges = lambda: iter([EdgeChunk(np.array([0, 1, 1]), np.array([0, 0, 2]), 0, "w.csv", 2)])
    >>> feat = lambda: iter([RowBlock(0, np.eye(3), "paper.csv", 2)])
    >>> source = TypedSource("mini", "typed-edge-list", "mini", {
    ...     "paper": TypedNodes(3, features=feat, labels=lambda: np.array([1, 0, 1])),
    ...     "author": TypedNodes(2)}, [TypedRelation(("author", "writes", "paper"), edges)])
    >>> write_typed(source, tmp.name + "/s", IngestOptions(), lambda *a: None)
    >>> store = GraphStore.open(tmp.name + "/s")
    >>> store.target_type, [a.tolist() for a in store.typed_csc(("author", "writes", "paper"))]
    ('paper', [[0, 2, 2, 3], [0, 1, 1]])
    >>> tmp.cleanup()
    """
    refuse_for_typed(options, source.source_format)
    counts = {ntype: nodes.count for ntype, nodes in source.node_types.items()}
    if source.target_type is not None and source.target_type not in counts:
        raise IngestError(f"--target-type {source.target_type!r} is not a node type of "
                          f"{source.source_path} ({sorted(counts)})")
    if options.add_reverse_edges:
        check_reverse([rel.etype for rel in source.relations], source.source_path)
    memory_limit = options.memory_bytes()
    with TypedStoreWriter(dest, counts, name=options.name or source.name, overwrite=options.overwrite,
                          target_type=source.target_type) as writer:
        for i, rel in enumerate(source.relations):
            report("relations", i, len(source.relations))
            _write_relation(writer, rel, reverse=options.add_reverse_edges, memory_limit=memory_limit)
        report("relations", len(source.relations), len(source.relations))
        for ntype, nodes in source.node_types.items():
            _write_nodes(writer, ntype, nodes, options, report)
        writer.manifest["provenance"] = {"source_format": source.source_format,
                                         "source_path": str(source.source_path), **source.extra}
        report("writing", 0, 1)
        writer.commit()
        report("writing", 1, 1)


def _write_relation(writer: TypedStoreWriter, rel: TypedRelation, *, reverse: bool,
                    memory_limit: int) -> None:
    """One relation (and its reverse), with its edge features and times."""
    num_edges = build_relation(writer, rel.etype, rel.edges(), memory_limit=memory_limit,
                               expected_edges=rel.num_edges, expected_from=rel.num_edges_from)
    feat = rel.edge_features() if rel.edge_features is not None else None
    if feat is not None and feat.shape[0] != num_edges:
        raise IngestError(f"{rel.edge_features_from}: {feat.shape[0]} rows, but the relation has "
                          f"{num_edges} edges")
    time = rel.edge_time() if rel.edge_time is not None else None
    etypes = [rel.etype]
    if reverse:
        etypes.append(build_reverse(writer, rel.etype, rel.edges(), memory_limit=memory_limit))
    if feat is not None or time is not None:
        for etype in etypes:
            writer.write_edge_arrays(etype, edge_feat=feat, time=time)


def _write_nodes(writer: TypedStoreWriter, ntype: str, nodes: TypedNodes, options: IngestOptions,
                 report: ProgressFn) -> None:
    """Features, times, labels, splits and ID map of ``ntype``, where the source has them."""
    if nodes.features is not None:
        dtype = np.dtype(np.float16) if nodes.float16 else options.feature_numpy_dtype()
        stage = f"{ntype} features"
        report(stage, 0, nodes.count)
        write_rows(writer, ts.node_key(ntype, "feat"), nodes.features(), nodes.count, nodes.feature_dim,
                   dtype, options, report, stage, what=f"{ntype!r} nodes", expected_from=nodes.where,
                   chunk_rows=max(1, nodes.count))
    try:
        if nodes.time is not None:
            writer.write_node_array(ntype, "time", nodes.time())
        if nodes.labels is not None:
            writer.write_node_array(ntype, "label", nodes.labels())
            if nodes.num_classes is not None:
                meta = writer.labels_meta[ntype]
                meta["num_classes"] = max(nodes.num_classes, meta["num_classes"])
        if nodes.id_map is not None:
            writer.write_typed_id_map(ntype, nodes.id_map)
    except IngestError:
        raise  # a reader's error names its own file (node_year.npy, not meta.pt)
    except StoreError as exc:
        raise IngestError(f"{nodes.where}: {exc}") from None
    for name, ids, where in nodes.splits() if nodes.splits is not None else ():
        try:
            writer.write_split(ntype, ts.check_name(str(name), "split name"), ids)
        except StoreError as exc:
            raise IngestError(f"{where}: {exc}") from None


# -- one relation through the out-of-core CSC builder ---------------------------------------
def checked_chunks(chunks: Iterable[EdgeChunk], n_src: int, n_dst: int,
                   etype: ts.EdgeType) -> Iterator[EdgeChunk]:
    """``chunks`` after checking each ID against its type's count (IngestError naming the
    chunk's file and line otherwise)."""
    for chunk in chunks:
        for ids, n, which, ntype in ((chunk.src, n_src, "source", etype[0]),
                                     (chunk.dst, n_dst, "destination", etype[2])):
            bad = np.flatnonzero((ids < 0) | (ids >= n))
            if bad.size:
                raise IngestError(f"{chunk.source}: line {chunk.first_line + int(bad[0])}: {which} "
                                  f"id {int(ids[bad[0]])} out of range [0, {n}) for node type "
                                  f"{ntype!r} (relation {ts.etype_key(etype)})")
        yield chunk


def build_relation(writer: TypedStoreWriter, etype: ts.EdgeType, chunks: Iterable[EdgeChunk], *,
                   memory_limit: int | None = None, edge_ids: bool = True,
                   expected_edges: int | None = None, expected_from: str = "",
                   progress: ProgressFn | None = None) -> int:
    """Build relation ``etype`` from ``chunks`` (its edge list, local IDs) into ``writer``;
    returns its number of edges. ``expected_edges`` (declared in ``expected_from``) must
    match the edges read. An empty relation is allowed."""
    n_src = writer.num_nodes_dict[etype[0]]
    n_dst = writer.num_nodes_dict[etype[2]]
    sink = writer.relation_sink(etype)
    stream = checked_chunks(chunks, n_src, n_dst, etype)
    first = next(stream, None)
    if first is None:
        _write_empty(sink, n_src, n_dst, edge_ids)
        num_edges = 0
    else:
        options = CscOptions(memory_limit=memory_limit, edge_ids=edge_ids)
        stats = build_csc(_prepend(first, stream), max(n_src, n_dst, 1), sink, options,
                          progress=progress)
        num_edges = int(stats.num_edges)
    if expected_edges is not None and num_edges != expected_edges:
        where = first.source if first is not None else ts.etype_key(etype)
        raise IngestError(f"{where}: {num_edges} edges, but {expected_from or 'the metadata'} says "
                          f"{expected_edges}")
    writer.finish_relation(etype, num_edges)
    return num_edges


def _prepend(first: EdgeChunk, rest: Iterator[EdgeChunk]) -> Iterator[EdgeChunk]:
    yield first
    yield from rest


def _write_empty(sink: Any, n_src: int, n_dst: int, edge_ids: bool) -> None:
    sink.write_array("csc/indptr", np.zeros(max(n_src, n_dst, 1) + 1, dtype=np.int64))
    sink.write_array("csc/indices", np.zeros(0, dtype=indices_dtype(max(n_src, n_dst))))
    if edge_ids:
        sink.write_array("csc/edge_id", np.zeros(0, dtype=np.int64))


def reverse_etype(etype: ts.EdgeType) -> ts.EdgeType:
    """``(dst, "rev_" + rel, src)``.

    >>> reverse_etype(("author", "writes", "paper"))
    ('paper', 'rev_writes', 'author')
    """
    return ts.as_etype((etype[2], REVERSE_PREFIX + etype[1], etype[0]))


def check_reverse(etypes: list[ts.EdgeType], where: str) -> None:
    """IngestError when a reverse relation would collide with a relation of the dataset."""
    present = set(etypes)
    for etype in etypes:
        try:
            reverse = reverse_etype(etype)
        except Exception as exc:  # noqa: BLE001 - a name too long once prefixed
            raise IngestError(f"{where}: --add-reverse-edges: {exc}") from None
        if reverse in present:
            raise IngestError(f"{where}: --add-reverse-edges would add {ts.etype_key(reverse)}, "
                              f"which the dataset already has")


def build_reverse(writer: TypedStoreWriter, etype: ts.EdgeType, chunks: Iterable[EdgeChunk], *,
                  memory_limit: int | None = None) -> ts.EdgeType:
    """Build relation ``(dst, rev_<rel>, src)`` from ``etype``'s edge list ``chunks`` (read
    again): its edge IDs are positions in ``etype``'s edge list. Returns the reverse type."""
    reverse = reverse_etype(etype)
    swapped = (EdgeChunk(c.dst, c.src, c.first_row, c.source, c.first_line) for c in chunks)
    build_relation(writer, reverse, swapped, memory_limit=memory_limit)
    writer.reverse_of[reverse] = etype
    return reverse
