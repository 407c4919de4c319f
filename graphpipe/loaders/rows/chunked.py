"""The store-backed row source: :class:`ChunkedRows` reads rows straight from the row-chunk
views of a feature matrix (what :meth:`graphpipe.store.GraphStore.feature_chunks`
returns: zero-copy memory maps of the chunk files, or one in-memory array) with the
Numba gather kernels of :mod:`graphpipe.ops.features.gather`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphpipe.loaders.rows.base import RowSource
from graphpipe.ops.features.gather import FeatureChunks, gather_rows

__all__ = ["ChunkedRows"]


class ChunkedRows(RowSource):
    """Rows of ``X`` read from its chunk views (not copied).

    Args:
        chunks: ``chunks[c]`` holds rows ``c*chunk_rows ...`` of ``X`` (a list of views,
            one 2D array, or prepared :class:`graphpipe.ops.features.gather.FeatureChunks`).
        chunk_rows: rows per chunk (every chunk but the last); ignored for FeatureChunks.
    """

    def __init__(self, chunks: Sequence[np.ndarray] | np.ndarray | FeatureChunks,
                 chunk_rows: int | None = None):
        self.chunks = chunks if isinstance(chunks, FeatureChunks) else FeatureChunks(chunks, chunk_rows)

    @property
    def num_rows(self) -> int:
        return int(self.chunks.num_rows)

    @property
    def dim(self) -> int:
        return int(self.chunks.dim)

    @property
    def dtype(self) -> np.dtype:
        return self.chunks.dtype

    def chunk_views(self) -> FeatureChunks:
        return self.chunks

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        return gather_rows(self.chunks, None, ids, out=out)

    def __repr__(self) -> str:
        return f"ChunkedRows(rows={self.num_rows}, dim={self.dim}, chunks={len(self.chunks)})"
