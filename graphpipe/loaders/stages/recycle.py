"""Recycled output buffers for the gather stages: a batch's feature rows are written into
a buffer that an earlier, released batch used, instead of fresh memory.

A batch's ``x`` is tens of MB (51K rows of 128 float32 per ogbn-mag-like batch at 1/10
scale); fresh memory of that size is faulted in page by page (huge pages zeroed 2 MiB at
a time) on every batch, which cost ~8% of the typed loader's CPU time. A buffer is handed
out again only when nothing but the pool references it: CPython's reference counts are
exact, and every array or tensor made from the handed-out view (``torch.from_numpy``,
slices, ``.numpy()``) keeps a reference to it, so a batch the caller still holds (or the
resident batch of the Match step) is never overwritten.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["RecycledBuffers"]


class RecycledBuffers:
    """A few flat buffers of one dtype, recycled for ``(k, dim)`` outputs.

    Args:
        dtype: the outputs' dtype.
        size: buffers kept for reuse (older free ones are replaced by larger ones).

    >>> pool = RecycledBuffers(np.float32)
    >>> a = pool.take(3, 2)
    >>> a.shape, pool.take(3, 2) is a                 # ``a`` is held: a second buffer
    ((3, 2), False)
    >>> address = a.ctypes.data
    >>> del a
    >>> pool.take(2, 2).ctypes.data == address        # released: its buffer is reused
    True
    """

    def __init__(self, dtype: np.dtype | type, size: int = 6):
        self.dtype = np.dtype(dtype)
        self.size = int(size)
        self.buffers: list[np.ndarray] = []
        """The flat buffers (at most ``size``); one is free when only this list refers to it."""

    def take(self, k: int, dim: int) -> np.ndarray:
        """A C-contiguous ``(k, dim)`` array (uninitialised) carved from a free buffer, or
        from a new one (25% spare room, so that slightly larger batches fit later)."""
        need = int(k) * int(dim)
        for i in range(len(self.buffers)):
            buf = self.buffers[i]
            # references: the pool list, ``buf`` and getrefcount's argument
            if buf.shape[0] >= need and sys.getrefcount(buf) == 3:
                return buf[:need].reshape(k, dim)
        buf = np.empty(max(need, 1) + need // 4, dtype=self.dtype)
        if len(self.buffers) < self.size:
            self.buffers.append(buf)
        else:  # replace the smallest free buffer, if any
            free = [i for i in range(len(self.buffers)) if sys.getrefcount(self.buffers[i]) == 2]
            if free:
                self.buffers[min(free, key=lambda i: self.buffers[i].shape[0])] = buf
        return buf[:need].reshape(k, dim)
