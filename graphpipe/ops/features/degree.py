"""Degree-centrality grouping (UniTG, thesis §5.6) and the hotness order of a
static feature cache.

Nodes are ranked by in-degree (the number of CSC in-edges: how often a
neighbour sampler can reach them) and put into ``bins`` groups, group 0 the
least central:

* ``"quartile"`` (rule A; default): equal-frequency groups on the strict-less
  CDF, ``p_v = |{u : deg(u) < deg(v)}| / N`` and ``group = ⌊bins · p_v⌋``.
  Equal degrees share a group; the minimum-degree nodes are in group 0.
* ``"log-bins"``: equal-width bins of ``log(1 + deg)`` between the minimum and
  the maximum degree (``group = min(bins-1, ⌊bins · c⌋)``).
* ``"equal-width"`` (rule B): the same on the degree itself, which on power-law
  graphs puts almost every node into group 0.

Pure functions of a degree array: :func:`graphpipe.derive.write_centrality` stores
their result as ``derived/degree_group`` (int8 per node) and ``derived/degree_order``
(int64 node IDs, hottest first), with the parameters in
``manifest["derived"]["centrality"]``.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "METHODS",
    "degree_groups",
    "degree_order",
]

METHODS = ("quartile", "log-bins", "equal-width")


def _check_degrees(degrees: np.ndarray) -> np.ndarray:
    degrees = np.asarray(degrees)
    if degrees.ndim != 1 or (degrees.size and degrees.dtype.kind not in "iu"):
        raise ValueError(f"'degrees' must be a one-dimensional integer array (got dtype "
                         f"{degrees.dtype}, ndim {degrees.ndim})")
    degrees = degrees.astype(np.int64, copy=False)
    if degrees.size and int(degrees.min()) < 0:
        raise ValueError(f"'degrees' must be non-negative (got min {int(degrees.min())})")
    return degrees


def degree_groups(degrees: np.ndarray, method: str = "quartile", bins: int = 4) -> np.ndarray:
    """Degree-centrality group of every node.

    Args:
        degrees: int ``(N,)`` in-degree per dense node ID.
        method: ``"quartile"``, ``"log-bins"`` or ``"equal-width"`` (module docstring).
        bins: number of groups, 1..127.

    Returns:
        int8 ``(N,)`` group per node in ``0..bins-1`` (0 = least central);
        monotone: ``deg(u) < deg(v)`` implies ``group(u) <= group(v)``.
    """
    if method not in METHODS:
        raise ValueError(f"'method' must be one of {METHODS} (got {method!r})")
    if not isinstance(bins, (int, np.integer)) or not 1 <= int(bins) <= 127:
        raise ValueError(f"'bins' must be an integer in [1, 127] (got {bins!r})")
    bins = int(bins)
    degrees = _check_degrees(degrees)
    n = degrees.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int8)
    if method == "quartile":
        below = np.searchsorted(np.sort(degrees), degrees, side="left")  # |{u: deg u < deg v}|
        groups = (below * bins) // n
    else:
        values = np.log1p(degrees.astype(np.float64)) if method == "log-bins" else degrees.astype(np.float64)
        lo, hi = float(values.min()), float(values.max())
        if hi == lo:
            groups = np.zeros(n, dtype=np.int64)
        else:
            groups = np.minimum(bins - 1, np.floor(bins * (values - lo) / (hi - lo)).astype(np.int64))
    return groups.astype(np.int8)


def degree_order(degrees: np.ndarray) -> np.ndarray:
    """Node IDs (int64 ``(N,)``) by in-degree, highest first; equal degrees keep ascending ID."""
    degrees = _check_degrees(degrees)
    return np.argsort(-degrees, kind="stable").astype(np.int64)
