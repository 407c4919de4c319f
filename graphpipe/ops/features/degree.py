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

:func:`write_centrality` stores ``derived/degree_group`` (int8 per node) and
``derived/degree_order`` (int64 node IDs, hottest first) into a store, with
the parameters in ``manifest["derived"]["centrality"]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "GROUP_KEY",
    "METHODS",
    "ORDER_KEY",
    "degree_groups",
    "degree_order",
    "read_degree_order",
    "write_centrality",
]

METHODS = ("quartile", "log-bins", "equal-width")
GROUP_KEY = "derived/degree_group"
ORDER_KEY = "derived/degree_order"


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


def write_centrality(store: Any, method: str = "quartile", bins: int = 4, *,
                     replace: bool = True) -> dict[str, Any]:
    """Compute the groups and the hotness order of ``store`` and store them as derived arrays.

    Args:
        store: a :class:`graphpipe.store.GraphStore`.
        method, bins: as in :func:`degree_groups`.
        replace: overwrite earlier centrality arrays (default); with False an
            existing ``derived/degree_group`` is an error.

    Returns:
        The manifest entry written to ``manifest["derived"]["centrality"]``.
    """
    degrees = np.asarray(store.in_degrees)
    groups = degree_groups(degrees, method, bins)
    order = degree_order(degrees)
    sizes = np.bincount(groups.astype(np.int64), minlength=bins)
    entry = {
        "degree": "in",
        "method": method,
        "bins": int(bins),
        "group_sizes": [int(s) for s in sizes],
        "arrays": {"group": GROUP_KEY, "order": ORDER_KEY},
    }
    with store.edit() as editor:
        editor.write_array(GROUP_KEY, groups, replace=replace)
        editor.write_array(ORDER_KEY, order, replace=replace)
        editor.manifest.setdefault("derived", {})
        if editor.manifest["derived"] is None:
            editor.manifest["derived"] = {}
        editor.manifest["derived"]["centrality"] = entry
        editor.commit()
    # keep the in-memory handle in step with the file
    store.manifest = type(store).open(store.path).manifest
    if hasattr(store, "_cache"):
        store._cache.pop(GROUP_KEY, None)
        store._cache.pop(ORDER_KEY, None)
    return entry


def read_degree_order(store: Any) -> np.ndarray | None:
    """The stored hotness order (``derived/degree_order``), or None when absent."""
    if store.has_array(ORDER_KEY):
        return np.asarray(store.array(ORDER_KEY))
    return None
