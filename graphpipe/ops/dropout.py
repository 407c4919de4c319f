"""Fused ReLU + dropout for the CPU (one pass forward, one pass backward).

``relu_dropout(x, p, training)`` equals ``F.dropout(F.relu(x), p, training)`` in
distribution: each element is kept with probability ``1 - p`` and scaled by
``1 / (1 - p)``. torch's CPU dropout draws its mask with ``bernoulli_`` (about 10 ns an
element on this machine: a third of a SAGE training step at hidden 256), then ReLU,
its backward and the mask product each make another pass. Here one parallel Numba pass
computes ``max(x, 0) · keep · scale`` and a one-byte gradient mask, with a counter-based
random number per element (SplitMix64 of ``seed + index``), and the backward is one
pass ``grad · mask · scale``.

The seed of each call is drawn from torch's global generator, so ``torch.manual_seed``
and ``torch.get_rng_state``/``set_rng_state`` make runs (and checkpoint resumes)
reproducible exactly as with ``F.dropout`` — the masks differ from torch's, not their
law. Non-CPU tensors, other dtypes, ``p == 0`` or evaluation fall back to torch.
"""

from __future__ import annotations

import numba
import numpy as np
import torch
from torch.nn import functional as F

from graphpipe.ops._core.rng import splitmix64

__all__ = ["dropout_keep_mask", "relu_dropout"]

_CHUNK = 1 << 16


_splitmix = splitmix64  # graphpipe.ops._core.rng: mix64(z + GOLDEN)


@numba.njit(parallel=True, nogil=True, cache=True)
def _forward(x, seed, threshold, scale, relu, out, mask):  # pragma: no cover - compiled
    """Element ``i`` is kept when the 32-bit half ``i % 2`` of ``splitmix(seed + i // 2)``
    is ``>= threshold`` (``threshold = p · 2^32``); branch-free (the random branch would
    be mispredicted half the time)."""
    n = x.shape[0]
    chunks = (n + _CHUNK - 1) // _CHUNK
    s = np.uint64(seed)
    thr = np.uint64(threshold)
    low = np.uint64(0xFFFFFFFF)
    floor = -np.inf if not relu else 0.0
    for c in numba.prange(chunks):
        lo = c * _CHUNK
        hi = min(n, lo + _CHUNK)
        for i in range(lo, hi):
            r = _splitmix(s + np.uint64(i >> 1))
            half = (r >> np.uint64(32)) if (i & 1) else (r & low)
            v = x[i]
            keep = (half >= thr) & (v > floor)
            mask[i] = np.uint8(keep)
            out[i] = v * (scale * keep)


@numba.njit(parallel=True, nogil=True, cache=True)
def _backward(grad, mask, scale, out):  # pragma: no cover - compiled
    n = grad.shape[0]
    chunks = (n + _CHUNK - 1) // _CHUNK
    for c in numba.prange(chunks):
        lo = c * _CHUNK
        hi = min(n, lo + _CHUNK)
        for i in range(lo, hi):
            out[i] = grad[i] * (scale * mask[i])


class _ReluDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float, relu: bool, seed: int, inplace: bool) -> torch.Tensor:
        inplace = inplace and x.is_contiguous()
        xc = x.detach().contiguous()
        out = xc if inplace else torch.empty_like(xc)
        if inplace:
            ctx.mark_dirty(x)
        mask = torch.empty(xc.shape, dtype=torch.uint8)
        scale = np.float32(1.0 / (1.0 - p)) if xc.dtype == torch.float32 else 1.0 / (1.0 - p)
        threshold = min(int(p * 4294967296.0), 4294967295)
        _forward(xc.view(-1).numpy(), seed, threshold, scale, relu,
                 out.view(-1).numpy(), mask.view(-1).numpy())
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return x if inplace else out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (mask,) = ctx.saved_tensors
        g = grad.detach().contiguous()
        out = torch.empty_like(g)
        _backward(g.view(-1).numpy(), mask.view(-1).numpy(), ctx.scale, out.view(-1).numpy())
        return out, None, None, None, None


def relu_dropout(x: torch.Tensor, p: float, training: bool, *, relu: bool = True,
                 inplace: bool = False) -> torch.Tensor:
    """``dropout(relu(x), p)`` (``relu=False``: plain dropout), any shape; fused on the CPU.

    ``inplace=True`` overwrites ``x`` (a fresh activation nobody else reads) instead of
    allocating the output: one less 4-byte-per-element buffer to fault in and write."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"'p' must be in [0, 1) (got {p!r})")
    if not training or p == 0.0 or x.device.type != "cpu" or x.dtype not in (torch.float32, torch.float64):
        # ReLU may overwrite x, dropout may not then: ReLU's backward reads its output
        h = F.relu(x, inplace=inplace) if relu else x
        return F.dropout(h, p=p, training=training, inplace=inplace and training and not relu)
    seed = int(torch.randint(0, 1 << 62, (1,)))
    return _ReluDropout.apply(x, float(p), bool(relu), seed, bool(inplace))


def dropout_keep_mask(n: int, p: float, seed: int) -> np.ndarray:
    """The keep mask (bool ``(n,)``) that :func:`relu_dropout` draws for ``seed`` (tests)."""
    x = np.ones(n, dtype=np.float32)
    out = np.empty_like(x)
    mask = np.empty(n, dtype=np.uint8)
    _forward(x, seed, min(int(p * 4294967296.0), 4294967295), np.float32(1.0), False, out, mask)
    return mask.astype(bool)
