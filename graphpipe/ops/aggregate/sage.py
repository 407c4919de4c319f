"""SAGE's mean aggregation and its two linear maps as one op (the batched-GEMM idea of
WiseGraph's gTask applied to one layer).

``sage_mean(x, block, w_l, b, w_r) = mean_{v -> u} x_v · w_lᵀ + b + x_u · w_rᵀ``
(PyG ``SAGEConv(aggr="mean", root_weight=True)``, gather first). On the CPU:

- **one GEMM instead of two**: the mean is written straight into the left half of a
  ``(num_dst, 2·F)`` buffer whose right half is ``x[:num_dst]``, multiplied once by
  ``[w_l | w_r]ᵀ``; the backward's weight gradient is one GEMM over the same buffer;
- **a custom backward**: ``grad_x`` is the transposed mean of ``grad · w_l`` (the
  cached CSR by source) with ``grad · w_r`` added into its first ``num_dst`` rows in
  place, instead of autograd's zero-filled slice gradient plus a sum of two full-size
  gradients.

Other devices (or dtypes the kernels do not take) use :func:`sage_mean_composed`
(:func:`.api.aggregate`, then ``addmm``): the same value.
"""

from __future__ import annotations

import torch

from graphpipe.ops._core.worksharing import threads_for

from . import cpu as _cpu
from .api import (
    CSCBlock,
    _block_for,
    _cpu_spmm_transposed,
    _np,
    _resolve_backend,
    _work_of,
    aggregate,
)

__all__ = ["sage_mean", "sage_mean_composed"]


class _SageMeanFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, w_l: torch.Tensor, b: torch.Tensor | None,
                w_r: torch.Tensor | None, block: CSCBlock) -> torch.Tensor:
        xc = x.detach().contiguous()
        nd, dim = block.num_dst, xc.shape[1]
        inv_deg = block.inv_in_degree(xc.dtype)
        if w_r is None:
            buf, weight = torch.empty(nd, dim, dtype=xc.dtype), w_l.detach()
        else:
            buf = torch.empty(nd, 2 * dim, dtype=xc.dtype)
            buf[:, dim:].copy_(xc[:nd])
            weight = torch.cat([w_l.detach(), w_r.detach()], 1)
        with threads_for(_work_of(block, dim)):
            _cpu.spmm_sum(_np(block.indptr), _np(block.indices), xc.numpy(), inv_deg.numpy(),
                          buf.numpy())
        out = torch.addmm(b.detach(), buf, weight.t()) if b is not None else buf @ weight.t()
        ctx.block, ctx.dim, ctx.has_root, ctx.has_bias = block, dim, w_r is not None, b is not None
        ctx.save_for_backward(buf, weight)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        buf, weight = ctx.saved_tensors
        block: CSCBlock = ctx.block
        dim = ctx.dim
        g = grad.detach().contiguous()
        grad_x = grad_wl = grad_b = grad_wr = None
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[3]:
            grad_w = g.t() @ buf  # (out, 2·dim): both weights in one GEMM
            grad_wl = grad_w[:, :dim] if ctx.needs_input_grad[1] else None
            grad_wr = grad_w[:, dim:] if ctx.has_root and ctx.needs_input_grad[3] else None
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g.sum(0)
        if ctx.needs_input_grad[0]:
            w_l = weight[:, :dim]
            grad_x = _cpu_spmm_transposed(block, g @ w_l, None, block.inv_in_degree(g.dtype))
            if ctx.has_root:
                grad_x[: block.num_dst].addmm_(g, weight[:, dim:])
        return grad_x, grad_wl, grad_b, grad_wr, None


def sage_mean(x: torch.Tensor, indptr: torch.Tensor, indices: torch.Tensor, num_dst: int,
              weight_l: torch.Tensor, bias: torch.Tensor | None = None,
              weight_r: torch.Tensor | None = None, *, block: CSCBlock | None = None) -> torch.Tensor:
    """``mean_{v -> u} x_v · weight_lᵀ + bias + x_u · weight_rᵀ`` for the destinations of
    a block (zero in-degree: the mean is zero), differentiable in ``x`` and the weights.

    Args:
        x: float ``(num_src, F)`` source features; destinations are its first ``num_dst`` rows.
        indptr, indices: the block's CSC (int64 ``(num_dst + 1,)``, ``(E,)``).
        num_dst: destinations.
        weight_l: ``(out, F)`` applied to the mean; bias: ``(out,)`` or None.
        weight_r: ``(out, F)`` applied to ``x[:num_dst]`` (the root), or None.
        block: the cached :class:`CSCBlock` of ``(indptr, indices)`` (looked up if None).

    Returns:
        ``(num_dst, out)``.

    >>> import torch
    >>> indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([1, 2, 0])
    >>> x = torch.tensor([[1., 0.], [2., 1.], [4., 3.]])
    >>> w_l, w_r = torch.eye(2), 10 * torch.eye(2)
    >>> sage_mean(x, indptr, indices, 2, w_l, torch.zeros(2), w_r)
    tensor([[13.,  2.],
            [21., 10.]])
    """
    block = _block_for(block, indptr, indices, num_dst, x.shape[0])
    backend = _resolve_backend("auto", x.device)
    if backend == "cpu" and x.dtype in (torch.float32, torch.float64) and \
            weight_l.dtype == x.dtype:
        return _SageMeanFunction.apply(x, weight_l, bias, weight_r, block)
    return sage_mean_composed(x, indptr, indices, num_dst, weight_l, bias, weight_r, block=block)


def sage_mean_composed(x: torch.Tensor, indptr: torch.Tensor, indices: torch.Tensor,
                       num_dst: int, weight_l: torch.Tensor, bias: torch.Tensor | None = None,
                       weight_r: torch.Tensor | None = None, *,
                       block: CSCBlock | None = None) -> torch.Tensor:
    """:func:`sage_mean` as :func:`.api.aggregate` then two GEMMs under autograd (any
    device; the unfused order ``benchmarks/train.py --ablations unfused`` measures).

    >>> import torch
    >>> indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([1, 2, 0])
    >>> x, w = torch.tensor([[1., 0.], [2., 1.], [4., 3.]]), torch.eye(2)
    >>> torch.equal(sage_mean_composed(x, indptr, indices, 2, w, None, w),
    ...             sage_mean(x, indptr, indices, 2, w, None, w))
    True
    """
    agg = aggregate(indptr, indices, x, num_dst=num_dst, reduce="mean", block=block)
    out = torch.addmm(bias, agg, weight_l.t()) if bias is not None else agg @ weight_l.t()
    # in place: the GEMM accumulates into ``out``; neither product's backward reads it
    return out.addmm_(x[:num_dst], weight_r.t()) if weight_r is not None else out
