"""Numba CPU kernels behind :mod:`graphpipe.ops.aggregate`.

Every kernel works on a compressed row structure ``indptr`` (int64, rows + 1) /
``indices`` (int64, E): row ``r`` owns the entries ``indptr[r]:indptr[r + 1]``.
The same kernels serve the forward pass (rows = destinations of the block,
``indices`` = local sources, CSC by destination) and the backward pass (rows =
sources, ``indices`` = destinations, the transposed CSR copy built once per block by
:func:`transpose_csc`). Rows are processed in parallel, each row by one thread,
entries of a row in storage order: no atomics, and the result is bitwise
reproducible for a given thread count (indeed for any thread count, since a row's
sum never depends on how rows are split over threads).

Inputs are NumPy views of contiguous CPU tensors; outputs are written in place.
"""

from __future__ import annotations

import numba
import numpy as np

_JIT = {"cache": True, "nogil": True, "parallel": True}

# --------------------------------------------------------------------------- structure


@numba.njit(cache=True, nogil=True)
def transpose_csc(indptr: np.ndarray, indices: np.ndarray, num_src: int):
    """CSC by destination -> CSR by source, stable.

    Returns ``(t_indptr (num_src+1,), t_dst (E,), t_eid (E,))`` int64: the entries of
    source ``v`` are ``t_indptr[v]:t_indptr[v+1]``; ``t_dst`` is the destination of
    each entry and ``t_eid`` its position in the CSC ``indices`` array. Within a
    source, entries are in increasing destination (then edge) order, so the backward
    sums are in a fixed order.
    """
    num_dst = indptr.shape[0] - 1
    num_edges = indices.shape[0]
    t_indptr = np.zeros(num_src + 1, dtype=np.int64)
    for e in range(num_edges):
        t_indptr[indices[e] + 1] += 1
    for v in range(num_src):
        t_indptr[v + 1] += t_indptr[v]
    fill = t_indptr[:-1].copy()
    t_dst = np.empty(num_edges, dtype=np.int64)
    t_eid = np.empty(num_edges, dtype=np.int64)
    for u in range(num_dst):
        for e in range(indptr[u], indptr[u + 1]):
            v = indices[e]
            k = fill[v]
            t_dst[k] = u
            t_eid[k] = e
            fill[v] = k + 1
    return t_indptr, t_dst, t_eid


@numba.njit(cache=True, nogil=True)
def validate_csc(indptr: np.ndarray, indices: np.ndarray, num_src: int) -> int:
    """Return -1 if the structure is valid, else a code: 0 indptr[0] != 0,
    1 indptr decreasing, 2 indptr[-1] != E, 3 index out of [0, num_src)."""
    if indptr[0] != 0:
        return 0
    for r in range(indptr.shape[0] - 1):
        if indptr[r + 1] < indptr[r]:
            return 1
    if indptr[indptr.shape[0] - 1] != indices.shape[0]:
        return 2
    for e in range(indices.shape[0]):
        if indices[e] < 0 or indices[e] >= num_src:
            return 3
    return -1


# --------------------------------------------------------------------------- SpMM


@numba.njit(**_JIT)
def spmm_sum(indptr, indices, x, row_scale, out):
    """out[r, :F] = s_r * sum_{e in row r} x[indices[e], :]; x (N, F), out (R, F) or wider
    (its other columns are left as they are: SAGE's fused buffer).

    ``row_scale`` is ``(R,)`` (s_r) or empty (s_r = 1); scaling happens while the row
    is still in cache, after its sum, so mean costs no extra pass."""
    num_rows = indptr.shape[0] - 1
    num_feat = x.shape[1]
    scaled = row_scale.shape[0] > 0
    for r in numba.prange(num_rows):
        acc = out[r]
        for f in range(num_feat):
            acc[f] = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            src = x[indices[e]]
            for f in range(num_feat):
                acc[f] += src[f]
        if scaled:
            s = row_scale[r]
            for f in range(num_feat):
                acc[f] *= s


@numba.njit(**_JIT)
def spmm_weighted(indptr, indices, weight, x, row_scale, out):
    """out[r, :] = s_r * sum_{e in row r} weight[e] * x[indices[e], :]; weight (E,),
    ``row_scale`` as in :func:`spmm_sum`."""
    num_rows = indptr.shape[0] - 1
    num_feat = x.shape[1]
    scaled = row_scale.shape[0] > 0
    for r in numba.prange(num_rows):
        acc = out[r]
        for f in range(num_feat):
            acc[f] = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            src = x[indices[e]]
            w = weight[e]
            for f in range(num_feat):
                acc[f] += w * src[f]
        if scaled:
            s = row_scale[r]
            for f in range(num_feat):
                acc[f] *= s


@numba.njit(**_JIT)
def spmm_weighted_gather(indptr, indices, weight, weight_index, x, row_scale, out):
    """out[r, :] = sum_{e in row r} weight[weight_index[e]] * x[indices[e], :].

    The transposed pass reads per-edge weights through ``t_eid`` and per-destination
    weights (the mean's 1/deg) through ``t_dst`` without materialising them; GCN reads
    per-node scales through the neighbour index. ``row_scale`` as in :func:`spmm_sum`."""
    num_rows = indptr.shape[0] - 1
    num_feat = x.shape[1]
    scaled = row_scale.shape[0] > 0
    for r in numba.prange(num_rows):
        acc = out[r]
        for f in range(num_feat):
            acc[f] = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            src = x[indices[e]]
            w = weight[weight_index[e]]
            for f in range(num_feat):
                acc[f] += w * src[f]
        if scaled:
            s = row_scale[r]
            for f in range(num_feat):
                acc[f] *= s


@numba.njit(**_JIT)
def spmm_heads(indptr, indices, alpha, alpha_index, x, out):
    """Multi-head weighted SpMM.

    out[r, h, :] = sum_{e in row r} alpha[alpha_index[e], h] * x[indices[e], h, :]
    with alpha (E, H), x (N, H, D), out (R, H, D). ``alpha_index`` is the identity
    in the forward pass and ``t_eid`` in the transposed pass.
    """
    num_rows = indptr.shape[0] - 1
    num_heads = x.shape[1]
    head_dim = x.shape[2]
    for r in numba.prange(num_rows):
        acc = out[r]
        for h in range(num_heads):
            for d in range(head_dim):
                acc[h, d] = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            src = x[indices[e]]
            a = alpha[alpha_index[e]]
            for h in range(num_heads):
                w = a[h]
                for d in range(head_dim):
                    acc[h, d] += w * src[h, d]


# --------------------------------------------------------------------------- SDDMM


@numba.njit(**_JIT)
def sddmm_dot(indptr, indices, dst_feat, src_feat, out):
    """out[e] = <dst_feat[r, :], src_feat[indices[e], :]> for e in row r."""
    num_rows = indptr.shape[0] - 1
    num_feat = src_feat.shape[1]
    for r in numba.prange(num_rows):
        g = dst_feat[r]
        for e in range(indptr[r], indptr[r + 1]):
            s = src_feat[indices[e]]
            acc = 0.0
            for f in range(num_feat):
                acc += g[f] * s[f]
            out[e] = acc


@numba.njit(**_JIT)
def sddmm_dot_heads(indptr, indices, dst_feat, src_feat, out):
    """out[e, h] = <dst_feat[r, h, :], src_feat[indices[e], h, :]>."""
    num_rows = indptr.shape[0] - 1
    num_heads = src_feat.shape[1]
    head_dim = src_feat.shape[2]
    for r in numba.prange(num_rows):
        g = dst_feat[r]
        for e in range(indptr[r], indptr[r + 1]):
            s = src_feat[indices[e]]
            for h in range(num_heads):
                acc = 0.0
                for d in range(head_dim):
                    acc += g[h, d] * s[h, d]
                out[e, h] = acc


@numba.njit(**_JIT)
def sddmm_add_leaky(indptr, indices, a_src, a_dst, negative_slope, out):
    """out[e, h] = leaky_relu(a_src[indices[e], h] + a_dst[r, h])."""
    num_rows = indptr.shape[0] - 1
    num_heads = a_src.shape[1]
    for r in numba.prange(num_rows):
        for e in range(indptr[r], indptr[r + 1]):
            v = indices[e]
            for h in range(num_heads):
                z = a_src[v, h] + a_dst[r, h]
                out[e, h] = z if z > 0 else z * negative_slope


@numba.njit(**_JIT)
def sddmm_add_leaky_backward_dst(indptr, indices, a_src, a_dst, negative_slope, grad, grad_pre,
                                 grad_dst):
    """grad_pre[e, h] = grad[e, h] * leaky'(z); grad_dst[r, h] = sum over row r."""
    num_rows = indptr.shape[0] - 1
    num_heads = a_src.shape[1]
    for r in numba.prange(num_rows):
        for h in range(num_heads):
            grad_dst[r, h] = 0.0
        for e in range(indptr[r], indptr[r + 1]):
            v = indices[e]
            for h in range(num_heads):
                z = a_src[v, h] + a_dst[r, h]
                g = grad[e, h] if z > 0 else grad[e, h] * negative_slope
                grad_pre[e, h] = g
                grad_dst[r, h] += g


@numba.njit(**_JIT)
def segment_sum_gather(t_indptr, t_eid, values, out):
    """out[v, h] = sum_{k in row v} values[t_eid[k], h] (per-source sums of edge values)."""
    num_rows = t_indptr.shape[0] - 1
    num_heads = values.shape[1]
    for v in numba.prange(num_rows):
        for h in range(num_heads):
            out[v, h] = 0.0
        for k in range(t_indptr[v], t_indptr[v + 1]):
            e = t_eid[k]
            for h in range(num_heads):
                out[v, h] += values[e, h]


# --------------------------------------------------------------------------- edge softmax


@numba.njit(**_JIT)
def edge_softmax_forward(indptr, scores, out):
    """Per-row, per-head softmax of scores (E, H), max-subtracted."""
    num_rows = indptr.shape[0] - 1
    num_heads = scores.shape[1]
    for r in numba.prange(num_rows):
        lo = indptr[r]
        hi = indptr[r + 1]
        if hi == lo:
            continue
        for h in range(num_heads):
            m = scores[lo, h]
            for e in range(lo + 1, hi):
                m = max(m, scores[e, h])
            s = 0.0
            for e in range(lo, hi):
                p = np.exp(scores[e, h] - m)
                out[e, h] = p
                s += p
            inv = 1.0 / s
            for e in range(lo, hi):
                out[e, h] *= inv


@numba.njit(**_JIT)
def edge_softmax_backward(indptr, alpha, grad, out):
    """grad_scores[e, h] = alpha[e, h] * (grad[e, h] - sum_row alpha * grad)."""
    num_rows = indptr.shape[0] - 1
    num_heads = alpha.shape[1]
    for r in numba.prange(num_rows):
        lo = indptr[r]
        hi = indptr[r + 1]
        for h in range(num_heads):
            s = 0.0
            for e in range(lo, hi):
                s += alpha[e, h] * grad[e, h]
            for e in range(lo, hi):
                out[e, h] = alpha[e, h] * (grad[e, h] - s)
