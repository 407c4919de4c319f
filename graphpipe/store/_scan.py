"""The Numba scan behind :func:`graphpipe.store.checks.check_topology` (imported on first
use, so ``import graphpipe.store`` does not import numba)."""

from __future__ import annotations

import numba
import numpy as np

OK, BAD_START, DECREASES, BAD_END, OUT_OF_RANGE = 0, 1, 2, 3, 4


@numba.njit(cache=True, nogil=True)
def scan_csc(indptr, indices, num_nodes):
    """One sequential pass over ``indptr`` (int64 ``(N+1,)``) and ``indices`` (int32/int64
    ``(E,)``). Returns ``(code, position, lo, hi)``: ``code`` is :data:`OK` or the first
    violation found (``position``: the node or the edge slot); ``lo, hi`` the minimum and
    maximum index when OK (``N, -1`` when there are none)."""
    if indptr[0] != 0:
        return BAD_START, 0, 0, 0
    for v in range(indptr.shape[0] - 1):
        if indptr[v + 1] < indptr[v]:
            return DECREASES, v, 0, 0
    if indptr[indptr.shape[0] - 1] != indices.shape[0]:
        return BAD_END, 0, 0, 0
    lo = num_nodes
    hi = np.int64(-1)
    for e in range(indices.shape[0]):
        u = np.int64(indices[e])
        if u < 0 or u >= num_nodes:
            return OUT_OF_RANGE, e, 0, 0
        lo = min(lo, u)
        hi = max(hi, u)
    return OK, 0, lo, hi
