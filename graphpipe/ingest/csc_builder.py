"""Out-of-core CSC (and optional CSR) topology builder used by ``graphpipe ingest``.

:func:`build_csc` consumes a stream of :class:`~graphpipe.ingest.chunks.EdgeChunk` once
and writes into a :class:`~graphpipe.store.StoreWriter`:

- ``csc/indptr``  int64 ``(N + 1,)``: the in-edges of node ``v`` are slots ``indptr[v]:indptr[v+1]``;
- ``csc/indices`` int32 ``(M,)`` (int64 when ``N >= 2**31``): the source node of each slot;
- ``csc/edge_id`` int64 ``(M,)`` (unless ``CscOptions(edge_ids=False)``): the slot's position
  in the input edge list; with ``add_reverse_edges`` the reverse of input edge ``i``
  (``d -> s``) has ID ``E + i``;
- ``csr/indptr``, ``csr/indices``, ``csr/edge_id`` the same by source when ``build_csr``.

The output is canonical: it depends only on the input edges and the options, never on
the chunking or the memory limit. Within a row, neighbours are ordered by
``(neighbour, edge_id)`` when ``sort_neighbors`` and by ``edge_id`` otherwise;
``deduplicate`` keeps, of each ``(src, dst)`` pair, the copy with the smallest edge ID
(reverse edges take part, so ``a->b`` plus ``b->a`` with reverse edges added gives each
pair once); ``remove_self_loops`` drops every ``v -> v`` edge. :func:`reference_csc`
is the plain NumPy statement of the same result, used by the tests.

Two regimes:

1. In memory (no ``memory_limit``, or the edges fit in it): a two-level Numba counting
   sort by destination. In-degrees are counted and scanned into ``indptr``; the slots are
   partitioned (streaming writes) into up to 1024 buckets of consecutive rows, each bucket
   owning its final slot range; then, in parallel over buckets (``prange``), each bucket is
   scattered into its rows of the store's memory-mapped output while in cache, and every row
   is sorted / deduplicated there. With deduplication the rows are compacted at the end.
2. Out of core (the edges exceed ``memory_limit``): the chunks are spilled into *runs*,
   files of edge records bucket-sorted by destination range, in one pass. Consecutive
   buckets whose records fit the budget are then loaded together, finished in memory by
   the same row kernel and appended to the output with ordinary sequential writes (no
   large memory maps, whose touched pages would count as resident memory). A bucket that
   alone exceeds the budget is re-partitioned into finer ranges, recursively; a single
   destination whose in-edges exceed the budget is split by neighbour, then by edge ID.
   Spill files live in a hidden directory inside ``writer.path`` and are removed before
   :func:`build_csc` returns (or with the writer's temporary tree on abort). They take
   16 bytes per slot and layout (24 with ``N >= 2**31``), plus a copy of a bucket while it
   is being re-partitioned.

Example::

    with StoreWriter(dest, name="arxiv") as writer:
        stats = build_csc(reader.edge_chunks(), num_nodes, writer,
                          CscOptions(add_reverse_edges=True, memory_limit=2 << 30))
        writer.manifest.update(num_nodes=num_nodes, num_edges=stats.num_edges)
        writer.commit()
"""

from __future__ import annotations

import math
import mmap
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit, prange

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.store.writer import StoreWriter

ProgressFn = Callable[[str, int, int], None]
"""``progress(stage, done, total)``; stages ``"counting"``, ``"scattering"``, ``"sorting"``.
``total`` is 0 while it is not known yet (edges still streaming in)."""

_REV_BIT = np.int64(1) << np.int64(62)
"""Edge-ID tag of reverse records spilled before the input edge count ``E`` is known;
``_REV_BIT + i`` becomes ``E + i`` when records are read back (order preserving)."""

_INSERTION_MAX = 32
_MAX_BUCKETS = 1024
_MIN_BUDGET = 1 << 12

# Working-set estimates in bytes, used to size runs and groups against the budget.
_IN_MEMORY_BYTES_PER_EDGE = 16  # buffered src + dst (int64) per input edge
_IN_MEMORY_BYTES_PER_RECORD = 64  # output (<= 16), partitioned copy (<= 24), dedup scratch (24)
_IN_MEMORY_BUCKETS = 1024  # most buckets of the in-memory partition pass (write streams)
_IN_MEMORY_BUCKET_SLOTS = 1 << 14  # aim: slots per bucket, so a bucket's rows stay in cache
_IN_MEMORY_BYTES_PER_NODE = 32  # indptr, scatter positions, kept counts, compacted indptr
# Out of core, a record (row, neighbour, edge ID) takes ``2 * node_bytes + 8`` bytes (node IDs
# int32 below 2**31 nodes); a run buffer holds records plus their bucket-sorted copy (2x), a
# re-partitioning piece 1x, a group its loaded records, the rows scattered and compacted
# (2 x (node_bytes + 8)) plus slack.
_GROUP_BYTES_PER_ROW = 32  # offsets, counts and kept counts of a row


@dataclass
class CscOptions:
    """What :func:`build_csc` does to the edge list on the way to the store.

    Attributes:
        add_reverse_edges: edge ``i`` (``s -> d``) also gets ``d -> s`` with edge ID ``E + i``
            (OGB's ``add_inverse_edge``).
        remove_self_loops: drop every ``v -> v`` edge (reverse copies included).
        deduplicate: keep one copy of each ``(src, dst)`` pair, the one with the smallest edge ID.
        sort_neighbors: within each row, neighbours ascending (ties by edge ID); otherwise rows
            keep edge-ID order.
        build_csr: also write ``csr/indptr``, ``csr/indices``, ``csr/edge_id`` (rows by source).
        edge_ids: write ``csc/edge_id`` (and ``csr/edge_id``); without them the topology is the
            same (edge IDs still order each row's slots), only the map from a slot back to its
            input edge is not stored. Needed to read per-edge data (``edge/feat``) by slot.
        memory_limit: bytes the builder's working set may use; ``None`` for no limit (always
            in memory). The out-of-core path keeps peak RSS under this plus a fixed overhead.
            Limits below 4 KiB act as 4 KiB.
    """

    add_reverse_edges: bool = False
    remove_self_loops: bool = False
    deduplicate: bool = False
    sort_neighbors: bool = True
    build_csr: bool = False
    memory_limit: int | None = None
    edge_ids: bool = True

    def __post_init__(self) -> None:
        if self.memory_limit is not None and int(self.memory_limit) <= 0:
            raise ValueError(f"'memory_limit' needs to be positive bytes (got {self.memory_limit})")


@dataclass
class CscStats:
    """What :func:`build_csc` did.

    ``num_edges = num_input_edges * (2 if reverse else 1) - self_loops_removed
    - duplicates_removed`` (all counts are CSC slots, reverse copies included).

    Attributes:
        num_nodes: ``N``.
        num_edges: CSC slots written (length of ``csc/indices``).
        num_input_edges: edges read from the chunks (``E``).
        self_loops_removed: slots dropped as self-loops.
        duplicates_removed: slots dropped as duplicate ``(src, dst)`` pairs.
        out_of_core: whether the spill path ran.
        runs: spill run files written (all levels, CSC and CSR).
        groups: bucket groups finished in memory (out of core).
        max_depth: deepest re-partitioning level (0: the first spill sufficed).
        spilled_bytes: bytes written to spill files.
        seconds: wall time of the build.
        csr_num_edges: CSR slots written (equal to ``num_edges``), ``None`` without CSR.
    """

    num_nodes: int
    num_edges: int
    num_input_edges: int
    self_loops_removed: int = 0
    duplicates_removed: int = 0
    out_of_core: bool = False
    runs: int = 0
    groups: int = 0
    max_depth: int = 0
    spilled_bytes: int = 0
    seconds: float = 0.0
    csr_num_edges: int | None = field(default=None)


# =============================================================================================
# Reference implementation (plain NumPy): what the fast paths must produce.
# =============================================================================================


def reference_csc(
    src: np.ndarray, dst: np.ndarray, num_nodes: int, options: CscOptions | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSC of the edge list ``src[i] -> dst[i]`` by ``np.lexsort``; slow and obvious.

    Args:
        src, dst: integer ``(E,)`` dense node IDs in ``[0, num_nodes)``.
        num_nodes: ``N``.
        options: as for :func:`build_csc` (``build_csr`` and ``memory_limit`` are ignored;
            the CSR is ``reference_csc(dst, src, ...)``).

    Returns:
        ``(indptr int64 (N+1,), indices int32|int64 (M,), edge_id int64 (M,))``.
    """
    options = CscOptions() if options is None else options
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    num_edges = src.shape[0]
    eid = np.arange(num_edges, dtype=np.int64)
    if options.add_reverse_edges:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
        eid = np.arange(2 * num_edges, dtype=np.int64)
    if options.remove_self_loops:
        keep = src != dst
        src, dst, eid = src[keep], dst[keep], eid[keep]
    if options.deduplicate:
        order = np.lexsort((eid, src, dst))
        s, d = src[order], dst[order]
        first = np.ones(order.shape[0], dtype=bool)
        first[1:] = (s[1:] != s[:-1]) | (d[1:] != d[:-1])
        keep = np.sort(order[first])
        src, dst, eid = src[keep], dst[keep], eid[keep]
    if options.sort_neighbors:
        order = np.lexsort((eid, src, dst))
    else:
        order = np.lexsort((eid, dst))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src[order].astype(indices_dtype(num_nodes)), eid[order]


def indices_dtype(num_nodes: int) -> np.dtype:
    """dtype of ``csc/indices``: int32 when ``num_nodes < 2**31``, int64 otherwise."""
    return np.dtype(np.int32) if num_nodes < 2**31 else np.dtype(np.int64)


# =============================================================================================
# Numba kernels
# =============================================================================================


@njit(cache=True, nogil=True)
def _first_bad_id(src, dst, num_nodes):  # pragma: no cover - compiled
    """Index ``2*i`` (bad source) or ``2*i + 1`` (bad destination) of the first bad ID, or -1."""
    for i in range(src.shape[0]):
        if src[i] < 0 or src[i] >= num_nodes:
            return 2 * i
        if dst[i] < 0 or dst[i] >= num_nodes:
            return 2 * i + 1
    return -1


@njit(cache=True, nogil=True)
def _count_rows(keys, others, add_reverse, remove_self_loops, counts):  # pragma: no cover
    """``counts[v + 1] += 1`` for each slot of row ``v``; returns the self-loop slots skipped."""
    loops = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        o = others[i]
        if k == o and remove_self_loops:
            loops += 2 if add_reverse else 1
            continue
        counts[k + 1] += 1
        if add_reverse:
            counts[o + 1] += 1
    return loops


@njit(cache=True, nogil=True)
def _exclusive_scan(counts):  # pragma: no cover
    """In place: ``counts[i] = sum(counts[:i+1])`` (counts[0] is 0 so it becomes indptr)."""
    total = 0
    for i in range(counts.shape[0]):
        total += counts[i]
        counts[i] = total
    return total


@njit(cache=True, nogil=True)
def _partition_edges(keys, others, eid0, remove_self_loops, shift, bucket_pos, part_key,
                     part_other, part_eid):  # pragma: no cover
    """First level of the in-memory sort: append slot (row ``keys[i]``, neighbour
    ``others[i]``, ID ``eid0 + i``) to its bucket of rows ``keys[i] >> shift``; ``bucket_pos``
    holds each bucket's next free position (bucket ``b`` owns the final slot range of its
    rows, so every bucket is then finished in place and in cache)."""
    for i in range(keys.shape[0]):
        k = keys[i]
        o = others[i]
        if k == o and remove_self_loops:
            continue
        b = k >> shift
        p = bucket_pos[b]
        part_key[p] = k
        part_other[p] = o
        part_eid[p] = eid0 + i
        bucket_pos[b] = p + 1


@njit(cache=True, nogil=True, parallel=True)
def _finish_buckets(indptr, shift, part_key, part_other, part_eid, out_other, out_eid,
                    sort_rows, sort_neighbors, dedup, kept):  # pragma: no cover
    """Second level: per bucket of ``2**shift`` rows (in parallel), a stable counting scatter
    of its slots into their rows, then each row sorted / deduplicated while it is in cache;
    ``kept[r]`` = slots left in row ``r``."""
    n_rows = indptr.shape[0] - 1
    n_buckets = (n_rows + (1 << shift) - 1) >> shift
    for b in prange(n_buckets):
        r0 = b << shift
        r1 = min(n_rows, r0 + (1 << shift))
        pos = indptr[r0:r1].copy()
        for p in range(indptr[r0], indptr[r1]):
            r = part_key[p] - r0
            q = pos[r]
            out_other[q] = part_other[p]
            out_eid[q] = part_eid[p]
            pos[r] = q + 1
        for r in range(r0, r1):
            lo = indptr[r]
            hi = indptr[r + 1]
            if sort_rows:
                _sort_row(out_other, out_eid, lo, hi, sort_neighbors)
            if dedup:
                kept[r] = _dedup_row(out_other, out_eid, lo, hi, sort_neighbors)
            else:
                kept[r] = hi - lo


@njit(cache=True, nogil=True)
def _count_keys(keys, base, indptr):  # pragma: no cover
    """``indptr[k - base + 1] += 1`` for every key."""
    for j in range(keys.shape[0]):
        indptr[keys[j] - base + 1] += 1


@njit(cache=True, nogil=True)
def _scatter_records(keys, others, eids, base, indptr, out_other, out_eid):  # pragma: no cover
    """Counting-sort scatter of records ``(keys[j] - base, others[j], eids[j])`` by row."""
    n_rows = indptr.shape[0] - 1
    pos = np.empty(n_rows, dtype=np.int64)
    for r in range(n_rows):
        pos[r] = indptr[r]
    for j in range(keys.shape[0]):
        r = keys[j] - base
        p = pos[r]
        out_other[p] = others[j]
        out_eid[p] = eids[j]
        pos[r] = p + 1


@njit(cache=True, nogil=True)
def _less(o1, e1, o2, e2, by_other):  # pragma: no cover
    if by_other:
        return o1 < o2 or (o1 == o2 and e1 < e2)
    return e1 < e2


@njit(cache=True, nogil=True)
def _insertion_sort(other, eid, lo, hi, by_other):  # pragma: no cover
    for j in range(lo + 1, hi):
        o = other[j]
        e = eid[j]
        k = j - 1
        while k >= lo and _less(o, e, other[k], eid[k], by_other):
            other[k + 1] = other[k]
            eid[k + 1] = eid[k]
            k -= 1
        other[k + 1] = o
        eid[k + 1] = e


@njit(cache=True, nogil=True)
def _apply_perm(other, eid, lo, perm):  # pragma: no cover
    o = other[lo:lo + perm.shape[0]].copy()
    e = eid[lo:lo + perm.shape[0]].copy()
    for j in range(perm.shape[0]):
        other[lo + j] = o[perm[j]]
        eid[lo + j] = e[perm[j]]


@njit(cache=True, nogil=True)
def _sort_row(other, eid, lo, hi, by_other):  # pragma: no cover
    """Sort slots ``[lo, hi)`` by ``(other, eid)`` when ``by_other``, else by ``eid``."""
    n = hi - lo
    if n < 2:
        return
    if n <= _INSERTION_MAX:
        _insertion_sort(other, eid, lo, hi, by_other)
        return
    eid_sorted = True
    for j in range(lo + 1, hi):
        if eid[j] < eid[j - 1]:
            eid_sorted = False
            break
    if not eid_sorted:
        _apply_perm(other, eid, lo, np.argsort(eid[lo:hi]))
    if by_other:
        other_sorted = True
        for j in range(lo + 1, hi):
            if other[j] < other[j - 1]:
                other_sorted = False
                break
        if not other_sorted:  # stable, so ties stay in edge-ID order
            _apply_perm(other, eid, lo, np.argsort(other[lo:hi], kind="mergesort"))


@njit(cache=True, nogil=True)
def _dedup_row(other, eid, lo, hi, by_other):  # pragma: no cover
    """Keep the first (smallest edge ID) slot of each neighbour, packed at ``lo``; returns
    the kept count. The row is sorted (by ``(other, eid)`` or by ``eid``) on entry."""
    n = hi - lo
    if n < 2:
        return n
    kept = 1
    if by_other:
        for j in range(lo + 1, hi):
            if other[j] != other[lo + kept - 1]:
                other[lo + kept] = other[j]
                eid[lo + kept] = eid[j]
                kept += 1
        return kept
    if n <= _INSERTION_MAX:
        for j in range(lo + 1, hi):
            seen = False
            for k in range(lo, lo + kept):
                if other[k] == other[j]:
                    seen = True
                    break
            if not seen:
                other[lo + kept] = other[j]
                eid[lo + kept] = eid[j]
                kept += 1
        return kept
    perm = np.argsort(other[lo:hi], kind="mergesort")  # ties in edge-ID order
    keep = np.zeros(n, dtype=np.bool_)
    keep[perm[0]] = True
    for j in range(1, n):
        keep[perm[j]] = other[lo + perm[j]] != other[lo + perm[j - 1]]
    kept = 0
    for j in range(n):
        if keep[j]:
            other[lo + kept] = other[lo + j]
            eid[lo + kept] = eid[lo + j]
            kept += 1
    return kept


@njit(cache=True, nogil=True, parallel=True)
def _finish_rows(indptr, other, eid, sort_neighbors, dedup, kept):  # pragma: no cover
    """Sort (and deduplicate) every row in place; ``kept[r]`` = slots left in row ``r``."""
    n_rows = indptr.shape[0] - 1
    for r in prange(n_rows):
        lo = indptr[r]
        hi = indptr[r + 1]
        _sort_row(other, eid, lo, hi, sort_neighbors)
        if dedup:
            kept[r] = _dedup_row(other, eid, lo, hi, sort_neighbors)
        else:
            kept[r] = hi - lo


@njit(cache=True, nogil=True, parallel=True)
def _compact_rows(indptr, new_indptr, other, eid, out_other, out_eid):  # pragma: no cover
    """Copy the first ``new_indptr[r+1] - new_indptr[r]`` slots of every row to the output."""
    n_rows = indptr.shape[0] - 1
    for r in prange(n_rows):
        src = indptr[r]
        dst = new_indptr[r]
        for j in range(new_indptr[r + 1] - dst):
            out_other[dst + j] = other[src + j]
            out_eid[dst + j] = eid[src + j]


@njit(cache=True, nogil=True)
def _make_records(keys, others, eid0, remove_self_loops, out_key, out_other, out_eid,
                  at):  # pragma: no cover
    """Append the records of slots (row ``keys[i]``, neighbour ``others[i]``, ID ``eid0 + i``)
    at ``out_*[at:]``; returns ``(new at, self-loop records skipped)``."""
    loops = 0
    for i in range(keys.shape[0]):
        k = keys[i]
        o = others[i]
        if k == o and remove_self_loops:
            loops += 1
            continue
        out_key[at] = k
        out_other[at] = o
        out_eid[at] = eid0 + i
        at += 1
    return at, loops


@njit(cache=True, nogil=True)
def _bucket_sort(values, lo, shift, n_buckets, key, other, eid, out_key, out_other, out_eid,
                 offsets):  # pragma: no cover
    """Stable counting sort of the records by bucket ``(values - lo) >> shift``;
    ``offsets`` (``n_buckets + 1``) receives the bucket boundaries."""
    n = values.shape[0]
    for b in range(n_buckets + 1):
        offsets[b] = 0
    for j in range(n):
        offsets[((values[j] - lo) >> shift) + 1] += 1
    for b in range(n_buckets):
        offsets[b + 1] += offsets[b]
    pos = offsets[:n_buckets].copy()
    for j in range(n):
        b = (values[j] - lo) >> shift
        p = pos[b]
        out_key[p] = key[j]
        out_other[p] = other[j]
        out_eid[p] = eid[j]
        pos[b] = p + 1


@njit(cache=True, nogil=True)
def _untag_reverse(eid, num_input_edges):  # pragma: no cover
    rev = np.int64(1) << np.int64(62)
    for j in range(eid.shape[0]):
        if eid[j] >= rev:
            eid[j] = eid[j] - rev + num_input_edges


# =============================================================================================
# Public entry point
# =============================================================================================


def build_csc(
    edge_chunks: Iterable[EdgeChunk],
    num_nodes: int,
    writer: StoreWriter,
    options: CscOptions | None = None,
    progress: ProgressFn | None = None,
) -> CscStats:
    """Build the CSC (and optionally CSR) topology of an edge stream into ``writer``.

    Args:
        edge_chunks: the edge list in order, consumed once; chunk ``k`` must start at edge
            ``first_row`` = the number of edges in the chunks before it. The chunks' arrays
            may be kept (not copied) until the build returns: do not modify them meanwhile.
        num_nodes: ``N``; every ID must lie in ``[0, N)``.
        writer: the store being written; arrays are created with ``create_raw_array``.
        options: see :class:`CscOptions` (``None``: the defaults).
        progress: optional ``progress(stage, done, total)`` callback.

    Returns:
        :class:`CscStats`; the caller records ``num_edges`` in the manifest. The
        ``graph`` section of ``writer.manifest`` is updated with the options used.

    Raises:
        IngestError: an ID out of range (naming file and line), non-consecutive chunks,
            or an empty edge list.
    """
    options = CscOptions() if options is None else options
    num_nodes = int(num_nodes)
    if num_nodes < 0:
        raise ValueError(f"'num_nodes' needs to be non-negative (got {num_nodes})")
    limit = None if options.memory_limit is None else max(_MIN_BUDGET, int(options.memory_limit))
    try:
        return _build(edge_chunks, num_nodes, writer, options, progress, limit)
    finally:
        for spill_dir in Path(writer.path).glob(".csc-spill-*"):
            shutil.rmtree(spill_dir, ignore_errors=True)


def _build(edge_chunks: Iterable[EdgeChunk], num_nodes: int, writer: StoreWriter,
           options: CscOptions, progress: ProgressFn | None, limit: int | None) -> CscStats:
    started = time.perf_counter()
    mult = 2 if options.add_reverse_edges else 1
    in_memory_bytes_per_edge = _IN_MEMORY_BYTES_PER_EDGE + mult * _IN_MEMORY_BYTES_PER_RECORD
    in_memory_node_bytes = (num_nodes + 1) * _IN_MEMORY_BYTES_PER_NODE
    buffered: list[tuple[np.ndarray, np.ndarray]] = []
    num_read = 0
    last_source: str | None = None
    spiller: _Spiller | None = None
    for chunk in edge_chunks:
        src, dst = _check_chunk(chunk, num_nodes, num_read)
        last_source = chunk.source
        if spiller is None:
            buffered.append((src, dst))
        else:
            spiller.add_edges(src, dst, num_read)
        num_read += src.shape[0]
        if (spiller is None and limit is not None
                and num_read * in_memory_bytes_per_edge + in_memory_node_bytes > limit):
            spiller = _Spiller(writer, num_nodes, options, limit, progress,
                               reserved=num_read * _IN_MEMORY_BYTES_PER_EDGE)
            eid0 = 0
            while buffered:
                bsrc, bdst = buffered.pop(0)
                spiller.add_edges(bsrc, bdst, eid0)
                eid0 += bsrc.shape[0]
        if progress is not None:
            progress("counting", num_read, 0)
    if num_read == 0:
        if last_source is None:
            raise IngestError("edge list is empty (no edge chunks were given)")
        raise IngestError(f"{last_source}: edge list is empty")

    if spiller is None:
        stats = _build_in_memory(buffered, num_nodes, writer, options, progress)
        buffered.clear()
    else:
        stats = spiller.finish(num_read)
    stats.seconds = time.perf_counter() - started
    writer.manifest.setdefault("graph", {}).update(
        reverse_edges_added=bool(options.add_reverse_edges),
        self_loops_removed=bool(options.remove_self_loops),
        deduplicated=bool(options.deduplicate),
        sorted_neighbors=bool(options.sort_neighbors),
        has_csr=bool(options.build_csr),
    )
    return stats


def _check_chunk(chunk: EdgeChunk, num_nodes: int, expected_row: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunk's IDs as contiguous int64 arrays, after checking order, shapes and ranges."""
    src = np.ascontiguousarray(chunk.src, dtype=np.int64)
    dst = np.ascontiguousarray(chunk.dst, dtype=np.int64)
    if src.ndim != 1 or src.shape != dst.shape:
        raise IngestError(
            f"{chunk.source}: line {chunk.first_line}: chunk has {src.shape} source and "
            f"{dst.shape} destination IDs (need two equal-length 1-D arrays)"
        )
    if int(chunk.first_row) != expected_row:
        raise IngestError(
            f"{chunk.source}: line {chunk.first_line}: chunk starts at edge {chunk.first_row}, "
            f"expected {expected_row} (edge chunks must be consecutive and in order)"
        )
    bad = int(_first_bad_id(src, dst, num_nodes))
    if bad >= 0:
        i, which = divmod(bad, 2)
        value = int(dst[i] if which else src[i])
        kind = "destination" if which else "source"
        raise IngestError(
            f"{chunk.source}: line {chunk.first_line + i}: {kind} node id {value} "
            f"out of range [0, {num_nodes})"
        )
    return src, dst


# =============================================================================================
# In-memory path
# =============================================================================================


_MADV_POPULATE_WRITE = 23  # Linux >= 5.14


def _prefault(arr: np.ndarray) -> None:
    """Map every page of a fresh output memory map for writing in one system call
    (``MADV_POPULATE_WRITE``) instead of one page fault per page during the scatter."""
    mapping = getattr(arr, "_mmap", None)
    if mapping is None or not hasattr(mapping, "madvise"):
        return
    try:
        mapping.madvise(getattr(mmap, "MADV_POPULATE_WRITE", _MADV_POPULATE_WRITE))
    except (OSError, ValueError):  # older kernel: the pages fault in as they are written
        pass


def _build_in_memory(chunks: list[tuple[np.ndarray, np.ndarray]], num_nodes: int,
                     writer: StoreWriter, options: CscOptions,
                     progress: ProgressFn | None) -> CscStats:
    num_input = sum(int(src.shape[0]) for src, _ in chunks)
    mult = 2 if options.add_reverse_edges else 1
    stats = CscStats(num_nodes=num_nodes, num_edges=0, num_input_edges=num_input)
    for prefix in ("csc", "csr") if options.build_csr else ("csc",):
        # (row, neighbour) of each chunk's edges: CSC rows by destination, CSR by source
        layout = [(dst, src) if prefix == "csc" else (src, dst) for src, dst in chunks]
        loops, kept = _in_memory_layout(prefix, layout, num_input, num_nodes, writer, options,
                                        progress)
        if prefix == "csc":
            stats.num_edges = kept
            stats.self_loops_removed = loops
            stats.duplicates_removed = num_input * mult - loops - kept
        else:
            stats.csr_num_edges = kept
    return stats


def _in_memory_layout(prefix: str, layout: list[tuple[np.ndarray, np.ndarray]], num_input: int,
                      num_nodes: int, writer: StoreWriter, options: CscOptions,
                      progress: ProgressFn | None) -> tuple[int, int]:
    """Write ``{prefix}/indptr|indices|edge_id`` from chunks of ``(row, neighbour)`` IDs;
    returns ``(self-loop slots skipped, slots written)``."""
    idx_dtype = indices_dtype(num_nodes)
    reverse, no_loops = options.add_reverse_edges, options.remove_self_loops
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    loops = 0
    for keys, others in layout:
        loops += int(_count_rows(keys, others, reverse, no_loops, indptr))
    total = int(_exclusive_scan(indptr))
    if progress is not None:
        progress("scattering", 0, total)
    if options.deduplicate:
        other = np.empty(total, dtype=idx_dtype)
        eid = np.empty(total, dtype=np.int64)
    else:  # the final size is known: scatter straight into the store's chunk files
        other = writer.create_raw_array(f"{prefix}/indices", (total,), idx_dtype)
        eid = (writer.create_raw_array(f"{prefix}/edge_id", (total,), np.int64) if options.edge_ids
               else np.empty(total, dtype=np.int64))  # still orders each row's slots
        _prefault(other)
        _prefault(eid)
    # two-level counting sort: partition the slots into buckets of 2**shift rows (streaming
    # writes), then finish each bucket in cache; far fewer cache and TLB misses than one
    # scatter over the whole output once it outgrows the caches.
    n_buckets_wanted = min(_IN_MEMORY_BUCKETS, max(1, total // _IN_MEMORY_BUCKET_SLOTS))
    shift = max(0, math.ceil(math.log2(max(1, num_nodes) / n_buckets_wanted)))
    n_buckets = (num_nodes + (1 << shift) - 1) >> shift
    bucket_pos = indptr[0:n_buckets << shift:1 << shift].copy()  # first slot of each bucket
    part_key = np.empty(total, dtype=idx_dtype)
    part_other = np.empty(total, dtype=idx_dtype)
    part_eid = np.empty(total, dtype=np.int64)
    first_ids = np.concatenate([[0], np.cumsum([k.shape[0] for k, _ in layout])[:-1]])
    passes = [(keys, others, int(first)) for (keys, others), first in zip(layout, first_ids)]
    if reverse:  # reverse slots after all forward ones: ID E + i
        passes += [(others, keys, num_input + first) for keys, others, first in passes]
    for keys, others, first_id in passes:
        _partition_edges(keys, others, first_id, no_loops, shift, bucket_pos, part_key,
                         part_other, part_eid)
    del bucket_pos
    if progress is not None:
        progress("scattering", total, total)
        progress("sorting", 0, num_nodes)
    kept = np.empty(num_nodes, dtype=np.int64)
    _finish_buckets(indptr, shift, part_key, part_other, part_eid, other, eid,
                    options.sort_neighbors or options.deduplicate, options.sort_neighbors,
                    options.deduplicate, kept)
    del part_key, part_other, part_eid
    if options.deduplicate:
        new_indptr = np.zeros(num_nodes + 1, dtype=np.int64)
        new_indptr[1:] = kept
        total = int(_exclusive_scan(new_indptr))
        out_other = writer.create_raw_array(f"{prefix}/indices", (total,), idx_dtype)
        out_eid = (writer.create_raw_array(f"{prefix}/edge_id", (total,), np.int64)
                   if options.edge_ids else np.empty(total, dtype=np.int64))
        _prefault(out_other)
        _prefault(out_eid)
        _compact_rows(indptr, new_indptr, other, eid, out_other, out_eid)
        del out_other, out_eid
        indptr = new_indptr
    del other, eid  # unmaps the store's files; the page cache holds the data until commit
    writer.write_array(f"{prefix}/indptr", indptr)
    if progress is not None:
        progress("sorting", num_nodes, num_nodes)
    return loops, total


# =============================================================================================
# Out-of-core path
# =============================================================================================


class _Runs:
    """Spill runs over one partition: records bucketed by ``(field - lo) >> shift``.

    Each run file holds ``n`` records as three columns ``key | other | eid`` (node IDs in
    ``node_dtype``, edge IDs int64), sorted by bucket; ``offsets`` (``n_buckets + 1``) gives
    each bucket's record range in the run. ``field`` is 0 (row key), 1 (neighbour) or 2
    (edge ID).
    """

    def __init__(self, field_index: int, lo: int, hi: int, shift: int, n_buckets: int,
                 node_dtype: np.dtype):
        self.field_index = field_index
        self.node_dtype = np.dtype(node_dtype)
        self.lo, self.hi, self.shift, self.n_buckets = lo, hi, shift, n_buckets
        self.files: list[tuple[Path, int, np.ndarray]] = []

    def bucket_counts(self) -> np.ndarray:
        counts = np.zeros(self.n_buckets, dtype=np.int64)
        for _path, _n, offsets in self.files:
            counts += np.diff(offsets)
        return counts

    def bucket_range(self, b: int) -> tuple[int, int]:
        """Field values ``[start, stop)`` of bucket ``b``."""
        start = self.lo + (b << self.shift)
        return start, min(self.hi, start + (1 << self.shift))

    def segments(self, b0: int, b1: int) -> list[tuple[Path, int, int, int, np.dtype]]:
        """``(path, run_length, first_record, count, node_dtype)`` of buckets ``[b0, b1)`` in
        every run."""
        out = []
        for path, n, offsets in self.files:
            first, count = int(offsets[b0]), int(offsets[b1] - offsets[b0])
            if count:
                out.append((path, n, first, count, self.node_dtype))
        return out

    def remove(self) -> None:
        for path, _n, _offsets in self.files:
            path.unlink(missing_ok=True)
        self.files.clear()


def _read_into(fd: int, path: Path, arr: np.ndarray, offset: int) -> None:
    """Fill ``arr`` from byte ``offset`` of the open file ``fd`` (``path``)."""
    view = memoryview(arr).cast("B")
    done = 0
    while done < view.nbytes:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:
            raise IngestError(f"{path}: spill file ended early (byte {offset + done}, "
                              f"{view.nbytes - done} more expected)")
        done += got


def _read_records(segments: list[tuple[Path, int, int, int, np.dtype]], total: int,
                  num_input: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``total`` records of ``segments`` (see :meth:`_Runs.segments`) as ``(key, other,
    eid)`` arrays (node dtype, node dtype, int64), reverse-edge tags resolved to ``E + i``."""
    node_dtype = segments[0][4] if segments else np.dtype(np.int64)
    cols = [np.empty(total, dtype=node_dtype), np.empty(total, dtype=node_dtype),
            np.empty(total, dtype=np.int64)]
    at = 0
    for path, n, first, count, _dtype in segments:
        node_bytes = node_dtype.itemsize
        starts = (first * node_bytes, (n + first) * node_bytes, 2 * n * node_bytes + first * 8)
        fd = os.open(path, os.O_RDONLY)
        try:
            for col, start in zip(cols, starts):
                _read_into(fd, path, col[at:at + count], start)
        finally:
            os.close(fd)
        at += count
    _untag_reverse(cols[2], num_input)
    return cols[0], cols[1], cols[2]


def _iter_pieces(segments: list[tuple[Path, int, int, int, np.dtype]], piece: int,
                 num_input: int):
    """Records of ``segments`` in order, in arrays of at most ``piece`` records."""
    for path, n, first, count, node_dtype in segments:
        for start in range(first, first + count, piece):
            size = min(piece, first + count - start)
            yield _read_records([(path, n, start, size, node_dtype)], size, num_input)


def _partition_shape(lo: int, hi: int) -> tuple[int, int]:
    """``(shift, n_buckets)`` splitting ``[lo, hi)`` into at most ``_MAX_BUCKETS`` buckets."""
    width = hi - lo
    shift = max(0, math.ceil(math.log2(max(1, width) / _MAX_BUCKETS)))
    while (width + (1 << shift) - 1) >> shift > _MAX_BUCKETS:
        shift += 1
    return shift, max(1, (width + (1 << shift) - 1) >> shift)


class _RunBuilder:
    """Buffers records (up to ``capacity``) and writes them as bucket-sorted runs."""

    def __init__(self, spill_dir: Path, runs: _Runs, capacity: int, stats: CscStats):
        self.spill_dir, self.runs, self.capacity, self.stats = spill_dir, runs, capacity, stats
        self.key = np.empty(capacity, dtype=runs.node_dtype)
        self.other = np.empty(capacity, dtype=runs.node_dtype)
        self.eid = np.empty(capacity, dtype=np.int64)
        self.at = 0

    def add_edges(self, keys: np.ndarray, others: np.ndarray, eid0: int,
                  remove_self_loops: bool) -> int:
        """Add slots (row ``keys[i]``, neighbour ``others[i]``, ID ``eid0 + i``); returns the
        self-loops skipped."""
        loops = 0
        start = 0
        while start < keys.shape[0]:
            if self.at == self.capacity:
                self.flush()
            stop = min(keys.shape[0], start + self.capacity - self.at)
            self.at, skipped = _make_records(keys[start:stop], others[start:stop], eid0 + start,
                                             remove_self_loops, self.key, self.other, self.eid,
                                             self.at)
            loops += skipped
            start = stop
        return loops

    def add_records(self, key: np.ndarray, other: np.ndarray, eid: np.ndarray) -> None:
        start = 0
        while start < key.shape[0]:
            if self.at == self.capacity:
                self.flush()
            stop = min(key.shape[0], start + self.capacity - self.at)
            n = stop - start
            self.key[self.at:self.at + n] = key[start:stop]
            self.other[self.at:self.at + n] = other[start:stop]
            self.eid[self.at:self.at + n] = eid[start:stop]
            self.at += n
            start = stop

    def flush(self) -> None:
        n = self.at
        if n == 0:
            return
        runs = self.runs
        values = (self.key, self.other, self.eid)[runs.field_index][:n]
        sorted_cols = [np.empty(n, dtype=runs.node_dtype), np.empty(n, dtype=runs.node_dtype),
                       np.empty(n, dtype=np.int64)]
        offsets = np.empty(runs.n_buckets + 1, dtype=np.int64)
        _bucket_sort(values, runs.lo, runs.shift, runs.n_buckets, self.key[:n], self.other[:n],
                     self.eid[:n], sorted_cols[0], sorted_cols[1], sorted_cols[2], offsets)
        path = self.spill_dir / f"run-{uuid.uuid4().hex}.bin"
        with open(path, "wb") as fh:
            fh.writelines(memoryview(col) for col in sorted_cols)
        self.stats.spilled_bytes += sum(col.nbytes for col in sorted_cols)
        del sorted_cols
        runs.files.append((path, n, offsets))
        self.stats.runs += 1
        self.at = 0

    def finish(self) -> _Runs:
        self.flush()
        self.key = self.other = self.eid = np.empty(0, dtype=np.int64)  # release the buffers
        return self.runs


class _IndptrWriter:
    """Sequential writer of an int64 ``indptr`` file, row by row as counts become final."""

    def __init__(self, path: Path, num_rows: int):
        self.fh = open(path, "wb")  # noqa: SIM115 - written across calls, closed in close()
        self.num_rows = num_rows
        self.fh.write(np.zeros(1, dtype=np.int64).tobytes())
        self.cur_row = 0  # row whose count is still accumulating
        self.running = 0  # slots in rows < cur_row plus those emitted so far for cur_row

    def _finalize_until(self, row: int) -> None:
        """Write ``indptr[cur_row + 1 : row + 1]`` (rows cur_row .. row-1 are complete)."""
        block = 1 << 16
        remaining = row - self.cur_row
        while remaining > 0:
            n = min(block, remaining)
            self.fh.write(np.full(n, self.running, dtype=np.int64).tobytes())
            remaining -= n
        self.cur_row = row

    def add(self, first_row: int, counts: np.ndarray) -> None:
        """Slots for rows ``first_row .. first_row + len(counts) - 1`` (may add to the current
        row again; rows must not go backwards)."""
        if first_row < self.cur_row:
            raise AssertionError(f"rows went backwards ({first_row} < {self.cur_row})")
        self._finalize_until(first_row)
        k = counts.shape[0]
        if k == 0:
            return
        if k > 1:
            ends = self.running + np.cumsum(counts[:-1], dtype=np.int64)
            self.fh.write(ends.tobytes())
            self.running = int(ends[-1])
            self.cur_row = first_row + k - 1
        self.running += int(counts[-1])

    def close(self) -> int:
        self._finalize_until(self.num_rows)
        self.fh.close()
        return self.running


class _OutputSink:
    """Appends finished rows of one layout (``csc`` or ``csr``) to temporary files."""

    def __init__(self, spill_dir: Path, prefix: str, num_nodes: int, edge_ids: bool = True):
        self.prefix = prefix
        self.idx_dtype = indices_dtype(num_nodes)
        self.paths = {name: spill_dir / f"{prefix}-{name}.bin"
                      for name in ("indptr", "indices", "edge_id")}
        self.indptr = _IndptrWriter(self.paths["indptr"], num_nodes)
        # written across emit() calls; closed by commit() or close()
        self.indices = open(self.paths["indices"], "wb")  # noqa: SIM115
        self.edge_id = open(self.paths["edge_id"], "wb") if edge_ids else None  # noqa: SIM115

    def close(self) -> None:
        """Close the files (after an error; :meth:`commit` closes them itself)."""
        for fh in (self.indptr.fh, self.indices, self.edge_id):
            if fh is not None:
                fh.close()

    def emit(self, first_row: int, counts: np.ndarray, other: np.ndarray, eid: np.ndarray) -> None:
        self.indptr.add(first_row, counts)
        self.indices.write(memoryview(np.ascontiguousarray(other, dtype=self.idx_dtype)))
        if self.edge_id is not None:
            self.edge_id.write(memoryview(np.ascontiguousarray(eid, dtype=np.int64)))

    def commit(self, writer: StoreWriter, num_nodes: int) -> int:
        """Move the files into the store as ``{prefix}/indptr|indices|edge_id``; returns slots."""
        total = self.indptr.close()
        self.indices.close()
        outputs = [("indptr", num_nodes + 1, np.int64), ("indices", total, self.idx_dtype)]
        if self.edge_id is not None:
            self.edge_id.close()
            outputs.append(("edge_id", total, np.int64))
        for name, shape, dtype in outputs:
            arr = writer.create_raw_array(f"{self.prefix}/{name}", (shape,), dtype)
            target = getattr(arr, "filename", None)
            del arr
            if target is not None:
                os.replace(self.paths[name], target)
            else:
                self.paths[name].unlink()
        return total


class _RecordCollector:
    """A sink that turns emitted rows back into records (key = row) for another partition."""

    def __init__(self, builder: _RunBuilder):
        self.builder = builder

    def emit(self, first_row: int, counts: np.ndarray, other: np.ndarray, eid: np.ndarray) -> None:
        key = np.repeat(np.arange(first_row, first_row + counts.shape[0], dtype=np.int64), counts)
        self.builder.add_records(key, other, eid)


class _Spiller:
    """The out-of-core build: spill runs while reading, then finish bucket groups in order."""

    def __init__(self, writer: StoreWriter, num_nodes: int, options: CscOptions, budget: int,
                 progress: ProgressFn | None, reserved: int = 0):
        self.writer, self.num_nodes, self.options, self.progress = writer, num_nodes, options, progress
        self.budget = max(_MIN_BUDGET, int(budget * 0.85))
        self.spill_dir = Path(writer.path) / f".csc-spill-{uuid.uuid4().hex[:8]}"
        self.spill_dir.mkdir()
        self.stats = CscStats(num_nodes=num_nodes, num_edges=0, num_input_edges=0,
                              out_of_core=True)
        self.num_input = 0
        self.records_spilled = 0
        self.records_done = 0
        layouts = ["csc", "csr"] if options.build_csr else ["csc"]
        directions = ["forward", "reverse"] if options.add_reverse_edges else ["forward"]
        shift, n_buckets = _partition_shape(0, num_nodes)
        # ``reserved``: bytes of edges buffered before the switch to this path, still held
        # while the first runs are written.
        self.node_dtype = indices_dtype(num_nodes)
        record_bytes = 2 * self.node_dtype.itemsize + 8
        self.group_bytes_per_record = record_bytes + 2 * (self.node_dtype.itemsize + 8) + 16
        capacity = max(16, (self.budget - reserved)
                       // (2 * record_bytes * len(layouts) * len(directions)))
        # Forward and reverse slots go to separate runs, so that reading a group's forward
        # runs, then its reverse runs, yields every row in edge-ID order (cheap to finish).
        self.builders = {
            (prefix, direction): _RunBuilder(
                self.spill_dir, _Runs(0, 0, num_nodes, shift, n_buckets, self.node_dtype),
                capacity, self.stats)
            for prefix in layouts for direction in directions
        }
        # re-partitioning: a run buffer (2 records' bytes) plus the piece being read (1)
        self.run_capacity = max(16, self.budget // (3 * record_bytes))

    # -- pass 1 ---------------------------------------------------------------------------------
    def add_edges(self, src: np.ndarray, dst: np.ndarray, eid0: int) -> None:
        """Spill input edges ``eid0 ...`` (and their reverses, tagged ``_REV_BIT + i``)."""
        for (prefix, direction), builder in self.builders.items():
            keys, others = (dst, src) if prefix == "csc" else (src, dst)
            first_id = eid0
            if direction == "reverse":
                keys, others, first_id = others, keys, int(_REV_BIT) + eid0
            loops = builder.add_edges(keys, others, first_id, self.options.remove_self_loops)
            if prefix == "csc":
                self.stats.self_loops_removed += loops
                self.records_spilled += src.shape[0] - loops
        if self.progress is not None:
            self.progress("scattering", self.records_spilled, 0)

    # -- pass 2 ---------------------------------------------------------------------------------
    def finish(self, num_input: int) -> CscStats:
        try:
            self.num_input = num_input
            self.stats.num_input_edges = num_input
            runs: dict[str, _Runs] = {}
            for (prefix, _direction), builder in self.builders.items():  # forward first
                finished = builder.finish()
                if prefix in runs:
                    runs[prefix].files.extend(finished.files)
                else:
                    runs[prefix] = finished
            self.builders.clear()
            if self.progress is not None:
                self.progress("scattering", self.records_spilled, self.records_spilled)
            for prefix, layout_runs in runs.items():
                sink = _OutputSink(self.spill_dir, prefix, self.num_nodes, self.options.edge_ids)
                self.records_done = 0
                try:
                    self._process(layout_runs, self.options.sort_neighbors,
                                  self.options.deduplicate, sink, depth=0)
                except BaseException:
                    sink.close()
                    raise
                total = sink.commit(self.writer, self.num_nodes)
                if self.progress is not None:
                    self.progress("sorting", self.records_spilled, self.records_spilled)
                if prefix == "csc":
                    self.stats.num_edges = total
                else:
                    self.stats.csr_num_edges = total
            mult = 2 if self.options.add_reverse_edges else 1
            self.stats.duplicates_removed = (num_input * mult - self.stats.self_loops_removed
                                             - self.stats.num_edges)
            return self.stats
        finally:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    def _group_cost(self, records: int, rows: int) -> int:
        return records * self.group_bytes_per_record + rows * _GROUP_BYTES_PER_ROW

    def _process(self, runs: _Runs, sort_neighbors: bool, dedup: bool, sink, depth: int) -> None:
        """Emit the records of ``runs`` in canonical order into ``sink``.

        Records of ``runs`` share their values on the fields before ``runs.field_index``
        (for field 1 and 2, they all lie in one row).
        """
        self.stats.max_depth = max(self.stats.max_depth, depth)
        counts = runs.bucket_counts()
        row_field = runs.field_index == 0
        b = 0
        while b < runs.n_buckets:
            if counts[b] == 0:
                b += 1
                continue
            start, stop = runs.bucket_range(b)
            rows = stop - start if row_field else 1
            if self._group_cost(int(counts[b]), rows) > self.budget:
                self._split_bucket(runs, b, int(counts[b]), sort_neighbors, dedup, sink, depth)
                b += 1
                continue
            records, b1 = int(counts[b]), b + 1
            while b1 < runs.n_buckets:
                s1, e1 = runs.bucket_range(b1)
                more_rows = (e1 - s1) if row_field else 0
                if self._group_cost(records + int(counts[b1]), rows + more_rows) > self.budget:
                    break
                records += int(counts[b1])
                rows += more_rows
                b1 += 1
            self._finish_group(runs, b, b1, records, sort_neighbors, dedup, sink)
            b = b1
        runs.remove()

    def _finish_group(self, runs: _Runs, b0: int, b1: int, records: int, sort_neighbors: bool,
                      dedup: bool, sink) -> None:
        key, other, eid = _read_records(runs.segments(b0, b1), records, self.num_input)
        if runs.field_index == 0:
            base = runs.bucket_range(b0)[0]
            n_rows = runs.bucket_range(b1 - 1)[1] - base
        else:
            base, n_rows = int(key[0]), 1
        indptr = np.zeros(n_rows + 1, dtype=np.int64)
        _count_keys(key, base, indptr)
        _exclusive_scan(indptr)
        row_other = np.empty(records, dtype=self.node_dtype)
        row_eid = np.empty(records, dtype=np.int64)
        _scatter_records(key, other, eid, base, indptr, row_other, row_eid)
        del key, other, eid
        kept = np.empty(n_rows, dtype=np.int64)
        _finish_rows(indptr, row_other, row_eid, sort_neighbors, dedup, kept)
        if dedup:
            new_indptr = np.zeros(n_rows + 1, dtype=np.int64)
            new_indptr[1:] = kept
            total = int(_exclusive_scan(new_indptr))
            out_other = np.empty(total, dtype=self.node_dtype)
            out_eid = np.empty(total, dtype=np.int64)
            _compact_rows(indptr, new_indptr, row_other, row_eid, out_other, out_eid)
            row_other, row_eid = out_other, out_eid
        sink.emit(base, kept, row_other, row_eid)
        self.stats.groups += 1
        self.records_done += records
        if self.progress is not None and runs.field_index == 0:
            total_records = self.records_spilled
            self.progress("sorting", min(self.records_done, total_records), total_records)

    def _split_bucket(self, runs: _Runs, b: int, records: int, sort_neighbors: bool, dedup: bool,
                      sink, depth: int) -> None:
        """Bucket ``b`` alone exceeds the budget: re-partition it (finer, or by the next field)."""
        start, stop = runs.bucket_range(b)
        segments = runs.segments(b, b + 1)
        field_index = runs.field_index
        if stop - start > 1:  # finer ranges of the same field
            self._repartition_and_process(segments, field_index, start, stop, sort_neighbors,
                                          dedup, sink, depth)
            return
        if field_index == 0:  # one row: split by neighbour, or order by edge ID
            if sort_neighbors:
                self._repartition_and_process(segments, 1, 0, self.num_nodes, True, dedup, sink,
                                              depth)
            elif dedup:  # deduplicate by neighbour first, then order the survivors by edge ID
                survivors = self._new_runs(2, 0, self._eid_limit())
                # a small buffer: it stays allocated while the neighbour pass runs
                collector = _RecordCollector(_RunBuilder(self.spill_dir, survivors,
                                                         max(16, self.run_capacity // 8),
                                                         self.stats))
                self._repartition_and_process(segments, 1, 0, self.num_nodes, True, True,
                                              collector, depth)
                self._process(collector.builder.finish(), False, False, sink, depth + 1)
            else:
                self._repartition_and_process(segments, 2, 0, self._eid_limit(), False, False,
                                              sink, depth)
        elif field_index == 1:  # one (row, neighbour) pair
            if dedup:
                best_key = best_other = best_eid = -1
                for key, other, eid in _iter_pieces(segments, self.run_capacity, self.num_input):
                    j = int(np.argmin(eid))
                    if best_eid < 0 or eid[j] < best_eid:
                        best_key, best_other, best_eid = int(key[j]), int(other[j]), int(eid[j])
                sink.emit(best_key, np.ones(1, dtype=np.int64),
                          np.array([best_other], dtype=np.int64),
                          np.array([best_eid], dtype=np.int64))
                self.records_done += records
            else:
                self._repartition_and_process(segments, 2, 0, self._eid_limit(), sort_neighbors,
                                              False, sink, depth)
        else:  # pragma: no cover - one edge ID is one record, which always fits the budget
            raise AssertionError("a single edge ID exceeded the memory budget")

    def _eid_limit(self) -> int:
        return self.num_input * (2 if self.options.add_reverse_edges else 1)

    def _new_runs(self, field_index: int, lo: int, hi: int) -> _Runs:
        shift, n_buckets = _partition_shape(lo, hi)
        return _Runs(field_index, lo, hi, shift, n_buckets, self.node_dtype)

    def _repartition_and_process(self, segments, field_index: int, lo: int, hi: int,
                                 sort_neighbors: bool, dedup: bool, sink, depth: int) -> None:
        sub = self._new_runs(field_index, lo, hi)
        builder = _RunBuilder(self.spill_dir, sub, self.run_capacity, self.stats)
        for key, other, eid in _iter_pieces(segments, self.run_capacity, self.num_input):
            builder.add_records(key, other, eid)
        self._process(builder.finish(), sort_neighbors, dedup, sink, depth + 1)


def warm_up() -> None:
    """Compile (or load from cache) every kernel, so a timed or memory-measured build that
    follows does not pay for JIT compilation."""
    import tempfile

    rng = np.random.default_rng(0)
    src = rng.integers(0, 50, 400)
    dst = np.where(np.arange(400) < 150, 3, rng.integers(0, 50, 400))
    chunk = EdgeChunk(src, dst, 0, "<warm-up>", 1)
    with tempfile.TemporaryDirectory() as tmp:
        for limit in (None, 6000):
            for opts in (CscOptions(add_reverse_edges=True, remove_self_loops=True,
                                    deduplicate=True, build_csr=True, memory_limit=limit),
                         CscOptions(deduplicate=True, sort_neighbors=False, memory_limit=limit),
                         CscOptions(sort_neighbors=False, memory_limit=limit)):
                with StoreWriter(Path(tmp) / "s", name="warm-up", overwrite=True) as w:
                    build_csc([chunk], 50, w, opts)


__all__ = ["CscOptions", "CscStats", "build_csc", "indices_dtype", "reference_csc", "warm_up"]
