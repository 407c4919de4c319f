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

Each function has a plain-Python reference next to it
(:func:`match_degree_matrix_reference`, :func:`greedy_reorder_reference`) that
the tests compare the fast path against.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

__all__ = [
    "greedy_reorder",
    "greedy_reorder_reference",
    "intersection_size",
    "match_degree_matrix",
    "match_degree_matrix_reference",
]


@numba.njit(cache=True, nogil=True)
def _merge_count(a: np.ndarray, b: np.ndarray) -> int:
    """Size of the intersection of two sorted arrays of distinct values (sort-merge)."""
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
            i += 1
            j += 1
        elif va < vb:
            i += 1
        else:
            j += 1
    return count


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


def _sorted_unique(ids: np.ndarray, name: str) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"'{name}' must be a one-dimensional integer array (got dtype {ids.dtype}, "
                         f"ndim {ids.ndim})")
    return np.unique(ids.astype(np.int64, copy=False))


def match_degree_matrix(node_sets: Sequence[np.ndarray]) -> np.ndarray:
    """Match degrees of ``n`` batches.

    Args:
        node_sets: ``n`` integer arrays of global node IDs (e.g. each batch's
            ``n_id``); duplicates inside one array are ignored.

    Returns:
        float64 ``(n, n)``: ``M[i, j] = |V_i ∩ V_j| / min(|V_i|, |V_j|)`` for
        ``i != j`` (0 when either set is empty), symmetric, in ``[0, 1]``; the
        diagonal is excluded and set to 0.
    """
    sets = [_sorted_unique(s, f"node_sets[{k}]") for k, s in enumerate(node_sets)]
    n = len(sets)
    if n == 0:
        return np.zeros((0, 0), dtype=np.float64)
    sizes = np.array([len(s) for s in sets], dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    flat = np.concatenate(sets) if offsets[-1] else np.zeros(0, dtype=np.int64)
    overlap = _pairwise_overlap(flat, offsets)
    smaller = np.minimum(sizes[:, None], sizes[None, :]).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        matrix = np.where(smaller > 0, overlap / np.where(smaller > 0, smaller, 1.0), 0.0)
    np.fill_diagonal(matrix, 0.0)
    return matrix


def match_degree_matrix_reference(node_sets: Sequence[np.ndarray]) -> np.ndarray:
    """Plain-Python reference of :func:`match_degree_matrix` (Python ``set`` intersections)."""
    sets = [set(int(v) for v in np.asarray(s).ravel()) for s in node_sets]
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
