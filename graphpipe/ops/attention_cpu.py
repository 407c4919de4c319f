"""Numba CPU kernels behind :func:`graphpipe.ops.attention.sparse_attention`.

Layout: ``q`` ``(S_q, H, D)``, ``k``/``v`` ``(S_k, H, D)``, C-contiguous; the pattern is
a CSR over queries (``indptr (S_q + 1,)``, ``indices (nnz,)`` key positions) and, for
the backward pass, its by-key copy (``t_indptr (S_k + 1,)``, ``t_query (nnz,)``,
``t_eid (nnz,)``: entry ``t`` of key ``j`` is pattern entry ``t_eid[t]``, query
``t_query[t]``).

Rows are processed in parallel in chunks of :data:`ROW_CHUNK` (one thread per
chunk, scratch allocated once per chunk), the entries of a row in storage order, all
heads of an entry together (the key row ``k[j]`` is read once). No atomics: every
output element is written by one thread, and results do not depend on the thread
count. Memory beyond inputs and outputs: ``O(H·D)`` per thread in the forward pass,
three ``(nnz, H)`` buffers in the backward pass (``p``, ``ds`` and, in the torchgt
mode, the clamp-masked ``ds``); never ``O(S²)``.

Scores: ``s = scale·<q_i, k_j>``; in the torchgt mode clamped to ``[-clamp, clamp]``;
then ``+ bias[e, h]``. A score of ``-inf`` (a ``-inf`` bias) contributes nothing.
Per row and head the kernel keeps the running maximum ``m``, the sum ``l`` of
``exp(s - m)`` and the weighted sum of values; at the end ``lse = m + log l``
(torchgt mode: ``lse = log(exp(m)·l + eps)``) and ``out = acc · exp(m - lse)``.
Rows with no contributing entry get ``out = 0`` and ``lse = -inf``.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import prange

ROW_CHUNK = 64
_JIT = {"cache": True, "nogil": True, "parallel": True, "fastmath": False}


@numba.njit(**_JIT)
def forward(indptr, indices, q, k, v, bias, has_bias, scale, compat, clamp, log_eps, out, lse):
    """Fill ``out (S_q, H, D)`` and ``lse (S_q, H)``."""
    num_q, num_heads, dim = q.shape
    num_chunks = (num_q + ROW_CHUNK - 1) // ROW_CHUNK
    for c in prange(num_chunks):
        m = np.empty(num_heads, dtype=np.float64)
        l_sum = np.empty(num_heads, dtype=np.float64)
        acc = np.empty((num_heads, dim), dtype=np.float64)
        for i in range(c * ROW_CHUNK, min(num_q, (c + 1) * ROW_CHUNK)):
            m[:] = -np.inf
            l_sum[:] = 0.0
            acc[:, :] = 0.0
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                for h in range(num_heads):
                    s = 0.0
                    for d in range(dim):
                        s += q[i, h, d] * k[j, h, d]
                    s *= scale
                    if compat:
                        s = min(max(s, -clamp), clamp)
                    if has_bias:
                        s += bias[e, h]
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
def backward_rows(indptr, indices, q, k, v, bias, has_bias, scale, compat, clamp, lse, delta,
                  dout, dq, p_buf, ds_buf, dsr_buf):
    """dQ by rows; also stores per entry ``p`` (attention weight), ``ds`` (gradient of the
    score, i.e. of the bias) and, in the torchgt mode, ``ds`` masked by the clamp (the
    gradient of the unclamped score) in ``dsr_buf``."""
    num_q, num_heads, dim = q.shape
    num_chunks = (num_q + ROW_CHUNK - 1) // ROW_CHUNK
    for c in prange(num_chunks):
        for i in range(c * ROW_CHUNK, min(num_q, (c + 1) * ROW_CHUNK)):
            for h in range(num_heads):
                for d in range(dim):
                    dq[i, h, d] = 0.0
            for e in range(indptr[i], indptr[i + 1]):
                j = indices[e]
                for h in range(num_heads):
                    raw = 0.0
                    for d in range(dim):
                        raw += q[i, h, d] * k[j, h, d]
                    raw *= scale
                    s = raw
                    if compat:
                        s = min(max(raw, -clamp), clamp)
                    if has_bias:
                        s += bias[e, h]
                    if s == -np.inf or lse[i, h] == -np.inf:
                        p = 0.0
                    else:
                        p = math.exp(s - lse[i, h])
                    dp = 0.0
                    for d in range(dim):
                        dp += dout[i, h, d] * v[j, h, d]
                    ds = p * (dp - delta[i, h])
                    p_buf[e, h] = p
                    ds_buf[e, h] = ds
                    if compat:
                        if raw < -clamp or raw > clamp:
                            ds = 0.0
                        dsr_buf[e, h] = ds
                    g = scale * ds
                    for d in range(dim):
                        dq[i, h, d] += g * k[j, h, d]


@numba.njit(**_JIT)
def backward_cols(t_indptr, t_query, t_eid, q, dout, p_buf, dsr_buf, scale, dk, dv):
    """dK and dV by keys over the by-key copy of the pattern (no atomics)."""
    num_k, num_heads, dim = dk.shape
    num_chunks = (num_k + ROW_CHUNK - 1) // ROW_CHUNK
    for c in prange(num_chunks):
        for j in range(c * ROW_CHUNK, min(num_k, (c + 1) * ROW_CHUNK)):
            for h in range(num_heads):
                for d in range(dim):
                    dk[j, h, d] = 0.0
                    dv[j, h, d] = 0.0
            for t in range(t_indptr[j], t_indptr[j + 1]):
                i = t_query[t]
                e = t_eid[t]
                for h in range(num_heads):
                    p = p_buf[e, h]
                    g = scale * dsr_buf[e, h]
                    for d in range(dim):
                        dv[j, h, d] += p * dout[i, h, d]
                        dk[j, h, d] += g * q[i, h, d]
