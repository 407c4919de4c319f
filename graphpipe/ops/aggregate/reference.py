"""Plain-torch float64 oracles of the aggregation ops (slow and obvious): every backend of
:mod:`graphpipe.ops.aggregate.api` is tested against these. Same definitions as the
front (zero in-degree rows are zero, mean divides by the unweighted in-degree, GCN uses
the degrees inside the block); all differentiable through torch autograd."""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["reference_aggregate", "reference_aggregate_heads", "reference_edge_softmax",
           "reference_sddmm_scores"]

Reduce = Literal["sum", "mean"]
Norm = Literal["gcn"] | None


def _edge_dst_ref(indptr: torch.Tensor) -> torch.Tensor:
    deg = indptr[1:] - indptr[:-1]
    return torch.repeat_interleave(torch.arange(deg.shape[0], device=indptr.device), deg)


def reference_aggregate(indptr: torch.Tensor, indices: torch.Tensor, x: torch.Tensor, *,
                        num_dst: int, reduce: Reduce = "sum",
                        edge_weight: torch.Tensor | None = None,
                        norm: Norm = None) -> torch.Tensor:
    """Plain-torch float64 aggregation (``index_add_``); returns float64 ``(num_dst, F)``.
    Differentiable through torch autograd. Same definitions as :func:`aggregate`."""
    dst = _edge_dst_ref(indptr)
    x64 = x.to(torch.float64)
    coef = torch.ones(indices.shape[0], dtype=torch.float64, device=x.device)
    if edge_weight is not None:
        coef = coef * edge_weight.to(torch.float64)
    if norm == "gcn":
        deg_dst = torch.zeros(num_dst, dtype=torch.float64, device=x.device)
        deg_dst.index_add_(0, dst, torch.ones_like(dst, dtype=torch.float64))
        deg_src = torch.zeros(x.shape[0], dtype=torch.float64, device=x.device)
        deg_src.index_add_(0, indices, torch.ones_like(indices, dtype=torch.float64))
        coef = coef / torch.sqrt(deg_dst.clamp(min=1)[dst] * deg_src.clamp(min=1)[indices])
    out = torch.zeros(num_dst, x.shape[1], dtype=torch.float64, device=x.device)
    out = out.index_add(0, dst, x64[indices] * coef[:, None])
    if reduce == "mean":
        deg = torch.zeros(num_dst, dtype=torch.float64, device=x.device)
        deg.index_add_(0, dst, torch.ones_like(dst, dtype=torch.float64))
        out = out / deg.clamp(min=1)[:, None]
    return out


def reference_sddmm_scores(indptr: torch.Tensor, indices: torch.Tensor, a_src: torch.Tensor,
                           a_dst: torch.Tensor, negative_slope: float = 0.2) -> torch.Tensor:
    """float64 ``(E, H)``: ``leaky_relu(a_src[src_e] + a_dst[dst_e])``."""
    dst = _edge_dst_ref(indptr)
    z = a_src.to(torch.float64)[indices] + a_dst.to(torch.float64)[dst]
    return torch.nn.functional.leaky_relu(z, negative_slope)


def reference_edge_softmax(indptr: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """float64 ``(E, H)``: softmax of ``scores`` over each destination's in-edges."""
    dst = _edge_dst_ref(indptr)
    s = scores.to(torch.float64)
    num_dst = indptr.shape[0] - 1
    idx = dst[:, None].expand_as(s)
    row_max = torch.full((num_dst, s.shape[1]), -torch.inf, dtype=torch.float64,
                         device=s.device).scatter_reduce(0, idx, s, "amax")
    p = torch.exp(s - row_max[dst])
    denom = torch.zeros(num_dst, s.shape[1], dtype=torch.float64, device=s.device)
    denom = denom.index_add(0, dst, p)
    return p / denom[dst]


def reference_aggregate_heads(indptr: torch.Tensor, indices: torch.Tensor, x: torch.Tensor,
                              alpha: torch.Tensor) -> torch.Tensor:
    """float64 ``(num_dst, H, D)``: ``out[u,h] = sum_e alpha[e,h] * x[src_e,h]``."""
    dst = _edge_dst_ref(indptr)
    num_dst = indptr.shape[0] - 1
    msg = x.to(torch.float64)[indices] * alpha.to(torch.float64)[:, :, None]
    out = torch.zeros(num_dst, x.shape[1], x.shape[2], dtype=torch.float64, device=x.device)
    return out.index_add(0, dst, msg)
