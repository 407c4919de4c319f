"""Triton kernels behind :func:`graphpipe.ops.attention.sparse_attention` (GPU path).

- **Forward.** One program per (block of ``BLOCK_M`` query rows, head). The rows'
  queries stay in registers; their pattern entries are walked ``BLOCK_N`` at a time
  (``[BLOCK_M, BLOCK_N]`` entry tiles; the key and value rows are gathered as
  ``[BLOCK_M, BLOCK_N, BLOCK_D]`` tiles), with one online-softmax state (running
  max, running sum, accumulator) per row. Stores ``out`` and the row log-sum-exp.
- **Backward, by rows.** The same walk recomputes ``p = exp(s - lse)`` and
  ``ds = p·(dO·v - Δ)`` (``Δ = rowsum(dO ⊙ O)``), accumulates dQ and writes ``p`` and
  ``ds`` per entry (``(nnz, H)``, the bias gradient).
- **Backward, by keys.** One program per (block of keys, head) over the by-key copy of
  the pattern: ``dV_j = Σ p·dO_i``, ``dK_j = scale·Σ ds·Q_i``. No atomics.

Loops run to the largest row degree of the block; masked lanes cost time but not
correctness. Tested on the CPU with ``TRITON_INTERPRET=1`` (tests/test_attention_triton.py).
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

DEFAULTS = {"block_m": 16, "block_n": 16}


@triton.jit
def _fwd_kernel(indptr, indices, q, k, v, bias, out, lse, num_q, num_heads, dim,
                scale, clamp, log_eps,
                HAS_BIAS: tl.constexpr, COMPAT: tl.constexpr, ACC: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    h = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    r_mask = rows < num_q
    start = tl.load(indptr + rows, mask=r_mask, other=0)
    end = tl.load(indptr + rows + 1, mask=r_mask, other=0)
    deg = end - start
    max_deg = tl.max(deg, axis=0)
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    q_tile = tl.load(q + (rows[:, None] * num_heads + h) * dim + dd[None, :],
                     mask=r_mask[:, None] & d_mask[None, :], other=0.0).to(ACC)
    m = tl.full([BLOCK_M], float("-inf"), ACC)
    l_sum = tl.zeros([BLOCK_M], ACC)
    acc = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    for n0 in range(0, max_deg, BLOCK_N):
        nn = n0 + tl.arange(0, BLOCK_N)
        e_mask = (nn[None, :] < deg[:, None]) & r_mask[:, None]
        edges = start[:, None] + nn[None, :]
        j = tl.load(indices + edges, mask=e_mask, other=0)
        kv_off = ((j * num_heads + h) * dim)[:, :, None] + dd[None, None, :]
        kv_mask = e_mask[:, :, None] & d_mask[None, None, :]
        k_tile = tl.load(k + kv_off, mask=kv_mask, other=0.0).to(ACC)
        s = tl.sum(q_tile[:, None, :] * k_tile, axis=2) * scale
        if COMPAT:
            s = tl.minimum(tl.maximum(s, -clamp), clamp)
        if HAS_BIAS:
            s += tl.load(bias + edges * num_heads + h, mask=e_mask, other=0.0).to(ACC)
        s = tl.where(e_mask, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp(m - m_safe)
        p = tl.exp(s - m_safe[:, None])
        v_tile = tl.load(v + kv_off, mask=kv_mask, other=0.0).to(ACC)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * v_tile, axis=1)
        m = m_new
    empty = l_sum == 0.0
    row_lse = m + tl.log(tl.where(empty, 1.0, l_sum))
    if COMPAT:
        hi = tl.maximum(row_lse, log_eps)
        row_lse = hi + tl.log(tl.exp(row_lse - hi) + tl.exp(log_eps - hi))
    row_lse = tl.where(empty, float("-inf"), row_lse)
    w = tl.where(empty, 0.0, tl.exp(m - tl.where(empty, 0.0, row_lse)))
    o = acc * w[:, None]
    tl.store(out + (rows[:, None] * num_heads + h) * dim + dd[None, :], o,
             mask=r_mask[:, None] & d_mask[None, :])
    tl.store(lse + rows * num_heads + h, row_lse, mask=r_mask)


@triton.jit
def _bwd_rows_kernel(indptr, indices, q, k, v, bias, lse, delta, dout, dq, p_buf, ds_buf,
                     dsr_buf, num_q, num_heads, dim, scale, clamp,
                     HAS_BIAS: tl.constexpr, COMPAT: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    h = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    r_mask = rows < num_q
    start = tl.load(indptr + rows, mask=r_mask, other=0)
    end = tl.load(indptr + rows + 1, mask=r_mask, other=0)
    deg = end - start
    max_deg = tl.max(deg, axis=0)
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    row_off = (rows[:, None] * num_heads + h) * dim + dd[None, :]
    rd_mask = r_mask[:, None] & d_mask[None, :]
    q_tile = tl.load(q + row_off, mask=rd_mask, other=0.0).to(ACC)
    do_tile = tl.load(dout + row_off, mask=rd_mask, other=0.0).to(ACC)
    row_lse = tl.load(lse + rows * num_heads + h, mask=r_mask, other=float("-inf")).to(ACC)
    row_delta = tl.load(delta + rows * num_heads + h, mask=r_mask, other=0.0).to(ACC)
    live = row_lse != float("-inf")
    lse_safe = tl.where(live, row_lse, 0.0)
    dq_acc = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    for n0 in range(0, max_deg, BLOCK_N):
        nn = n0 + tl.arange(0, BLOCK_N)
        e_mask = (nn[None, :] < deg[:, None]) & r_mask[:, None]
        edges = start[:, None] + nn[None, :]
        j = tl.load(indices + edges, mask=e_mask, other=0)
        kv_off = ((j * num_heads + h) * dim)[:, :, None] + dd[None, None, :]
        kv_mask = e_mask[:, :, None] & d_mask[None, None, :]
        k_tile = tl.load(k + kv_off, mask=kv_mask, other=0.0).to(ACC)
        raw = tl.sum(q_tile[:, None, :] * k_tile, axis=2) * scale
        s = raw
        if COMPAT:
            s = tl.minimum(tl.maximum(raw, -clamp), clamp)
        if HAS_BIAS:
            s += tl.load(bias + edges * num_heads + h, mask=e_mask, other=0.0).to(ACC)
        ok = e_mask & live[:, None] & (s != float("-inf"))
        p = tl.where(ok, tl.exp(tl.where(ok, s, 0.0) - lse_safe[:, None]), 0.0)
        v_tile = tl.load(v + kv_off, mask=kv_mask, other=0.0).to(ACC)
        dp = tl.sum(do_tile[:, None, :] * v_tile, axis=2)
        ds = p * (dp - row_delta[:, None])
        tl.store(p_buf + edges * num_heads + h, p, mask=e_mask)
        tl.store(ds_buf + edges * num_heads + h, ds, mask=e_mask)
        if COMPAT:
            ds = tl.where((raw < -clamp) | (raw > clamp), 0.0, ds)
            tl.store(dsr_buf + edges * num_heads + h, ds, mask=e_mask)
        dq_acc += tl.sum(ds[:, :, None] * k_tile, axis=1) * scale
    tl.store(dq + row_off, dq_acc, mask=rd_mask)


@triton.jit
def _bwd_cols_kernel(t_indptr, t_query, t_eid, q, dout, p_buf, dsr_buf, dk, dv,
                     num_k, num_heads, dim, scale, ACC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    pid = tl.program_id(0)
    h = tl.program_id(1)
    keys = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    k_mask = keys < num_k
    start = tl.load(t_indptr + keys, mask=k_mask, other=0)
    end = tl.load(t_indptr + keys + 1, mask=k_mask, other=0)
    deg = end - start
    max_deg = tl.max(deg, axis=0)
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    dk_acc = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    dv_acc = tl.zeros([BLOCK_M, BLOCK_D], ACC)
    for n0 in range(0, max_deg, BLOCK_N):
        nn = n0 + tl.arange(0, BLOCK_N)
        t_mask = (nn[None, :] < deg[:, None]) & k_mask[:, None]
        slots = start[:, None] + nn[None, :]
        i = tl.load(t_query + slots, mask=t_mask, other=0)
        e = tl.load(t_eid + slots, mask=t_mask, other=0)
        p = tl.load(p_buf + e * num_heads + h, mask=t_mask, other=0.0).to(ACC)
        ds = tl.load(dsr_buf + e * num_heads + h, mask=t_mask, other=0.0).to(ACC)
        off = ((i * num_heads + h) * dim)[:, :, None] + dd[None, None, :]
        m3 = t_mask[:, :, None] & d_mask[None, None, :]
        do_tile = tl.load(dout + off, mask=m3, other=0.0).to(ACC)
        q_tile = tl.load(q + off, mask=m3, other=0.0).to(ACC)
        dv_acc += tl.sum(p[:, :, None] * do_tile, axis=1)
        dk_acc += tl.sum(ds[:, :, None] * q_tile, axis=1) * scale
    key_off = (keys[:, None] * num_heads + h) * dim + dd[None, :]
    kd_mask = k_mask[:, None] & d_mask[None, :]
    tl.store(dk + key_off, dk_acc, mask=kd_mask)
    tl.store(dv + key_off, dv_acc, mask=kd_mask)


def _acc(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _blocks(dim: int, options: dict) -> tuple[int, int, int]:
    opts = {**DEFAULTS, **options}
    return int(opts["block_m"]), int(opts["block_n"]), max(16, triton.next_power_of_2(dim))


def forward(indptr: torch.Tensor, indices: torch.Tensor, q: torch.Tensor, k: torch.Tensor,
            v: torch.Tensor, bias: torch.Tensor | None, scale: float, compat: bool,
            clamp: float, eps: float, **options) -> tuple[torch.Tensor, torch.Tensor]:
    """``(out (S_q, H, D), lse (S_q, H))`` in q's dtype / the accumulation dtype."""
    num_q, num_heads, dim = q.shape
    bm, bn, bd = _blocks(dim, options)
    acc_dtype = torch.float64 if q.dtype == torch.float64 else torch.float32
    out = torch.empty(q.shape, dtype=acc_dtype, device=q.device)
    lse = torch.empty(num_q, num_heads, dtype=acc_dtype, device=q.device)
    if num_q == 0:
        return out, lse
    grid = (triton.cdiv(num_q, bm), num_heads)
    _fwd_kernel[grid](indptr, indices, q, k, v, bias if bias is not None else q, out, lse,
                      num_q, num_heads, dim, float(scale), float(clamp),
                      math.log(eps) if compat else 0.0,
                      HAS_BIAS=bias is not None, COMPAT=compat, ACC=_acc(q.dtype),
                      BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd)
    return out, lse


def backward(indptr, indices, t_indptr, t_query, t_eid, q, k, v, bias, lse, delta, dout,
             scale: float, compat: bool, clamp: float, **options):
    """``(dq, dk, dv, dbias (nnz, H))`` in the accumulation dtype."""
    num_q, num_heads, dim = q.shape
    num_k = k.shape[0]
    nnz = indices.shape[0]
    bm, bn, bd = _blocks(dim, options)
    acc_dtype = lse.dtype
    dq = torch.empty(q.shape, dtype=acc_dtype, device=q.device)
    dk = torch.empty(k.shape, dtype=acc_dtype, device=q.device)
    dv = torch.empty(v.shape, dtype=acc_dtype, device=q.device)
    p_buf = torch.empty(nnz, num_heads, dtype=acc_dtype, device=q.device)
    ds_buf = torch.empty(nnz, num_heads, dtype=acc_dtype, device=q.device)
    dsr_buf = torch.empty(nnz, num_heads, dtype=acc_dtype, device=q.device) if compat else ds_buf
    if num_q:
        _bwd_rows_kernel[(triton.cdiv(num_q, bm), num_heads)](
            indptr, indices, q, k, v, bias if bias is not None else q, lse, delta, dout, dq,
            p_buf, ds_buf, dsr_buf, num_q, num_heads, dim, float(scale), float(clamp),
            HAS_BIAS=bias is not None, COMPAT=compat, ACC=_acc(acc_dtype),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd)
    if num_k:
        _bwd_cols_kernel[(triton.cdiv(num_k, bm), num_heads)](
            t_indptr, t_query, t_eid, q, dout, p_buf, dsr_buf, dk, dv, num_k, num_heads, dim,
            float(scale), ACC=_acc(acc_dtype), BLOCK_M=bm, BLOCK_N=bn, BLOCK_D=bd)
    return dq, dk, dv, ds_buf


# =========================================================================== block-sparse tiles
# Kernels of :func:`graphpipe.ops.attention.cluster_sparse.cluster_sparse_attention`: one program per
# (aligned d_b-tile, head); the tile's queries (or keys) stay in registers and every
# d_b × d_b block is a dense tile (contiguous key/value rows, ``tl.dot`` when the tile is
# at least 16 wide in float32, IEEE precision). The backward pass recomputes the scores.


@triton.jit
def _tile_scores(a_tile, b_tile, USE_DOT: tl.constexpr):
    """``a_tile @ b_tile.T`` for ``[R, D]`` tiles."""
    if USE_DOT:
        return tl.dot(a_tile, tl.trans(b_tile), input_precision="ieee")
    return tl.sum(a_tile[:, None, :] * b_tile[None, :, :], axis=2)


@triton.jit
def _tile_apply(w_tile, x_tile, USE_DOT: tl.constexpr):
    """``w_tile @ x_tile`` for ``[R, R]`` weights and ``[R, D]`` rows."""
    if USE_DOT:
        return tl.dot(w_tile, x_tile, input_precision="ieee")
    return tl.sum(w_tile[:, :, None] * x_tile[None, :, :], axis=1)


@triton.jit
def _block_fwd_kernel(tile_start, row_ptr, row_cols, q, k, v, out, lse, num_heads, dim, scale,
                      DB: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
                      ACC: tl.constexpr, USE_DOT: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    rr = tl.arange(0, BLOCK_R)
    r_mask = rr < DB
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    rows = tl.load(tile_start + t) + rr
    rd_mask = r_mask[:, None] & d_mask[None, :]
    q_tile = tl.load(q + (rows[:, None] * num_heads + h) * dim + dd[None, :], mask=rd_mask,
                     other=0.0).to(ACC)
    b0 = tl.load(row_ptr + t)
    b1 = tl.load(row_ptr + t + 1)
    m = tl.full([BLOCK_R], float("-inf"), ACC)
    l_sum = tl.zeros([BLOCK_R], ACC)
    acc = tl.zeros([BLOCK_R, BLOCK_D], ACC)
    for b in range(b0, b1):
        cols = tl.load(row_cols + b) + rr
        off = (cols[:, None] * num_heads + h) * dim + dd[None, :]
        k_tile = tl.load(k + off, mask=rd_mask, other=0.0).to(ACC)
        s = _tile_scores(q_tile, k_tile, USE_DOT) * scale
        s = tl.where(r_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, axis=1))
        alpha = tl.exp(m - m_new)
        p = tl.exp(s - m_new[:, None])
        v_tile = tl.load(v + off, mask=rd_mask, other=0.0).to(ACC)
        l_sum = l_sum * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + _tile_apply(p.to(ACC), v_tile, USE_DOT)
        m = m_new
    live = l_sum > 0.0
    row_lse = m + tl.log(tl.where(live, l_sum, 1.0))
    o = acc / tl.where(live, l_sum, 1.0)[:, None]
    tl.store(out + (rows[:, None] * num_heads + h) * dim + dd[None, :], o,
             mask=rd_mask & live[:, None])
    tl.store(lse + rows * num_heads + h, row_lse, mask=r_mask & live)


@triton.jit
def _block_bwd_rows_kernel(tile_start, row_ptr, row_cols, q, k, v, lse, delta, dout, dq,
                           num_heads, dim, scale, DB: tl.constexpr, BLOCK_R: tl.constexpr,
                           BLOCK_D: tl.constexpr, ACC: tl.constexpr, USE_DOT: tl.constexpr):
    t = tl.program_id(0)
    h = tl.program_id(1)
    rr = tl.arange(0, BLOCK_R)
    r_mask = rr < DB
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    rows = tl.load(tile_start + t) + rr
    rd_mask = r_mask[:, None] & d_mask[None, :]
    row_off = (rows[:, None] * num_heads + h) * dim + dd[None, :]
    q_tile = tl.load(q + row_off, mask=rd_mask, other=0.0).to(ACC)
    do_tile = tl.load(dout + row_off, mask=rd_mask, other=0.0).to(ACC)
    row_lse = tl.load(lse + rows * num_heads + h, mask=r_mask, other=0.0).to(ACC)
    row_delta = tl.load(delta + rows * num_heads + h, mask=r_mask, other=0.0).to(ACC)
    b0 = tl.load(row_ptr + t)
    b1 = tl.load(row_ptr + t + 1)
    dq_acc = tl.zeros([BLOCK_R, BLOCK_D], ACC)
    for b in range(b0, b1):
        cols = tl.load(row_cols + b) + rr
        off = (cols[:, None] * num_heads + h) * dim + dd[None, :]
        k_tile = tl.load(k + off, mask=rd_mask, other=0.0).to(ACC)
        v_tile = tl.load(v + off, mask=rd_mask, other=0.0).to(ACC)
        s = _tile_scores(q_tile, k_tile, USE_DOT) * scale
        ok = r_mask[:, None] & r_mask[None, :]
        p = tl.where(ok, tl.exp(tl.where(ok, s - row_lse[:, None], 0.0)), 0.0)
        dp = _tile_scores(do_tile, v_tile, USE_DOT)
        ds = p * (dp - row_delta[:, None])
        dq_acc += _tile_apply(ds.to(ACC), k_tile, USE_DOT) * scale
    tl.store(dq + row_off, dq_acc, mask=rd_mask)


@triton.jit
def _block_bwd_cols_kernel(tile_start, col_ptr, col_rows, q, k, v, lse, delta, dout, dk, dv,
                           num_heads, dim, scale, DB: tl.constexpr, BLOCK_R: tl.constexpr,
                           BLOCK_D: tl.constexpr, ACC: tl.constexpr, USE_DOT: tl.constexpr):
    u = tl.program_id(0)
    h = tl.program_id(1)
    rr = tl.arange(0, BLOCK_R)
    r_mask = rr < DB
    dd = tl.arange(0, BLOCK_D)
    d_mask = dd < dim
    keys = tl.load(tile_start + u) + rr
    rd_mask = r_mask[:, None] & d_mask[None, :]
    key_off = (keys[:, None] * num_heads + h) * dim + dd[None, :]
    k_tile = tl.load(k + key_off, mask=rd_mask, other=0.0).to(ACC)
    v_tile = tl.load(v + key_off, mask=rd_mask, other=0.0).to(ACC)
    b0 = tl.load(col_ptr + u)
    b1 = tl.load(col_ptr + u + 1)
    dk_acc = tl.zeros([BLOCK_R, BLOCK_D], ACC)
    dv_acc = tl.zeros([BLOCK_R, BLOCK_D], ACC)
    for b in range(b0, b1):
        rows = tl.load(col_rows + b) + rr
        off = (rows[:, None] * num_heads + h) * dim + dd[None, :]
        q_tile = tl.load(q + off, mask=rd_mask, other=0.0).to(ACC)
        do_tile = tl.load(dout + off, mask=rd_mask, other=0.0).to(ACC)
        row_lse = tl.load(lse + rows * num_heads + h, mask=r_mask, other=0.0).to(ACC)
        row_delta = tl.load(delta + rows * num_heads + h, mask=r_mask, other=0.0).to(ACC)
        s_t = _tile_scores(k_tile, q_tile, USE_DOT) * scale          # [keys, rows]
        ok = r_mask[:, None] & r_mask[None, :]
        p_t = tl.where(ok, tl.exp(tl.where(ok, s_t - row_lse[None, :], 0.0)), 0.0)
        dp_t = _tile_scores(v_tile, do_tile, USE_DOT)
        ds_t = p_t * (dp_t - row_delta[None, :])
        dv_acc += _tile_apply(p_t.to(ACC), do_tile, USE_DOT)
        dk_acc += _tile_apply(ds_t.to(ACC), q_tile, USE_DOT) * scale
    tl.store(dk + key_off, dk_acc, mask=rd_mask)
    tl.store(dv + key_off, dv_acc, mask=rd_mask)


def _block_config(block_size: int, dim: int, dtype: torch.dtype) -> dict:
    block_r = max(2, triton.next_power_of_2(block_size))
    return {"DB": block_size, "BLOCK_R": block_r, "BLOCK_D": max(16, triton.next_power_of_2(dim)),
                "ACC": _acc(dtype), "USE_DOT": dtype != torch.float64 and block_r >= 16}


def block_forward(tens: dict, block_size: int, q, k, v, scale: float, out, lse, **_options):
    """Block part of the cluster-sparse forward: fills ``out``/``lse`` rows of tiles that
    have blocks (``out``, ``lse`` preset to 0 / -inf)."""
    num_tiles = tens["tile_start"].shape[0]
    if num_tiles == 0:
        return
    _block_fwd_kernel[(num_tiles, q.shape[1])](
        tens["tile_start"], tens["row_ptr"], tens["row_cols"], q, k, v, out, lse,
        q.shape[1], q.shape[2], float(scale), **_block_config(block_size, q.shape[2], q.dtype))


def block_backward(tens: dict, block_size: int, q, k, v, scale: float, lse, delta, dout,
                   **_options):
    """Block part of the cluster-sparse backward: ``(dq, dk, dv)`` (zero outside tiles)."""
    dq = torch.zeros_like(q)
    dk = torch.zeros_like(k)
    dv = torch.zeros_like(v)
    num_tiles = tens["tile_start"].shape[0]
    if num_tiles:
        cfg = _block_config(block_size, q.shape[2], q.dtype)
        grid = (num_tiles, q.shape[1])
        _block_bwd_rows_kernel[grid](tens["tile_start"], tens["row_ptr"], tens["row_cols"], q, k,
                                     v, lse, delta, dout, dq, q.shape[1], q.shape[2],
                                     float(scale), **cfg)
        _block_bwd_cols_kernel[grid](tens["tile_start"], tens["col_ptr"], tens["col_rows"], q, k,
                                     v, lse, delta, dout, dk, dv, q.shape[1], q.shape[2],
                                     float(scale), **cfg)
    return dq, dk, dv
