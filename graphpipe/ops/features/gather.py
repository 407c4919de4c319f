"""Feature-row gather and the Match step (FastGL §3.3).

The feature matrix ``X`` (``num_nodes × dim``) is read as a list of row-chunk
views: ``chunks[c]`` holds rows ``c*chunk_rows ... c*chunk_rows + len(chunks[c]) - 1``
(what :meth:`graphpipe.store.GraphStore.feature_chunks` returns: zero-copy memory
maps of the store's chunk files, or one in-memory array).

* :func:`gather_rows` copies ``X[ids]`` into a contiguous array straight from the
  chunk views (rows grouped by chunk with a counting sort when the store has many
  chunks), with a software prefetch a few rows ahead, shared with helper threads
  (:mod:`graphpipe.ops._core.worksharing`) when the copy is large enough to pay for them.
* :func:`positions_in` finds where each of ``queries`` sits inside ``keys``
  (``-1`` when absent) with an open-addressing hash table sized by ``len(keys)``,
  never by the number of nodes: the membership test of the Match step
  (positions of the next batch's IDs inside the batch currently resident).
* :func:`assemble_rows` fills the next batch's feature rows from the three
  sources in priority order: the static cache, the previous batch, the store.

Rows are copied, never computed on, so any dtype works; float16 (MAG240M's, which Numba
cannot type) goes through the kernels viewed as uint16: half the bytes of float32 in the
store, the caches and the batch, and no float32 copy of the table (models cast the batch).

Each has a NumPy reference (``*_reference``) next to it that the tests compare
against.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from numba import types
from numba.typed import List

from graphpipe.ops._core.intrinsics import prefetch as _prefetch
from graphpipe.ops._core.worksharing import run_ranges

__all__ = [
    "SOURCE_CACHE",
    "SOURCE_PREVIOUS",
    "SOURCE_STORE",
    "FeatureChunks",
    "PositionTable",
    "ResidentIndex",
    "assemble_rows",
    "assemble_rows_reference",
    "gather_rows",
    "gather_rows_reference",
    "positions_in",
    "positions_in_reference",
]

SOURCE_CACHE = 0
SOURCE_PREVIOUS = 1
SOURCE_STORE = 2


TUPLE_BUCKETS = (1, 4, 16, 64)
"""Chunk counts up to 64 are handed to the kernels as a tuple padded to one of these sizes
(one compiled variant per size); larger stores as a typed list."""


def _kernel_view(rows: np.ndarray) -> np.ndarray:
    """``rows`` as the kernels see them: float16 (which Numba cannot type) viewed as uint16,
    whose copy moves the same bits; other dtypes unchanged. A view, never a copy."""
    return rows.view(np.uint16) if rows.dtype == np.float16 else rows


class FeatureChunks:
    """The row-chunk views of a feature matrix ``X`` prepared for the kernels.

    ``views[c]`` holds rows ``c*chunk_rows ... c*chunk_rows + len(views[c]) - 1`` of ``X``
    (every view but the last has ``chunk_rows`` rows). One-dimensional views are
    viewed as ``(rows, 1)``. The views are not copied.

    Args:
        chunks: the views (a list, or one 2D array for an in-memory ``X``).
        chunk_rows: rows per chunk (default: the first view's length).
    """

    def __init__(self, chunks: Sequence[np.ndarray] | np.ndarray, chunk_rows: int | None = None):
        if isinstance(chunks, np.ndarray):
            chunks = [chunks]
        if len(chunks) == 0:
            raise ValueError("'chunks' must hold at least one array (got 0)")
        first = np.asarray(chunks[0])
        self.dtype = first.dtype
        width = first.shape[1:] if first.ndim > 1 else (1,)
        views = []
        for k, chunk in enumerate(chunks):
            chunk = np.asarray(chunk)
            if chunk.ndim == 1:
                chunk = chunk.reshape(-1, 1)
            if chunk.ndim != 2 or chunk.dtype != self.dtype or chunk.shape[1:] != width:
                raise ValueError(f"'chunks[{k}]' has shape {chunk.shape} and dtype {chunk.dtype}; "
                                 f"expected (rows, {width[0]}) of {self.dtype}")
            view = _kernel_view(np.ascontiguousarray(chunk)).view()
            view.setflags(write=False)  # one numba type for every view
            views.append(view)
        self.views = views
        self.chunk_rows = int(chunk_rows) if chunk_rows is not None else max(1, views[0].shape[0])
        if self.chunk_rows < 1:
            raise ValueError(f"'chunk_rows' must be >= 1 (got {chunk_rows})")
        for k, view in enumerate(views[:-1]):
            if view.shape[0] != self.chunk_rows:
                raise ValueError(f"'chunks[{k}]' has {view.shape[0]} rows; every chunk but the last "
                                 f"must have chunk_rows={self.chunk_rows}")
        self.dim = int(width[0])
        self.num_rows = (len(views) - 1) * self.chunk_rows + views[-1].shape[0]
        self.single: np.ndarray | None = views[0] if len(views) == 1 else None
        """The whole matrix when it is one view (an in-memory ``X``): the kernels index it
        directly instead of dispatching on the chunk of every row."""
        bucket = next((b for b in TUPLE_BUCKETS if len(views) <= b), None)
        self.is_tuple = bucket is not None
        if self.is_tuple:
            self.packed: Any = tuple(views + [views[-1]] * (bucket - len(views)))
        else:
            packed = List.empty_list(types.Array(numba.from_dtype(views[0].dtype), 2, "C", readonly=True))
            for view in views:
                packed.append(view)
            self.packed = packed

    def __len__(self) -> int:
        return len(self.views)


def _as_chunks(chunks: Any, chunk_rows: int | None) -> FeatureChunks:
    if isinstance(chunks, FeatureChunks):
        return chunks
    return FeatureChunks(chunks, chunk_rows)


def _check_ids(ids: np.ndarray, num_rows: int, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'{name}' must be a one-dimensional integer array (got dtype {ids.dtype}, "
                         f"ndim {ids.ndim})")
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_rows):
        raise ValueError(f"'{name}' holds IDs outside [0, {num_rows}) (got min {int(ids.min())}, "
                         f"max {int(ids.max())})")
    return ids


# -- row gather ---------------------------------------------------------------------------------
PARALLEL_MIN_BYTES = 1 << 20
"""Copies smaller than this run in the calling thread alone; larger ones are shared with
helper threads (:func:`graphpipe.ops._core.worksharing.run_ranges`: the caller keeps working
through the pieces, so a busy machine never leaves it waiting on a descheduled thread)."""
PARALLEL_MIN_QUERIES = 1 << 15
"""Hash probes below this count run in the calling thread alone."""
PREFETCH_DISTANCE = 32
"""Rows ahead whose store reads are announced with a software prefetch: a random row of
a large feature matrix is a DRAM miss, and the prefetch overlaps it with the copy of the
rows before it."""


def _threads(work: int, min_work: int) -> int:
    """Threads to share ``work`` units among (1 = the caller alone)."""
    threads = numba.get_num_threads()
    if threads <= 1 or work < min_work:
        return 1
    return threads


@numba.njit(cache=True, nogil=True, inline="always")
def _prefetch_row(src, r, dim):
    """Announce the read of row ``r`` of the 2D C-contiguous ``src``: every 64-byte cache
    line of it (a row of a few hundred bytes is several lines, and waiting on the hardware
    prefetcher to follow the first one leaves most of them as DRAM misses)."""
    base = r * dim
    step = max(1, 64 // src.itemsize)
    for off in range(0, dim, step):
        _prefetch(src, base + off)
    _prefetch(src, base + dim - 1)


@numba.njit(cache=True, nogil=True)
def _group_by_chunk(ids, positions, chunk_rows, num_chunks):
    """``positions`` reordered so that rows of the same chunk are adjacent (counting sort)."""
    starts = np.zeros(num_chunks + 1, dtype=np.int64)
    for j in range(positions.shape[0]):
        starts[ids[positions[j]] // chunk_rows + 1] += 1
    for c in range(num_chunks):
        starts[c + 1] += starts[c]
    order = np.empty(positions.shape[0], dtype=np.int64)
    for j in range(positions.shape[0]):
        i = positions[j]
        c = ids[i] // chunk_rows
        order[starts[c]] = i
        starts[c] += 1
    return order


@numba.njit(cache=True, nogil=True)
def _copy_chunk_rows(chunks, chunk_rows, ids, order, out, lo, hi):
    """``out[i] = X[ids[i]]`` for ``i`` in ``order[lo:hi]`` (grouped by chunk)."""
    dim = out.shape[1]
    current = -1
    src = chunks[0]
    for j in range(lo, hi):
        ahead = j + PREFETCH_DISTANCE
        if ahead < hi:
            g = ids[order[ahead]]
            c = g // chunk_rows
            _prefetch_row(chunks[c], g - c * chunk_rows, dim)
        i = order[j]
        gid = ids[i]
        c = gid // chunk_rows
        if c != current:
            src = chunks[c]
            current = c
        r = gid - c * chunk_rows
        for d in range(dim):
            out[i, d] = src[r, d]


def _copy_from_store(chunks: FeatureChunks, ids: np.ndarray, positions: np.ndarray,
                     out: np.ndarray) -> None:
    """``out[positions] = X[ids[positions]]`` from the chunk views, grouped by chunk."""
    if positions.shape[0] == 0:
        return
    order = _group_by_chunk(ids, positions, chunks.chunk_rows, len(chunks))
    threads = _threads(positions.shape[0] * out.shape[1] * out.itemsize, PARALLEL_MIN_BYTES)
    run_ranges(_copy_chunk_rows, order.shape[0], chunks.packed, chunks.chunk_rows, ids, order, out,
               threads=threads)


@numba.njit(cache=True, nogil=True, inline="always")
def _reuse_row(i, cache_pos, cache_rows, prev_pos, prev_rows, out, source):
    """Copy row ``i`` from the static cache (``source[i] = 0``) or the previous batch
    (``source[i] = 1``); False when neither holds it."""
    dim = out.shape[1]
    c = cache_pos[i]
    if c >= 0:
        for d in range(dim):
            out[i, d] = cache_rows[c, d]
        source[i] = 0
        return True
    p = prev_pos[i]
    if p >= 0:
        for d in range(dim):
            out[i, d] = prev_rows[p, d]
        source[i] = 1
        return True
    return False


@numba.njit(cache=True, nogil=True)
def _fused_range(ids, cache_pos, cache_rows, prev_pos, prev_rows, chunks, chunk_rows, out, source,
                 lo, hi):
    """Rows ``lo..hi-1`` in row order, each from the cache, the previous batch or its chunk."""
    dim = out.shape[1]
    for i in range(lo, hi):
        ahead = i + PREFETCH_DISTANCE
        if ahead < hi and cache_pos[ahead] < 0 and prev_pos[ahead] < 0:
            g = ids[ahead]
            c = g // chunk_rows
            _prefetch_row(chunks[c], g - c * chunk_rows, dim)
        if _reuse_row(i, cache_pos, cache_rows, prev_pos, prev_rows, out, source):
            continue
        gid = ids[i]
        k = gid // chunk_rows
        src = chunks[k]
        r = gid - k * chunk_rows
        for d in range(dim):
            out[i, d] = src[r, d]
        source[i] = 2


@numba.njit(cache=True, nogil=True)
def _split_by_source(cache_pos, prev_pos, source):
    """Positions of the rows served by the cache, by the previous batch and by the store
    (int64 arrays, ascending), with ``source[i]`` set to each row's source."""
    k = cache_pos.shape[0]
    counts = np.zeros(3, dtype=np.int64)
    for i in range(k):
        s = 0 if cache_pos[i] >= 0 else (1 if prev_pos[i] >= 0 else 2)
        source[i] = s
        counts[s] += 1
    cached = np.empty(counts[0], dtype=np.int64)
    reused = np.empty(counts[1], dtype=np.int64)
    stored = np.empty(counts[2], dtype=np.int64)
    a = b = c = 0
    for i in range(k):
        s = source[i]
        if s == 0:
            cached[a] = i
            a += 1
        elif s == 1:
            reused[b] = i
            b += 1
        else:
            stored[c] = i
            c += 1
    return cached, reused, stored


@numba.njit(cache=True, nogil=True)
def _copy_rows_range(src, src_rows, dst_rows, out, lo, hi):
    """``out[dst_rows[j]] = src[src_rows[j]]`` for ``j`` in ``lo..hi-1``."""
    dim = out.shape[1]
    for j in range(lo, hi):
        ahead = j + PREFETCH_DISTANCE
        if ahead < hi:
            _prefetch_row(src, src_rows[ahead], dim)
        r = src_rows[j]
        t = dst_rows[j]
        for d in range(dim):
            out[t, d] = src[r, d]


def _take_rows(src: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = src[ids]`` for a 2D ``src`` (kernel view) and checked int64 ``ids``
    ``(k,)``: one pass, shared with helper threads when large."""
    k = ids.shape[0]
    if k:
        run_ranges(_copy_rows_range, k, src, ids, np.arange(k, dtype=np.int64), out,
                   threads=_threads(k * out.shape[1] * out.itemsize, PARALLEL_MIN_BYTES))


def _assemble(chunks: FeatureChunks, ids: np.ndarray, cache_pos: np.ndarray, cache_rows: np.ndarray,
              prev_pos: np.ndarray, prev_rows: np.ndarray, out: np.ndarray, source: np.ndarray) -> None:
    k = ids.shape[0]
    if k == 0:
        return
    if chunks.single is not None and cache_rows.shape[0] == 0 and prev_rows.shape[0] == 0:
        source[:] = SOURCE_STORE  # nothing to reuse: every row from the matrix
        _take_rows(chunks.single, ids, out)
        return
    if chunks.single is not None:  # one simple gather per source (no per-row branching)
        cached, reused, stored = _split_by_source(cache_pos, prev_pos, source)
        for src, src_rows, dst_rows in ((cache_rows, cache_pos[cached], cached),
                                        (prev_rows, prev_pos[reused], reused),
                                        (chunks.single, ids[stored], stored)):
            if dst_rows.shape[0]:
                run_ranges(_copy_rows_range, dst_rows.shape[0], src, src_rows, dst_rows, out,
                           threads=_threads(dst_rows.shape[0] * out.shape[1] * out.itemsize,
                                            PARALLEL_MIN_BYTES))
        return
    threads = _threads(k * out.shape[1] * out.itemsize, PARALLEL_MIN_BYTES)
    if chunks.is_tuple:  # one pass in row order (chunk lookup is a cheap switch)
        run_ranges(_fused_range, k, ids, cache_pos, cache_rows, prev_pos, prev_rows, chunks.packed,
                   chunks.chunk_rows, out, source, threads=threads)
        return
    # many chunks: reused rows first, then the store rows grouped by chunk
    run_ranges(_reuse_range, k, cache_pos, cache_rows, prev_pos, prev_rows, out, source,
               threads=threads)
    _copy_from_store(chunks, ids, np.flatnonzero(source == SOURCE_STORE), out)


def gather_rows(chunks: Sequence[np.ndarray] | np.ndarray | FeatureChunks, chunk_rows: int | None,
                ids: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``X[ids]`` as a contiguous ``(len(ids), dim)`` array of ``X``'s dtype.

    Args:
        chunks: row-chunk views of ``X`` (list, one 2D array, or :class:`FeatureChunks`).
        chunk_rows: rows per chunk (every chunk but the last is this long; ignored for
            :class:`FeatureChunks`).
        ids: int ``(k,)`` global node IDs (row numbers of ``X``); any order, repeats allowed.
        out: optional C-contiguous ``(k, dim)`` output of ``X``'s dtype.
    """
    prepared = _as_chunks(chunks, chunk_rows)
    ids = _check_ids(ids, prepared.num_rows, "ids")
    k = ids.shape[0]
    if out is None:
        out = np.empty((k, prepared.dim), dtype=prepared.dtype)
    elif out.shape != (k, prepared.dim) or out.dtype != prepared.dtype or not out.flags.c_contiguous:
        raise ValueError(f"'out' must be C-contiguous {(k, prepared.dim)} of {prepared.dtype} "
                         f"(got {out.shape}, {out.dtype})")
    if prepared.single is not None:
        _take_rows(prepared.single, ids, _kernel_view(out))
        return out
    none = np.full(k, -1, dtype=np.int64)
    empty = np.zeros((0, prepared.dim), dtype=prepared.dtype)
    empty = _kernel_view(empty)
    _assemble(prepared, ids, none, empty, none, empty, _kernel_view(out), np.empty(k, dtype=np.int8))
    return out


def gather_rows_reference(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """NumPy reference of :func:`gather_rows` on the whole matrix ``x``."""
    return np.asarray(x)[np.asarray(ids, dtype=np.int64)]


# -- membership: positions of queries inside keys ----------------------------------------------
_HASH_MULT = np.uint64(0x9E3779B97F4A7C15)


@numba.njit(cache=True, nogil=True)
def _build_table(keys, bits, table):
    """Fill ``table`` (int64 ``(2 << bits,)``: slot ``s`` holds its key at ``2s`` and the
    key's position at ``2s + 1``, so a probe touches one cache line) with ``keys``."""
    size = 1 << bits
    mask = size - 1
    for s in range(size):
        table[2 * s] = -1
    shift = np.uint64(64 - bits)
    n = keys.shape[0]
    for p in range(n):
        if p + PREFETCH_DISTANCE < n:  # the home slot of a key further on: a cache miss
            _prefetch(table, 2 * np.int64((np.uint64(keys[p + PREFETCH_DISTANCE]) * _HASH_MULT)
                                          >> shift))
        key = keys[p]
        slot = np.int64((np.uint64(key) * _HASH_MULT) >> shift)
        while True:
            k = table[2 * slot]
            if k == -1:
                table[2 * slot] = key
                table[2 * slot + 1] = p
                break
            if k == key:  # duplicate key: keep the first position
                break
            slot = (slot + 1) & mask


@numba.njit(cache=True, nogil=True)
def _probe_range(table, bits, queries, out, lo, hi):
    mask = (1 << bits) - 1
    shift = np.uint64(64 - bits)
    for i in range(lo, hi):
        if i + PREFETCH_DISTANCE < hi:
            _prefetch(table, 2 * np.int64((np.uint64(queries[i + PREFETCH_DISTANCE]) * _HASH_MULT)
                                          >> shift))
        key = queries[i]
        slot = np.int64((np.uint64(key) * _HASH_MULT) >> shift)
        found = -1
        while True:
            k = table[2 * slot]
            if k == -1:
                break
            if k == key:
                found = table[2 * slot + 1]
                break
            slot = (slot + 1) & mask
        out[i] = found


class PositionTable:
    """Open-addressing hash table from IDs to their positions in ``keys``: built once
    (``O(P)``), probed in parallel many times.

    Args:
        keys: int ``(P,)`` non-negative global IDs; with repeats, the first position counts.
        storage: optional int64 array to build the table in when it is large enough
            (a loader passes the same one batch after batch, so the table's memory is not
            allocated, and faulted in, anew each time); the table is valid until the
            storage is reused.
    """

    def __init__(self, keys: np.ndarray, storage: np.ndarray | None = None):
        keys = np.asarray(keys)
        if keys.ndim != 1 or (keys.size and keys.dtype.kind not in "iu"):
            raise ValueError(f"'keys' must be a one-dimensional integer array "
                             f"(got dtype {keys.dtype}, ndim {keys.ndim})")
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        if keys.size and int(keys.min()) < 0:
            raise ValueError(f"'keys' must be non-negative IDs (got min {int(keys.min())})")
        self.size = int(keys.shape[0])
        self.bits = self._bits(self.size)
        self._table = None
        if self.size:
            need = self.table_length(self.size)
            if storage is not None and storage.dtype == np.int64 and storage.shape[0] >= need:
                self._table = storage[:need]
            else:
                self._table = np.empty(need, dtype=np.int64)
            _build_table(keys, self.bits, self._table)

    @staticmethod
    def _bits(size: int) -> int:
        """log2 of the slot count: at least twice ``size`` slots (load factor <= 1/2)."""
        return max(4, int(2 * max(1, size) - 1).bit_length())

    @classmethod
    def table_length(cls, size: int) -> int:
        """int64 entries the table of ``size`` keys takes (what ``storage`` must hold)."""
        return 2 << cls._bits(size)

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """int64 ``(Q,)``: position of each query in ``keys``, -1 when absent."""
        queries = np.asarray(queries)
        if queries.ndim != 1 or (queries.size and queries.dtype.kind not in "iu"):
            raise ValueError(f"'queries' must be a one-dimensional integer array "
                             f"(got dtype {queries.dtype}, ndim {queries.ndim})")
        queries = np.ascontiguousarray(queries, dtype=np.int64)
        out = np.empty(queries.shape[0], dtype=np.int64)
        if self._table is None:
            out.fill(-1)
        elif queries.size:
            run_ranges(_probe_range, queries.shape[0], self._table, self.bits, queries, out,
                       threads=_threads(queries.shape[0], PARALLEL_MIN_QUERIES))
        return out


DENSE_INDEX_MAX_BYTES = 256 << 20
"""A :class:`ResidentIndex` keeps a dense int32 position per node (``4 × num_nodes``
bytes) up to this size; above it, a hash table sized by the batch."""


@numba.njit(cache=True, nogil=True)
def _dense_replace(slot_of, old_ids, new_ids):
    """Forget ``old_ids``' positions, then record ``new_ids[p] -> p`` (first one wins).
    IDs outside ``[0, len(slot_of))`` are skipped: never a write out of bounds, whatever
    the IDs say (a corrupt store's topology may hold any value)."""
    size = slot_of.shape[0]
    n = old_ids.shape[0]
    for i in range(n):
        if i + PREFETCH_DISTANCE < n:
            _prefetch(slot_of, min(max(old_ids[i + PREFETCH_DISTANCE], 0), size - 1))
        v = old_ids[i]
        if 0 <= v < size:
            slot_of[v] = -1
    m = new_ids.shape[0]
    for i in range(m):
        if i + PREFETCH_DISTANCE < m:
            _prefetch(slot_of, min(max(new_ids[i + PREFETCH_DISTANCE], 0), size - 1))
        v = new_ids[i]
        if 0 <= v < size and slot_of[v] < 0:
            slot_of[v] = i


@numba.njit(cache=True, nogil=True)
def _dense_lookup(slot_of, queries, out):
    """``out[i] = slot_of[queries[i]]``, -1 for a query outside ``[0, len(slot_of))``."""
    size = slot_of.shape[0]
    m = queries.shape[0]
    for i in range(m):
        if i + PREFETCH_DISTANCE < m:
            _prefetch(slot_of, min(max(queries[i + PREFETCH_DISTANCE], 0), size - 1))
        v = queries[i]
        out[i] = slot_of[v] if 0 <= v < size else -1


class ResidentIndex:
    """The IDs of the batch currently resident and where each sits in it: the Match step's
    question "where is ID ``v`` in the previous batch?" for every ID of the next batch.

    Up to :data:`DENSE_INDEX_MAX_BYTES` it keeps one int32 position per node (allocated on
    first use): replacing the resident batch is two scattered passes over the old and new
    IDs, a lookup one gather (all within a few MB that stay in cache). Larger graphs use a
    :class:`PositionTable` built per batch in reused storage.

    Args:
        num_nodes: IDs are in ``[0, num_nodes)``.
    """

    def __init__(self, num_nodes: int):
        self.num_nodes = int(num_nodes)
        self.ids: np.ndarray | None = None
        self._dense = 4 * self.num_nodes <= DENSE_INDEX_MAX_BYTES
        self._slot_of: np.ndarray | None = None
        self._storage: np.ndarray | None = None

    def replace(self, ids: np.ndarray | None) -> None:
        """Make ``ids`` (int64 ``(P,)``, distinct, in range) the resident batch (None: none).
        The index keeps its own copy: a caller changing the array later (a batch's
        ``n_id`` handed out to user code) cannot leave stale positions behind."""
        if ids is not None:
            ids = np.array(ids, dtype=np.int64, copy=True)
        if self._dense and (ids is not None or self.ids is not None):
            if self._slot_of is None:
                self._slot_of = np.full(self.num_nodes, -1, dtype=np.int32)
            empty = np.zeros(0, dtype=np.int64)
            _dense_replace(self._slot_of, empty if self.ids is None else self.ids,
                           empty if ids is None else ids)
        self.ids = ids

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """int64 ``(Q,)``: position of each of ``queries`` (in range) in the resident batch,
        -1 when absent or when nothing is resident."""
        if self.ids is None:
            return np.full(queries.shape[0], -1, dtype=np.int64)
        if not self._dense:
            need = PositionTable.table_length(self.ids.shape[0])
            if self._storage is None or self._storage.shape[0] < need:
                self._storage = np.empty(need, dtype=np.int64)
            return PositionTable(self.ids, self._storage).lookup(queries)
        out = np.empty(queries.shape[0], dtype=np.int64)
        _dense_lookup(self._slot_of, queries, out)
        return out


def positions_in(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Position of each query inside ``keys``, or ``-1`` when absent.

    Args:
        keys: int ``(P,)`` non-negative global IDs (e.g. the resident batch's
            ``n_id``); with repeats, the first position counts.
        queries: int ``(Q,)`` global IDs (e.g. the next batch's ``n_id``).

    Returns:
        int64 ``(Q,)``: ``keys[pos[q]] == queries[q]`` where ``pos[q] >= 0``.
        Memory is ``O(P + Q)`` (a hash table of at least ``2P`` slots), never
        ``O(num_nodes)``.
    """
    return PositionTable(keys).lookup(queries)


def positions_in_reference(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Dictionary reference of :func:`positions_in`."""
    where: dict[int, int] = {}
    for p, key in enumerate(np.asarray(keys).tolist()):
        where.setdefault(int(key), p)
    return np.array([where.get(int(q), -1) for q in np.asarray(queries).tolist()], dtype=np.int64)


# -- assembling the next batch: cache -> previous batch -> store -------------------------------
@numba.njit(cache=True, nogil=True)
def _reuse_range(cache_pos, cache_rows, prev_pos, prev_rows, out, source, lo, hi):
    """Rows ``lo..hi-1`` from the cache or the previous batch; marks the rest for the store."""
    for i in range(lo, hi):
        if not _reuse_row(i, cache_pos, cache_rows, prev_pos, prev_rows, out, source):
            source[i] = 2


def assemble_rows(ids: np.ndarray, *, chunks: Sequence[np.ndarray] | np.ndarray | FeatureChunks,
                  chunk_rows: int | None, cache_pos: np.ndarray | None = None,
                  cache_rows: np.ndarray | None = None, prev_pos: np.ndarray | None = None,
                  prev_rows: np.ndarray | None = None,
                  out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Feature rows ``X[ids]`` assembled from cache, previous batch and store.

    Row ``i`` comes from ``cache_rows[cache_pos[i]]`` when ``cache_pos[i] >= 0``,
    else from ``prev_rows[prev_pos[i]]`` when ``prev_pos[i] >= 0``, else from the
    store chunks. The caller guarantees that the cache and previous rows hold the
    features of the same IDs (``cache_rows[cache_pos[i]] == X[ids[i]]``).

    Args:
        ids: int ``(k,)`` global node IDs of the next batch.
        chunks, chunk_rows: the store's row-chunk views (see :func:`gather_rows`).
        cache_pos: int64 ``(k,)`` row in ``cache_rows`` or -1 (None: no cache).
        cache_rows: ``(C, dim)`` cached feature rows.
        prev_pos: int64 ``(k,)`` row in ``prev_rows`` or -1 (None: nothing resident).
        prev_rows: ``(P, dim)`` the resident batch's feature rows.
        out: optional C-contiguous ``(k, dim)`` output.

    Returns:
        ``(out, source)``: the ``(k, dim)`` rows and an int8 ``(k,)`` array naming
        where each row came from (:data:`SOURCE_CACHE`, :data:`SOURCE_PREVIOUS`,
        :data:`SOURCE_STORE`).
    """
    prepared = _as_chunks(chunks, chunk_rows)
    ids = _check_ids(ids, prepared.num_rows, "ids")
    k = ids.shape[0]
    dim, dtype = prepared.dim, prepared.dtype
    none = np.full(k, -1, dtype=np.int64)
    empty = np.zeros((0, dim), dtype=dtype)
    cache_pos = none if cache_pos is None else np.asarray(cache_pos, dtype=np.int64)
    prev_pos = none if prev_pos is None else np.asarray(prev_pos, dtype=np.int64)
    cache_rows = empty if cache_rows is None else np.ascontiguousarray(cache_rows)
    prev_rows = empty if prev_rows is None else np.ascontiguousarray(prev_rows)
    for name, pos, rows in (("cache_pos", cache_pos, cache_rows), ("prev_pos", prev_pos, prev_rows)):
        if pos.shape != (k,):
            raise ValueError(f"'{name}' must have shape ({k},) (got {pos.shape})")
        if k and int(pos.max()) >= rows.shape[0]:
            raise ValueError(f"'{name}' points past its rows (max {int(pos.max())}, "
                             f"rows {rows.shape[0]})")
    for name, rows in (("cache_rows", cache_rows), ("prev_rows", prev_rows)):
        if rows.ndim != 2 or rows.shape[1] != dim or rows.dtype != dtype:
            raise ValueError(f"'{name}' must be (rows, {dim}) of {dtype} (got {rows.shape}, {rows.dtype})")
    if out is None:
        out = np.empty((k, dim), dtype=dtype)
    elif out.shape != (k, dim) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"'out' must be C-contiguous {(k, dim)} of {dtype} (got {out.shape}, {out.dtype})")
    source = np.empty(k, dtype=np.int8)
    _assemble(prepared, ids, cache_pos, _kernel_view(cache_rows), prev_pos, _kernel_view(prev_rows),
              _kernel_view(out), source)
    return out, source


def assemble_rows_reference(ids: np.ndarray, x: np.ndarray, cache_pos: np.ndarray | None,
                            cache_rows: np.ndarray | None, prev_pos: np.ndarray | None,
                            prev_rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """NumPy reference of :func:`assemble_rows` on the whole matrix ``x``."""
    ids = np.asarray(ids, dtype=np.int64)
    k = len(ids)
    cache_pos = np.full(k, -1) if cache_pos is None else np.asarray(cache_pos)
    prev_pos = np.full(k, -1) if prev_pos is None else np.asarray(prev_pos)
    from_cache = cache_pos >= 0
    from_prev = ~from_cache & (prev_pos >= 0)
    from_store = ~from_cache & ~from_prev
    out = np.empty((k,) + x.shape[1:], dtype=x.dtype)
    if from_cache.any():
        out[from_cache] = cache_rows[cache_pos[from_cache]]
    if from_prev.any():
        out[from_prev] = prev_rows[prev_pos[from_prev]]
    out[from_store] = x[ids[from_store]]
    source = np.where(from_cache, SOURCE_CACHE, np.where(from_prev, SOURCE_PREVIOUS, SOURCE_STORE))
    return out, source.astype(np.int8)
