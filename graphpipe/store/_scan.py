"""The Numba scan behind :func:`graphpipe.store.checks.check_topology` (imported on first
use, so ``import graphpipe.store`` does not import numba)."""

from __future__ import annotations

import numba
import numpy as np

OK, BAD_START, DECREASES, BAD_END, OUT_OF_RANGE = 0, 1, 2, 3, 4


_CHUNK = 1 << 20


@numba.njit(cache=True, nogil=True, parallel=True)
def _index_range(indices):
    """``(min, max)`` of ``indices`` (E > 0), chunks in parallel: branch-free inner loops
    that LLVM vectorises, so the check reads memory at full speed."""
    num_chunks = (indices.shape[0] + _CHUNK - 1) // _CHUNK
    los = np.empty(num_chunks, dtype=np.int64)
    his = np.empty(num_chunks, dtype=np.int64)
    for c in numba.prange(num_chunks):
        stop = min((c + 1) * _CHUNK, indices.shape[0])
        lo = np.int64(indices[c * _CHUNK])
        hi = lo
        for e in range(c * _CHUNK, stop):
            u = np.int64(indices[e])
            lo = min(lo, u)
            hi = max(hi, u)
        los[c] = lo
        his[c] = hi
    return los.min(), his.max()


@numba.njit(cache=True, nogil=True, parallel=True)
def _decreasing_chunks(indptr):
    """Per chunk of ``indptr``, whether some entry is smaller than the one before it."""
    n = indptr.shape[0] - 1
    num_chunks = (n + _CHUNK - 1) // _CHUNK
    bad = np.zeros(num_chunks, dtype=np.bool_)
    for c in numba.prange(num_chunks):
        stop = min((c + 1) * _CHUNK, n)
        drops = 0
        for v in range(c * _CHUNK, stop):
            drops += indptr[v + 1] < indptr[v]
        bad[c] = drops > 0
    return bad


@numba.njit(cache=True, nogil=True)
def _first_decrease(indptr):
    for v in range(indptr.shape[0] - 1):
        if indptr[v + 1] < indptr[v]:
            return v
    return -1


@numba.njit(cache=True, nogil=True)
def _first_out_of_range(indices, num_nodes):
    for e in range(indices.shape[0]):
        if indices[e] < 0 or indices[e] >= num_nodes:
            return e
    return -1


def scan_csc(indptr: np.ndarray, indices: np.ndarray, num_nodes: int) -> tuple[int, int, int, int]:
    """Check ``indptr`` (int64 ``(N+1,)``) and ``indices`` (int32/int64 ``(E,)``) in
    parallel passes. Returns ``(code, position, lo, hi)``: ``code`` is :data:`OK` or the
    first violation found (``position``: the node or the edge slot); ``lo, hi`` the
    minimum and maximum index when OK (``N, -1`` when there are none)."""
    if indptr.shape[0] == 0 or indptr[0] != 0:
        return BAD_START, 0, 0, 0
    if _decreasing_chunks(indptr).any():
        return DECREASES, int(_first_decrease(indptr)), 0, 0
    if indptr[-1] != indices.shape[0]:
        return BAD_END, 0, 0, 0
    if indices.shape[0] == 0:
        return OK, 0, int(num_nodes), -1
    lo, hi = _index_range(indices)
    if lo < 0 or hi >= num_nodes:
        return OUT_OF_RANGE, int(_first_out_of_range(indices, num_nodes)), 0, 0
    return OK, 0, int(lo), int(hi)
