"""Sparse (topology-induced) multi-head attention (TorchGT §3.2).

The attention *pattern* is a CSR over queries:

- ``indptr``: int64 ``(S_q + 1,)``; query ``i`` attends to the entries
  ``indptr[i]:indptr[i + 1]`` of ``indices``;
- ``indices``: int64 ``(nnz,)`` key positions in ``[0, S_k)``;
- per-entry tensors (``bias``, the bias gradient) are ``(nnz, H)`` in the same order.

For each head ``h`` and query ``i`` with entries ``e`` (key ``j_e``)::

    s_e   = scale · <q[i,h], k[j_e,h]>  (+ bias[e,h])
    out[i,h] = Σ_e softmax_e(s)·v[j_e,h]              (exact, max-subtracted)
    lse[i,h] = log Σ_e exp(s_e)                        (stored for the backward pass)

``scale`` defaults to ``1/sqrt(D)``. Definitions fixed here:

- **Rows with no entries** (or whose entries all score ``-inf``, e.g. a ``-inf``
  bias) give ``out = 0`` and ``lse = -inf``, and no gradient. Add self loops to
  avoid them (TorchGT's condition C1).
- **Duplicate entries** count once each (as in a scatter softmax); the dense
  reference needs a duplicate-free pattern.
- **compat="torchgt"**: the public TorchGT code's variant: the dot-product score is
  clamped to ``[-clamp, clamp]`` (5 by default) *before* the bias is added, and
  ``out = Σ exp(s_e)·v / (Σ exp(s_e) + eps)`` (``eps = 1e-6``). Empty rows then
  give 0 by construction. The kernels compute it max-subtracted
  (``lse = log(Σ exp(s) + eps)``), which is the same number without overflow. The
  gradient through the clamp is zero outside ``[-clamp, clamp]`` (torch.clamp's).

Backends (``backend=``): ``"cpu"`` (Numba, :mod:`.attention_cpu`), ``"triton"``
(:mod:`.attention_triton`), ``"torch"`` (gather/scatter with ``index_select`` /
``index_add``: TorchGT's public implementation, any device, O(nnz·H·D) memory; the
benchmark baseline), ``"reference"`` (dense masked, float64, O(S²): the oracle);
``"auto"`` = triton on CUDA, cpu otherwise.

The cpu and triton paths run as one :class:`torch.autograd.Function`: the forward
pass keeps ``O(S·H)`` extra (the row log-sum-exp); the backward pass computes dQ by
rows and dK/dV by keys through a by-key (CSC) copy of the pattern, built once per
pattern and cached on its :class:`AttentionPattern` (no atomics, deterministic). The
CPU kernels read heads-last ``(S, D, H)`` copies of q, k, v and the output gradient (one
parallel transpose each, so the per-entry work vectorises over heads), recompute scores
in the backward pass (no ``(nnz, H)`` scratch unless the bias gradient is wanted),
balance work by entries and split rows/keys longer than ``split`` entries (a global
token's) across threads (:mod:`.attention_cpu`). Memory is never ``O(S²)``.
"""

from __future__ import annotations

import math
import weakref
from typing import Literal

import numpy as np
import torch

from graphpipe.ops._core.backend import check_backend, resolve_backend

from ..aggregate import cpu as _agg_cpu
from . import cpu as _cpu
from .reference import Compat, _scores_setup, reference_sparse_attention

Backend = Literal["auto", "cpu", "triton", "torch", "reference"]
_BACKENDS = ("auto", "cpu", "triton", "torch", "reference")
_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

__all__ = [
    "AttentionPattern",
    "gather_scatter_attention",
    "get_pattern",
    "permute_pattern",
    "reference_sparse_attention",
    "sparse_attention",
]


# =========================================================================== pattern


class AttentionPattern:
    """A CSR attention pattern over queries plus its cached by-key copy.

    Attributes:
        indptr: int64 ``(num_queries + 1,)``.
        indices: int64 ``(nnz,)`` key positions in ``[0, num_keys)``.
        num_queries, num_keys, nnz.
    """

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, num_keys: int, *,
                 validate: bool = True) -> None:
        _check_index("indptr", indptr)
        _check_index("indices", indices)
        if indptr.shape[0] < 1:
            raise ValueError("'indptr' must have at least one element (got 0)")
        if indptr.device != indices.device:
            raise ValueError(f"'indices' must be on indptr's device {indptr.device} "
                             f"(got {indices.device})")
        if not isinstance(num_keys, int) or num_keys < 0:
            raise ValueError(f"'num_keys' must be a non-negative int (got {num_keys!r})")
        self.indptr = indptr
        self.indices = indices
        self.num_queries = int(indptr.shape[0]) - 1
        self.num_keys = int(num_keys)
        self.nnz = int(indices.shape[0])
        self._transposed: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._plans: dict[tuple[str, int], tuple[np.ndarray, ...]] = {}
        if validate:
            self._validate()

    def _validate(self) -> None:
        ip = self.indptr.detach().cpu().numpy()
        ix = self.indices.detach().cpu().numpy()
        code = _agg_cpu.validate_csc(ip, ix, self.num_keys)
        if code == 0:
            raise ValueError(f"'indptr' must start at 0 (got {int(ip[0])})")
        if code == 1:
            raise ValueError("'indptr' must be non-decreasing")
        if code == 2:
            raise ValueError(f"'indptr' must end at len(indices)={ix.shape[0]} (got {int(ip[-1])})")
        if code == 3:
            bad = ix[(ix < 0) | (ix >= self.num_keys)][0]
            raise ValueError(f"'indices' must lie in [0, num_keys={self.num_keys}) (got {int(bad)})")

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    def transposed(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The pattern by key: ``(t_indptr (num_keys + 1,), t_query (nnz,), t_eid (nnz,))``,
        int64; entry ``t`` of key ``j`` (``t_indptr[j] <= t < t_indptr[j + 1]``) is pattern
        entry ``t_eid[t]`` of query ``t_query[t]``, in increasing query order. Built once."""
        if self._transposed is None:
            if self.device.type == "cpu":
                ti, tq, te = _agg_cpu.transpose_csc(self.indptr.numpy(), self.indices.numpy(),
                                                    self.num_keys)
                self._transposed = (torch.from_numpy(ti), torch.from_numpy(tq),
                                    torch.from_numpy(te))
            else:
                te = torch.argsort(self.indices, stable=True)
                rows = torch.repeat_interleave(
                    torch.arange(self.num_queries, device=self.device),
                    self.indptr[1:] - self.indptr[:-1], output_size=self.nnz)
                ti = torch.zeros(self.num_keys + 1, dtype=torch.int64, device=self.device)
                torch.cumsum(torch.bincount(self.indices, minlength=self.num_keys), 0,
                             out=ti[1:])
                self._transposed = (ti, rows[te].contiguous(), te)
        return self._transposed

    def cpu_plan(self, by: Literal["rows", "keys"], target: int | None = None
                 ) -> tuple[np.ndarray, ...]:
        """The CPU kernels' work plan (:func:`.attention_cpu.build_plan`) over the rows
        (``by="rows"``) or over the by-key copy (``by="keys"``); built once."""
        target = _cpu.TARGET if target is None else int(target)
        key = (by, target)
        if key not in self._plans:
            ptr = self.indptr if by == "rows" else self.transposed()[0]
            self._plans[key] = _cpu.build_plan(ptr.numpy(), target)
        return self._plans[key]


def _check_index(name: str, t: object) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != 1 or t.dtype != torch.int64:
        raise ValueError(f"'{name}' must be a 1-D int64 tensor (got {_describe(t)})")


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dim()}-D {t.dtype} tensor of shape {tuple(t.shape)}"
    return type(t).__name__


_CACHE: dict[tuple[int, int, int], tuple[weakref.ref, weakref.ref, int, int, AttentionPattern]] = {}
_CACHE_SIZE = 16


def get_pattern(indptr: torch.Tensor, indices: torch.Tensor, num_keys: int) -> AttentionPattern:
    """The cached :class:`AttentionPattern` of these tensors (keyed by their identity and
    version, so the by-key copy is built once per pattern across layers and steps)."""
    _check_index("indptr", indptr)
    _check_index("indices", indices)
    key = (id(indptr), id(indices), int(num_keys))
    hit = _CACHE.get(key)
    if hit is not None:
        r_ptr, r_idx, v_ptr, v_idx, pattern = hit
        if (r_ptr() is indptr and r_idx() is indices and indptr._version == v_ptr
                and indices._version == v_idx):
            return pattern
        del _CACHE[key]
    pattern = AttentionPattern(indptr, indices, num_keys)
    for dead in [k for k, v in _CACHE.items() if v[0]() is None or v[1]() is None]:
        del _CACHE[dead]
    while len(_CACHE) >= _CACHE_SIZE:
        del _CACHE[next(iter(_CACHE))]
    _CACHE[key] = (weakref.ref(indptr), weakref.ref(indices), indptr._version,
                   indices._version, pattern)
    return pattern


def permute_pattern(indptr: torch.Tensor, indices: torch.Tensor, perm: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Relabel a square pattern by a permutation of the sequence.

    ``perm[p]`` is the old position at new position ``p``. Returns ``(new_indptr,
    new_indices, entry_order)``: new query ``p`` has the entries of old query
    ``perm[p]`` in their old order, keys relabelled to new positions;
    ``entry_order[e_new]`` is the old entry (to reorder per-entry tensors such as bias).
    """
    _check_index("indptr", indptr)
    _check_index("indices", indices)
    n = indptr.shape[0] - 1
    if perm.shape != (n,):
        raise ValueError(f"'perm' must have shape ({n},) (got {tuple(perm.shape)})")
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(n, device=perm.device)
    deg = indptr[1:] - indptr[:-1]
    new_deg = deg[perm]
    new_indptr = torch.zeros_like(indptr)
    torch.cumsum(new_deg, 0, out=new_indptr[1:])
    starts = indptr[:-1][perm]
    rows = torch.repeat_interleave(torch.arange(n, device=indptr.device), new_deg,
                                   output_size=int(indices.shape[0]))
    entry_order = starts[rows] + (torch.arange(indices.shape[0], device=indptr.device)
                                  - new_indptr[:-1][rows])
    return new_indptr, inverse[indices[entry_order]], entry_order


# =========================================================================== torch path


def gather_scatter_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             indptr: torch.Tensor, indices: torch.Tensor, *,
                             bias: torch.Tensor | None = None, scale: float | None = None,
                             compat: Compat = None, clamp: float = 5.0, eps: float = 1e-6
                             ) -> torch.Tensor:
    """Sparse attention with plain torch gathers and scatters (TorchGT's public code):
    ``index_select`` of q/k/v by entry, a scatter softmax, an ``index_add`` of the
    weighted values. Differentiable by torch autograd; any device; materialises
    ``(nnz, H, D)`` tensors. Returns ``(S_q, H, D)`` in q's dtype."""
    scale = _scores_setup(q, k, scale)
    num_q = q.shape[0]
    rows = torch.repeat_interleave(torch.arange(num_q, device=q.device), indptr[1:] - indptr[:-1],
                                   output_size=int(indices.shape[0]))
    s = (q.index_select(0, rows) * k.index_select(0, indices)).sum(-1) * scale   # (nnz, H)
    if compat == "torchgt":
        s = s.clamp(-clamp, clamp)
        if bias is not None:
            s = s + bias
        w = torch.exp(s)
        denom = torch.zeros(num_q, q.shape[1], dtype=s.dtype, device=q.device).index_add(
            0, rows, w) + eps
    else:
        if bias is not None:
            s = s + bias
        row_max = torch.full((num_q, q.shape[1]), -torch.inf, dtype=s.dtype, device=q.device
                             ).scatter_reduce(0, rows[:, None].expand_as(s), s.detach(), "amax")
        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
        w = torch.exp(s - row_max.index_select(0, rows))
        denom = torch.zeros(num_q, q.shape[1], dtype=s.dtype, device=q.device).index_add(
            0, rows, w)
        denom = torch.where(denom > 0, denom, torch.ones_like(denom))
    msg = w[..., None] * v.index_select(0, indices)
    out = torch.zeros_like(q, dtype=msg.dtype).index_add(0, rows, msg)
    return out / denom[..., None]


# =========================================================================== autograd


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _np_scalar(x: float, dtype: torch.dtype):
    return np.float64(x) if dtype == torch.float64 else np.float32(x)


def _cpu_view(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` detached in ``dtype``, C-contiguous (a copy only when needed)."""
    return t.detach().to(dtype).contiguous()


def _heads_last(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``(S, H, D)`` → a detached C-contiguous ``(S, D, H)`` copy in ``dtype`` (the CPU
    kernels' layout, :mod:`.attention_cpu`)."""
    src = t.detach().to(dtype)
    out = torch.empty((src.shape[0], src.shape[2], src.shape[1]), dtype=dtype)
    if src.numel():
        _cpu.heads_last(src.numpy(), out.numpy())
    return out


def _cpu_forward(pattern: AttentionPattern, qt, kt, vt, bc, scale, compat, clamp, eps,
                 target: int | None = None):
    """``(out (S_q, H, D), lse (S_q, H))`` of heads-last ``qt``, ``kt``, ``vt``."""
    cdtype = qt.dtype
    out = torch.empty((qt.shape[0], qt.shape[2], qt.shape[1]), dtype=cdtype)
    lse = torch.empty((qt.shape[0], qt.shape[2]), dtype=cdtype)
    b_np = bc.numpy() if bc is not None else np.empty((0, qt.shape[2]), dtype=qt.numpy().dtype)
    plan = pattern.cpu_plan("rows", target)
    _cpu.forward(pattern.indptr.numpy(), pattern.indices.numpy(), qt.numpy(), kt.numpy(),
                 vt.numpy(), b_np, bc is not None, _np_scalar(scale, cdtype), compat,
                 _np_scalar(clamp, cdtype), math.log(eps), out.numpy(), lse.numpy(), *plan,
                 _cpu.TARGET if target is None else int(target))
    return out, lse


def _cpu_backward(pattern: AttentionPattern, qt, kt, vt, bc, scale, compat, clamp, out, lse,
                  g_t, want_ds: bool, target: int | None = None):
    """``(dq, dk, dv, ds or None)``, the first three ``(S, H, D)``, from heads-last ``qt``,
    ``kt``, ``vt``, output gradient ``g_t`` and the forward output ``out (S_q, H, D)``."""
    cdtype = qt.dtype
    heads = qt.shape[2]
    t_indptr, t_query, t_eid = pattern.transposed()
    dq, dk, dv = (torch.empty((t.shape[0], heads, t.shape[1]), dtype=cdtype) for t in (qt, kt, vt))
    delta = torch.empty((qt.shape[0], heads), dtype=cdtype)
    ds_buf = torch.empty((pattern.nnz if want_ds else 0, heads), dtype=cdtype)
    b_np = bc.numpy() if bc is not None else np.empty((0, heads), dtype=qt.numpy().dtype)
    _cpu.backward(pattern.indptr.numpy(), pattern.indices.numpy(), t_indptr.numpy(),
                  t_query.numpy(), t_eid.numpy(), qt.numpy(), kt.numpy(), vt.numpy(), b_np,
                  bc is not None, _np_scalar(scale, cdtype), compat, _np_scalar(clamp, cdtype),
                  lse.numpy(), out.numpy(), g_t.numpy(), dq.numpy(), dk.numpy(), dv.numpy(),
                  delta.numpy(), ds_buf.numpy(), want_ds, *pattern.cpu_plan("rows", target),
                  *pattern.cpu_plan("keys", target),
                  _cpu.TARGET if target is None else int(target))
    return dq, dk, dv, (ds_buf if want_ds else None)


class _SparseAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, bias, pattern: AttentionPattern, scale: float, compat: bool,
                clamp: float, eps: float, backend: str, options: dict):
        cdtype = _compute_dtype(q.dtype)
        bc = _cpu_view(bias, cdtype) if bias is not None else None
        if backend == "cpu":  # kernels read heads-last (S, D, H), write (S, H, D)
            qc, kc, vc = (_heads_last(t, cdtype) for t in (q, k, v))
            out, lse = _cpu_forward(pattern, qc, kc, vc, bc, scale, compat, clamp, eps,
                                    options.get("split"))
        else:
            from . import triton as _tr
            qc, kc, vc = (_cpu_view(t, cdtype) for t in (q, k, v))
            out, lse = _tr.forward(pattern.indptr, pattern.indices, qc, kc, vc, bc, scale,
                                   compat, clamp, eps, **_triton_only(options))
        ctx.pattern, ctx.scale, ctx.compat, ctx.clamp = pattern, scale, compat, clamp
        ctx.backend, ctx.options = backend, options
        ctx.dtypes = (q.dtype, k.dtype, v.dtype, bias.dtype if bias is not None else None)
        ctx.save_for_backward(qc, kc, vc, bc, out, lse)
        ctx.mark_non_differentiable(lse)
        return out.to(q.dtype), lse

    @staticmethod
    def backward(ctx, grad_out, _grad_lse):
        qc, kc, vc, bc, out, lse = ctx.saved_tensors
        pattern: AttentionPattern = ctx.pattern
        want_ds = bc is not None and bool(ctx.needs_input_grad[3])
        if ctx.backend == "cpu":
            g = _heads_last(grad_out, qc.dtype)
            dq, dk, dv, ds_buf = _cpu_backward(pattern, qc, kc, vc, bc, ctx.scale, ctx.compat,
                                               ctx.clamp, out, lse, g, want_ds,
                                               ctx.options.get("split"))
        else:
            from . import triton as _tr
            g = grad_out.detach().to(qc.dtype).contiguous()
            delta = (g * out).sum(-1).contiguous()                    # (S_q, H)
            t_indptr, t_query, t_eid = pattern.transposed()
            dq, dk, dv, ds_buf = _tr.backward(pattern.indptr, pattern.indices, t_indptr,
                                              t_query, t_eid, qc, kc, vc, bc, lse, delta, g,
                                              ctx.scale, ctx.compat, ctx.clamp,
                                              **_triton_only(ctx.options))
        dq_t, dk_t, dv_t, db_t = ctx.dtypes
        grad_bias = ds_buf.to(db_t) if want_ds else None
        return (dq.to(dq_t), dk.to(dk_t), dv.to(dv_t), grad_bias,
                None, None, None, None, None, None, None)


def _triton_only(options: dict) -> dict:
    return {k: v for k, v in options.items() if k in _TRITON_OPTIONS}


# =========================================================================== public


def _check_float(name: str, t: object, dim: int) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != dim or t.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"'{name}' must be a {dim}-D floating tensor (got {_describe(t)})")


_TRITON_OPTIONS = ("block_m", "block_n")
_OPTIONS = (*_TRITON_OPTIONS, "split")


def sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     indptr: torch.Tensor, indices: torch.Tensor, *,
                     bias: torch.Tensor | None = None, scale: float | None = None,
                     compat: Compat = None, clamp: float = 5.0, eps: float = 1e-6,
                     backend: Backend = "auto", pattern: AttentionPattern | None = None,
                     return_lse: bool = False, **triton_options
                     ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Multi-head attention restricted to a sparse pattern (see the module docstring).

    Args:
        q: float ``(S_q, H, D)`` queries.
        k, v: float ``(S_k, H, D)`` keys and values.
        indptr: int64 ``(S_q + 1,)`` CSR offsets over queries.
        indices: int64 ``(nnz,)`` key position of every entry, in ``[0, S_k)``.
        bias: optional float ``(nnz, H)`` additive score bias per entry and head
            (e.g. Graphormer's spatial encoding); gradient flows to it.
        scale: score scale (default ``1/sqrt(D)``).
        compat: ``None`` (exact masked softmax) or ``"torchgt"`` (clamp + eps variant).
        clamp, eps: the torchgt mode's constants.
        backend: ``"auto"``, ``"cpu"``, ``"triton"``, ``"torch"`` or ``"reference"``.
        pattern: optional prebuilt :class:`AttentionPattern` of ``(indptr, indices)``;
            by default one is looked up in a small identity-keyed cache.
        return_lse: also return the row log-sum-exp ``(S_q, H)``.
        **triton_options: ``block_m`` (rows per program), ``block_n`` (entries per step)
            for the triton backend; ``split`` for the cpu backend: entries per unit of
            parallel work (default :data:`.attention_cpu.TARGET`); a row or key with more
            entries is split across threads.

    Returns:
        ``out (S_q, H, D)`` in q's dtype (and ``lse`` when asked; float32/float64).

    Query 0 attends to keys 0 and 1, query 1 to key 2; with zero queries every score is
    equal, so each output row is the mean of the values it attends to:

    >>> import torch
    >>> q, k = torch.zeros(2, 1, 2), torch.ones(3, 1, 2)          # (S, H=1, D=2)
    >>> v = torch.tensor([[1., 0.], [3., 2.], [5., 4.]]).reshape(3, 1, 2)
    >>> indptr, indices = torch.tensor([0, 2, 3]), torch.tensor([0, 1, 2])
    >>> out = sparse_attention(q, k, v, indptr, indices)
    >>> out.shape
    torch.Size([2, 1, 2])
    >>> out[:, 0]
    tensor([[2., 1.],
            [5., 4.]])
    >>> q = torch.tensor([[[1., -1.]], [[0.5, 2.]]])
    >>> torch.allclose(sparse_attention(q, k, v, indptr, indices, backend="cpu"),
    ...                sparse_attention(q, k, v, indptr, indices, backend="reference"))
    True
    """
    _check_float("q", q, 3)
    _check_float("k", k, 3)
    _check_float("v", v, 3)
    if k.shape != v.shape or k.shape[1:] != q.shape[1:]:
        raise ValueError(f"'k' and 'v' must have shape (S_k, {q.shape[1]}, {q.shape[2]}) "
                         f"(got {tuple(k.shape)} and {tuple(v.shape)})")
    if compat not in (None, "torchgt"):
        raise ValueError(f"'compat' must be None or 'torchgt' (got {compat!r})")
    check_backend(backend, _BACKENDS)
    for name in triton_options:
        if name not in _OPTIONS:
            raise ValueError(f"unknown option {name!r}; expected one of {_OPTIONS}")
    if "split" in triton_options and (not isinstance(triton_options["split"], int)
                                      or triton_options["split"] < 1):
        raise ValueError(f"'split' must be a positive int (got {triton_options['split']!r})")
    if pattern is None:
        pattern = get_pattern(indptr, indices, k.shape[0])
    elif not isinstance(pattern, AttentionPattern) or pattern.indptr is not indptr \
            or pattern.indices is not indices:
        raise ValueError("'pattern' must be an AttentionPattern built from indptr and indices")
    if pattern.num_queries != q.shape[0] or pattern.num_keys != k.shape[0]:
        raise ValueError(f"'indptr' must have S_q + 1 = {q.shape[0] + 1} elements and keys "
                         f"S_k = {k.shape[0]} (got {pattern.num_queries + 1}, {pattern.num_keys})")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.device != pattern.device:
            raise ValueError(f"'{name}' must be on the pattern's device {pattern.device} "
                             f"(got {t.device})")
    if bias is not None:
        _check_float("bias", bias, 2)
        if tuple(bias.shape) != (pattern.nnz, q.shape[1]):
            raise ValueError(f"'bias' must have shape (nnz={pattern.nnz}, H={q.shape[1]}) "
                             f"(got {tuple(bias.shape)})")
    backend = resolve_backend(backend, _BACKENDS, str(q.device))
    scale = _scores_setup(q, k, scale)
    if backend == "reference":
        out, lse = reference_sparse_attention(q, k, v, indptr, indices, bias=bias, scale=scale,
                                              compat=compat, clamp=clamp, eps=eps)
        out = out.to(q.dtype)
    elif backend == "torch":
        if return_lse:
            raise ValueError("'return_lse' is not available with backend='torch'")
        return gather_scatter_attention(q, k, v, indptr, indices, bias=bias, scale=scale,
                                        compat=compat, clamp=clamp, eps=eps)
    else:
        out, lse = _SparseAttentionFunction.apply(q, k, v, bias, pattern, scale,
                                                  compat == "torchgt", float(clamp),
                                                  float(eps), backend, dict(triton_options))
    return (out, lse) if return_lse else out
