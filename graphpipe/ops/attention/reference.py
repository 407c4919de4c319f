"""Dense masked attention in float64: the oracle of :func:`graphpipe.ops.attention.sparse_attention`
(and, through ``to_csr``, of cluster-sparse attention). O(S_q·S_k·H) memory: tests only."""

from __future__ import annotations

import math
from typing import Literal

import torch

__all__ = ["reference_sparse_attention"]

Compat = Literal["torchgt"] | None


def _scores_setup(q, k, scale):
    return (1.0 / math.sqrt(q.shape[-1])) if scale is None else float(scale)


def reference_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                               indptr: torch.Tensor, indices: torch.Tensor, *,
                               bias: torch.Tensor | None = None, scale: float | None = None,
                               compat: Compat = None, clamp: float = 5.0, eps: float = 1e-6
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Dense masked attention in float64 (the oracle; O(S_q·S_k·H) memory).

    Builds the dense ``(H, S_q, S_k)`` score matrix, masks it with the pattern (which
    must be duplicate-free) and takes a max-subtracted softmax. Same definitions as
    :func:`sparse_attention`. Differentiable through torch autograd.

    Returns:
        ``(out (S_q, H, D), lse (S_q, H))``, float64.
    """
    scale = _scores_setup(q, k, scale)
    num_q, num_k = q.shape[0], k.shape[0]
    q64, k64, v64 = (t.to(torch.float64) for t in (q, k, v))
    rows = torch.repeat_interleave(torch.arange(num_q, device=q.device), indptr[1:] - indptr[:-1])
    flat = rows * num_k + indices
    if torch.unique(flat).shape[0] != flat.shape[0]:
        raise ValueError("'indices': the dense reference needs a duplicate-free pattern")
    mask = torch.zeros(num_q * num_k, dtype=torch.bool, device=q.device)
    mask[flat] = True
    mask = mask.view(num_q, num_k)
    s = torch.einsum("ihd,jhd->hij", q64, k64) * scale
    if compat == "torchgt":
        s = s.clamp(-clamp, clamp)
    if bias is not None:
        dense_bias = torch.zeros(q.shape[1], num_q * num_k, dtype=torch.float64, device=q.device)
        dense_bias = dense_bias.index_put((torch.arange(q.shape[1], device=q.device)[:, None],
                                           flat[None, :]), bias.to(torch.float64).T)
        s = s + dense_bias.view(q.shape[1], num_q, num_k)
    allowed = mask[None] & (s != -torch.inf)
    live = allowed.any(-1)                                          # (H, S_q)
    s_fill = torch.where(allowed, s, torch.tensor(-torch.inf, dtype=torch.float64))
    s_fill = torch.where(live[..., None], s_fill, torch.zeros((), dtype=torch.float64))
    lse = torch.logsumexp(s_fill, dim=-1)
    if compat == "torchgt":
        lse = torch.logaddexp(lse, torch.tensor(math.log(eps), dtype=torch.float64))
    p = torch.exp(s_fill - lse[..., None]) * allowed
    out = torch.einsum("hij,jhd->ihd", p, v64)
    lse = torch.where(live, lse, torch.tensor(-torch.inf, dtype=torch.float64))
    return out, lse.T.contiguous()
