"""Neighbourhood aggregation on sampled blocks (FastGL Memory-Aware aggregation).

A *block* is one layer of a sampled mini-batch in DGL's convention, stored as a local
CSC by destination:

- ``indptr``: int64 tensor ``(num_dst + 1,)``; the in-edges of destination ``u`` are
  positions ``indptr[u]:indptr[u + 1]`` of ``indices``;
- ``indices``: int64 tensor ``(E,)`` of local source IDs in ``[0, num_src)``;
- destinations are the first ``num_dst`` sources, so ``num_dst <= num_src``;
- ``x``: float tensor ``(num_src, F)`` of source features.

Edge ``e`` is identified by its position in ``indices``; per-edge tensors
(``edge_weight``, scores, attention) are ordered the same way. Duplicate edges are
allowed and count once each (in degrees, sums and softmax).

Public functions (all differentiable with respect to their float inputs):

- :func:`aggregate`: ``sum`` / ``mean`` / GCN-normalised / edge-weighted SpMM,
  ``(num_dst, F)``;
- :func:`sddmm_scores`: GAT logits ``leaky_relu(a_src[src] + a_dst[dst])``, ``(E, H)``;
- :func:`edge_softmax`: softmax of per-edge scores over each destination's in-edges;
- :func:`aggregate_heads`: multi-head weighted SpMM ``(num_dst, H, D)``.

Each has a ``reference`` path (plain torch in float64, slow and obvious: the
``reference_*`` functions of :mod:`.reference`), a ``cpu`` path (Numba, :mod:`.cpu`) and a
``triton`` path (:mod:`.triton`); ``backend="auto"`` picks ``triton`` for
CUDA tensors and ``cpu`` otherwise. On the ``triton`` backend, :func:`sddmm_scores` is
two gathers and an elementwise leaky ReLU in torch (memory-bound, nothing for a custom
kernel to win); the other three are Triton kernels. ``backend="triton"`` also accepts
CPU tensors, which only makes sense under ``TRITON_INTERPRET=1`` (tests).
Float16/bfloat16 inputs are computed in float32 and returned in their own dtype.

Definitions fixed here:

- **zero in-degree destinations** get an all-zero output row (sum, mean and GCN); the
  caller who wants DGL/FastGL's "copy the input" adds a self loop or ``x[:num_dst]``.
- **mean** divides the (optionally edge-weighted) sum by the unweighted in-degree.
- **GCN** normalisation uses the degrees *inside the block*:
  ``w_e = 1 / sqrt(deg_dst(u) * deg_src(v))`` where ``deg_dst(u)`` is the number of
  in-edges of destination ``u`` and ``deg_src(v)`` the number of out-edges of source
  ``v`` in this block, each clamped to at least 1. This is DGL ``GraphConv(norm="both")``
  on a block. On a square block with a symmetric edge set, in- and out-degrees agree
  and this equals PyG's ``gcn_norm(..., add_self_loops=False)``. Self loops are the
  caller's job (add them to the block). An ``edge_weight`` given together with
  ``norm="gcn"`` multiplies the normalised coefficient (degrees stay unweighted).

Backward passes use no atomics (unless Triton's ``atomic_backward=True``): the
gradient with respect to ``x`` is the aggregation over the transposed block (CSR by
source), built once per block and cached on its :class:`CSCBlock`; gradients with
respect to edge weights / attention are SDDMMs over the forward rows. Forward results
are bitwise reproducible.
"""

from __future__ import annotations

import weakref
from typing import Literal

import numpy as np
import torch

from graphpipe.ops._core.backend import resolve_backend
from graphpipe.ops._core.worksharing import threads_for

from . import cpu as _cpu
from .reference import (
    Norm,
    Reduce,
    reference_aggregate,
    reference_aggregate_heads,
    reference_edge_softmax,
    reference_sddmm_scores,
)

Backend = Literal["auto", "cpu", "triton", "reference"]

_BACKENDS = ("auto", "cpu", "triton", "reference")
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

__all__ = [
    "CSCBlock",
    "aggregate",
    "aggregate_heads",
    "edge_softmax",
    "get_block",
    "reference_aggregate",
    "reference_aggregate_heads",
    "reference_edge_softmax",
    "reference_sddmm_scores",
    "sddmm_scores",
]


# =========================================================================== the block


class CSCBlock:
    """One sampled block (local CSC by destination) plus what kernels derive from it.

    Derived data is computed on first use and cached on the object, so a block used
    by several layers' forward and backward passes pays for each item once:
    degrees, the per-edge destination, GCN coefficients, the transposed CSR by source
    (for atomic-free backward passes) and Triton's degree-grouped task lists.

    Attributes:
        indptr: int64 ``(num_dst + 1,)``.
        indices: int64 ``(E,)``, local source IDs in ``[0, num_src)``.
        num_dst: number of destination rows.
        num_src: number of source rows (``>= num_dst``).
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, num_src: int,
                 *, validate: bool = True) -> None:
        num_dst = indptr.shape[0] - 1 if isinstance(indptr, torch.Tensor) and \
            indptr.dim() == 1 else 0
        _check_structure_args(indptr, indices, num_dst, num_src)
        self.indptr = indptr
        self.indices = indices
        self.num_dst = int(indptr.shape[0]) - 1
        self.num_src = int(num_src)
        self.num_edges = int(indices.shape[0])
        self._cache: dict[object, object] = {}
        if validate:
            self._validate()

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if self.num_dst > self.num_src:
            raise ValueError(
                f"'num_dst' must not exceed num_src (destinations are the first sources); "
                f"got num_dst={self.num_dst}, num_src={self.num_src}")
        if self.indptr.shape[0] == 0:
            raise ValueError("'indptr' must have at least one element (got 0)")
        if self.device.type == "cpu":
            ip, ix = self.indptr.numpy(), self.indices.numpy()
            code = _cpu.validate_csc(ip, ix, self.num_src)
        else:  # on the device: no host copy of the edge arrays, one sync
            ip, ix = self.indptr, self.indices
            checks = torch.stack([
                ip[0] != 0, (ip[1:] < ip[:-1]).any(), ip[-1] != ix.shape[0],
                ((ix < 0) | (ix >= self.num_src)).any() if ix.numel() else ip[0] != ip[0]])
            failed = torch.nonzero(checks).flatten().tolist()
            code = failed[0] if failed else -1
        if code == 0:
            raise ValueError(f"'indptr' must start at 0 (got {int(ip[0])})")
        if code == 1:
            raise ValueError("'indptr' must be non-decreasing")
        if code == 2:
            raise ValueError(
                f"'indptr' must end at len(indices)={ix.shape[0]} (got {int(ip[-1])})")
        if code == 3:
            bad = ix[(ix < 0) | (ix >= self.num_src)][0]  # numpy or torch
            raise ValueError(
                f"'indices' must lie in [0, num_src={self.num_src}) (got {int(bad)})")

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    # ------------------------------------------------------------------ derived data
    def _memo(self, key: object, make):
        value = self._cache.get(key)
        if value is None:
            value = make()
            self._cache[key] = value
        return value

    def in_degree(self) -> torch.Tensor:
        """int64 ``(num_dst,)``: number of in-edges of each destination."""
        return self._memo("in_degree", lambda: self.indptr[1:] - self.indptr[:-1])

    def out_degree(self) -> torch.Tensor:
        """int64 ``(num_src,)``: number of out-edges of each source in the block."""
        return self._memo("out_degree", lambda: torch.bincount(
            self.indices, minlength=self.num_src))

    def edge_dst(self) -> torch.Tensor:
        """int64 ``(E,)``: destination of each edge."""
        return self._memo("edge_dst", lambda: torch.repeat_interleave(
            torch.arange(self.num_dst, device=self.device), self.in_degree(),
            output_size=self.num_edges))

    def inv_in_degree(self, dtype: torch.dtype) -> torch.Tensor:
        """``(num_dst,)`` of ``dtype``: ``1 / max(in_degree, 1)`` (the mean's row scale)."""
        return self._memo(("inv_in_degree", dtype), lambda: 1.0 / self.in_degree().clamp(
            min=1).to(dtype))

    def gcn_weight(self, dtype: torch.dtype) -> torch.Tensor:
        """``(E,)`` of ``dtype``: ``1 / sqrt(deg_dst(u) * deg_src(v))``, in-block degrees
        clamped to at least 1 (see the module docstring)."""
        def make() -> torch.Tensor:
            d_dst, d_src = self.gcn_scales(torch.float64)
            return (d_dst[self.edge_dst()] * d_src[self.indices]).to(dtype)
        return self._memo(("gcn_weight", dtype), make)

    def gcn_scales(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``(1/sqrt(deg_dst) (num_dst,), 1/sqrt(deg_src) (num_src,))`` of ``dtype``,
        degrees clamped to at least 1; ``gcn_weight[e] = d_dst[u] * d_src[v]``."""
        return self._memo(("gcn_scales", dtype), lambda: (
            self.in_degree().clamp(min=1).to(torch.float64).rsqrt().to(dtype),
            self.out_degree().clamp(min=1).to(torch.float64).rsqrt().to(dtype)))

    def transposed(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The block as CSR by source: ``(t_indptr (num_src+1,), t_dst (E,), t_eid (E,))``,
        int64. Entry ``k`` is edge ``t_eid[k]`` from source ``v`` (``t_indptr[v] <= k <
        t_indptr[v+1]``) to destination ``t_dst[k]``; within a source, entries are in
        increasing edge order. Built once and cached."""
        def make():
            if self.device.type == "cpu":
                t_indptr, t_dst, t_eid = _cpu.transpose_csc(
                    self.indptr.numpy(), self.indices.numpy(), self.num_src)
                return (torch.from_numpy(t_indptr), torch.from_numpy(t_dst),
                        torch.from_numpy(t_eid))
            t_eid = torch.argsort(self.indices, stable=True)
            t_dst = self.edge_dst()[t_eid]
            t_indptr = torch.zeros(self.num_src + 1, dtype=torch.int64, device=self.device)
            torch.cumsum(self.out_degree(), 0, out=t_indptr[1:])
            return t_indptr, t_dst, t_eid
        return self._memo("transposed", make)


def _check_structure_args(indptr: torch.Tensor, indices: torch.Tensor, num_dst: int,
                          num_src: int) -> None:
    if not isinstance(indptr, torch.Tensor) or indptr.dim() != 1 or indptr.dtype != torch.int64:
        raise ValueError(
            f"'indptr' must be a 1-D int64 tensor (got {_describe(indptr)})")
    if not isinstance(indices, torch.Tensor) or indices.dim() != 1 or \
            indices.dtype != torch.int64:
        raise ValueError(
            f"'indices' must be a 1-D int64 tensor (got {_describe(indices)})")
    if indptr.device != indices.device:
        raise ValueError(f"'indices' must be on indptr's device {indptr.device} "
                         f"(got {indices.device})")
    if not isinstance(num_dst, int) or num_dst < 0:
        raise ValueError(f"'num_dst' must be a non-negative int (got {num_dst!r})")
    if indptr.shape[0] != num_dst + 1:
        raise ValueError(
            f"'indptr' must have num_dst + 1 = {num_dst + 1} elements (got {indptr.shape[0]})")
    if not isinstance(num_src, int) or num_src < 0:
        raise ValueError(f"'num_src' must be a non-negative int (got {num_src!r})")


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dim()}-D {t.dtype} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


# A small cache of blocks keyed by the identity of their (indptr, indices) tensors, so
# that repeated calls on the same block (forward of several layers, GAT's three ops,
# every backward) reuse the transposed copy. An entry is used only while both tensors
# are alive, are the very same objects and have not been modified in place
# (``_version``); a freed tensor's id can be reused, but then the weakref is dead.
_BLOCK_CACHE: dict[tuple[int, int, int], tuple[weakref.ref, weakref.ref, int, int, CSCBlock]] = {}
_BLOCK_CACHE_SIZE = 16


def get_block(indptr: torch.Tensor, indices: torch.Tensor, num_dst: int,
              num_src: int) -> CSCBlock:
    """The cached :class:`CSCBlock` for these tensors, building (and validating) it on
    first use. Validation runs once per block: ``indptr`` starts at 0, is
    non-decreasing, ends at ``len(indices)``; ``indices`` lie in ``[0, num_src)``."""
    _check_structure_args(indptr, indices, num_dst, num_src)
    key = (id(indptr), id(indices), num_src)
    hit = _BLOCK_CACHE.get(key)
    if hit is not None:
        ref_ptr, ref_idx, ver_ptr, ver_idx, block = hit
        if (ref_ptr() is indptr and ref_idx() is indices and indptr._version == ver_ptr
                and indices._version == ver_idx):
            return block
        del _BLOCK_CACHE[key]
    block = CSCBlock(indptr, indices, num_src)
    for dead in [k for k, v in _BLOCK_CACHE.items() if v[0]() is None or v[1]() is None]:
        del _BLOCK_CACHE[dead]
    while len(_BLOCK_CACHE) >= _BLOCK_CACHE_SIZE:
        del _BLOCK_CACHE[next(iter(_BLOCK_CACHE))]
    _BLOCK_CACHE[key] = (weakref.ref(indptr), weakref.ref(indices), indptr._version,
                         indices._version, block)
    return block


# =========================================================================== helpers


def _work_of(block: CSCBlock, cols: int) -> int:
    """Element operations of one kernel over the block (decides serial vs parallel)."""
    return (block.num_edges + block.num_dst + block.num_src) * max(cols, 1)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().numpy()


def _resolve_backend(backend: str, device: torch.device) -> str:
    return resolve_backend(backend, _BACKENDS, str(device))


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """Numba kernels run in float32 or float64; half types are widened to float32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_float(name: str, t: torch.Tensor, dim: int) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != dim or t.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"'{name}' must be a {dim}-D floating tensor (got {_describe(t)})")


def _check_device(name: str, t: torch.Tensor, device: torch.device) -> None:
    if t.device != device:
        raise ValueError(f"'{name}' must be on the block's device {device} (got {t.device})")


# =========================================================================== aggregate


class _AggregateFunction(torch.autograd.Function):
    """out = diag(row_scale) · A_w · x, with A_w[u, v] = sum of coef_e over edges v->u."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, edge_weight: torch.Tensor | None, block: CSCBlock,
                reduce: str, norm: str | None, backend: str, options: dict) -> torch.Tensor:
        cdtype = _compute_dtype(x.dtype)
        xc = x.detach().to(cdtype).contiguous()
        # CPU, GCN without edge weights: no per-edge coefficient array; the kernel reads
        # 1/sqrt(deg_src) through the source index and scales each row by 1/sqrt(deg_dst)
        ctx.gcn_scaled = backend == "cpu" and norm == "gcn" and edge_weight is None
        if ctx.gcn_scaled:
            coef = norm_coef = row_scale = None
        else:
            coef, norm_coef = _edge_coefficients(block, edge_weight, norm, cdtype)
            row_scale = block.inv_in_degree(cdtype) if reduce == "mean" else None
        if ctx.gcn_scaled:
            out = _cpu_spmm_gcn(block, xc)
        elif backend == "cpu":
            out = _cpu_spmm(block, xc, coef, row_scale)
        else:
            from . import triton as _tr
            out = _tr.spmm(block, xc, coef, row_scale, **options)
        ctx.block = block
        ctx.backend = backend
        ctx.options = options
        ctx.x_dtype = x.dtype
        ctx.has_weight = edge_weight is not None
        ctx.save_for_backward(xc if edge_weight is not None else None, coef, norm_coef,
                              row_scale)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        xc, coef, norm_coef, row_scale = ctx.saved_tensors
        block: CSCBlock = ctx.block
        cdtype = _compute_dtype(ctx.x_dtype)
        g = grad_out.detach().to(cdtype).contiguous()
        grad_x = grad_w = None
        if ctx.needs_input_grad[0]:
            if ctx.gcn_scaled:
                grad_x = _cpu_spmm_gcn(block, g, transposed=True)
            elif ctx.backend == "cpu":
                grad_x = _cpu_spmm_transposed(block, g, coef, row_scale)
            else:
                from . import triton as _tr
                grad_x = _tr.spmm_transposed(block, g, coef, row_scale, **ctx.options)
            grad_x = grad_x.to(ctx.x_dtype)
        if ctx.has_weight and ctx.needs_input_grad[1]:
            if ctx.backend == "cpu":
                grad_w = torch.empty(block.num_edges, dtype=cdtype)
                with threads_for(_work_of(block, g.shape[1])):
                    _cpu.sddmm_dot(_np(block.indptr), _np(block.indices), g.numpy(), xc.numpy(),
                                   grad_w.numpy())
            else:
                from . import triton as _tr
                grad_w = _tr.sddmm_dot(block, g, xc, **ctx.options)
            if norm_coef is not None:
                grad_w = grad_w * norm_coef
            if row_scale is not None:
                grad_w = grad_w * row_scale[block.edge_dst()]
        return grad_x, grad_w, None, None, None, None, None


def _edge_coefficients(block: CSCBlock, edge_weight: torch.Tensor | None, norm: str | None,
                       cdtype: torch.dtype) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """(coef (E,) or None for all-ones, the GCN factor alone or None)."""
    norm_coef = block.gcn_weight(cdtype) if norm == "gcn" else None
    if edge_weight is None:
        return norm_coef, norm_coef
    w = edge_weight.detach().to(cdtype).contiguous()
    if norm_coef is not None:
        w = w * norm_coef
    return w, norm_coef


_EMPTY = {dt: torch.empty(0, dtype=dt) for dt in (torch.float32, torch.float64)}


def _cpu_spmm(block: CSCBlock, x: torch.Tensor, coef: torch.Tensor | None,
              row_scale: torch.Tensor | None) -> torch.Tensor:
    out = torch.empty(block.num_dst, x.shape[1], dtype=x.dtype)
    ip, ix = _np(block.indptr), _np(block.indices)
    scale = (row_scale if row_scale is not None else _EMPTY[x.dtype]).numpy()
    if coef is None:
        with threads_for(_work_of(block, x.shape[1])):
            _cpu.spmm_sum(ip, ix, x.numpy(), scale, out.numpy())
    else:
        with threads_for(_work_of(block, x.shape[1])):
            _cpu.spmm_weighted(ip, ix, coef.numpy(), x.numpy(), scale, out.numpy())
    return out


def _cpu_spmm_gcn(block: CSCBlock, x: torch.Tensor, transposed: bool = False) -> torch.Tensor:
    """GCN-normalised sum without per-edge arrays: forward
    ``out[u] = d_dst[u] * sum_e d_src[v] x[v]``; transposed
    ``grad_x[v] = d_src[v] * sum_k d_dst[t_dst[k]] g[t_dst[k]]``."""
    d_dst, d_src = block.gcn_scales(x.dtype)
    if transposed:
        t_indptr, t_dst, _ = block.transposed()
        ip, ix, w, scale, rows = t_indptr.numpy(), t_dst.numpy(), d_dst, d_src, block.num_src
    else:
        ip, ix, w, scale, rows = _np(block.indptr), _np(block.indices), d_src, d_dst, \
            block.num_dst
    out = torch.empty(rows, x.shape[1], dtype=x.dtype)
    with threads_for(_work_of(block, x.shape[1])):
        _cpu.spmm_weighted_gather(ip, ix, w.numpy(), ix, x.numpy(), scale.numpy(), out.numpy())
    return out


def _cpu_spmm_transposed(block: CSCBlock, g: torch.Tensor, coef: torch.Tensor | None,
                         row_scale: torch.Tensor | None) -> torch.Tensor:
    """grad_x = A_w^T · diag(row_scale) · g over the cached transposed block."""
    t_indptr, t_dst, t_eid = block.transposed()
    out = torch.empty(block.num_src, g.shape[1], dtype=g.dtype)
    ti, td, g_np, o = t_indptr.numpy(), t_dst.numpy(), g.numpy(), out.numpy()
    no_scale = _EMPTY[g.dtype].numpy()
    if coef is None and row_scale is None:
        with threads_for(_work_of(block, g.shape[1])):
            _cpu.spmm_sum(ti, td, g_np, no_scale, o)
    elif coef is None:
        with threads_for(_work_of(block, g.shape[1])):
            _cpu.spmm_weighted_gather(ti, td, row_scale.numpy(), td, g_np, no_scale, o)
    else:
        if row_scale is not None:
            coef = coef * row_scale[block.edge_dst()]
        with threads_for(_work_of(block, g.shape[1])):
            _cpu.spmm_weighted_gather(ti, td, coef.numpy(), t_eid.numpy(), g_np, no_scale, o)
    return out


def aggregate(indptr: torch.Tensor, indices: torch.Tensor, x: torch.Tensor, *, num_dst: int,
              reduce: Reduce = "sum", edge_weight: torch.Tensor | None = None,
              norm: Norm = None, backend: Backend = "auto",
              block: CSCBlock | None = None, **triton_options) -> torch.Tensor:
    """Aggregate source features into destinations of a block.

    ``out[u] = s_u * sum_{e: v -> u} c_e * x[v]`` where ``c_e`` is ``edge_weight[e]``
    (1 if None) times the GCN coefficient if ``norm="gcn"``, and ``s_u`` is
    ``1 / max(deg_dst(u), 1)`` for ``reduce="mean"``, else 1.

    Args:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets by destination.
        indices: int64 ``(E,)`` local source IDs in ``[0, x.shape[0])``.
        x: float ``(num_src, F)`` source features (float16/bfloat16 are computed in
            float32 on the CPU path and returned in their own dtype).
        num_dst: number of destinations (``len(indptr) - 1``, ``<= num_src``).
        reduce: ``"sum"`` or ``"mean"``.
        edge_weight: optional float ``(E,)`` per-edge weights (gradient flows to it).
        norm: ``None`` or ``"gcn"`` (in-block symmetric normalisation; only with
            ``reduce="sum"``).
        backend: ``"auto"``, ``"cpu"``, ``"triton"`` or ``"reference"``.
        block: optional :class:`CSCBlock` for ``(indptr, indices)``; by default one is
            looked up in (or added to) a small cache keyed by the tensors' identity.
        **triton_options: ``block_x``, ``block_y``, ``block_k`` (tile sizes),
            ``degree_threshold`` (rows with more in-edges are split into chunks of
            that many edges and reduced separately), ``atomic_backward`` (bool).

    Returns:
        ``(num_dst, F)`` tensor of ``x.dtype`` on ``x.device``.

    Two destinations: node 0 receives from sources 1 and 2, node 1 from source 0.

    >>> import torch
    >>> indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([1, 2, 0])
    >>> x = torch.tensor([[1., 0.], [2., 1.], [4., 3.]])
    >>> aggregate(indptr, indices, x, num_dst=2)
    tensor([[6., 4.],
            [1., 0.]])
    >>> aggregate(indptr, indices, x, num_dst=2, reduce="mean")
    tensor([[3., 2.],
            [1., 0.]])
    >>> torch.equal(aggregate(indptr, indices, x, num_dst=2, backend="reference"),
    ...             aggregate(indptr, indices, x, num_dst=2, backend="cpu"))
    True
    """
    _check_float("x", x, 2)
    if reduce not in ("sum", "mean"):
        raise ValueError(f"'reduce' must be 'sum' or 'mean' (got {reduce!r})")
    if norm not in (None, "gcn"):
        raise ValueError(f"'norm' must be None or 'gcn' (got {norm!r})")
    if norm == "gcn" and reduce != "sum":
        raise ValueError(f"'norm'='gcn' needs reduce='sum' (got reduce={reduce!r})")
    backend = _resolve_backend(backend, x.device)
    block = _block_for(block, indptr, indices, num_dst, x.shape[0])
    _check_device("x", x, block.device)
    if edge_weight is not None:
        _check_float("edge_weight", edge_weight, 1)
        _check_device("edge_weight", edge_weight, block.device)
        if edge_weight.shape[0] != block.num_edges:
            raise ValueError(f"'edge_weight' must have E={block.num_edges} elements "
                             f"(got {edge_weight.shape[0]})")
    if backend == "reference":
        return reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce,
                                   edge_weight=edge_weight, norm=norm).to(x.dtype)
    return _AggregateFunction.apply(x, edge_weight, block, reduce, norm, backend,
                                    _triton_options(triton_options))


def _block_for(block: CSCBlock | None, indptr: torch.Tensor, indices: torch.Tensor,
               num_dst: int, num_src: int) -> CSCBlock:
    if block is None:
        return get_block(indptr, indices, num_dst, num_src)
    if not isinstance(block, CSCBlock):
        raise ValueError(f"'block' must be a CSCBlock (got {type(block).__name__})")  # noqa: TRY004
    if block.indptr is not indptr or block.indices is not indices:
        raise ValueError("'block' must be built from the given indptr and indices tensors")
    if block.num_dst != num_dst or block.num_src != num_src:
        raise ValueError(f"'block' has num_dst={block.num_dst}, num_src={block.num_src}; "
                         f"the call has num_dst={num_dst}, num_src={num_src}")
    return block


_TRITON_OPTION_NAMES = ("block_x", "block_y", "block_k", "degree_threshold", "atomic_backward")


def _triton_options(options: dict) -> dict:
    for name in options:
        if name not in _TRITON_OPTION_NAMES:
            raise ValueError(f"unknown option {name!r}; expected one of {_TRITON_OPTION_NAMES}")
    return dict(options)


# =========================================================================== GAT pieces


class _SddmmScoresFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a_src: torch.Tensor, a_dst: torch.Tensor, block: CSCBlock,
                negative_slope: float) -> torch.Tensor:
        cdtype = _compute_dtype(a_src.dtype)
        s = a_src.detach().to(cdtype).contiguous()
        d = a_dst.detach().to(cdtype).contiguous()
        out = torch.empty(block.num_edges, s.shape[1], dtype=cdtype)
        with threads_for(_work_of(block, s.shape[1])):
            _cpu.sddmm_add_leaky(_np(block.indptr), _np(block.indices), s.numpy(), d.numpy(),
                                 negative_slope, out.numpy())
        ctx.block = block
        ctx.negative_slope = negative_slope
        ctx.dtypes = (a_src.dtype, a_dst.dtype)
        ctx.save_for_backward(s, d)
        return out.to(a_src.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        s, d = ctx.saved_tensors
        block: CSCBlock = ctx.block
        g = grad.detach().to(s.dtype).contiguous()
        grad_pre = torch.empty_like(g)
        grad_dst = torch.empty_like(d)
        with threads_for(_work_of(block, s.shape[1])):
            _cpu.sddmm_add_leaky_backward_dst(_np(block.indptr), _np(block.indices), s.numpy(),
                                              d.numpy(), ctx.negative_slope, g.numpy(),
                                              grad_pre.numpy(), grad_dst.numpy())
        grad_src = None
        if ctx.needs_input_grad[0]:
            t_indptr, _, t_eid = block.transposed()
            grad_src = torch.empty_like(s)
            with threads_for(_work_of(block, s.shape[1])):
                _cpu.segment_sum_gather(t_indptr.numpy(), t_eid.numpy(), grad_pre.numpy(),
                                        grad_src.numpy())
            grad_src = grad_src.to(ctx.dtypes[0])
        return grad_src, grad_dst.to(ctx.dtypes[1]), None, None


def _torch_sddmm_scores(block: CSCBlock, a_src: torch.Tensor, a_dst: torch.Tensor,
                        negative_slope: float) -> torch.Tensor:
    """Device-agnostic path (used on CUDA): gathers and an elementwise leaky ReLU,
    differentiable by torch autograd."""
    z = a_src[block.indices] + a_dst[block.edge_dst()]
    return torch.nn.functional.leaky_relu(z, negative_slope)


def sddmm_scores(indptr: torch.Tensor, indices: torch.Tensor, a_src: torch.Tensor,
                 a_dst: torch.Tensor, *, negative_slope: float = 0.2,
                 backend: Backend = "auto", block: CSCBlock | None = None) -> torch.Tensor:
    """GAT attention logits per edge.

    Args:
        indptr, indices: the block (see module docstring).
        a_src: float ``(num_src, H)``, ``<a_s, z_v>`` per source and head.
        a_dst: float ``(num_dst, H)``, ``<a_d, z_u>`` per destination and head.
        negative_slope: leaky ReLU slope (GAT uses 0.2).
        backend: ``"auto"``, ``"cpu"``, ``"triton"`` (torch gathers) or
            ``"reference"``.

    Returns:
        ``(E, H)`` tensor ``leaky_relu(a_src[src_e] + a_dst[dst_e])`` of a_src's dtype.
    """
    _check_float("a_src", a_src, 2)
    _check_float("a_dst", a_dst, 2)
    if a_dst.shape[1] != a_src.shape[1]:
        raise ValueError(f"'a_dst' must have H={a_src.shape[1]} columns like a_src "
                         f"(got {a_dst.shape[1]})")
    num_dst = a_dst.shape[0]
    backend = _resolve_backend(backend, a_src.device)
    block = _block_for(block, indptr, indices, num_dst, a_src.shape[0])
    _check_device("a_src", a_src, block.device)
    _check_device("a_dst", a_dst, block.device)
    if backend == "reference":
        return reference_sddmm_scores(indptr, indices, a_src, a_dst,
                                      negative_slope).to(a_src.dtype)
    if backend == "triton":
        return _torch_sddmm_scores(block, a_src, a_dst, negative_slope)
    return _SddmmScoresFunction.apply(a_src, a_dst, block, float(negative_slope))


class _EdgeSoftmaxFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, scores: torch.Tensor, indptr: torch.Tensor, backend: str) -> torch.Tensor:
        s = scores.detach().to(_compute_dtype(scores.dtype)).contiguous()
        if backend == "cpu":
            alpha = torch.empty_like(s)
            with threads_for(s.numel()):
                _cpu.edge_softmax_forward(_np(indptr), s.numpy(), alpha.numpy())
        else:
            from . import triton as _tr
            alpha = _tr.edge_softmax_forward(indptr, s)
        ctx.indptr = indptr
        ctx.backend = backend
        ctx.dtype = scores.dtype
        ctx.save_for_backward(alpha)
        return alpha.to(scores.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (alpha,) = ctx.saved_tensors
        g = grad.detach().to(alpha.dtype).contiguous()
        if ctx.backend == "cpu":
            out = torch.empty_like(alpha)
            with threads_for(alpha.numel()):
                _cpu.edge_softmax_backward(_np(ctx.indptr), alpha.numpy(), g.numpy(), out.numpy())
        else:
            from . import triton as _tr
            out = _tr.edge_softmax_backward(ctx.indptr, alpha, g)
        return out.to(ctx.dtype), None, None


def edge_softmax(indptr: torch.Tensor, scores: torch.Tensor, *,
                 backend: Backend = "auto") -> torch.Tensor:
    """Softmax of per-edge scores over the in-edges of each destination.

    ``alpha[e, h] = exp(s[e,h] - m[u,h]) / sum_{e' -> u} exp(s[e',h] - m[u,h])`` with
    ``m[u,h]`` the row maximum (numerically stable). Rows without edges produce no
    entries.

    Args:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets (``indptr[-1] == E``).
        scores: float ``(E, H)``.
        backend: ``"auto"``, ``"cpu"``, ``"triton"`` or ``"reference"``.

    Returns:
        ``(E, H)`` tensor of scores' dtype; differentiable w.r.t. scores.
    """
    _check_float("scores", scores, 2)
    if not isinstance(indptr, torch.Tensor) or indptr.dim() != 1 or \
            indptr.dtype != torch.int64 or indptr.shape[0] == 0:
        raise ValueError(f"'indptr' must be a non-empty 1-D int64 tensor "
                         f"(got {_describe(indptr)})")
    _check_device("scores", scores, indptr.device)
    if int(indptr[0]) != 0 or int(indptr[-1]) != scores.shape[0] or \
            bool((indptr[1:] < indptr[:-1]).any()):
        raise ValueError(f"'indptr' must rise from 0 to E=scores.shape[0]={scores.shape[0]} "
                         f"(got {int(indptr[0])} .. {int(indptr[-1])})")
    backend = _resolve_backend(backend, scores.device)
    if backend == "reference":
        return reference_edge_softmax(indptr, scores).to(scores.dtype)
    return _EdgeSoftmaxFunction.apply(scores, indptr, backend)


class _AggregateHeadsFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor, alpha: torch.Tensor, block: CSCBlock, backend: str,
                options: dict) -> torch.Tensor:
        cdtype = _compute_dtype(x.dtype)
        xc = x.detach().to(cdtype).contiguous()
        ac = alpha.detach().to(cdtype).contiguous()
        if backend == "cpu":
            out = torch.empty(block.num_dst, xc.shape[1], xc.shape[2], dtype=cdtype)
            ident = _identity_index(block)
            with threads_for(_work_of(block, xc.shape[1] * xc.shape[2])):
                _cpu.spmm_heads(_np(block.indptr), _np(block.indices), ac.numpy(), ident.numpy(),
                                xc.numpy(), out.numpy())
        else:
            from . import triton as _tr
            out = _tr.spmm_heads(block, xc, ac, **options)
        ctx.block, ctx.backend, ctx.options = block, backend, options
        ctx.dtypes = (x.dtype, alpha.dtype)
        ctx.save_for_backward(xc, ac)
        return out.to(x.dtype)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor):
        xc, ac = ctx.saved_tensors
        block: CSCBlock = ctx.block
        g = grad_out.detach().to(xc.dtype).contiguous()
        grad_x = grad_alpha = None
        if ctx.backend == "cpu":
            if ctx.needs_input_grad[0]:
                t_indptr, t_dst, t_eid = block.transposed()
                grad_x = torch.empty_like(xc)
                with threads_for(_work_of(block, xc.shape[1] * xc.shape[2])):
                    _cpu.spmm_heads(t_indptr.numpy(), t_dst.numpy(), ac.numpy(), t_eid.numpy(),
                                    g.numpy(), grad_x.numpy())
            if ctx.needs_input_grad[1]:
                grad_alpha = torch.empty_like(ac)
                with threads_for(_work_of(block, xc.shape[1] * xc.shape[2])):
                    _cpu.sddmm_dot_heads(_np(block.indptr), _np(block.indices), g.numpy(),
                                         xc.numpy(), grad_alpha.numpy())
        else:
            from . import triton as _tr
            if ctx.needs_input_grad[0]:
                grad_x = _tr.spmm_heads_transposed(block, g, ac, **ctx.options)
            if ctx.needs_input_grad[1]:
                grad_alpha = _tr.sddmm_dot_heads(block, g, xc, **ctx.options)
        if grad_x is not None:
            grad_x = grad_x.to(ctx.dtypes[0])
        if grad_alpha is not None:
            grad_alpha = grad_alpha.to(ctx.dtypes[1])
        return grad_x, grad_alpha, None, None, None


def _identity_index(block: CSCBlock) -> torch.Tensor:
    return block._memo("identity_index", lambda: torch.arange(block.num_edges,
                                                              device=block.device))


def aggregate_heads(indptr: torch.Tensor, indices: torch.Tensor, x: torch.Tensor,
                    alpha: torch.Tensor, *, backend: Backend = "auto",
                    block: CSCBlock | None = None, **triton_options) -> torch.Tensor:
    """Multi-head weighted aggregation (GAT's message passing).

    ``out[u, h, :] = sum_{e: v -> u} alpha[e, h] * x[v, h, :]``.

    Args:
        indptr, indices: the block; ``num_dst = len(indptr) - 1``.
        x: float ``(num_src, H, D)``.
        alpha: float ``(E, H)`` per-edge, per-head coefficients (e.g. from
            :func:`edge_softmax`).
        backend: ``"auto"``, ``"cpu"``, ``"triton"`` or ``"reference"``.
        **triton_options: as for :func:`aggregate`.

    Returns:
        ``(num_dst, H, D)`` tensor of x's dtype; differentiable w.r.t. x and alpha.
    """
    _check_float("x", x, 3)
    _check_float("alpha", alpha, 2)
    if alpha.shape[1] != x.shape[1]:
        raise ValueError(f"'alpha' must have H={x.shape[1]} columns (got {alpha.shape[1]})")
    if not isinstance(indptr, torch.Tensor) or indptr.dim() != 1:
        raise ValueError(f"'indptr' must be a 1-D int64 tensor (got {_describe(indptr)})")
    num_dst = indptr.shape[0] - 1
    backend = _resolve_backend(backend, x.device)
    block = _block_for(block, indptr, indices, num_dst, x.shape[0])
    _check_device("x", x, block.device)
    _check_device("alpha", alpha, block.device)
    if alpha.shape[0] != block.num_edges:
        raise ValueError(f"'alpha' must have E={block.num_edges} rows (got {alpha.shape[0]})")
    if backend == "reference":
        return reference_aggregate_heads(indptr, indices, x, alpha).to(x.dtype)
    return _AggregateHeadsFunction.apply(x, alpha, block, backend,
                                         _triton_options(triton_options))
