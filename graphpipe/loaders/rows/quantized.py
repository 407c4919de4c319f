"""Low-bit rows as a row source that wraps a row source: :class:`QuantizedRowSource`
delivers the rows of the source it wraps as Sylvie's per-row stochastic ``bits``-bit
codes (:mod:`graphpipe.ops.features.quantize`; packed codes + float32 min and scale per row).

* rows read from the backing source are quantized as they are read, with the rounding
  seed the caller gives (the loader derives one per batch from its seed and the
  batch's sampler key), the rows of one request quantized together, in request order;
* the wrapped source's held rows (a degree cache) are quantized once, here, with this
  wrapper's ``seed``;
* the loader's Match step hands in the previous batch's packed rows, copied as they
  are: dequantization is deterministic, so reused rows equal what that batch delivered.

As a plain :class:`graphpipe.loaders.rows.RowSource` it returns the dequantized float32
rows (``|x - X[ids]| <= scale`` per row, ``scale = (max - min) / (2^bits - 1)``)."""

from __future__ import annotations

import numpy as np
import torch

from graphpipe.loaders.rows.base import RowSource, RowSplit, WrappedRows
from graphpipe.ops.features.quantize import SUPPORTED_BITS, QuantizedRows, dequantize, quantize

__all__ = ["PackedRows", "QuantizedRowSource"]

PackedRows = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Packed rows as numpy arrays: uint8 ``(k, row_bytes)`` codes, float32 ``(k,)`` mins and
float32 ``(k,)`` scales (the layout of :class:`graphpipe.ops.features.quantize.QuantizedRows`)."""


class QuantizedRowSource(WrappedRows):
    """The rows of ``source`` in ``bits``-bit codes.

    Args:
        source: the row source wrapped (any dtype; quantized in float32).
        bits: 8, 4, 2 or 1.
        seed: rounding seed of the held rows (and of :meth:`gather_into`).
    """

    def __init__(self, source: RowSource, bits: int, seed: int = 0):
        if isinstance(bits, bool) or int(bits) not in SUPPORTED_BITS:
            raise ValueError(f"'bits' must be 8, 4, 2 or 1 (got {bits!r})")
        self.source = source
        self.bits = int(bits)
        self.seed = int(seed)
        self.row_bytes = (source.dim * self.bits + 7) // 8
        held = source.held_rows
        self.held_packed: QuantizedRows | None = None
        if held is not None:
            self.held_packed = quantize(torch.from_numpy(held), self.bits, seed=self.seed)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.float32)

    def gather_packed(self, ids: np.ndarray, seed: int, prev_pos: np.ndarray | None = None,
                      prev_packed: PackedRows | None = None) -> tuple[QuantizedRows, RowSplit]:
        """The rows of ``ids`` (int64 ``(k,)``, in range) packed: held rows from their packed
        copy, then ``prev_packed`` rows at ``prev_pos`` (the Match step; ignored when
        ``prev_packed`` is None), the rest read from the backing source and quantized
        with ``seed``. Returns the rows and where each came from."""
        split = self.source.split(ids, prev_pos if prev_packed is not None else None)
        k = ids.shape[0]
        packed = np.empty((k, self.row_bytes), dtype=np.uint8)
        mins = np.empty(k, dtype=np.float32)
        scales = np.empty(k, dtype=np.float32)
        stored = split.store_idx
        if stored.shape[0]:
            rows = self.source.backing.gather(ids[stored])
            q = quantize(torch.from_numpy(rows), self.bits, seed=seed)
            packed[stored], mins[stored], scales[stored] = q.packed.numpy(), q.mins.numpy(), q.scales.numpy()
        held = np.flatnonzero(split.held_pos >= 0)
        if held.shape[0]:
            hq, pos = self.held_packed, split.held_pos[held]
            packed[held] = hq.packed.numpy()[pos]
            mins[held] = hq.mins.numpy()[pos]
            scales[held] = hq.scales.numpy()[pos]
        reused = np.flatnonzero(split.prev_pos >= 0)
        if reused.shape[0]:
            r_packed, r_mins, r_scales = prev_packed
            pos = split.prev_pos[reused]
            packed[reused], mins[reused], scales[reused] = r_packed[pos], r_mins[pos], r_scales[pos]
        quantized = QuantizedRows(torch.from_numpy(packed), torch.from_numpy(mins),
                                  torch.from_numpy(scales), self.bits, self.dim)
        return quantized, split

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        q, _split = self.gather_packed(ids, self.seed)
        out[...] = dequantize(q).numpy()
        return out

    def __repr__(self) -> str:
        return f"QuantizedRowSource({self.source!r}, bits={self.bits})"
