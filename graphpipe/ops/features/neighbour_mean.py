"""The mean of each node's neighbours' feature rows, out of core (the OGB-LSC MAG240M
baseline's features of featureless types: an author is the mean of its papers, an
institution the mean of its authors).

The neighbours are a compressed row structure ``indptr`` (int64 ``(N + 1,)``) /
``indices`` (``(E,)`` rows of ``x``): row ``r``'s neighbours are
``indices[indptr[r]:indptr[r + 1]]``, a relation's CSC when the rows are its destinations,
its transpose (:func:`transpose_csc`) when they are its sources. ``x`` may be a memory map
far larger than memory: :func:`neighbour_mean_blocks` reads it one bounded block of gathered
rows at a time and yields the result a block of output rows at a time.

Definition (the tests' NumPy reference): ``out[r] = (sum_e float64(x[indices[e]])) /
deg(r)``, the sum in storage order, cast to ``x``'s dtype (float16 stays float16); a row
without neighbours is zero.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from graphpipe.ops.aggregate.cpu import transpose_csc

__all__ = ["neighbour_mean_blocks", "transpose_csc"]


def _check(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray) -> None:
    if indptr.ndim != 1 or indptr.size == 0 or indptr.dtype.kind not in "iu":
        raise ValueError(f"'indptr' must be a non-empty 1-D integer array (got {indptr.dtype}, "
                         f"shape {indptr.shape})")
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0] or \
            bool((np.diff(indptr) < 0).any()):
        raise ValueError(f"'indptr' must rise from 0 to E={indices.shape[0]}")
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ValueError(f"'x' must be a 2-D float array (got {x.dtype}, shape {x.shape})")


def _block_sums(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, r0: int, r1: int,
                max_edges: int) -> np.ndarray:
    """float64 ``(r1 - r0, D)``: the neighbour sums of rows ``r0 .. r1-1``, in edge order,
    gathering at most ``max_edges`` rows of ``x`` at once."""
    out = np.zeros((r1 - r0, x.shape[1]), dtype=np.float64)
    bounds = np.asarray(indptr[r0:r1 + 1], dtype=np.int64)
    for c0 in range(int(bounds[0]), int(bounds[-1]), max_edges):
        c1 = min(c0 + max_edges, int(bounds[-1]))
        ids = np.asarray(indices[c0:c1], dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= x.shape[0]):
            raise ValueError(f"'indices' must lie in [0, {x.shape[0]}) (the rows of 'x')")
        rows = np.searchsorted(bounds, np.arange(c0, c1), side="right") - 1
        order = np.argsort(ids, kind="stable")  # read x in row order (a memory map: by page)
        gathered = np.empty((ids.size, x.shape[1]), dtype=np.float64)
        gathered[order] = x[ids[order]]
        np.add.at(out, rows, gathered)  # per row in edge order
    return out


def neighbour_mean_blocks(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, *,
                          memory_bytes: int = 256 << 20) -> Iterator[np.ndarray]:
    """Yield the neighbour means of rows ``0 .. N-1`` in blocks of consecutive rows.

    Args:
        indptr: integer ``(N + 1,)`` offsets (see the module docstring).
        indices: integer ``(E,)`` rows of ``x``.
        x: float ``(M, D)`` (a memory map is read a block at a time).
        memory_bytes: the working memory to stay near: an output block and a block of
            gathered rows (in float64) each take about half of it.

    Yields:
        ``(rows, D)`` arrays of ``x``'s dtype, ``N`` rows in all.

    >>> import numpy as np
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    >>> indptr, indices = np.array([0, 2, 2, 3]), np.array([0, 1, 2])
    >>> np.concatenate(list(neighbour_mean_blocks(indptr, indices, x)))
    array([[2., 3.],
           [0., 0.],
           [5., 6.]], dtype=float32)
    """
    indptr = np.asarray(indptr)
    _check(indptr, indices, x)
    n, row_bytes = indptr.shape[0] - 1, max(1, x.shape[1]) * 8
    block_rows = max(1, int(memory_bytes) // 2 // row_bytes)
    max_edges = max(1, int(memory_bytes) // 2 // (row_bytes + 8 * 4))
    r0 = 0
    while r0 < n:
        # as many rows as fit both budgets (at least one: a high-degree row is chunked)
        limit = int(indptr[r0]) + max_edges
        r1 = int(np.searchsorted(indptr, limit, side="right")) - 1
        r1 = min(n, r0 + block_rows, max(r0 + 1, r1))
        sums = _block_sums(indptr, indices, x, r0, r1, max_edges)
        deg = np.diff(np.asarray(indptr[r0:r1 + 1], dtype=np.int64)).astype(np.float64)
        np.divide(sums, deg[:, None], out=sums, where=deg[:, None] > 0)
        yield sums.astype(x.dtype)
        r0 = r1
