"""The in-memory row source: :class:`ArrayRows` over one ``(N, dim)`` array (the matrix
is one chunk, so the gather kernels index it directly)."""

from __future__ import annotations

import numpy as np

from graphpipe.loaders.rows.chunked import ChunkedRows

__all__ = ["ArrayRows"]


class ArrayRows(ChunkedRows):
    """Rows of an in-memory matrix ``x`` (``(N, dim)``, or ``(N,)`` as ``(N, 1)``; a
    non-contiguous ``x`` is copied once)."""

    def __init__(self, x: np.ndarray):
        x = np.asarray(x)
        super().__init__([x.reshape(-1, 1) if x.ndim == 1 else x], max(1, x.shape[0]))

    def __repr__(self) -> str:
        return f"ArrayRows(rows={self.num_rows}, dim={self.dim}, dtype={self.dtype})"
