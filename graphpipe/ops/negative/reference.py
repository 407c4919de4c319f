"""Plain-Python oracle of negative sampling (the numbers every backend must draw).

The contract, for sample ``i`` (``0 <= i < num_samples``) and a 64-bit ``seed``:

- its stream starts at ``state = mix64(seed + (i + 1) * GOLDEN)``
  (:mod:`graphpipe.ops._core.rng`);
- uniform: the node is ``bounded(state, num_nodes)`` (Lemire, unbiased);
- weighted (``cdf``: the running sum of the node weights, ``total = cdf[-1]``): with
  ``u = (mix64(state + GOLDEN) >> 11) * 2**-53``, the node is the first ``j`` with
  ``cdf[j] > u * total`` (so a node of weight 0 is never drawn), at most ``last``,
  the last node of positive weight.

Samples are independent (counter-based), so backends may draw them in any order.
"""

from __future__ import annotations

import bisect

import numpy as np

from graphpipe.ops._core.rng import GOLDEN_I, U64_MASK, bounded_py, mix64_py

__all__ = ["negative_sample_reference"]

_INV_2_53 = 1.0 / (1 << 53)


def _start(seed: int, i: int) -> int:
    return mix64_py((seed + (i + 1) * GOLDEN_I) & U64_MASK)


def negative_sample_reference(num_samples: int, num_nodes: int, seed: int,
                              cdf: np.ndarray | None = None, last: int = -1) -> np.ndarray:
    """int64 ``(num_samples,)`` node IDs drawn as the module docstring says."""
    out = np.empty(num_samples, dtype=np.int64)
    cdf_list = None if cdf is None else [float(v) for v in cdf]
    for i in range(num_samples):
        state = _start(seed, i)
        if cdf_list is None:
            out[i] = bounded_py(state, num_nodes)[1]
            continue
        u = (mix64_py((state + GOLDEN_I) & U64_MASK) >> 11) * _INV_2_53
        out[i] = min(bisect.bisect_right(cdf_list, u * cdf_list[-1]), last)
    return out
