"""Numba CPU kernels behind :func:`graphpipe.ops.attention.sparse_attention`.

Layout: ``q`` ``(S_q, H, D)``, ``k``/``v`` ``(S_k, H, D)``, C-contiguous; the pattern is
a CSR over queries (``indptr (S_q + 1,)``, ``indices (nnz,)`` key positions) and, for
the backward pass, its by-key copy (``t_indptr (S_k + 1,)``, ``t_query (nnz,)``,
``t_eid (nnz,)``: entry ``t`` of key ``j`` is pattern entry ``t_eid[t]``, query
``t_query[t]``).

**Work plan** (:func:`build_plan`, built once per pattern and direction, cached on the
pattern): rows are grouped into *chunks* of about ``target`` entries (by nnz, not by
row count, so chunks cost the same), and every row with more than ``target`` entries
(e.g. a global token's row and column, ``S`` entries each) is *split* into segments of
``target`` entries. One parallel loop runs over chunks and segments together (balanced
under Numba's static scheduling); a segment leaves a partial result (online-softmax
state, or a partial gradient sum) that a second, short parallel loop merges in float64
in segment order. So results do not depend on the thread count, there are no atomics,
and a single long row never serialises a step.

**Precision**: scores, probabilities and ``exp`` are computed in the inputs' dtype
(float32 for float32 inputs, float64 for float64); per-row accumulators (the
softmax denominator, the output and gradient sums) are float64.

**Memory** beyond inputs and outputs: ``O(H·D)`` per thread and per segment. The
backward pass recomputes scores and probabilities from ``q``, ``k``, ``lse`` (no
``(nnz, H)`` buffers); only when the bias gradient is wanted is ``ds`` written per
entry (``(nnz, H)``, the bias gradient itself). Never ``O(S²)``.

Scores: ``s = scale·<q_i, k_j>``; in the torchgt mode clamped to ``[-clamp, clamp]``;
then ``+ bias[e, h]``. A score of ``-inf`` (a ``-inf`` bias) contributes nothing.
Per row and head the forward kernel keeps the running maximum ``m``, the sum ``l`` of
``exp(s - m)`` and the weighted sum of values; at the end ``lse = m + log l``
(torchgt mode: ``lse = log(exp(m)·l + eps)``) and ``out = acc · exp(m - lse)``.
Rows with no contributing entry get ``out = 0`` and ``lse = -inf``.

Backward, with ``p = exp(s - lse_i)``, ``dp = <dout_i, v_j>``, ``delta_i = <dout_i,
out_i>`` and ``ds = p·(dp - delta_i)`` (zeroed outside the clamp for dq/dk in the
torchgt mode): ``dq_i = scale·Σ_j ds·k_j`` by rows, ``dk_j = scale·Σ_i ds·q_i`` and
``dv_j = Σ_i p·dout_i`` by keys.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import prange
from numba.core import cgutils, types
from numba.extending import intrinsic

#: Entries per chunk and per segment of a split row.
TARGET = 2048
#: How many entries ahead the key/value (query/gradient) rows are prefetched.
PREFETCH = 16
_JIT = {"cache": True, "nogil": True, "parallel": True, "fastmath": False}
_SER = {"cache": True, "nogil": True}
_INL = {"cache": True, "nogil": True, "inline": "always"}


@intrinsic
def prefetch_row(typingctx, arr, idx):
    """Prefetch (``llvm.prefetch``, read, keep in all caches) the first 4 cache lines of
    ``arr[idx]``. The kernels gather rows of ``k``/``v`` (``q``/``dout``) in pattern
    order: latency-bound once they do not fit in cache, and the loads of one entry are
    not independent of the softmax state, so the out-of-order core cannot run far
    ahead; prefetching ``PREFETCH`` entries ahead keeps several misses in flight."""
    if not isinstance(arr, types.Array) or not isinstance(idx, types.Integer):
        return None
    sig = types.void(arr, idx)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        row_bytes = cgutils.unpack_tuple(builder, ary.strides)[0]
        i64 = ir.IntType(64)
        i32 = ir.IntType(32)
        i8p = ir.IntType(8).as_pointer()
        index = args[1] if args[1].type.width == 64 else builder.sext(args[1], i64)
        start = builder.add(builder.ptrtoint(ary.data, i64), builder.mul(index, row_bytes))
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        for line in range(4):
            offset = ir.Constant(i64, 64 * line)
            with builder.if_then(builder.icmp_signed("<", offset, row_bytes)):
                addr = builder.inttoptr(builder.add(start, offset), i8p)
                builder.call(fn, [addr, ir.Constant(i32, 0), ir.Constant(i32, 3),
                                  ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


# =========================================================================== work plan


@numba.njit(**_SER)
def build_plan(indptr, target):
    """Partition rows into chunks of about ``target`` entries and split long rows.

    Returns ``(chunk_ptr, seg_row, seg_start, seg_end, long_rows, long_ptr)``, int64:
    chunk ``c`` holds rows ``chunk_ptr[c]:chunk_ptr[c + 1]`` (rows with more than
    ``target`` entries inside it are skipped: they are split); segment ``g`` covers the
    entries ``seg_start[g]:seg_end[g]`` of row ``seg_row[g]``; the segments of split row
    ``long_rows[r]`` are ``long_ptr[r]:long_ptr[r + 1]``, in entry order.
    """
    n = indptr.shape[0] - 1
    n_long = 0
    n_seg = 0
    for i in range(n):
        deg = indptr[i + 1] - indptr[i]
        if deg > target:
            n_long += 1
            n_seg += (deg + target - 1) // target
    long_rows = np.empty(n_long, dtype=np.int64)
    long_ptr = np.zeros(n_long + 1, dtype=np.int64)
    seg_row = np.empty(n_seg, dtype=np.int64)
    seg_start = np.empty(n_seg, dtype=np.int64)
    seg_end = np.empty(n_seg, dtype=np.int64)
    chunks = [0]
    r = 0
    g = 0
    filled = 0
    for i in range(n):
        deg = indptr[i + 1] - indptr[i]
        if deg > target:
            long_rows[r] = i
            e = indptr[i]
            while e < indptr[i + 1]:
                seg_row[g] = i
                seg_start[g] = e
                e = min(e + target, indptr[i + 1])
                seg_end[g] = e
                g += 1
            long_ptr[r + 1] = g
            r += 1
            deg = 0
        filled += deg + 1          # +1: a row costs something even when empty
        if filled >= target:
            chunks.append(i + 1)
            filled = 0
    if chunks[-1] != n:
        chunks.append(n)
    chunk_ptr = np.array(chunks, dtype=np.int64)
    return chunk_ptr, seg_row, seg_start, seg_end, long_rows, long_ptr


# =========================================================================== forward


@numba.njit(**_INL)
def _score(q, k, i, j, h, dim, scale, compat, clamp, bias, has_bias, e):
    s = q[i, h, 0] * k[j, h, 0]
    for d in range(1, dim):
        s += q[i, h, d] * k[j, h, d]
    s *= scale
    if compat:
        s = min(max(s, -clamp), clamp)
    if has_bias:
        s += bias[e, h]
    return s


@numba.njit(**_INL)
def _forward_entries(i, e0, e1, indices, q, k, v, bias, has_bias, scale, compat, clamp,
                     m, l_sum, acc):
    """Online softmax of row ``i`` over entries ``e0:e1`` into ``(m, l_sum, acc)``."""
    num_heads, dim = q.shape[1], q.shape[2]
    m[:] = -np.inf
    l_sum[:] = 0.0
    acc[:, :] = 0.0
    nnz = indices.shape[0]
    for e in range(e0, e1):
        if e + PREFETCH < nnz:
            prefetch_row(k, indices[e + PREFETCH])
            prefetch_row(v, indices[e + PREFETCH])
        j = indices[e]
        for h in range(num_heads):
            s = _score(q, k, i, j, h, dim, scale, compat, clamp, bias, has_bias, e)
            if s == -np.inf:
                continue
            if s > m[h]:
                alpha = math.exp(m[h] - s)
                l_sum[h] = l_sum[h] * alpha + 1.0
                for d in range(dim):
                    acc[h, d] = acc[h, d] * alpha + v[j, h, d]
                m[h] = s
            else:
                p = math.exp(s - m[h])
                l_sum[h] += p
                for d in range(dim):
                    acc[h, d] += p * v[j, h, d]


@numba.njit(**_INL)
def _forward_finish(i, m, l_sum, acc, compat, log_eps, out, lse):
    num_heads, dim = acc.shape
    for h in range(num_heads):
        if l_sum[h] == 0.0:
            lse[i, h] = -np.inf
            for d in range(dim):
                out[i, h, d] = 0.0
            continue
        row_lse = m[h] + math.log(l_sum[h])
        if compat:
            hi = max(row_lse, log_eps)
            row_lse = hi + math.log(math.exp(row_lse - hi) + math.exp(log_eps - hi))
        lse[i, h] = row_lse
        w = math.exp(m[h] - row_lse)
        for d in range(dim):
            out[i, h, d] = acc[h, d] * w


@numba.njit(**_JIT)
def forward(indptr, indices, q, k, v, bias, has_bias, scale, compat, clamp, log_eps, out, lse,
            chunk_ptr, seg_row, seg_start, seg_end, long_rows, long_ptr, target):
    """Fill ``out (S_q, H, D)`` and ``lse (S_q, H)``. ``scale``/``clamp`` in q's dtype."""
    num_heads, dim = q.shape[1], q.shape[2]
    n_chunks = chunk_ptr.shape[0] - 1
    n_seg = seg_row.shape[0]
    part_m = np.empty((n_seg, num_heads), dtype=np.float64)
    part_l = np.empty((n_seg, num_heads), dtype=np.float64)
    part_acc = np.empty((n_seg, num_heads, dim), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        m = np.empty(num_heads, dtype=q.dtype)
        l_sum = np.empty(num_heads, dtype=np.float64)
        acc = np.empty((num_heads, dim), dtype=np.float64)
        if w < n_chunks:
            for i in range(chunk_ptr[w], chunk_ptr[w + 1]):
                if indptr[i + 1] - indptr[i] > target:
                    continue
                _forward_entries(i, indptr[i], indptr[i + 1], indices, q, k, v, bias, has_bias,
                                 scale, compat, clamp, m, l_sum, acc)
                _forward_finish(i, m, l_sum, acc, compat, log_eps, out, lse)
        else:
            g = w - n_chunks
            _forward_entries(seg_row[g], seg_start[g], seg_end[g], indices, q, k, v, bias,
                             has_bias, scale, compat, clamp, m, l_sum, acc)
            part_m[g, :] = m
            part_l[g, :] = l_sum
            part_acc[g, :, :] = acc
    for r in prange(long_rows.shape[0]):
        m = np.full(num_heads, -np.inf)
        l_sum = np.zeros(num_heads)
        acc = np.zeros((num_heads, dim))
        for g in range(long_ptr[r], long_ptr[r + 1]):
            for h in range(num_heads):
                if part_l[g, h] == 0.0:
                    continue
                new_m = max(m[h], part_m[g, h])
                a = math.exp(m[h] - new_m)
                b = math.exp(part_m[g, h] - new_m)
                l_sum[h] = l_sum[h] * a + part_l[g, h] * b
                for d in range(dim):
                    acc[h, d] = acc[h, d] * a + part_acc[g, h, d] * b
                m[h] = new_m
        _forward_finish(long_rows[r], m, l_sum, acc, compat, log_eps, out, lse)


# =========================================================================== backward


@numba.njit(**_INL)
def _rows_entries(i, e0, e1, indices, q, k, v, bias, has_bias, scale, compat, clamp, lse,
                  delta_i, dout, acc, ds_buf, want_ds):
    """dq of row ``i`` over entries ``e0:e1`` (unscaled) into ``acc``; ``ds`` per entry
    into ``ds_buf`` when ``want_ds``."""
    num_heads, dim = q.shape[1], q.shape[2]
    acc[:, :] = 0.0
    nnz = indices.shape[0]
    for e in range(e0, e1):
        if e + PREFETCH < nnz:
            prefetch_row(k, indices[e + PREFETCH])
            prefetch_row(v, indices[e + PREFETCH])
        j = indices[e]
        for h in range(num_heads):
            raw = q[i, h, 0] * k[j, h, 0]
            dp = dout[i, h, 0] * v[j, h, 0]
            for d in range(1, dim):
                raw += q[i, h, d] * k[j, h, d]
                dp += dout[i, h, d] * v[j, h, d]
            raw *= scale
            s = raw
            if compat:
                s = min(max(raw, -clamp), clamp)
            if has_bias:
                s += bias[e, h]
            if s == -np.inf or lse[i, h] == -np.inf:
                if want_ds:
                    ds_buf[e, h] = 0.0
                continue
            p = math.exp(s - lse[i, h])
            ds = p * (dp - delta_i[h])
            if want_ds:
                ds_buf[e, h] = ds
            if compat and (raw < -clamp or raw > clamp):
                continue
            for d in range(dim):
                acc[h, d] += ds * k[j, h, d]


@numba.njit(**_INL)
def _row_delta(i, dout, out, delta_i):
    num_heads, dim = out.shape[1], out.shape[2]
    for h in range(num_heads):
        t = 0.0
        for d in range(dim):
            t += dout[i, h, d] * out[i, h, d]
        delta_i[h] = t


@numba.njit(**_INL)
def _cols_entries(j, t0, t1, t_query, t_eid, q, k, v, bias, has_bias, scale, compat, clamp,
                  lse, delta, dout, acc_k, acc_v):
    """dk (unscaled) and dv of key ``j`` over its by-key entries ``t0:t1``."""
    num_heads, dim = q.shape[1], q.shape[2]
    acc_k[:, :] = 0.0
    acc_v[:, :] = 0.0
    nnz = t_query.shape[0]
    for t in range(t0, t1):
        if t + PREFETCH < nnz:
            ahead = t_query[t + PREFETCH]
            prefetch_row(q, ahead)
            prefetch_row(dout, ahead)
            prefetch_row(lse, ahead)
            prefetch_row(delta, ahead)
        i = t_query[t]
        for h in range(num_heads):
            if lse[i, h] == -np.inf:
                continue
            raw = q[i, h, 0] * k[j, h, 0]
            dp = dout[i, h, 0] * v[j, h, 0]
            for d in range(1, dim):
                raw += q[i, h, d] * k[j, h, d]
                dp += dout[i, h, d] * v[j, h, d]
            raw *= scale
            s = raw
            if compat:
                s = min(max(raw, -clamp), clamp)
            if has_bias:
                s += bias[t_eid[t], h]
            if s == -np.inf:
                continue
            p = math.exp(s - lse[i, h])
            for d in range(dim):
                acc_v[h, d] += p * dout[i, h, d]
            if compat and (raw < -clamp or raw > clamp):
                continue
            ds = p * (dp - delta[i, h])
            for d in range(dim):
                acc_k[h, d] += ds * q[i, h, d]


@numba.njit(**_JIT)
def backward(indptr, indices, t_indptr, t_query, t_eid, q, k, v, bias, has_bias, scale,
             compat, clamp, lse, out, dout, dq, dk, dv, delta, ds_buf, want_ds,
             r_chunk, r_seg_row, r_seg_start, r_seg_end, r_long, r_long_ptr,
             c_chunk, c_seg_row, c_seg_start, c_seg_end, c_long, c_long_ptr, target):
    """dq, dk, dv (and ``delta (S_q, H)``; ``ds`` per entry into ``ds_buf (nnz, H)``
    when ``want_ds``). ``scale``/``clamp`` in q's dtype."""
    num_heads, dim = q.shape[1], q.shape[2]
    fscale = float(scale)
    # ---- by rows: delta and dq
    n_chunks = r_chunk.shape[0] - 1
    n_seg = r_seg_row.shape[0]
    part = np.empty((n_seg, num_heads, dim), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        acc = np.empty((num_heads, dim), dtype=np.float64)
        delta_i = np.empty(num_heads, dtype=q.dtype)
        if w < n_chunks:
            for i in range(r_chunk[w], r_chunk[w + 1]):
                _row_delta(i, dout, out, delta_i)
                for h in range(num_heads):
                    delta[i, h] = delta_i[h]
                if indptr[i + 1] - indptr[i] > target:
                    continue
                _rows_entries(i, indptr[i], indptr[i + 1], indices, q, k, v, bias, has_bias,
                              scale, compat, clamp, lse, delta_i, dout, acc, ds_buf, want_ds)
                for h in range(num_heads):
                    for d in range(dim):
                        dq[i, h, d] = acc[h, d] * fscale
        else:
            g = w - n_chunks
            i = r_seg_row[g]
            _row_delta(i, dout, out, delta_i)
            _rows_entries(i, r_seg_start[g], r_seg_end[g], indices, q, k, v, bias, has_bias,
                          scale, compat, clamp, lse, delta_i, dout, acc, ds_buf, want_ds)
            part[g, :, :] = acc
    for r in prange(r_long.shape[0]):
        i = r_long[r]
        for h in range(num_heads):
            for d in range(dim):
                t = 0.0
                for g in range(r_long_ptr[r], r_long_ptr[r + 1]):
                    t += part[g, h, d]
                dq[i, h, d] = t * fscale
    # ---- by keys: dk and dv
    n_chunks = c_chunk.shape[0] - 1
    n_seg = c_seg_row.shape[0]
    part_k = np.empty((n_seg, num_heads, dim), dtype=np.float64)
    part_v = np.empty((n_seg, num_heads, dim), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        acc_k = np.empty((num_heads, dim), dtype=np.float64)
        acc_v = np.empty((num_heads, dim), dtype=np.float64)
        if w < n_chunks:
            for j in range(c_chunk[w], c_chunk[w + 1]):
                if t_indptr[j + 1] - t_indptr[j] > target:
                    continue
                _cols_entries(j, t_indptr[j], t_indptr[j + 1], t_query, t_eid, q, k, v, bias,
                              has_bias, scale, compat, clamp, lse, delta, dout, acc_k, acc_v)
                for h in range(num_heads):
                    for d in range(dim):
                        dk[j, h, d] = acc_k[h, d] * fscale
                        dv[j, h, d] = acc_v[h, d]
        else:
            g = w - n_chunks
            _cols_entries(c_seg_row[g], c_seg_start[g], c_seg_end[g], t_query, t_eid, q, k, v,
                          bias, has_bias, scale, compat, clamp, lse, delta, dout, acc_k, acc_v)
            part_k[g, :, :] = acc_k
            part_v[g, :, :] = acc_v
    for r in prange(c_long.shape[0]):
        j = c_long[r]
        for h in range(num_heads):
            for d in range(dim):
                tk = 0.0
                tv = 0.0
                for g in range(c_long_ptr[r], c_long_ptr[r + 1]):
                    tk += part_k[g, h, d]
                    tv += part_v[g, h, d]
                dk[j, h, d] = tk * fscale
                dv[j, h, d] = tv
