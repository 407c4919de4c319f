"""Match-Reorder (FastGL §3): the match-degree matrix of a window of sampled
batches and the greedy order that puts each batch after the one it shares the
most input nodes with.

The node set ``V_i`` of batch ``i`` is the set of global node IDs whose feature
rows the batch needs: ``SampleOutput.n_id`` (the source set of the outermost
block). The match degree of two batches is

    M_ij = |V_i ∩ V_j| / min(|V_i|, |V_j|)        (0 when either set is empty)

Greedy Reorder is FastGL's Algorithm 1 with the corrections of fastgl.md §3.4:
the diagonal is excluded, the argmax runs only over batches not yet placed (a
visited mask), ties go to the lowest index, and the first batch stays first.

Greedy Reorder maximises the *normalised* match degree, which favours small
batches (a short last batch matches "well" with everything, then leaves its
successor to load much); :func:`overlap_matrix` gives the raw counts
``|V_i ∩ V_j|`` for a greedy order that directly minimises rows loaded.

Each function has a plain-Python reference next to it
(:func:`match_degree_matrix_reference`, :func:`greedy_reorder_reference`) that
the tests compare the fast path against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from graphpipe.ops._core.intrinsics import prefetch as _prefetch

__all__ = [
    "OverlapWorkspace",
    "greedy_reorder",
    "greedy_reorder_reference",
    "intersection_size",
    "match_degree_matrix",
    "match_degree_matrix_reference",
    "overlap_matrix",
]


@numba.njit(cache=True, nogil=True)
def _merge_count(a: np.ndarray, b: np.ndarray) -> int:
    """Number of distinct values two sorted arrays share (sort-merge; repeats are skipped)."""
    i = 0
    j = 0
    count = 0
    na = a.shape[0]
    nb = b.shape[0]
    while i < na and j < nb:
        va = a[i]
        vb = b[j]
        if va == vb:
            count += 1
            while i < na and a[i] == va:
                i += 1
            while j < nb and b[j] == vb:
                j += 1
        elif va < vb:
            i += 1
        else:
            j += 1
    return count


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_segments(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sort each segment ``flat[offsets[i]:offsets[i+1]]`` in place (segments in parallel);
    returns the number of distinct values of each."""
    n = offsets.shape[0] - 1
    distinct = np.zeros(n, dtype=np.int64)
    for s in numba.prange(n):
        seg = flat[offsets[s]:offsets[s + 1]]
        seg.sort()
        c = 0
        for k in range(seg.shape[0]):
            if k == 0 or seg[k] != seg[k - 1]:
                c += 1
        distinct[s] = c
    return distinct


@numba.njit(cache=True, nogil=True, parallel=True)
def _pairwise_overlap(flat: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """``overlap[i, j] = |set_i ∩ set_j|`` for sorted distinct sets packed in ``flat``."""
    n = offsets.shape[0] - 1
    overlap = np.zeros((n, n), dtype=np.int64)
    num_pairs = n * (n - 1) // 2
    for p in numba.prange(num_pairs):
        # unrank pair p -> (i, j) with i < j, row-major over the upper triangle
        i = 0
        remaining = p + 0
        while remaining >= n - 1 - i:
            remaining -= n - 1 - i
            i += 1
        j = i + 1 + remaining
        c = _merge_count(flat[offsets[i]:offsets[i + 1]], flat[offsets[j]:offsets[j + 1]])
        overlap[i, j] = c
        overlap[j, i] = c
    return overlap


_PREFETCH_AHEAD = 16
"""Values ahead whose bitmap row is prefetched."""


@numba.njit(cache=True, nogil=True)
def _bitmap_overlap(flat: np.ndarray, offsets: np.ndarray,
                    member: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(overlap, distinct)`` with an ID-indexed membership bitmap: bit ``i % 8`` of
    ``member[v, i // 8]`` says that set ``i`` holds ``v``; each value of set ``j`` adds one
    to ``overlap[i, j]`` for every earlier set ``i`` holding it. ``member`` (uint8, zero,
    at least ``max_id + 1`` rows and ``⌈n/8⌉`` columns) is left zero again."""
    n = offsets.shape[0] - 1
    overlap = np.zeros((n, n), dtype=np.int64)
    distinct = np.zeros(n, dtype=np.int64)
    cols = member.shape[1]
    total = flat.shape[0]
    for j in range(n):
        w = j // 8
        bit = np.uint8(1 << (j % 8))
        for k in range(offsets[j], offsets[j + 1]):
            if k + _PREFETCH_AHEAD < total:  # a random row of a large bitmap: a cache miss
                _prefetch(member, flat[k + _PREFETCH_AHEAD] * cols)
            v = flat[k]
            if member[v, w] & bit:
                continue  # repeated inside set j
            distinct[j] += 1
            for ww in range(w + 1):
                m = np.int64(member[v, ww])
                i = ww * 8
                while m:
                    if m & 1:
                        overlap[i, j] += 1
                        overlap[j, i] += 1
                    m >>= 1
                    i += 1
            member[v, w] = member[v, w] | bit
    for k in range(total):
        for ww in range(cols):
            member[flat[k], ww] = 0
    return overlap, distinct


class OverlapWorkspace:
    """A reusable zeroed membership bitmap for :func:`overlap_matrix` (``num_ids × ⌈n/8⌉``
    bytes), so that a loader does not allocate and fault in a fresh one every window."""

    def __init__(self, num_ids: int, max_sets: int):
        self.member = np.zeros((max(1, int(num_ids)), max(1, -(-int(max_sets) // 8))), dtype=np.uint8)

    def fits(self, num_ids: int, num_sets: int) -> bool:
        return num_ids <= self.member.shape[0] and -(-num_sets // 8) <= self.member.shape[1]


_BITMAP_MAX_BYTES = 1 << 30


def _check_ids(ids: np.ndarray, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'{name}' must be a one-dimensional integer array (got dtype {ids.dtype}, "
                         f"ndim {ids.ndim})")
    return ids.astype(np.int64, copy=False)


def _sorted_unique(ids: np.ndarray, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"'{name}' must be a one-dimensional integer array (got dtype {ids.dtype}, "
                         f"ndim {ids.ndim})")
    return np.unique(ids.astype(np.int64, copy=False))


def overlap_matrix(node_sets: Sequence[np.ndarray], method: str = "auto", *,
                   workspace: OverlapWorkspace | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pairwise intersection sizes of ``n`` node sets.

    Args:
        node_sets: ``n`` integer arrays of non-negative global node IDs (e.g. each
            batch's ``n_id``); duplicates inside one array are ignored.
        method: ``"bitmap"``: one pass over all sets with an ID-indexed membership
            bitmap (``max_id · ⌈n/8⌉`` bytes of host memory); ``"merge"``: sort each
            set (in parallel) and sort-merge every pair; ``"auto"``: the bitmap when it
            needs at most 1 GiB.
        workspace: a reusable bitmap (bitmap method only; used when large enough).

    Returns:
        ``(overlap, sizes)``: int64 ``(n, n)`` with ``overlap[i, j] = |V_i ∩ V_j|``
        (diagonal 0), and int64 ``(n,)`` distinct values per set ``|V_i|``.
    """
    sets = [_check_ids(s, f"node_sets[{k}]") for k, s in enumerate(node_sets)]
    if method not in ("auto", "bitmap", "merge"):
        raise ValueError(f"'method' must be 'auto', 'bitmap' or 'merge' (got {method!r})")
    n = len(sets)
    if n == 0:
        return np.zeros((0, 0), dtype=np.int64), np.zeros(0, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(s) for s in sets], out=offsets[1:])
    flat = np.concatenate(sets) if offsets[-1] else np.zeros(0, dtype=np.int64)  # a copy
    if flat.size and int(flat.min()) < 0:
        raise ValueError(f"'node_sets' must hold non-negative IDs (got {int(flat.min())})")
    num_ids = int(flat.max()) + 1 if flat.size else 0
    bitmap_bytes = num_ids * ((n + 7) // 8)
    if method == "bitmap" or (method == "auto" and bitmap_bytes <= _BITMAP_MAX_BYTES):
        if workspace is None or not workspace.fits(num_ids, n):
            workspace = OverlapWorkspace(num_ids, n)
        overlap, sizes = _bitmap_overlap(flat, offsets, workspace.member)
    else:
        sizes = _sort_segments(flat, offsets)  # sorts in place
        overlap = _pairwise_overlap(flat, offsets)
    return overlap, sizes


def match_degree_matrix(node_sets: Sequence[np.ndarray], method: str = "auto", *,
                        workspace: OverlapWorkspace | None = None) -> np.ndarray:
    """Match degrees of ``n`` batches.

    Args:
        node_sets, method, workspace: as in :func:`overlap_matrix`.

    Returns:
        float64 ``(n, n)``: ``M[i, j] = |V_i ∩ V_j| / min(|V_i|, |V_j|)`` for
        ``i != j`` (0 when either set is empty), symmetric, in ``[0, 1]``; the
        diagonal is excluded and set to 0.
    """
    overlap, sizes = overlap_matrix(node_sets, method, workspace=workspace)
    smaller = np.minimum(sizes[:, None], sizes[None, :]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        matrix = np.where(smaller > 0, overlap / np.where(smaller > 0, smaller, 1.0), 0.0)
    np.fill_diagonal(matrix, 0.0)
    return matrix


def match_degree_matrix_reference(node_sets: Sequence[np.ndarray]) -> np.ndarray:
    """Plain-Python reference of :func:`match_degree_matrix` (Python ``set`` intersections)."""
    sets = [{int(v) for v in np.asarray(s).ravel()} for s in node_sets]
    n = len(sets)
    matrix = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            smaller = min(len(sets[i]), len(sets[j]))
            matrix[i, j] = len(sets[i] & sets[j]) / smaller if smaller else 0.0
    return matrix


def intersection_size(a: np.ndarray, b: np.ndarray) -> int:
    """``|set(a) ∩ set(b)|`` for two integer arrays (sort-merge)."""
    return int(_merge_count(_sorted_unique(a, "a"), _sorted_unique(b, "b")))


def greedy_reorder(matrix: np.ndarray) -> np.ndarray:
    """Greedy Reorder (FastGL Algorithm 1, corrected).

    Starting from batch 0, repeatedly append the batch not yet placed with the
    largest match degree to the batch placed last; ties go to the lowest index.
    The diagonal of ``matrix`` is ignored.

    Args:
        matrix: float ``(n, n)`` match degrees (:func:`match_degree_matrix`).

    Returns:
        int64 ``(n,)``: a permutation of ``0..n-1`` with ``order[0] == 0``.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"'matrix' must be square (got shape {matrix.shape})")
    n = matrix.shape[0]
    order = np.empty(n, dtype=np.int64)
    if n == 0:
        return order
    visited = np.zeros(n, dtype=bool)
    last = 0
    order[0] = 0
    visited[0] = True
    for step in range(1, n):
        row = np.where(visited, -np.inf, matrix[last])
        nxt = int(np.argmax(row))  # first maximum: lowest index on ties
        order[step] = nxt
        visited[nxt] = True
        last = nxt
    return order


def greedy_reorder_reference(matrix: np.ndarray) -> list[int]:
    """Plain-Python reference of :func:`greedy_reorder` (visited set, strict ``>`` keeps the
    lowest index on ties)."""
    n = len(matrix)
    if n == 0:
        return []
    order = [0]
    placed = {0}
    while len(order) < n:
        last = order[-1]
        best, best_value = -1, None
        for k in range(n):
            if k in placed:
                continue
            value = float(matrix[last][k])
            if best_value is None or value > best_value:
                best, best_value = k, value
        order.append(best)
        placed.add(best)
    return order
