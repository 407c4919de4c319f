"""The mean of each node's neighbours' feature rows, out of core and in bounded memory (the
OGB-LSC MAG240M baseline's features of featureless types: an author is the mean of its
papers, an institution the mean of its authors).

``out[r] = (sum over r's neighbours s of acc(x[s])) / deg(r)``, cast to ``x``'s dtype
(float16 stays float16); a row without neighbours is zero. The sum runs in ascending ``s``
in the accumulator dtype (float64 by default: the sum of float16 or float32 rows is then
exact in practice, so the order does not show in the result; float32 halves the
accumulator and so the passes, within float32 summation-order rounding).

The neighbours come in one of two layouts (the store keeps each relation's CSC, grouped
by its destination):

- ``grouped="rows"``: ``indptr`` (``(N + 1,)``) over the output rows, ``indices`` rows of
  ``x``: the relation's CSC when the output type is the relation's destination
  (institutions from ``author___affiliated_with___institution``);
- ``grouped="sources"``: ``indptr`` (``(M + 1,)``) over the rows of ``x``, ``indices``
  output rows: the relation's CSC when the output type is the relation's source (authors
  from ``author___writes___paper``, grouped by paper).

The computation (:func:`neighbour_mean_blocks`) never reads ``x`` in random order: it
holds the sums of one block of output rows (the accumulator) and streams ``x`` in
sequential blocks of rows past it, scatter-adding each block's rows into the sums of the
edges whose source lies in it (a Numba kernel; blocks without such edges skipped, and of a
block only the rows such edges name are converted when they are fewer than half), then it
divides by the degree and yields the block. Output blocks are a pass each, so ``x`` is
read ``passes`` times (:func:`plan_neighbour_mean`): once when the sums of all output rows
fit the budget. Memory (``memory_bytes``): half for the accumulator and its output
block, a quarter for a block of ``x`` rows (as the accumulator's dtype, at most
:data:`MAX_SOURCE_BLOCK` of ``x``), a quarter for the block's edges.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

from graphpipe.ops.aggregate.cpu import transpose_csc

__all__ = ["MAX_SOURCE_BLOCK", "MeanPlan", "neighbour_mean_blocks", "plan_neighbour_mean",
           "transpose_csc"]

MAX_SOURCE_BLOCK = 256 << 20
"""Bytes of ``x`` (its own dtype) read in one sequential block at most."""
_CHUNK = 1 << 20
EDGE_BYTES = 64
"""Working bytes per edge of a step: its two IDs, their local copies, the sort and unique temporaries."""


@dataclass(frozen=True)
class MeanPlan:
    """Block sizes of one :func:`neighbour_mean_blocks` run.

    Attributes:
        out_rows: output rows per pass (the accumulator's rows), at most.
        source_rows: rows of ``x`` per streamed block, at most.
        max_edges: edges per step, at most.
        accumulate: the accumulator's dtype.
    """

    out_rows: int
    source_rows: int
    max_edges: int
    accumulate: np.dtype

    def passes(self, num_rows: int) -> int:
        """Passes over ``x`` for ``num_rows`` output rows when edges do not bind (the
        ``grouped="rows"`` layout adds one where a block's edges exceed ``max_edges``)."""
        return max(1, -(-int(num_rows) // self.out_rows))


def plan_neighbour_mean(dim: int, dtype: np.dtype, memory_bytes: int,
                        accumulate: np.dtype = np.float64) -> MeanPlan:
    """Block sizes for ``x`` of ``dim`` columns of ``dtype`` in ``memory_bytes``.

    >>> plan = plan_neighbour_mean(768, np.float16, 1 << 30)
    >>> plan.out_rows, plan.source_rows, plan.max_edges, plan.passes(122_383_112)
    (69905, 43690, 4194304, 1751)
    """
    acc, item = np.dtype(accumulate), np.dtype(dtype).itemsize
    if acc.kind != "f" or acc.itemsize < 4:
        raise ValueError(f"'accumulate' must be float32 or float64 (got {acc})")
    budget, dim = max(1, int(memory_bytes)), max(1, int(dim))
    out_rows = max(1, budget // 2 // (dim * (acc.itemsize + item)))
    source_rows = max(1, min(budget // 4 // (dim * max(acc.itemsize, item)),
                             MAX_SOURCE_BLOCK // (dim * item)))
    return MeanPlan(out_rows, source_rows, max(1, budget // 4 // EDGE_BYTES), acc)


def _check(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, grouped: str) -> None:
    if grouped not in ("rows", "sources"):
        raise ValueError(f"'grouped' must be 'rows' or 'sources' (got {grouped!r})")
    if indptr.ndim != 1 or indptr.size == 0 or indptr.dtype.kind not in "iu":
        raise ValueError(f"'indptr' must be a non-empty 1-D integer array (got {indptr.dtype}, "
                         f"shape {indptr.shape})")
    rising = all(not (np.diff(np.asarray(indptr[c0:c0 + _CHUNK + 1])) < 0).any()
                 for c0 in range(0, indptr.shape[0], _CHUNK))  # a chunk at a time: bounded
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0] or not rising:
        raise ValueError(f"'indptr' must rise from 0 to E={indices.shape[0]}")
    if x.ndim != 2 or x.dtype.kind != "f":
        raise ValueError(f"'x' must be a 2-D float array (got {x.dtype}, shape {x.shape})")
    if grouped == "sources" and indptr.shape[0] - 1 != x.shape[0]:
        raise ValueError(f"'indptr' must have one entry per row of 'x' plus one "
                         f"({x.shape[0] + 1}, got {indptr.shape[0]})")


def _ids(indices: np.ndarray, e0: int, e1: int, bound: int, what: str) -> np.ndarray:
    ids = np.asarray(indices[e0:e1], dtype=np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= bound):
        raise ValueError(f"'indices' must lie in [0, {bound}) (the {what})")
    return ids


@numba.njit(cache=True, nogil=True)
def _scatter_add(acc, counts, block, src, dst):  # pragma: no cover - compiled
    """``acc[dst[e]] += block[src[e]]`` and ``counts[dst[e]] += 1`` for each ``e`` in order
    (the callers build ``src``/``dst`` inside ``block``/``acc``: no index leaves them)."""
    for e in range(src.shape[0]):
        a = acc[dst[e]]
        r = block[src[e]]
        for j in range(r.shape[0]):
            a[j] += r[j]
        counts[dst[e]] += 1


def _as_acc(rows: np.ndarray, acc: np.dtype) -> np.ndarray:
    """``rows`` as the kernel reads them: float16 widened exactly to the accumulator's dtype,
    float32/64 kept when not wider than it."""
    if rows.dtype.itemsize < 4 or rows.dtype.itemsize > acc.itemsize:
        return np.asarray(rows, dtype=acc)
    return np.ascontiguousarray(rows)


def _read_rows(x: np.ndarray, s0: int, s1: int, src: np.ndarray, acc: np.dtype
               ) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, src')``: the rows of ``x[s0:s1]`` that ``src`` (local to ``s0``) names, read
    in ascending order, and ``src`` re-indexed into them. One slice of the whole block when
    it needs half of its rows or more; else only those rows (the pages between them are
    read ahead all the same, but none is converted or copied for nothing)."""
    needed, inverse = np.unique(src, return_inverse=True)
    if 2 * needed.size >= s1 - s0:
        return _as_acc(x[s0:s1], acc), src
    return _as_acc(x[needed + s0], acc), inverse.reshape(-1).astype(np.int64)


def _finish(acc: np.ndarray, counts: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Divide each row with neighbours by its count (in the accumulator's dtype), cast."""
    deg = counts.astype(acc.dtype)[:, None]
    np.divide(acc, deg, out=acc, where=deg > 0)
    return acc.astype(dtype)


def _pass_by_sources(indptr, indices, x, r0, r1, plan: MeanPlan, n: int):
    """Accumulator and counts of output rows ``r0 .. r1-1``, ``grouped="sources"``: ``x`` and
    its edges streamed in order of ``x``'s rows, edges into other output rows skipped."""
    acc = np.zeros((r1 - r0, x.shape[1]), dtype=plan.accumulate)
    counts = np.zeros(r1 - r0, dtype=np.int64)
    m, s0 = x.shape[0], 0
    while s0 < m:
        e_first = int(indptr[s0])
        s1 = int(np.searchsorted(indptr, e_first + plan.max_edges, side="right")) - 1
        s1 = min(m, s0 + plan.source_rows, max(s0 + 1, s1))
        bounds = np.asarray(indptr[s0:s1 + 1], dtype=np.int64)
        for c0 in range(int(bounds[0]), int(bounds[-1]), plan.max_edges):  # one row: chunked
            c1 = min(c0 + plan.max_edges, int(bounds[-1]))
            out = _ids(indices, c0, c1, n, "output rows")
            keep = np.flatnonzero((out >= r0) & (out < r1))
            if keep.size == 0:
                continue
            src = np.searchsorted(bounds, keep + c0, side="right") - 1
            rows, src = _read_rows(x, s0, s1, src, plan.accumulate)
            _scatter_add(acc, counts, rows, src, out[keep] - r0)
        s0 = s1
    return acc, counts


def _rows_block_end(indptr: np.ndarray, r0: int, n: int, plan: MeanPlan) -> int:
    limit = int(indptr[r0]) + plan.max_edges
    r1 = int(np.searchsorted(indptr, limit, side="right")) - 1
    return min(n, r0 + plan.out_rows, max(r0 + 1, r1))


def _pass_by_rows(indptr, indices, x, r0, r1, plan: MeanPlan):
    """Accumulator and counts of output rows ``r0 .. r1-1``, ``grouped="rows"``: the block's
    edges (at most ``max_edges`` at once; one row may take several) sorted by source, ``x``
    streamed over the blocks they touch."""
    acc = np.zeros((r1 - r0, x.shape[1]), dtype=plan.accumulate)
    counts = np.zeros(r1 - r0, dtype=np.int64)
    bounds = np.asarray(indptr[r0:r1 + 1], dtype=np.int64)
    for c0 in range(int(bounds[0]), int(bounds[-1]), plan.max_edges):
        c1 = min(c0 + plan.max_edges, int(bounds[-1]))
        src = _ids(indices, c0, c1, x.shape[0], "rows of 'x'")
        order = np.argsort(src, kind="stable")
        src = src[order]
        dst = (np.searchsorted(bounds, order + c0, side="right") - 1).astype(np.int64)
        del order
        starts = np.unique(src // plan.source_rows) * plan.source_rows
        for s0 in starts.tolist():
            s1 = min(x.shape[0], s0 + plan.source_rows)
            e0, e1 = np.searchsorted(src, [s0, s1])
            rows, local = _read_rows(x, s0, s1, src[e0:e1] - s0, plan.accumulate)
            _scatter_add(acc, counts, rows, local, dst[e0:e1])
    return acc, counts


def neighbour_mean_blocks(indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, *,
                          grouped: str = "rows", num_rows: int | None = None,
                          memory_bytes: int = 256 << 20, accumulate: np.dtype = np.float64,
                          start: int = 0) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Yield the neighbour means of output rows ``start .. N-1`` in blocks of consecutive
    rows, each block one pass over ``x`` (module docstring).

    Args:
        indptr, indices: the neighbours in layout ``grouped`` (module docstring).
        x: float ``(M, D)`` (a memory map is read in sequential blocks).
        grouped: ``"rows"`` or ``"sources"``.
        num_rows: N, the output rows (``grouped="sources"`` only; ``"rows"``: ``len(indptr) - 1``).
        memory_bytes: the working memory to stay within (module docstring).
        accumulate: float64 (default) or float32 sums.
        start: the first output row (to resume after blocks already written).

    Yields:
        ``(first_row, rows, counts)``: ``rows`` an ``(k, D)`` array of ``x``'s dtype, the
        means of output rows ``first_row .. first_row + k - 1``; ``counts`` int64 ``(k,)``,
        their numbers of neighbours.

    >>> import numpy as np
    >>> x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype=np.float32)
    >>> indptr, indices = np.array([0, 2, 2, 3]), np.array([0, 1, 2])  # rows 0, 1, 2
    >>> [(r0, b.tolist(), c.tolist()) for r0, b, c in neighbour_mean_blocks(indptr, indices, x)]
    [(0, [[2.0, 3.0], [0.0, 0.0], [5.0, 6.0]], [2, 0, 1])]
    >>> by_source = np.array([0, 1, 2, 3]), np.array([0, 0, 2])  # x's rows 0, 1, 2
    >>> [(r0, b[:, 0].tolist()) for r0, b, _ in neighbour_mean_blocks(
    ...     *by_source, x, grouped="sources", num_rows=3, memory_bytes=40)]
    [(0, [2.0]), (1, [0.0]), (2, [5.0])]
    """
    indptr = np.asarray(indptr)
    _check(indptr, indices, x, grouped)
    if grouped == "rows":
        n = indptr.shape[0] - 1
    elif num_rows is None:
        raise ValueError("grouped='sources' needs num_rows (the output rows)")
    else:
        n = int(num_rows)
    plan = plan_neighbour_mean(x.shape[1], x.dtype, memory_bytes, accumulate)
    r0 = int(start)
    while r0 < n:
        if grouped == "rows":
            r1 = _rows_block_end(indptr, r0, n, plan)
            acc, counts = _pass_by_rows(indptr, indices, x, r0, r1, plan)
        else:
            r1 = min(n, r0 + plan.out_rows)
            acc, counts = _pass_by_sources(indptr, indices, x, r0, r1, plan, n)
        out = _finish(acc, counts, x.dtype)
        del acc  # before the next pass allocates its own
        yield r0, out, counts
        r0 = r1
