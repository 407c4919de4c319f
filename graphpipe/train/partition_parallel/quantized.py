"""Per-row quantization of exchanged halo rows (Sylvie, thesis ch. 3 §3.4, §3.5, §3.9).

Bit widths per row:

- fixed ``bits`` in {1, 2, 4, 8}: every row; ``32``: rows travel as float32, unquantized;
- ``"auto"`` (Sylvie's data-adaptive mask, the public code's ``boundary_imp_group``
  at base width 1): within one sender-to-receiver pool of rows, a row's importance is
  the inclusive empirical CDF of its global in-degree (self loop counted, as Sylvie's
  ``in_degree`` with self loops added), ``p(v) = |{u : deg[u] <= deg[v]}| / |pool|``
  (the highest degree gets 1, ties the same ``p``); ``p`` in ``[0, .25)`` gets 1 bit,
  ``[.25, .5)`` 2, ``[.5, .75)`` 4, ``[.75, 1]`` 8. Sender and receiver compute the
  same widths from the same global degrees.

Wire format of one pool (:class:`RowCodec`), one uint8 buffer: rows grouped by bit width
(1, 2, 4, 8 in that order, each group in pool order), per group the packed codes of
:func:`graphpipe.ops.features.quantize.quantize` (``ceil(D * b / 8)`` bytes per row),
then the group's float32 mins, then its float32 scales. So a pool of ``n_b`` rows at
``b`` bits costs ``sum_b n_b * (ceil(D * b / 8) + 8)`` bytes; at 32 bits ``4 * n * D``.
Rounding is stochastic (unbiased), so each decoded value is within one quantization step
of the original: ``|h - h~| < scale = (max(h) - min(h)) / (2^b - 1)`` per row.
"""

from __future__ import annotations

import numpy as np
import torch

from graphpipe.ops.features.quantize import QuantizedRows, dequantize, quantize

__all__ = ["HALO_BITS", "RowCodec", "auto_bits", "row_bits"]

#: accepted ``--halo-bits`` values (32 = float32, no quantization)
HALO_BITS = (1, 2, 4, 8, 32, "auto")
_LEVELS = (1, 2, 4, 8)


def auto_bits(degree: np.ndarray) -> np.ndarray:
    """Sylvie's degree-ranked widths of one pool: int64 ``(n,)`` in {1, 2, 4, 8}.

    Args:
        degree: int ``(n,)`` global in-degree of the pool's rows (self loop included).

    >>> auto_bits(np.array([1, 9, 3, 3, 5, 2, 7, 4])).tolist()
    [1, 8, 4, 4, 8, 2, 8, 4]
    >>> auto_bits(np.array([6, 6, 6])).tolist()  # ties: the same width, the top one
    [8, 8, 8]
    >>> auto_bits(np.zeros(0, dtype=np.int64)).tolist()
    []
    """
    degree = np.asarray(degree)
    n = degree.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    count = np.searchsorted(np.sort(degree), degree, side="right")  # inclusive ECDF * n
    group = np.minimum(4 * count // n, 3)
    return np.asarray(_LEVELS, dtype=np.int64)[group]


def row_bits(bits: int | str, degree: np.ndarray) -> np.ndarray:
    """Widths of a pool for a ``--halo-bits`` value: int64 ``(n,)`` (all 32 for float32)."""
    if bits == "auto":
        return auto_bits(degree)
    if bits not in (1, 2, 4, 8, 32) or isinstance(bits, bool):
        raise ValueError(f"'bits' must be one of {HALO_BITS} (got {bits!r})")
    return np.full(np.asarray(degree).shape[0], int(bits), dtype=np.int64)


def _floats(raw: torch.Tensor) -> torch.Tensor:
    """float32 view of bytes that may sit at any offset (copied when misaligned)."""
    if raw.storage_offset() % 4:
        raw = raw.clone()
    return raw.view(torch.float32)


class RowCodec:
    """Encode / decode the rows of one pool (``n`` rows of ``dim`` values) to bytes.

    Args:
        bits: int ``(n,)`` width of every row, each in {1, 2, 4, 8, 32}.
        dim: values per row.

    >>> codec = RowCodec(np.array([8, 32, 8]), 4)
    >>> codec.nbytes  # 2 rows * (4 + 8) + 1 row * 16
    40
    >>> rows = torch.tensor([[0., 1., 2., 3.], [5., 6., 7., 8.], [1., 1., 1., 1.]])
    >>> out = codec.decode(codec.encode(rows, seed=0))
    >>> bool(torch.equal(out[1:], rows[1:])), bool((out - rows).abs().max() < 3 / 255)
    (True, True)
    """

    def __init__(self, bits: np.ndarray, dim: int):
        bits = np.asarray(bits, dtype=np.int64)
        if bits.size and not np.isin(bits, (1, 2, 4, 8, 32)).all():
            raise ValueError(f"row widths must be in (1, 2, 4, 8, 32) (got {np.unique(bits)})")
        self.num_rows, self.dim = int(bits.shape[0]), int(dim)
        self.groups: list[tuple[int, torch.Tensor]] = []
        for b in (*_LEVELS, 32):
            rows = np.flatnonzero(bits == b)
            if rows.size:
                self.groups.append((b, torch.from_numpy(rows)))
        self.nbytes = sum(self._group_bytes(b, rows.shape[0]) for b, rows in self.groups)

    def _group_bytes(self, bits: int, n: int) -> int:
        if bits == 32:
            return 4 * n * self.dim
        return n * ((self.dim * bits + 7) // 8 + 8)

    def encode(self, rows: torch.Tensor, seed: int) -> torch.Tensor:
        """uint8 ``(nbytes,)`` of float ``rows`` ``(n, dim)``; ``seed`` drives the rounding."""
        parts = []
        for k, (b, idx) in enumerate(self.groups):
            block = rows.index_select(0, idx).to(torch.float32).contiguous()
            if b == 32:
                parts.append(block.reshape(-1).view(torch.uint8))
                continue
            q = quantize(block, b, seed=(seed * 5 + k) % (1 << 63))
            parts += [q.packed.reshape(-1), q.mins.view(torch.uint8), q.scales.view(torch.uint8)]
        if not parts:
            return torch.zeros(0, dtype=torch.uint8)
        return torch.cat(parts)

    def decode(self, buffer: torch.Tensor) -> torch.Tensor:
        """float32 ``(n, dim)`` from a buffer written by :meth:`encode`."""
        if buffer.dtype != torch.uint8 or buffer.shape != (self.nbytes,):
            raise ValueError(f"a halo buffer must be uint8 of {self.nbytes} bytes "
                             f"(got {buffer.dtype}, {tuple(buffer.shape)})")
        out = torch.empty(self.num_rows, self.dim, dtype=torch.float32)
        at = 0
        for b, idx in self.groups:
            n = idx.shape[0]
            if b == 32:
                size = 4 * n * self.dim
                out[idx] = _floats(buffer[at:at + size]).reshape(n, self.dim)
                at += size
                continue
            width = (self.dim * b + 7) // 8
            packed = buffer[at:at + n * width].reshape(n, width)
            at += n * width
            mins = _floats(buffer[at:at + 4 * n])
            scales = _floats(buffer[at + 4 * n:at + 8 * n])
            at += 8 * n
            out[idx] = dequantize(QuantizedRows(packed, mins, scales, b, self.dim))
        return out

    def error_bound(self, rows: torch.Tensor) -> torch.Tensor:
        """float32 ``(n,)``: the largest decoding error each row can have, one step
        ``(max - min) / (2^b - 1)`` (0 for float32 rows)."""
        bound = torch.zeros(self.num_rows, dtype=torch.float32)
        for b, idx in self.groups:
            if b != 32:
                block = rows.index_select(0, idx).to(torch.float32)
                span = block.amax(1) - block.amin(1) if self.dim else torch.zeros(idx.shape[0])
                bound[idx] = span / ((1 << b) - 1)
        return bound
