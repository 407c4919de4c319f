"""Dequantization with torch ops, on whatever device the tensors are (the GPU side of
:mod:`graphpipe.ops.features.quantize`): the loader's transfer stage moves packed rows to the
device and decodes them there. Same result as the Numba
:func:`graphpipe.ops.features.quantize.dequantize`, bit for bit."""

from __future__ import annotations

import torch

__all__ = ["dequantize_on"]


def dequantize_on(packed: torch.Tensor, mins: torch.Tensor, scales: torch.Tensor, bits: int,
                  num_cols: int) -> torch.Tensor:
    """float32 ``(N, num_cols)``: ``scale * code + min`` per row.

    Args:
        packed: uint8 ``(N, ceil(num_cols * bits / 8))`` codes packed per row, least
            significant bits first.
        mins, scales: float32 ``(N,)``.
        bits: 8, 4, 2 or 1.
        num_cols: values per row before packing.
    """
    per_byte = 8 // bits
    if bits == 8:
        codes = packed[:, :num_cols]
    else:
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=packed.device)
        codes = ((packed.unsqueeze(2) >> shifts) & ((1 << bits) - 1)).reshape(
            packed.shape[0], packed.shape[1] * per_byte)[:, :num_cols]
    x = codes.to(torch.float32) * scales.unsqueeze(1)
    return x + mins.unsqueeze(1)
