"""The one set of argument checks shared by the ops (and by the loaders and the service).

Each check raises ``ValueError`` with a one-line message ``'<name>' must ... (got ...)``
and returns the value normalised (plain ints, contiguous int64 arrays), so callers
validate once at their public entry point and pass the result on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def check_int(name: str, value: Any, minimum: int, *, allow_none: bool = False) -> int | None:
    """``int(value)`` if ``value`` is an integer (not a bool) ``>= minimum``; ``None``
    passes when ``allow_none``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"'{name}' must be an integer >= {minimum} (got {value!r})")
    return int(value)


def check_fanouts(fanouts: Sequence[int]) -> list[int]:
    """Per-hop fanouts: a non-empty sequence of integers ``>= 0``, or ``-1`` for all
    neighbours. Returns them as a list of ints."""
    if isinstance(fanouts, (str, bytes)) or not hasattr(fanouts, "__len__"):
        raise ValueError(f"'fanouts' must be a sequence of integers (got {fanouts!r})")
    values = list(fanouts)
    if not values:
        raise ValueError("'fanouts' must not be empty (got [])")
    for f in values:
        if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < -1:
            raise ValueError(f"'fanouts' entries must be integers >= -1 (got {values})")
    return [int(f) for f in values]


def check_csc(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A CSC (or CSR) graph: ``indptr`` int64 (N+1,) from 0 to ``len(indices)``, ``indices``
    int32/int64 (E,). Returns contiguous arrays (``indptr`` as int64, ``indices`` widened
    to int64 unless int32 or int64). Does not check that ``indices`` are in ``[0, N)``."""
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.shape[0] < 1:
        raise ValueError(f"'indptr' must be a 1-D array of N+1 offsets (got shape {indptr.shape})")
    if indices.ndim != 1:
        raise ValueError(f"'indices' must be 1-D (got shape {indices.shape})")
    if indptr.dtype != np.int64:
        if not np.issubdtype(indptr.dtype, np.integer):
            raise ValueError(f"'indptr' must hold integers (got {indptr.dtype})")
        indptr = indptr.astype(np.int64)
    if indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        if not np.issubdtype(indices.dtype, np.integer):
            raise ValueError(f"'indices' must hold integers (got {indices.dtype})")
        indices = indices.astype(np.int64)
    if int(indptr[0]) != 0:
        raise ValueError(f"'indptr' must start at 0 (got {int(indptr[0])})")
    if int(indptr[-1]) != indices.shape[0]:
        raise ValueError(f"'indptr' must end at len(indices)={indices.shape[0]} (got {int(indptr[-1])})")
    return np.ascontiguousarray(indptr), np.ascontiguousarray(indices)


def check_node_ids(ids: np.ndarray, num_nodes: int, name: str = "seeds") -> np.ndarray:
    """int64 contiguous copy of the 1-D integer array ``ids``, every entry in ``[0, num_nodes)``."""
    ids = np.asarray(ids)
    if ids.ndim != 1:
        raise ValueError(f"'{name}' must be 1-D (got shape {ids.shape})")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"'{name}' must hold integer node IDs (got {ids.dtype})")
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_nodes:
            bad = lo if lo < 0 else hi
            raise ValueError(f"'{name}' must be node IDs in [0, {num_nodes}) (got {bad})")
    return ids


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"'{name}' must be one of {tuple(choices)} (got {value!r})")
    return value
