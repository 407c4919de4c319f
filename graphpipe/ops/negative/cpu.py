"""Numba kernels of negative sampling: the draws of :mod:`.reference`, in parallel."""

from __future__ import annotations

import numba
import numpy as np

from graphpipe.ops._core.rng import GOLDEN, bounded, mix64

__all__ = ["negative_sample_cpu"]

_S11 = np.uint64(11)
_INV_2_53 = 1.0 / (1 << 53)


PARALLEL_FROM = 1 << 16
"""Draws from which the kernels run in parallel threads (below, one thread: a batch's
few thousand negatives take microseconds, less than waking the thread pool)."""


def _uniform_body(out, num_nodes, seed):
    for i in numba.prange(out.shape[0]):
        state = mix64(seed + np.uint64(i + 1) * GOLDEN)
        out[i] = bounded(state, num_nodes)[1]


def _weighted_body(out, cdf, last, seed):
    total = cdf[cdf.shape[0] - 1]
    for i in numba.prange(out.shape[0]):
        state = mix64(seed + np.uint64(i + 1) * GOLDEN)
        u = np.float64(mix64(state + GOLDEN) >> _S11) * _INV_2_53
        j = np.searchsorted(cdf, u * total, side="right")
        out[i] = min(j, last)


_uniform = numba.njit(cache=True, nogil=True)(_uniform_body)
_uniform_par = numba.njit(cache=True, nogil=True, parallel=True)(_uniform_body)
_weighted = numba.njit(cache=True, nogil=True)(_weighted_body)
_weighted_par = numba.njit(cache=True, nogil=True, parallel=True)(_weighted_body)


def negative_sample_cpu(num_samples: int, num_nodes: int, seed: int,
                        cdf: np.ndarray | None = None, last: int = -1) -> np.ndarray:
    """int64 ``(num_samples,)``: :func:`.reference.negative_sample_reference`'s draws."""
    out = np.empty(num_samples, dtype=np.int64)
    if num_samples:
        parallel = num_samples >= PARALLEL_FROM
        if cdf is None:
            (_uniform_par if parallel else _uniform)(out, np.int64(num_nodes), np.uint64(seed))
        else:
            (_weighted_par if parallel else _weighted)(out, cdf, np.int64(last), np.uint64(seed))
    return out
