"""The row-source interface: what the gather stage reads feature rows from.

A :class:`RowSource` serves rows of a ``(num_rows, dim)`` matrix ``X`` by ID. Sources
compose like GraphBolt's ``CPUCachedFeature(fallback_feature, cache)`` or zarr's
``WrapperStore``: a plain source reads the store's chunk views
(:class:`graphpipe.loaders.rows.ChunkedRows`); a wrapper adds a technique around the
source it is given (:class:`graphpipe.loaders.rows.DegreeCachedRows` keeps the rows of
the highest in-degree nodes in memory; :class:`graphpipe.loaders.rows.QuantizedRowSource`
delivers them as low-bit codes).

Two tiers per source, in priority order:

* *held* rows (:attr:`RowSource.held_rows`, :meth:`RowSource.held_positions`): rows a
  wrapper keeps in memory; they are served before the loader's Match step, so a row
  that is both held and in the previous batch counts as held (cached);
* the *backing* source (:attr:`RowSource.backing`): where every other row is read
  from (the source itself for a plain source).

Between the two the loader's Match step copies rows of the previous batch
(``prev_pos``/``prev_rows``). :meth:`RowSource.assemble` does all three; when the
backing source is a set of chunk views it runs the fused kernel
:func:`graphpipe.ops.features.gather.assemble_rows` (one pass, no per-row Python work).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

import numpy as np

from graphpipe.ops.features.gather import (
    SOURCE_CACHE,
    SOURCE_PREVIOUS,
    SOURCE_STORE,
    FeatureChunks,
    assemble_rows,
)

__all__ = ["RowSource", "RowSplit", "WrappedRows", "check_ids"]


def check_ids(ids: np.ndarray, num_rows: int) -> np.ndarray:
    """``ids`` as int64 ``(k,)`` after checking they are 1-D integers in ``[0, num_rows)``."""
    ids = np.asarray(ids)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'ids' must be a one-dimensional integer array (got dtype {ids.dtype}, "
                         f"ndim {ids.ndim})")
    ids = np.ascontiguousarray(ids, dtype=np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_rows):
        raise ValueError(f"'ids' holds IDs outside [0, {num_rows}) (got min {int(ids.min())}, "
                         f"max {int(ids.max())})")
    return ids


@dataclass
class RowSplit:
    """Where each of ``k`` requested rows comes from.

    Attributes:
        held_pos: int64 ``(k,)`` row in the source's held rows, or -1.
        prev_pos: int64 ``(k,)`` row in the previous batch, or -1 (-1 wherever held).
        store_idx: int64 ``(s,)`` positions (among the ``k``) read from the backing source.
    """

    held_pos: np.ndarray
    prev_pos: np.ndarray
    store_idx: np.ndarray

    def counts(self) -> tuple[int, int, int]:
        """``(held, reused, read)`` row counts."""
        return (int(np.count_nonzero(self.held_pos >= 0)), int(np.count_nonzero(self.prev_pos >= 0)),
                int(self.store_idx.shape[0]))


class RowSource(abc.ABC):
    """Rows of a ``(num_rows, dim)`` matrix ``X`` of ``dtype``, by row ID."""

    @property
    @abc.abstractmethod
    def num_rows(self) -> int:
        """Rows of ``X``; valid IDs are ``[0, num_rows)``."""

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Values per row."""

    @property
    @abc.abstractmethod
    def dtype(self) -> np.dtype:
        """The dtype of the rows :meth:`gather` returns."""

    @abc.abstractmethod
    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        """``out[i] = X[ids[i]]`` and ``out``.

        Args:
            ids: int64 ``(k,)`` row IDs in range (checked by :meth:`gather`); any order,
                repeats allowed.
            out: C-contiguous ``(k, dim)`` of :attr:`dtype`.
        """

    def gather(self, ids: np.ndarray) -> np.ndarray:
        """``X[ids]`` as a new C-contiguous ``(len(ids), dim)`` array."""
        ids = check_ids(ids, self.num_rows)
        return self.gather_into(ids, np.empty((ids.shape[0], self.dim), dtype=self.dtype))

    # -- tiers ---------------------------------------------------------------------------------
    @property
    def held_rows(self) -> np.ndarray | None:
        """``(H, dim)`` rows this source keeps in memory (a cache), or None."""
        return None

    def held_positions(self, ids: np.ndarray) -> np.ndarray | None:
        """int64 ``(k,)`` row of each ID in :attr:`held_rows` (-1: not held), or None when
        this source holds no rows."""
        return None

    @property
    def backing(self) -> RowSource:
        """The source the rows that are not held are read from."""
        return self

    def chunk_views(self) -> FeatureChunks | None:
        """The chunk views of ``X`` when this source reads them directly (the fused
        kernels' input), else None."""
        return None

    def split(self, ids: np.ndarray, prev_pos: np.ndarray | None = None) -> RowSplit:
        """Where each row of ``ids`` comes from: held rows, then the previous batch
        (``prev_pos``: int64 ``(k,)`` row in it or -1; None: nothing resident), then the
        backing source."""
        k = ids.shape[0]
        held = self.held_positions(ids)
        held = np.full(k, -1, dtype=np.int64) if held is None else held
        prev = np.full(k, -1, dtype=np.int64) if prev_pos is None else prev_pos.copy()
        prev[held >= 0] = -1
        store_idx = np.flatnonzero((held < 0) & (prev < 0)).astype(np.int64)
        return RowSplit(held_pos=held, prev_pos=prev, store_idx=store_idx)

    def assemble(self, ids: np.ndarray, *, prev_pos: np.ndarray | None = None,
                 prev_rows: np.ndarray | None = None,
                 out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``X[ids]`` with the Match step's reuse: held rows first, then
        ``prev_rows[prev_pos[i]]`` where ``prev_pos[i] >= 0``, the rest from the backing
        source. The caller guarantees ``prev_rows[prev_pos[i]] == X[ids[i]]``.

        Returns:
            ``(out, source)``: the ``(k, dim)`` rows and int8 ``(k,)``
            :data:`graphpipe.ops.features.gather.SOURCE_CACHE` (held) / ``SOURCE_PREVIOUS`` /
            ``SOURCE_STORE`` per row.
        """
        chunks = self.backing.chunk_views()
        if chunks is not None:  # one fused kernel over held rows, the previous batch, the chunks
            return assemble_rows(ids, chunks=chunks, chunk_rows=None,
                                 cache_pos=self.held_positions(ids), cache_rows=self.held_rows,
                                 prev_pos=prev_pos, prev_rows=prev_rows, out=out)
        return self._assemble_generic(check_ids(ids, self.num_rows), prev_pos, prev_rows, out)

    def _assemble_generic(self, ids: np.ndarray, prev_pos: np.ndarray | None,
                          prev_rows: np.ndarray | None,
                          out: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`assemble` for a backing source without chunk views: vectorised copies."""
        k = ids.shape[0]
        out = np.empty((k, self.dim), dtype=self.dtype) if out is None else out
        split = self.split(ids, prev_pos if prev_rows is not None else None)
        source = np.full(k, SOURCE_STORE, dtype=np.int8)
        held = np.flatnonzero(split.held_pos >= 0)
        if held.shape[0]:
            out[held] = self.held_rows[split.held_pos[held]]
            source[held] = SOURCE_CACHE
        reused = np.flatnonzero(split.prev_pos >= 0)
        if reused.shape[0]:
            out[reused] = prev_rows[split.prev_pos[reused]]
            source[reused] = SOURCE_PREVIOUS
        if split.store_idx.shape[0]:
            out[split.store_idx] = self.backing.gather(ids[split.store_idx])
        return out, source


class WrappedRows(RowSource):
    """A row source around another (``self.source``): the rows, their count, width and
    dtype are the wrapped source's unless a subclass says otherwise (a cache, a
    quantization); subclasses implement :meth:`gather_into`."""

    source: RowSource

    @property
    def num_rows(self) -> int:
        return self.source.num_rows

    @property
    def dim(self) -> int:
        return self.source.dim

    @property
    def dtype(self) -> np.dtype:
        return self.source.dtype
