"""One relation of a typed graph, streamed into its CSC by the out-of-core builder.

:func:`build_relation` checks every edge chunk against the relation's own bounds
(source IDs in ``[0, N_src)``, destination IDs in ``[0, N_dst)``; a failure names the
file and line), then hands the chunks to :func:`graphpipe.ingest.csc_builder.build_csc`
over ``max(N_src, N_dst)`` nodes through the writer's
:meth:`~graphpipe.store.writer.StoreWriter.relation_sink`, which cuts
``indptr`` to ``N_dst + 1`` rows. The result is the CSC
:meth:`~graphpipe.store.writer.StoreWriter.add_relation` builds in memory
(neighbours ascending, ties by input position), within ``memory_limit``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, build_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.store import schema as ts
from graphpipe.store.writer import TypedStoreWriter

ProgressFn = Callable[[str, int, int], None]


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


def _write_empty(sink, n_src: int, n_dst: int, edge_ids: bool) -> None:
    from graphpipe.store.writer import indices_dtype

    sink.write_array("csc/indptr", np.zeros(max(n_src, n_dst, 1) + 1, dtype=np.int64))
    sink.write_array("csc/indices", np.zeros(0, dtype=indices_dtype(max(n_src, n_dst))))
    if edge_ids:
        sink.write_array("csc/edge_id", np.zeros(0, dtype=np.int64))


REVERSE_PREFIX = "rev_"
"""A reverse relation ``(dst, "rev_" + rel, src)``: PyG's ``ToUndirected(merge=False)`` naming."""


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
