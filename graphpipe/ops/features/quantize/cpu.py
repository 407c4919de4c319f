"""Per-row stochastic low-bit quantization of feature rows (Sylvie, thesis ch. 3 §3.4).

For a row ``h`` of ``F`` values and a bit width ``b`` in {1, 2, 4, 8}:

- zero point ``z = min(h)``, ``scale = (max(h) - min(h)) / (2^b - 1)``;
- codes ``q = floor((h - z) / scale + u)`` with ``u ~ U[0, 1)`` (stochastic rounding:
  round up with probability equal to the fractional part), clamped to
  ``[0, 2^b - 1]``; hence ``E[scale * q + z] = h`` (unbiased) and
  ``|h - (scale * q + z)| < scale`` elementwise;
- a constant row (``max == min``) gets ``scale = 0`` and all-zero codes, so it
  dequantizes to itself exactly;
- dequantize: ``h~ = scale * q + z`` in float32.

Layout (:class:`QuantizedRows`): codes are bit-packed **per row** into
``ceil(F * b / 8)`` bytes, ``8 / b`` codes per byte, code ``f`` of a row in byte
``f // (8/b)`` at bit offset ``(f % (8/b)) * b`` (least significant first); padding
codes in a row's last byte are 0. Packing per row (Sylvie packs 8/b consecutive rows
per column instead) keeps any subset of rows gatherable without unpacking. Per-row
``mins`` and ``scales`` are float32 (``(N,)`` each), so the payload is
``N * (ceil(F*b/8) + 8)`` bytes.

Random numbers come from a counter-based hash (SplitMix64 of ``seed`` and the element's
flat index ``row * F + col``), not from a stateful generator: the Numba path runs rows
in parallel yet its codes are bitwise identical to the NumPy reference's and do not
depend on the thread count. A call takes ``seed`` or draws one from ``generator``
(or from torch's default generator).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
import torch

from graphpipe.ops._core.rng import uniform_f24, uniform_f24_np
from graphpipe.ops._core.worksharing import threads_for

__all__ = [
    "SUPPORTED_BITS",
    "QuantizedRows",
    "dequantize",
    "quantize",
    "reference_dequantize",
    "reference_pack",
    "reference_quantize",
    "unpack_codes",
]

SUPPORTED_BITS = (1, 2, 4, 8)


@dataclass(frozen=True)
class QuantizedRows:
    """Rows of a ``(num_rows, num_cols)`` float matrix in ``bits``-bit codes.

    Attributes:
        packed: uint8 tensor ``(num_rows, ceil(num_cols * bits / 8))``, codes packed
            per row, least significant bits first (see the module docstring).
        mins: float32 ``(num_rows,)``, the zero point (row minimum).
        scales: float32 ``(num_rows,)``, ``(max - min) / (2^bits - 1)``; 0 for constant rows.
        bits: code width, one of 1, 2, 4, 8.
        num_cols: F, the row length before packing.
    """

    packed: torch.Tensor
    mins: torch.Tensor
    scales: torch.Tensor
    bits: int
    num_cols: int

    @property
    def num_rows(self) -> int:
        return int(self.packed.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return (self.num_rows, self.num_cols)

    def nbytes(self) -> int:
        """Bytes of the payload (codes + mins + scales)."""
        return int(self.packed.numel() + 4 * self.mins.numel() + 4 * self.scales.numel())


def _check_bits(bits: int) -> None:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or \
            int(bits) not in SUPPORTED_BITS:
        raise ValueError(f"'bits' must be one of {SUPPORTED_BITS} (got {bits!r})")


def _row_bytes(num_cols: int, bits: int) -> int:
    return (num_cols * bits + 7) // 8


# --------------------------------------------------------------------------- random bits

# one SplitMix64 for every op (graphpipe.ops._core.rng): float32 in [0, 1) with 24 random
# bits from mix64(seed + (counter + 1) * GOLDEN)
_uniform = uniform_f24
_uniform_np = uniform_f24_np


# --------------------------------------------------------------------------- Numba kernels


@numba.njit(cache=True, nogil=True, parallel=True)
def _quantize_kernel(x, bits, seed, packed, mins, scales):
    """x float32 (N, F) -> packed uint8 (N, row_bytes), mins/scales float32 (N,).
    Returns the number of rows with non-finite values (0 on success)."""
    num_rows, num_cols = x.shape
    levels = (1 << bits) - 1
    per_byte = 8 // bits
    row_bytes = packed.shape[1]
    bad = 0
    for r in numba.prange(num_rows):
        row = x[r]
        mn = row[0] if num_cols > 0 else np.float32(0.0)
        mx = mn
        has_nan = False
        for f in range(num_cols):
            v = row[f]
            mn = min(mn, v)
            mx = max(mx, v)
            if np.isnan(v):
                has_nan = True
        if has_nan or not (np.isfinite(mn) and np.isfinite(mx)):
            bad += 1
            continue
        span = np.float32(mx - mn)
        if span > 0:
            inv = np.float32(levels) / span
            scale = span / np.float32(levels)
        else:
            inv = np.float32(0.0)
            scale = np.float32(0.0)
        mins[r] = mn
        scales[r] = scale
        out = packed[r]
        base = np.uint64(r) * np.uint64(num_cols)
        if bits == 8:  # one code per byte: no packing
            for f in range(num_cols):
                y = np.float32(np.float32(row[f] - mn) * inv)
                t = np.float32(y + _uniform(seed, base + np.uint64(f)))
                out[f] = np.uint8(min(int(t), levels))
            continue
        codes = np.empty(row_bytes * per_byte, dtype=np.uint8)
        codes[num_cols:] = 0
        for f in range(num_cols):  # straight-line: random bits, scale, round
            y = np.float32(np.float32(row[f] - mn) * inv)
            t = np.float32(y + _uniform(seed, base + np.uint64(f)))
            codes[f] = np.uint8(min(int(t), levels))
        for k in range(row_bytes):  # then pack, least significant code first
            byte = np.uint8(0)
            for j in range(per_byte):
                byte |= codes[k * per_byte + j] << np.uint8(j * bits)
            out[k] = byte
    return bad


@numba.njit(cache=True, nogil=True, parallel=True)
def _dequantize_kernel(packed, mins, scales, bits, num_cols, out):
    num_rows = packed.shape[0]
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    full_bytes = num_cols // per_byte
    for r in numba.prange(num_rows):
        src = packed[r]
        dst = out[r]
        mn = mins[r]
        scale = scales[r]
        if bits == 8:
            for f in range(num_cols):
                dst[f] = np.float32(np.float32(src[f]) * scale) + mn
            continue
        for k in range(full_bytes):
            byte = np.int32(src[k])
            base = k * per_byte
            for j in range(per_byte):
                code = (byte >> (j * bits)) & mask
                dst[base + j] = np.float32(np.float32(code) * scale) + mn
        for f in range(full_bytes * per_byte, num_cols):
            code = (np.int32(src[f // per_byte]) >> ((f % per_byte) * bits)) & mask
            dst[f] = np.float32(np.float32(code) * scale) + mn


@numba.njit(cache=True, nogil=True, parallel=True)
def _unpack_kernel(packed, bits, num_cols, out):
    per_byte = 8 // bits
    mask = (1 << bits) - 1
    for r in numba.prange(packed.shape[0]):
        for f in range(num_cols):
            out[r, f] = (np.int32(packed[r, f // per_byte]) >> ((f % per_byte) * bits)) & mask


# --------------------------------------------------------------------------- public API


def _seed_from(seed: int | None, generator: torch.Generator | None) -> np.uint64:
    if seed is not None and generator is not None:
        raise ValueError("give 'seed' or 'generator', not both")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0 or \
                seed >= 1 << 64:
            raise ValueError(f"'seed' must be an int in [0, 2**64) (got {seed!r})")
        return np.uint64(int(seed))
    drawn = torch.randint(0, 1 << 62, (1,), generator=generator, dtype=torch.int64)
    return np.uint64(int(drawn))


def _as_rows(x: torch.Tensor) -> np.ndarray:
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or not x.dtype.is_floating_point:
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"'x' must be a 2-D floating tensor (got {shape}, "
                         f"{getattr(x, 'dtype', None)})")
    return x.detach().to("cpu", torch.float32).contiguous().numpy()


def quantize(x: torch.Tensor, bits: int, *, seed: int | None = None,
             generator: torch.Generator | None = None) -> QuantizedRows:
    """Stochastically quantize each row of ``x`` to ``bits``-bit codes (Numba, parallel
    over rows).

    Args:
        x: float ``(N, F)`` (any float dtype; computed in float32). CUDA tensors are
            quantized on the CPU and the result is returned on the CPU.
        bits: 1, 2, 4 or 8.
        seed: 64-bit seed of the rounding noise; or
        generator: a ``torch.Generator`` to draw the seed from (default: torch's
            global generator, so ``torch.manual_seed`` makes calls reproducible).

    Returns:
        :class:`QuantizedRows` with ``packed`` uint8 ``(N, ceil(F*bits/8))``.

    Raises:
        ValueError: bad ``bits``/``seed``/``x``, or ``x`` holds NaN or infinity.
    """
    _check_bits(bits)
    bits = int(bits)
    rows = _as_rows(x)
    seed_u = _seed_from(seed, generator)
    num_rows, num_cols = rows.shape
    packed = np.zeros((num_rows, _row_bytes(num_cols, bits)), dtype=np.uint8)
    mins = np.zeros(num_rows, dtype=np.float32)
    scales = np.zeros(num_rows, dtype=np.float32)
    if num_rows and num_cols:
        with threads_for(num_rows * num_cols * 4):
            bad = _quantize_kernel(rows, bits, seed_u, packed, mins, scales)
        if bad:
            raise ValueError(f"'x' must be finite ({bad} rows hold NaN or infinity)")
    return QuantizedRows(torch.from_numpy(packed), torch.from_numpy(mins),
                         torch.from_numpy(scales), bits, num_cols)


def _check_quantized(q: QuantizedRows) -> None:
    if not isinstance(q, QuantizedRows):
        raise ValueError(f"'q' must be QuantizedRows (got {type(q).__name__})")  # noqa: TRY004
    _check_bits(q.bits)
    expected = (q.mins.shape[0], _row_bytes(q.num_cols, q.bits))
    if q.packed.dtype != torch.uint8 or tuple(q.packed.shape) != expected:
        raise ValueError(f"'q.packed' must be uint8 of shape {expected} "
                         f"(got {q.packed.dtype}, {tuple(q.packed.shape)})")
    if q.scales.shape != q.mins.shape:
        raise ValueError(f"'q.scales' must have shape {tuple(q.mins.shape)} "
                         f"(got {tuple(q.scales.shape)})")


def dequantize(q: QuantizedRows) -> torch.Tensor:
    """Decode to float32 ``(N, F)``: ``scale[r] * code[r, f] + min[r]`` (Numba)."""
    _check_quantized(q)
    out = np.empty((q.num_rows, q.num_cols), dtype=np.float32)
    if out.size:
        with threads_for(out.size):
            _dequantize_kernel(q.packed.contiguous().numpy(),
                               q.mins.to(torch.float32).contiguous().numpy(),
                               q.scales.to(torch.float32).contiguous().numpy(), q.bits,
                               q.num_cols, out)
    return torch.from_numpy(out)


def unpack_codes(q: QuantizedRows) -> torch.Tensor:
    """The integer codes, uint8 ``(N, F)`` in ``[0, 2^bits - 1]``."""
    _check_quantized(q)
    out = np.zeros((q.num_rows, q.num_cols), dtype=np.uint8)
    if out.size:
        _unpack_kernel(q.packed.contiguous().numpy(), q.bits, q.num_cols, out)
    return torch.from_numpy(out)


# --------------------------------------------------------------------------- reference


def reference_quantize(x: np.ndarray, bits: int, seed: int) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
    """Plain NumPy quantizer: ``(codes uint8 (N, F), mins float32 (N,), scales float32 (N,))``
    with the same arithmetic and noise as :func:`quantize` (so codes agree bitwise)."""
    _check_bits(bits)
    x = np.ascontiguousarray(x, dtype=np.float32)
    levels = np.float32((1 << bits) - 1)
    num_rows, num_cols = x.shape
    mins = x.min(axis=1) if num_cols else np.zeros(num_rows, np.float32)
    span = (x.max(axis=1) - mins).astype(np.float32) if num_cols else mins
    with np.errstate(divide="ignore"):
        inv = np.where(span > 0, levels / np.where(span > 0, span, 1), 0).astype(np.float32)
    scales = np.where(span > 0, span / levels, 0).astype(np.float32)
    y = ((x - mins[:, None]).astype(np.float32) * inv[:, None]).astype(np.float32)
    counter = np.arange(num_rows * num_cols, dtype=np.uint64).reshape(num_rows, num_cols)
    t = (y + _uniform_np(np.uint64(seed), counter)).astype(np.float32)
    codes = np.minimum(np.floor(t), levels).astype(np.uint8)
    return codes, mins.astype(np.float32), scales


def reference_pack(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack uint8 codes ``(N, F)`` per row, least significant first: ``(N, ceil(F*b/8))``."""
    per_byte = 8 // bits
    num_rows, num_cols = codes.shape
    padded = np.zeros((num_rows, _row_bytes(num_cols, bits) * per_byte), dtype=np.uint16)
    padded[:, :num_cols] = codes
    groups = padded.reshape(num_rows, -1, per_byte)
    shifts = (np.arange(per_byte) * bits).astype(np.uint16)
    return (groups << shifts).sum(axis=2).astype(np.uint8)


def reference_dequantize(codes: np.ndarray, mins: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """float32 ``scale * code + min``."""
    return (codes.astype(np.float32) * scales[:, None].astype(np.float32)).astype(
        np.float32) + mins[:, None].astype(np.float32)
