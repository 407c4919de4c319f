"""The degree cache as a row source that wraps a row source: :class:`DegreeCachedRows`
keeps the rows of chosen nodes (by default those of highest in-degree, the store's
``derived/degree_order`` when present) in memory and reads every other row from the
source it wraps (GraphBolt's ``CPUCachedFeature(fallback_feature, cache)``, static).

Its rows are *held* rows (:class:`graphpipe.loaders.rows.RowSource`): the loader serves
them before its Match step, and on a GPU the transfer stage keeps a device copy."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.loaders.rows.base import RowSource, WrappedRows
from graphpipe.ops.features.degree import degree_order
from graphpipe.ops.features.gather import PositionTable
from graphpipe.store.derived import read_degree_order

__all__ = ["DegreeCachedRows"]


class DegreeCachedRows(WrappedRows):
    """``source`` with the rows of ``ids`` held in memory: ``rows[i]`` is row ``ids[i]``.

    Args:
        source: the row source wrapped (read for the rows not held).
        ids: int64 ``(C,)`` distinct row IDs to hold (their rows are read from ``source``
            once, here, unless ``rows`` are given).
        rows: ``(C, dim)`` the rows of ``ids`` when the caller read them already (the
            disk tier fills its hot set with one near-sequential scan,
            :meth:`graphpipe.loaders.rows.DiskRows.read_bulk`); they must be ``X[ids]``.
    """

    def __init__(self, source: RowSource, ids: np.ndarray, rows: np.ndarray | None = None):
        self.source = source
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        if rows is not None and rows.shape != (self.ids.shape[0], source.dim):
            raise ValueError(f"'rows' must have shape {(self.ids.shape[0], source.dim)} (got {rows.shape})")
        self.rows = np.ascontiguousarray(source.gather(self.ids) if rows is None else rows)
        self.table = PositionTable(self.ids)

    @classmethod
    def by_degree(cls, source: RowSource, indptr: np.ndarray, budget: int,
                  store: Any = None) -> DegreeCachedRows:
        """The ``budget`` nodes of highest in-degree (the ``store``'s
        ``derived/degree_order`` when present, else computed from the CSC ``indptr``)."""
        order = read_degree_order(store) if store is not None else None
        if order is None:
            order = degree_order(np.diff(indptr))
        return cls(source, np.asarray(order[:budget], dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def held_rows(self) -> np.ndarray:
        return self.rows

    def held_positions(self, ids: np.ndarray) -> np.ndarray:
        return self.table.lookup(ids)

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """int64 ``(len(ids),)`` row of each ID in the cache, -1 when not cached."""
        return self.table.lookup(ids)

    @property
    def backing(self) -> RowSource:
        return self.source

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        rows, _source = self.assemble(ids, out=out)
        return rows

    def __repr__(self) -> str:
        return f"DegreeCachedRows({self.source!r}, held={len(self)})"
