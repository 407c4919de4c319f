"""Triton kernels behind :mod:`graphpipe.ops.aggregate` (GPU path).

Memory-Aware SpMM (FastGL §4.4-4.5) with WiseGraph's degree-grouped tasks:

- **Tiles.** One program handles ``BLOCK_X`` *tasks* (a task is a run of edges
  ``[start, end)`` that sums into one output row) times ``BLOCK_Y`` feature columns.
  The partial sums stay in registers (``acc[BLOCK_X, BLOCK_Y]``, Triton's stand-in for
  FastGL's shared-memory ``ĥ``); neighbour IDs and weights are loaded ``BLOCK_K`` at a
  time (``[BLOCK_X, BLOCK_K]``), the source rows gathered as a
  ``[BLOCK_X, BLOCK_K, BLOCK_Y]`` tile and reduced over the ``K`` axis in a fixed
  order, and every output element is stored once. No atomics: the forward result is
  deterministic. Defaults ``BLOCK_X = 8, BLOCK_Y = 32`` (FastGL), ``BLOCK_K = 8``.
- **Degree grouping (gTasks).** Rows with in-degree ``<= degree_threshold`` (default
  32, WiseGraph's GCN split) are one task each, ordered by degree so that the
  ``BLOCK_X`` rows of a program have near-equal degree (the loop runs to the tile's
  maximum degree, so sorting removes most masked-out iterations). Rows above the
  threshold are split into chunks of ``degree_threshold`` edges; a second launch
  reduces the chunks into partial rows and a third sums each heavy row's partials in
  chunk order (again without atomics, deterministic). Every launch sees tasks of
  near-equal size. The task lists are built with torch ops on the device, once per
  block and threshold, and cached on the :class:`~graphpipe.ops.aggregate.CSCBlock`.
- **Backward.** By default the gradient w.r.t. ``x`` runs the same kernel over the
  block's transposed copy (CSR by source, cached on the block): no atomics,
  deterministic. With ``atomic_backward=True`` it instead walks the forward tasks and
  scatters ``w_e * grad_out[u]`` into ``grad_x`` with ``tl.atomic_add`` (FastGL's
  artifact; saves building the transpose, but the summation order, hence the last
  bits, vary between runs). Gradients w.r.t. edge weights / attention are an SDDMM
  kernel (one program per ``BLOCK_E`` edges and head, dot products over columns).

On machines without a GPU these kernels are exercised with ``TRITON_INTERPRET=1`` on
CPU tensors (tests/test_aggregate_triton.py).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

DEFAULTS = {"block_x": 8, "block_y": 32, "block_k": 8, "degree_threshold": 32, "atomic_backward": False}


# =========================================================================== kernels


@triton.jit
def _spmm_task_kernel(task_start, task_end, task_row, num_tasks,
                      indices, weight, weight_index, row_scale, x, out,
                      num_cols, x_stride, out_stride, head_dim, num_heads,
                      HAS_WEIGHT: tl.constexpr, HAS_WINDEX: tl.constexpr,
                      PER_HEAD: tl.constexpr, HAS_SCALE: tl.constexpr,
                      ACC_DTYPE: tl.constexpr, BLOCK_X: tl.constexpr, BLOCK_Y: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    """out[row_t, c] = s_row * sum_{e in [start_t, end_t)} w_e(c) * x[indices[e], c]."""
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)
    tasks = pid_x * BLOCK_X + tl.arange(0, BLOCK_X)
    t_mask = tasks < num_tasks
    start = tl.load(task_start + tasks, mask=t_mask, other=0)
    end = tl.load(task_end + tasks, mask=t_mask, other=0)
    deg = end - start
    max_deg = tl.max(deg, axis=0)
    cols = pid_y * BLOCK_Y + tl.arange(0, BLOCK_Y)
    c_mask = cols < num_cols
    acc = tl.zeros([BLOCK_X, BLOCK_Y], dtype=ACC_DTYPE)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        e_mask = (kk[None, :] < deg[:, None]) & t_mask[:, None]
        edges = start[:, None] + kk[None, :]
        nbr = tl.load(indices + edges, mask=e_mask, other=0)
        tile_mask = e_mask[:, :, None] & c_mask[None, None, :]
        vals = tl.load(x + nbr[:, :, None] * x_stride + cols[None, None, :], mask=tile_mask,
                       other=0.0).to(ACC_DTYPE)
        if HAS_WEIGHT:
            if HAS_WINDEX:
                widx = tl.load(weight_index + edges, mask=e_mask, other=0)
            else:
                widx = edges
            if PER_HEAD:
                heads = cols // head_dim
                w = tl.load(weight + widx[:, :, None] * num_heads + heads[None, None, :],
                            mask=tile_mask, other=0.0).to(ACC_DTYPE)
                vals = vals * w
            else:
                w = tl.load(weight + widx, mask=e_mask, other=0.0).to(ACC_DTYPE)
                vals = vals * w[:, :, None]
        acc += tl.sum(vals, axis=1)
    rows = tl.load(task_row + tasks, mask=t_mask, other=0)
    if HAS_SCALE:
        scale = tl.load(row_scale + rows, mask=t_mask, other=0.0).to(ACC_DTYPE)
        acc = acc * scale[:, None]
    tl.store(out + rows[:, None] * out_stride + cols[None, :], acc,
             mask=t_mask[:, None] & c_mask[None, :])


@triton.jit
def _scatter_task_kernel(task_start, task_end, task_row, num_tasks,
                         indices, weight, row_scale, grad_out, grad_x,
                         num_cols, g_stride, gx_stride, head_dim, num_heads,
                         HAS_WEIGHT: tl.constexpr, PER_HEAD: tl.constexpr,
                         HAS_SCALE: tl.constexpr, ACC_DTYPE: tl.constexpr,
                         BLOCK_X: tl.constexpr, BLOCK_Y: tl.constexpr, BLOCK_K: tl.constexpr):
    """Atomic backward: grad_x[indices[e], c] += w_e(c) * s_row * grad_out[row_t, c]."""
    pid_x = tl.program_id(0)
    pid_y = tl.program_id(1)
    tasks = pid_x * BLOCK_X + tl.arange(0, BLOCK_X)
    t_mask = tasks < num_tasks
    start = tl.load(task_start + tasks, mask=t_mask, other=0)
    end = tl.load(task_end + tasks, mask=t_mask, other=0)
    rows = tl.load(task_row + tasks, mask=t_mask, other=0)
    deg = end - start
    max_deg = tl.max(deg, axis=0)
    cols = pid_y * BLOCK_Y + tl.arange(0, BLOCK_Y)
    c_mask = cols < num_cols
    g = tl.load(grad_out + rows[:, None] * g_stride + cols[None, :],
                mask=t_mask[:, None] & c_mask[None, :], other=0.0).to(ACC_DTYPE)
    if HAS_SCALE:
        scale = tl.load(row_scale + rows, mask=t_mask, other=0.0).to(ACC_DTYPE)
        g = g * scale[:, None]
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        e_mask = (kk[None, :] < deg[:, None]) & t_mask[:, None]
        edges = start[:, None] + kk[None, :]
        nbr = tl.load(indices + edges, mask=e_mask, other=0)
        tile_mask = e_mask[:, :, None] & c_mask[None, None, :]
        vals = g[:, None, :] + tl.zeros([BLOCK_X, BLOCK_K, BLOCK_Y], dtype=ACC_DTYPE)
        if HAS_WEIGHT:
            if PER_HEAD:
                heads = cols // head_dim
                w = tl.load(weight + edges[:, :, None] * num_heads + heads[None, None, :],
                            mask=tile_mask, other=0.0).to(ACC_DTYPE)
                vals = vals * w
            else:
                w = tl.load(weight + edges, mask=e_mask, other=0.0).to(ACC_DTYPE)
                vals = vals * w[:, :, None]
        tl.atomic_add(grad_x + nbr[:, :, None] * gx_stride + cols[None, None, :], vals,
                      mask=tile_mask)


@triton.jit
def _sddmm_dot_kernel(edge_dst, indices, num_edges, dst_feat, src_feat, out,
                      d_stride, s_stride, head_dim, num_heads,
                      ACC_DTYPE: tl.constexpr, BLOCK_E: tl.constexpr, BLOCK_F: tl.constexpr):
    """out[e, h] = sum_{c in head h} dst_feat[dst_e, c] * src_feat[src_e, c]."""
    pid_e = tl.program_id(0)
    head = tl.program_id(1)
    edges = pid_e * BLOCK_E + tl.arange(0, BLOCK_E)
    e_mask = edges < num_edges
    dst = tl.load(edge_dst + edges, mask=e_mask, other=0)
    src = tl.load(indices + edges, mask=e_mask, other=0)
    acc = tl.zeros([BLOCK_E], dtype=ACC_DTYPE)
    for c0 in range(0, head_dim, BLOCK_F):
        cc = c0 + tl.arange(0, BLOCK_F)
        cols = head * head_dim + cc
        m = e_mask[:, None] & (cc < head_dim)[None, :]
        a = tl.load(dst_feat + dst[:, None] * d_stride + cols[None, :], mask=m,
                    other=0.0).to(ACC_DTYPE)
        b = tl.load(src_feat + src[:, None] * s_stride + cols[None, :], mask=m,
                    other=0.0).to(ACC_DTYPE)
        acc += tl.sum(a * b, axis=1)
    tl.store(out + edges * num_heads + head, acc, mask=e_mask)


# =========================================================================== task plans


class TaskPlan:
    """Degree-grouped tasks for one compressed structure (forward CSC or transposed CSR).

    Attributes (int64 tensors on the structure's device):
        light_start, light_end, light_row: one task per row of degree ``<= threshold``,
            rows ordered by degree (stable).
        chunk_start, chunk_end: ``threshold``-edge chunks of the heavy rows, in row
            then edge order; chunk ``i`` sums into partial row ``i``.
        heavy_start, heavy_end, heavy_row: per heavy row, its range of partial rows.
        chunk_ids: ``arange(num_chunks)``, the "indices" of the reduce launch.
    """

    def __init__(self, indptr: torch.Tensor, threshold: int) -> None:
        device = indptr.device
        deg = indptr[1:] - indptr[:-1]
        heavy = deg > threshold
        light_rows = torch.nonzero(~heavy).flatten()
        order = torch.argsort(deg[light_rows], stable=True)
        self.light_row = light_rows[order].contiguous()
        self.light_start = indptr[self.light_row].contiguous()
        self.light_end = indptr[self.light_row + 1].contiguous()
        heavy_rows = torch.nonzero(heavy).flatten()
        self.heavy_row = heavy_rows.contiguous()
        hdeg = deg[heavy_rows]
        n_chunks = (hdeg + threshold - 1) // threshold
        chunk_ptr = torch.zeros(heavy_rows.shape[0] + 1, dtype=torch.int64, device=device)
        torch.cumsum(n_chunks, 0, out=chunk_ptr[1:])
        total = int(chunk_ptr[-1]) if heavy_rows.numel() else 0
        owner = torch.repeat_interleave(torch.arange(heavy_rows.shape[0], device=device),
                                        n_chunks, output_size=total)
        local = torch.arange(total, device=device) - chunk_ptr[owner]
        row_start = indptr[heavy_rows][owner]
        self.chunk_start = (row_start + local * threshold).contiguous()
        self.chunk_end = torch.minimum(self.chunk_start + threshold,
                                       indptr[heavy_rows + 1][owner]).contiguous()
        self.chunk_ids = torch.arange(total, device=device)
        self.heavy_start = chunk_ptr[:-1].contiguous()
        self.heavy_end = chunk_ptr[1:].contiguous()
        self.num_chunks = total


def _plan(block, which: str, threshold: int) -> TaskPlan:
    def make() -> TaskPlan:
        indptr = block.indptr if which == "forward" else block.transposed()[0]
        return TaskPlan(indptr, threshold)
    return block._memo(("triton_plan", which, threshold), make)


def _options(options: dict) -> dict:
    opts = dict(DEFAULTS)
    opts.update(options)
    for name in ("block_x", "block_y", "block_k"):
        v = opts[name]
        if not isinstance(v, int) or v < 1 or v & (v - 1):
            raise ValueError(f"'{name}' must be a power of two (got {v!r})")
    if opts["block_x"] * opts["block_y"] > 1024:
        raise ValueError(f"'block_x' * 'block_y' must be <= 1024 "
                         f"(got {opts['block_x']} * {opts['block_y']})")
    t = opts["degree_threshold"]
    if not isinstance(t, int) or t < 1:
        raise ValueError(f"'degree_threshold' must be a positive int (got {t!r})")
    return opts


def _acc_dtype(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


# =========================================================================== launches


def _launch_tasks(start, end, row, indices, weight, weight_index, row_scale, x2, out2,
                  head_dim: int, num_heads: int, per_head: bool, opts: dict) -> None:
    num_tasks = start.shape[0]
    num_cols = x2.shape[1]
    if num_tasks == 0 or num_cols == 0:
        return
    dummy = start  # any tensor: never read when the matching flag is off
    grid = (triton.cdiv(num_tasks, opts["block_x"]), triton.cdiv(num_cols, opts["block_y"]))
    _spmm_task_kernel[grid](
        start, end, row, num_tasks, indices,
        weight if weight is not None else dummy,
        weight_index if weight_index is not None else dummy,
        row_scale if row_scale is not None else dummy,
        x2, out2, num_cols, x2.stride(0), out2.stride(0), head_dim, num_heads,
        HAS_WEIGHT=weight is not None, HAS_WINDEX=weight_index is not None,
        PER_HEAD=per_head, HAS_SCALE=row_scale is not None,
        ACC_DTYPE=_acc_dtype(x2.dtype), BLOCK_X=opts["block_x"], BLOCK_Y=opts["block_y"],
        BLOCK_K=opts["block_k"])


def _grouped_spmm(plan: TaskPlan, indices, weight, weight_index, row_scale, x2,
                  num_rows: int, head_dim: int, num_heads: int, per_head: bool,
                  opts: dict) -> torch.Tensor:
    """Three launches: light rows, heavy-row chunks into partials, partials into rows."""
    out = torch.empty(num_rows, x2.shape[1], dtype=x2.dtype, device=x2.device)
    _launch_tasks(plan.light_start, plan.light_end, plan.light_row, indices, weight,
                  weight_index, row_scale, x2, out, head_dim, num_heads, per_head, opts)
    if plan.num_chunks:
        partial = torch.empty(plan.num_chunks, x2.shape[1], dtype=x2.dtype, device=x2.device)
        _launch_tasks(plan.chunk_start, plan.chunk_end, plan.chunk_ids, indices, weight,
                      weight_index, None, x2, partial, head_dim, num_heads, per_head, opts)
        _launch_tasks(plan.heavy_start, plan.heavy_end, plan.heavy_row, plan.chunk_ids, None,
                      None, row_scale, partial, out, head_dim, num_heads, False, opts)
    return out


def _atomic_transposed(block, weight, row_scale, g2, head_dim: int, num_heads: int,
                       per_head: bool, opts: dict) -> torch.Tensor:
    plan = _plan(block, "forward", opts["degree_threshold"])
    grad_x = torch.zeros(block.num_src, g2.shape[1], dtype=g2.dtype, device=g2.device)
    if g2.shape[1] == 0:
        return grad_x
    dummy = plan.light_start
    # heavy rows: their chunks scatter from the same output row
    heavy_owner_row = plan.heavy_row[torch.repeat_interleave(
        torch.arange(plan.heavy_row.shape[0], device=g2.device),
        plan.heavy_end - plan.heavy_start, output_size=plan.num_chunks)]
    for start, end, row in ((plan.light_start, plan.light_end, plan.light_row),
                            (plan.chunk_start, plan.chunk_end, heavy_owner_row)):
        num_tasks = start.shape[0]
        if num_tasks == 0:
            continue
        grid = (triton.cdiv(num_tasks, opts["block_x"]),
                triton.cdiv(g2.shape[1], opts["block_y"]))
        _scatter_task_kernel[grid](
            start, end, row, num_tasks, block.indices,
            weight if weight is not None else dummy,
            row_scale if row_scale is not None else dummy,
            g2, grad_x, g2.shape[1], g2.stride(0), grad_x.stride(0), head_dim, num_heads,
            HAS_WEIGHT=weight is not None, PER_HEAD=per_head, HAS_SCALE=row_scale is not None,
            ACC_DTYPE=_acc_dtype(g2.dtype), BLOCK_X=opts["block_x"], BLOCK_Y=opts["block_y"],
            BLOCK_K=opts["block_k"])
    return grad_x


def _sddmm(block, dst_feat2, src_feat2, head_dim: int, num_heads: int) -> torch.Tensor:
    out = torch.empty(block.num_edges, num_heads, dtype=src_feat2.dtype,
                      device=src_feat2.device)
    if block.num_edges == 0:
        return out
    if head_dim == 0:
        return out.zero_()
    block_e = 32
    block_f = min(64, triton.next_power_of_2(head_dim))
    grid = (triton.cdiv(block.num_edges, block_e), num_heads)
    _sddmm_dot_kernel[grid](block.edge_dst(), block.indices, block.num_edges, dst_feat2,
                            src_feat2, out, dst_feat2.stride(0), src_feat2.stride(0),
                            head_dim, num_heads, ACC_DTYPE=_acc_dtype(src_feat2.dtype),
                            BLOCK_E=block_e, BLOCK_F=block_f)
    return out


# =========================================================================== host API


def spmm(block, x: torch.Tensor, coef: torch.Tensor | None, row_scale: torch.Tensor | None,
         **options) -> torch.Tensor:
    """``out[u] = s_u * sum_e coef_e * x[src_e]``; x ``(num_src, F)`` float32/64,
    coef ``(E,)`` or None, row_scale ``(num_dst,)`` or None -> ``(num_dst, F)``."""
    opts = _options(options)
    plan = _plan(block, "forward", opts["degree_threshold"])
    return _grouped_spmm(plan, block.indices, coef, None, row_scale, x.contiguous(),
                         block.num_dst, x.shape[1], 1, False, opts)


def spmm_transposed(block, g: torch.Tensor, coef: torch.Tensor | None,
                    row_scale: torch.Tensor | None, **options) -> torch.Tensor:
    """``grad_x = A_w^T diag(row_scale) g``: ``(num_src, F)``."""
    opts = _options(options)
    g = g.contiguous()
    if opts["atomic_backward"]:
        return _atomic_transposed(block, coef, row_scale, g, g.shape[1], 1, False, opts)
    _t_indptr, t_dst, t_eid = block.transposed()
    plan = _plan(block, "transposed", opts["degree_threshold"])
    if coef is None and row_scale is None:
        weight, windex = None, None
    elif coef is None:
        weight, windex = row_scale, t_dst
    else:
        weight = coef * row_scale[block.edge_dst()] if row_scale is not None else coef
        weight, windex = weight.contiguous(), t_eid
    return _grouped_spmm(plan, t_dst, weight, windex, None, g, block.num_src, g.shape[1], 1,
                         False, opts)


def sddmm_dot(block, g: torch.Tensor, x: torch.Tensor, **options) -> torch.Tensor:
    """``out[e] = <g[dst_e], x[src_e]>``: ``(E,)``."""
    _options(options)
    return _sddmm(block, g.contiguous(), x.contiguous(), g.shape[1], 1)[:, 0]


def spmm_heads(block, x: torch.Tensor, alpha: torch.Tensor, **options) -> torch.Tensor:
    """``out[u, h] = sum_e alpha[e, h] * x[src_e, h]``; x ``(num_src, H, D)``."""
    opts = _options(options)
    plan = _plan(block, "forward", opts["degree_threshold"])
    num_src, heads, dim = x.shape
    out = _grouped_spmm(plan, block.indices, alpha.contiguous(), None, None,
                        x.reshape(num_src, heads * dim).contiguous(), block.num_dst, dim,
                        heads, True, opts)
    return out.view(block.num_dst, heads, dim)


def spmm_heads_transposed(block, g: torch.Tensor, alpha: torch.Tensor,
                          **options) -> torch.Tensor:
    """``grad_x[v, h] = sum_{e from v} alpha[e, h] * g[dst_e, h]``: ``(num_src, H, D)``."""
    opts = _options(options)
    num_dst, heads, dim = g.shape
    g2 = g.reshape(num_dst, heads * dim).contiguous()
    if opts["atomic_backward"]:
        out = _atomic_transposed(block, alpha.contiguous(), None, g2, dim, heads, True, opts)
    else:
        _, t_dst, t_eid = block.transposed()
        plan = _plan(block, "transposed", opts["degree_threshold"])
        out = _grouped_spmm(plan, t_dst, alpha.contiguous(), t_eid, None, g2, block.num_src,
                            dim, heads, True, opts)
    return out.view(block.num_src, heads, dim)


def sddmm_dot_heads(block, g: torch.Tensor, x: torch.Tensor, **options) -> torch.Tensor:
    """``out[e, h] = <g[dst_e, h, :], x[src_e, h, :]>``: ``(E, H)``."""
    _options(options)
    num_dst, heads, dim = g.shape
    return _sddmm(block, g.reshape(num_dst, heads * dim).contiguous(),
                  x.reshape(x.shape[0], heads * dim).contiguous(), dim, heads)


# =========================================================================== edge softmax


@triton.jit
def _edge_softmax_fwd_kernel(rows_ptr, num_rows, indptr, scores, out, num_heads,
                             ACC_DTYPE: tl.constexpr, BLOCK_X: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    """Per (row tile, head): max, sum of exp, normalised write, BLOCK_K edges at a time."""
    pid = tl.program_id(0)
    head = tl.program_id(1)
    idx = pid * BLOCK_X + tl.arange(0, BLOCK_X)
    r_mask = idx < num_rows
    rows = tl.load(rows_ptr + idx, mask=r_mask, other=0)
    start = tl.load(indptr + rows, mask=r_mask, other=0)
    deg = tl.load(indptr + rows + 1, mask=r_mask, other=0) - start
    max_deg = tl.max(deg, axis=0)
    row_max = tl.full([BLOCK_X], float("-inf"), dtype=ACC_DTYPE)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        m = (kk[None, :] < deg[:, None]) & r_mask[:, None]
        s = tl.load(scores + (start[:, None] + kk[None, :]) * num_heads + head, mask=m,
                    other=float("-inf")).to(ACC_DTYPE)
        row_max = tl.maximum(row_max, tl.max(s, axis=1))
    row_max = tl.where(row_max == float("-inf"), 0.0, row_max)  # empty rows
    denom = tl.zeros([BLOCK_X], dtype=ACC_DTYPE)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        m = (kk[None, :] < deg[:, None]) & r_mask[:, None]
        s = tl.load(scores + (start[:, None] + kk[None, :]) * num_heads + head, mask=m,
                    other=float("-inf")).to(ACC_DTYPE)
        p = tl.exp(s - row_max[:, None])
        denom += tl.sum(p, axis=1)
    inv = 1.0 / tl.where(denom > 0, denom, 1.0)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        m = (kk[None, :] < deg[:, None]) & r_mask[:, None]
        ptr = (start[:, None] + kk[None, :]) * num_heads + head
        s = tl.load(scores + ptr, mask=m, other=float("-inf")).to(ACC_DTYPE)
        p = tl.exp(s - row_max[:, None]) * inv[:, None]
        tl.store(out + ptr, p, mask=m)


@triton.jit
def _edge_softmax_bwd_kernel(rows_ptr, num_rows, indptr, alpha, grad, out, num_heads,
                             ACC_DTYPE: tl.constexpr, BLOCK_X: tl.constexpr,
                             BLOCK_K: tl.constexpr):
    """grad_s = alpha * (g - sum_row(alpha * g))."""
    pid = tl.program_id(0)
    head = tl.program_id(1)
    idx = pid * BLOCK_X + tl.arange(0, BLOCK_X)
    r_mask = idx < num_rows
    rows = tl.load(rows_ptr + idx, mask=r_mask, other=0)
    start = tl.load(indptr + rows, mask=r_mask, other=0)
    deg = tl.load(indptr + rows + 1, mask=r_mask, other=0) - start
    max_deg = tl.max(deg, axis=0)
    dot = tl.zeros([BLOCK_X], dtype=ACC_DTYPE)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        m = (kk[None, :] < deg[:, None]) & r_mask[:, None]
        ptr = (start[:, None] + kk[None, :]) * num_heads + head
        a = tl.load(alpha + ptr, mask=m, other=0.0).to(ACC_DTYPE)
        g = tl.load(grad + ptr, mask=m, other=0.0).to(ACC_DTYPE)
        dot += tl.sum(a * g, axis=1)
    for k0 in range(0, max_deg, BLOCK_K):
        kk = k0 + tl.arange(0, BLOCK_K)
        m = (kk[None, :] < deg[:, None]) & r_mask[:, None]
        ptr = (start[:, None] + kk[None, :]) * num_heads + head
        a = tl.load(alpha + ptr, mask=m, other=0.0).to(ACC_DTYPE)
        g = tl.load(grad + ptr, mask=m, other=0.0).to(ACC_DTYPE)
        tl.store(out + ptr, a * (g - dot[:, None]), mask=m)


def _softmax_launch(kernel, indptr: torch.Tensor, first: torch.Tensor, second, out,
                    num_heads: int) -> None:
    num_rows = indptr.shape[0] - 1
    if num_rows == 0 or out.numel() == 0:
        return
    deg = indptr[1:] - indptr[:-1]
    rows = torch.argsort(deg, stable=True)  # degree-grouped tiles
    block_x, block_k = 8, 16
    grid = (triton.cdiv(num_rows, block_x), num_heads)
    args = (rows, num_rows, indptr, first) + ((second,) if second is not None else ()) + (
        out, num_heads)
    kernel[grid](*args, ACC_DTYPE=_acc_dtype(out.dtype), BLOCK_X=block_x, BLOCK_K=block_k)


def edge_softmax_forward(indptr: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """``(E, H)`` softmax of scores over each row's entries (rows with no entries: none)."""
    scores = scores.contiguous()
    out = torch.empty_like(scores)
    _softmax_launch(_edge_softmax_fwd_kernel, indptr, scores, None, out, scores.shape[1])
    return out


def edge_softmax_backward(indptr: torch.Tensor, alpha: torch.Tensor,
                          grad: torch.Tensor) -> torch.Tensor:
    """``(E, H)`` gradient of the scores given alpha and the gradient of alpha."""
    out = torch.empty_like(alpha)
    _softmax_launch(_edge_softmax_bwd_kernel, indptr, alpha.contiguous(), grad.contiguous(),
                    out, alpha.shape[1])
    return out
