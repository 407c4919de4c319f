"""Numba CPU kernels behind :func:`graphpipe.ops.attention.sparse_attention`.

**Layout: heads last.** The kernels read ``q`` ``(S_q, D, H)``, ``k``/``v`` and the
output gradient ``dout`` ``(S, D, H)``, C-contiguous (:func:`heads_last` makes these
copies in parallel), and write ``out``, ``dq``, ``dk``, ``dv`` in the public layout
``(S, H, D)``; ``lse``/``delta`` are ``(S_q, H)``, per-entry ``bias``/``ds`` ``(nnz, H)``.
With the heads innermost, every per-entry step (the ``D`` products of a score, ``exp``,
the ``D`` accumulator updates) is a loop over the ``H`` heads of contiguous lanes, which
LLVM turns into SIMD instructions. Three things keep those loops free of calls (a call
in a loop body stops vectorisation): ``exp`` in float32 is emitted inline by
:func:`exp_lanes` as a branch-free Cody-Waite/Cephes polynomial (libm's ``expf`` is a
call); ``max``/``min`` are selects (:func:`_fmax`; Numba's builtins are out-of-line
calls); helpers are inlined at the Numba IR level. The pattern is a CSR over queries
(``indptr (S_q + 1,)``, ``indices (nnz,)`` key positions) and, for the backward pass, its
by-key copy (``t_indptr (S_k + 1,)``, ``t_query (nnz,)``, ``t_eid (nnz,)``: entry ``t``
of key ``j`` is pattern entry ``t_eid[t]``, query ``t_query[t]``).

**Work plan** (:func:`build_plan`, built once per pattern and direction, cached on the
pattern): rows are grouped into *chunks* of about ``target`` entries (by nnz, not by
row count, so chunks cost the same), and every row with more than ``target`` entries
(e.g. a global token's row and column, ``S`` entries each) is *split* into segments of
``target`` entries. One parallel loop runs over chunks and segments together (balanced
under Numba's static scheduling); a segment leaves a partial result (softmax state, or
a partial gradient sum) that a second, short parallel loop merges in float64 in segment
order. So results do not depend on the thread count, there are no atomics, and a single
long row never serialises a step.

**Precision**: scores, probabilities and ``exp`` are computed in the inputs' dtype
(float32 for float32 inputs, float64 for float64: :func:`exp_lanes`); per-row
accumulators (the softmax denominator, the output and gradient sums) are float64.

**Memory** beyond inputs and outputs: ``O(target·H + D·H)`` per thread (the scores of
one row or segment) and ``O(H·D)`` per segment. The backward pass recomputes scores and
probabilities from ``q``, ``k``, ``lse`` (no ``(nnz, H)`` buffers); only when the bias
gradient is wanted is ``ds`` written per entry (``(nnz, H)``, the bias gradient
itself). Never ``O(S²)``.

Scores: ``s = scale·<q_i, k_j>``; in the torchgt mode clamped to ``[-clamp, clamp]``;
then ``+ bias[e, h]``. A score of ``-inf`` (a ``-inf`` bias) contributes nothing.
Forward, per row (or segment) and head, in two passes over its entries: the scores and
their maximum ``m``, then ``p = exp(s - m)``, ``l = Σ p`` and ``acc = Σ p·v``; at the end
``lse = m + log l`` and ``out = acc / l`` (torchgt mode: ``lse = log(exp(m)·l + eps)``
and ``out = acc · exp(m - lse)``). Rows with no contributing entry get ``out = 0`` and ``lse = -inf``.

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


# =========================================================================== exp

# Cephes' expf: Cody-Waite reduction x = n·ln2 + r, then e^r = 1 + r + r²·P(r)
_LOG2E = 1.44269504088896341
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXPF_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
              1.6666665459e-1, 5.0000001201e-1)


def _fselect_max(builder, a, b):
    return builder.select(builder.fcmp_ordered(">", a, b), a, b)


def _fselect_min(builder, a, b):
    return builder.select(builder.fcmp_ordered("<", a, b), a, b)


def _expf_ir(builder, x):
    """LLVM IR of ``exp(x)`` for a float32 ``x``: no branches and no calls, so a loop
    over it vectorises (libm's ``expf`` does not). About 1 ulp; 0 below -87 (``-inf``
    included: no subnormals); ``exp(88)`` above 88; unspecified for NaN."""
    f32 = ir.FloatType()
    i32 = ir.IntType(32)

    def c(value):
        return ir.Constant(f32, value)

    xc = _fselect_min(builder, _fselect_max(builder, x, c(-87.0)), c(88.0))
    floor = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f32, [f32]),
                                           "llvm.floor.f32")
    n = builder.call(floor, [builder.fadd(builder.fmul(xc, c(_LOG2E)), c(0.5))])
    r = builder.fsub(builder.fsub(xc, builder.fmul(n, c(_LN2_HI))), builder.fmul(n, c(_LN2_LO)))
    y = c(_EXPF_POLY[0])
    for coef in _EXPF_POLY[1:]:
        y = builder.fadd(builder.fmul(y, r), c(coef))
    y = builder.fadd(builder.fadd(builder.fmul(y, builder.fmul(r, r)), r), c(1.0))
    bits = builder.shl(builder.add(builder.fptosi(n, i32), ir.Constant(i32, 127)),
                       ir.Constant(i32, 23))
    scaled = builder.fmul(y, builder.bitcast(bits, f32))
    return builder.select(builder.fcmp_ordered(">", x, c(-87.0)), scaled, c(0.0))


@intrinsic
def exp_lanes(typingctx, x):
    """``exp(x)`` in the dtype of ``x``, emitted inline: float32 by :func:`_expf_ir`
    (vectorisable), float64 by ``llvm.exp.f64`` (libm's accuracy)."""
    if x not in (types.float32, types.float64):
        return None

    def codegen(context, builder, signature, args):
        if signature.args[0] == types.float32:
            return _expf_ir(builder, args[0])
        f64 = ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f64, [f64]),
                                            "llvm.exp.f64")
        return builder.call(fn, [args[0]])

    return x(x), codegen


@numba.njit(**_INL)
def _fmax(a, b):
    """``max`` as a select (the builtin is an out-of-line call in Numba's code)."""
    return a if a > b else b  # noqa: FURB136 - the builtin is a call in Numba


@numba.njit(**_INL)
def _fmin(a, b):
    return a if a < b else b  # noqa: FURB136 - the builtin is a call in Numba


# =========================================================================== layout


@numba.njit(**_JIT)
def heads_last(src, dst):
    """``dst[i, d, h] = src[i, h, d]``: ``src (S, H, D)`` with any strides (a view of a
    fused q/k/v projection, say), ``dst (S, D, H)`` C-contiguous. Parallel over rows
    (torch's strided copy does this on one thread)."""
    num_heads, dim = src.shape[1], src.shape[2]
    for i in prange(src.shape[0]):
        for h in range(num_heads):
            for d in range(dim):
                dst[i, d, h] = src[i, h, d]


# =========================================================================== forward


@numba.njit(**_INL)
def _load_row(src, i, dst):
    """``dst[:, :] = src[i]`` for a ``(S, D, H)`` array."""
    for d in range(dst.shape[0]):
        for h in range(dst.shape[1]):
            dst[d, h] = src[i, d, h]


@numba.njit(**_INL)
def _dot_lanes(a, b, j, out):
    """``out[h] = Σ_d a[d, h]·b[j, d, h]`` for every head ``h``."""
    dim, num_heads = a.shape
    for h in range(num_heads):
        out[h] = a[0, h] * b[j, 0, h]
    for d in range(1, dim):
        for h in range(num_heads):
            out[h] += a[d, h] * b[j, d, h]


@numba.njit(**_INL)
def _forward_entries(i, e0, e1, indices, q, k, v, bias, has_bias, scale, compat, clamp,
                     qs, scores, m, l_sum, acc):
    """Softmax state of row ``i`` over entries ``e0:e1`` (at most ``scores.shape[0]``):
    ``m`` the maximum score (``-inf`` when none contributes), ``l_sum`` ``Σ exp(s - m)``,
    ``acc (D, H)`` ``Σ exp(s - m)·v``. Two passes: scores and maximum, then weights."""
    dim, num_heads = q.shape[1], q.shape[2]
    nnz = indices.shape[0]
    _load_row(q, i, qs)
    m[:] = -np.inf
    for e in range(e0, e1):
        if e + PREFETCH < nnz:
            prefetch_row(k, indices[e + PREFETCH])
            prefetch_row(v, indices[e + PREFETCH])
        row = scores[e - e0]
        _dot_lanes(qs, k, indices[e], row)
        for h in range(num_heads):
            s = row[h] * scale
            if compat:
                s = _fmin(_fmax(s, -clamp), clamp)
            if has_bias:
                s += bias[e, h]
            row[h] = s
            m[h] = _fmax(m[h], s)
    l_sum[:] = 0.0
    acc[:, :] = 0.0
    for e in range(e0, e1):
        if e + PREFETCH < nnz:
            prefetch_row(v, indices[e + PREFETCH])
        j = indices[e]
        row = scores[e - e0]
        for h in range(num_heads):
            # a head with no contributing entry: m = -inf, every s = -inf, p = 0
            p = exp_lanes(row[h] - m[h]) if m[h] > -np.inf else np.float32(0.0)
            row[h] = p
            l_sum[h] += p
        for d in range(dim):
            for h in range(num_heads):
                acc[d, h] += row[h] * v[j, d, h]


@numba.njit(**_INL)
def _forward_finish(i, m, l_sum, acc, compat, log_eps, out, lse):
    dim, num_heads = acc.shape
    for h in range(num_heads):
        if l_sum[h] == 0.0:
            lse[i, h] = -np.inf
            for d in range(dim):
                out[i, h, d] = 0.0
            continue
        row_lse = m[h] + math.log(l_sum[h])
        w = 1.0 / l_sum[h]                     # exp(m - lse) without the eps
        if compat:
            hi = max(row_lse, log_eps)
            row_lse = hi + math.log(math.exp(row_lse - hi) + math.exp(log_eps - hi))
            w = math.exp(m[h] - row_lse)
        lse[i, h] = row_lse
        for d in range(dim):
            out[i, h, d] = acc[d, h] * w


@numba.njit(**_JIT)
def forward(indptr, indices, q, k, v, bias, has_bias, scale, compat, clamp, log_eps, out, lse,
            chunk_ptr, seg_row, seg_start, seg_end, long_rows, long_ptr, target):
    """Fill ``out (S_q, H, D)`` (the public layout) and ``lse (S_q, H)`` from heads-last
    ``q``, ``k``, ``v``. ``scale``/``clamp`` in q's dtype."""
    dim, num_heads = q.shape[1], q.shape[2]
    n_chunks = chunk_ptr.shape[0] - 1
    n_seg = seg_row.shape[0]
    part_m = np.empty((n_seg, num_heads), dtype=np.float64)
    part_l = np.empty((n_seg, num_heads), dtype=np.float64)
    part_acc = np.empty((n_seg, dim, num_heads), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        qs = np.empty((dim, num_heads), dtype=q.dtype)
        scores = np.empty((target, num_heads), dtype=q.dtype)
        m = np.empty(num_heads, dtype=q.dtype)
        l_sum = np.empty(num_heads, dtype=np.float64)
        acc = np.empty((dim, num_heads), dtype=np.float64)
        if w < n_chunks:
            for i in range(chunk_ptr[w], chunk_ptr[w + 1]):
                if indptr[i + 1] - indptr[i] > target:
                    continue
                _forward_entries(i, indptr[i], indptr[i + 1], indices, q, k, v, bias, has_bias,
                                 scale, compat, clamp, qs, scores, m, l_sum, acc)
                _forward_finish(i, m, l_sum, acc, compat, log_eps, out, lse)
        else:
            g = w - n_chunks
            _forward_entries(seg_row[g], seg_start[g], seg_end[g], indices, q, k, v, bias,
                             has_bias, scale, compat, clamp, qs, scores, m, l_sum, acc)
            part_m[g, :] = m
            part_l[g, :] = l_sum
            part_acc[g, :, :] = acc
    for r in prange(long_rows.shape[0]):
        m = np.full(num_heads, -np.inf)
        l_sum = np.zeros(num_heads)
        acc = np.zeros((dim, num_heads))
        for g in range(long_ptr[r], long_ptr[r + 1]):
            for h in range(num_heads):
                if part_l[g, h] == 0.0:
                    continue
                new_m = max(m[h], part_m[g, h])
                a = math.exp(m[h] - new_m)
                b = math.exp(part_m[g, h] - new_m)
                l_sum[h] = l_sum[h] * a + part_l[g, h] * b
                for d in range(dim):
                    acc[d, h] = acc[d, h] * a + part_acc[g, d, h] * b
                m[h] = new_m
        _forward_finish(long_rows[r], m, l_sum, acc, compat, log_eps, out, lse)


# =========================================================================== backward


@numba.njit(**_INL)
def _probabilities(raw, dp, scale, compat, clamp, bias, has_bias, e, lse, delta, i, p, ds):
    """From the raw dot products ``raw[h] = <q_i, k_j>`` and ``dp[h] = <dout_i, v_j>`` of
    one entry ``e``: ``p[h]`` (0 where the score or the row's lse is ``-inf``) and
    ``ds[h] = p·(dp - delta)`` (0 outside the clamp in the torchgt mode, where
    ``raw[h]`` is left as the unclamped score: a caller wanting the bias gradient reads
    ``p`` and ``dp`` before the clamp)."""
    for h in range(raw.shape[0]):
        r = raw[h] * scale
        s = r
        if compat:
            s = _fmin(_fmax(r, -clamp), clamp)
        if has_bias:
            s += bias[e, h]
        live = s > -np.inf and lse[i, h] > -np.inf
        ph = exp_lanes(s - lse[i, h]) if live else np.float32(0.0)
        p[h] = ph
        ds[h] = ph * (dp[h] - delta[i, h])
        raw[h] = r


@numba.njit(**_INL)
def _zero_outside_clamp(raw, clamp, ds):
    """torchgt mode: no score gradient where the unclamped score ``raw[h]`` lies outside
    ``[-clamp, clamp]`` (torch.clamp's gradient)."""
    for h in range(raw.shape[0]):
        if raw[h] < -clamp or raw[h] > clamp:
            ds[h] = 0.0


@numba.njit(**_INL)
def _rows_entries(i, e0, e1, indices, q, k, v, bias, has_bias, scale, compat, clamp, lse,
                  delta, dout, qs, gs, lane, acc, ds_buf, want_ds):
    """dq of row ``i`` over entries ``e0:e1`` (unscaled) into ``acc (D, H)``; ``ds`` per
    entry into ``ds_buf`` when ``want_ds``. ``lane``: ``(4, H)`` scratch."""
    dim, num_heads = q.shape[1], q.shape[2]
    nnz = indices.shape[0]
    _load_row(q, i, qs)
    _load_row(dout, i, gs)
    raw, dp, p, ds = lane[0], lane[1], lane[2], lane[3]
    acc[:, :] = 0.0
    for e in range(e0, e1):
        if e + PREFETCH < nnz:
            prefetch_row(k, indices[e + PREFETCH])
            prefetch_row(v, indices[e + PREFETCH])
        j = indices[e]
        _dot_lanes(qs, k, j, raw)
        _dot_lanes(gs, v, j, dp)
        _probabilities(raw, dp, scale, compat, clamp, bias, has_bias, e, lse, delta, i, p, ds)
        if want_ds:
            for h in range(num_heads):
                ds_buf[e, h] = ds[h]
        if compat:
            _zero_outside_clamp(raw, clamp, ds)
        for d in range(dim):
            for h in range(num_heads):
                acc[d, h] += ds[h] * k[j, d, h]


@numba.njit(**_INL)
def _row_delta(i, dout, out, delta):
    """``delta[i, h] = <dout_i, out_i>`` (summed in float64) of heads-last ``dout`` and
    ``out (S_q, H, D)``."""
    dim, num_heads = dout.shape[1], dout.shape[2]
    for h in range(num_heads):
        t = 0.0
        for d in range(dim):
            t += dout[i, d, h] * out[i, h, d]
        delta[i, h] = t


@numba.njit(**_INL)
def _cols_entries(j, t0, t1, t_query, t_eid, q, k, v, bias, has_bias, scale, compat, clamp,
                  lse, delta, dout, ks, vs, lane, acc_k, acc_v):
    """dk (unscaled) and dv of key ``j`` over its by-key entries ``t0:t1``."""
    dim, num_heads = q.shape[1], q.shape[2]
    nnz = t_query.shape[0]
    _load_row(k, j, ks)
    _load_row(v, j, vs)
    raw, dp, p, ds = lane[0], lane[1], lane[2], lane[3]
    acc_k[:, :] = 0.0
    acc_v[:, :] = 0.0
    for t in range(t0, t1):
        if t + PREFETCH < nnz:
            ahead = t_query[t + PREFETCH]
            prefetch_row(q, ahead)
            prefetch_row(dout, ahead)
            prefetch_row(lse, ahead)
            prefetch_row(delta, ahead)
        i = t_query[t]
        _dot_lanes(ks, q, i, raw)
        _dot_lanes(vs, dout, i, dp)
        _probabilities(raw, dp, scale, compat, clamp, bias, has_bias, t_eid[t], lse, delta, i,
                       p, ds)
        if compat:
            _zero_outside_clamp(raw, clamp, ds)
        for d in range(dim):
            for h in range(num_heads):
                acc_v[d, h] += p[h] * dout[i, d, h]
        for d in range(dim):  # two loops: each vectorises (fused, neither did)
            for h in range(num_heads):
                acc_k[d, h] += ds[h] * q[i, d, h]


@numba.njit(**_JIT)
def backward(indptr, indices, t_indptr, t_query, t_eid, q, k, v, bias, has_bias, scale,
             compat, clamp, lse, out, dout, dq, dk, dv, delta, ds_buf, want_ds,
             r_chunk, r_seg_row, r_seg_start, r_seg_end, r_long, r_long_ptr,
             c_chunk, c_seg_row, c_seg_start, c_seg_end, c_long, c_long_ptr, target):
    """dq, dk, dv in the public layout ``(S, H, D)`` (and ``delta (S_q, H)``; ``ds`` per
    entry into ``ds_buf (nnz, H)`` when ``want_ds``) from heads-last ``q``, ``k``, ``v``,
    ``dout`` and the forward pass's ``out (S_q, H, D)``. ``scale``/``clamp`` in q's dtype."""
    dim, num_heads = q.shape[1], q.shape[2]
    fscale = float(scale)
    # ---- delta, then dq by rows
    for i in prange(q.shape[0]):
        _row_delta(i, dout, out, delta)
    n_chunks = r_chunk.shape[0] - 1
    n_seg = r_seg_row.shape[0]
    part = np.empty((n_seg, dim, num_heads), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        acc = np.empty((dim, num_heads), dtype=np.float64)
        qs = np.empty((dim, num_heads), dtype=q.dtype)
        gs = np.empty((dim, num_heads), dtype=q.dtype)
        lane = np.empty((4, num_heads), dtype=q.dtype)
        if w < n_chunks:
            for i in range(r_chunk[w], r_chunk[w + 1]):
                if indptr[i + 1] - indptr[i] > target:
                    continue
                _rows_entries(i, indptr[i], indptr[i + 1], indices, q, k, v, bias, has_bias,
                              scale, compat, clamp, lse, delta, dout, qs, gs, lane, acc,
                              ds_buf, want_ds)
                for h in range(num_heads):
                    for d in range(dim):
                        dq[i, h, d] = acc[d, h] * fscale
        else:
            g = w - n_chunks
            _rows_entries(r_seg_row[g], r_seg_start[g], r_seg_end[g], indices, q, k, v, bias,
                          has_bias, scale, compat, clamp, lse, delta, dout, qs, gs, lane, acc,
                          ds_buf, want_ds)
            part[g, :, :] = acc
    for r in prange(r_long.shape[0]):
        i = r_long[r]
        for h in range(num_heads):
            for d in range(dim):
                t = 0.0
                for g in range(r_long_ptr[r], r_long_ptr[r + 1]):
                    t += part[g, d, h]
                dq[i, h, d] = t * fscale
    # ---- by keys: dk and dv
    n_chunks = c_chunk.shape[0] - 1
    n_seg = c_seg_row.shape[0]
    part_k = np.empty((n_seg, dim, num_heads), dtype=np.float64)
    part_v = np.empty((n_seg, dim, num_heads), dtype=np.float64)
    for w in prange(n_chunks + n_seg):
        acc_k = np.empty((dim, num_heads), dtype=np.float64)
        acc_v = np.empty((dim, num_heads), dtype=np.float64)
        ks = np.empty((dim, num_heads), dtype=q.dtype)
        vs = np.empty((dim, num_heads), dtype=q.dtype)
        lane = np.empty((4, num_heads), dtype=q.dtype)
        if w < n_chunks:
            for j in range(c_chunk[w], c_chunk[w + 1]):
                if t_indptr[j + 1] - t_indptr[j] > target:
                    continue
                _cols_entries(j, t_indptr[j], t_indptr[j + 1], t_query, t_eid, q, k, v, bias,
                              has_bias, scale, compat, clamp, lse, delta, dout, ks, vs, lane,
                              acc_k, acc_v)
                for h in range(num_heads):
                    for d in range(dim):
                        dk[j, h, d] = acc_k[d, h] * fscale
                        dv[j, h, d] = acc_v[d, h]
        else:
            g = w - n_chunks
            _cols_entries(c_seg_row[g], c_seg_start[g], c_seg_end[g], t_query, t_eid, q, k, v,
                          bias, has_bias, scale, compat, clamp, lse, delta, dout, ks, vs, lane,
                          acc_k, acc_v)
            part_k[g, :, :] = acc_k
            part_v[g, :, :] = acc_v
    for r in prange(c_long.shape[0]):
        j = c_long[r]
        for h in range(num_heads):
            for d in range(dim):
                tk = 0.0
                tv = 0.0
                for g in range(c_long_ptr[r], c_long_ptr[r + 1]):
                    tk += part_k[g, d, h]
                    tv += part_v[g, d, h]
                dk[j, h, d] = tk * fscale
                dv[j, h, d] = tv
