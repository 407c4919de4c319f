"""Attention over a :class:`graphpipe.loaders.cluster.SequenceBatch` in three modes.

A graph-transformer step attends in one of three ways, chosen per step (the
interleaving schedule of :mod:`graphpipe.train.interleave` picks it):

- ``"sparse"``: the batch's exact pattern (``indptr``/``indices``, a CSR over the
  ``B·S`` flattened positions) through :func:`graphpipe.ops.attention.sparse_attention`;
- ``"cluster-sparse"``: the loader's :class:`~graphpipe.ops.attention.cluster_sparse.ClusterSparsePattern`
  (``B == 1``). Without an attention bias it runs
  :func:`~graphpipe.ops.attention.cluster_sparse.cluster_sparse_attention`; that kernel takes no
  bias, so with a bias the pattern's whole mask ``M`` (``csp.to_csr()``) runs through
  the sparse kernel with a per-entry bias instead (same mask, same numbers);
- ``"dense"``: every query attends every real key of its own sequence (and the global
  token, and itself), through ``torch.nn.functional.scaled_dot_product_attention``
  with an additive mask (its memory-efficient kernel on CUDA). ``dense_context(...,
  restrict_to_pattern=True)`` masks it to the sparse pattern instead: the test oracle
  that the sparse and dense paths compute the same function.

**Bias buckets** (Graphormer's spatial encoding restricted to a pattern, TorchGT digest
§6.2 [R]): every attended pair gets a bucket in ``[0, max_dist + 1]``:
0 self, 1 graph edge (one hop), ``2 .. max_dist - 1`` farther hops (dense mode with the
loader's SPD matrix only), ``max_dist`` "far" (not an edge of the sequence: the entries
the cluster-sparse format adds, and non-adjacent pairs of a dense step without SPD),
``max_dist + 1`` the global token's virtual distance. This is the loader's SPD bucket
convention, so one ``(max_dist + 2, H)`` embedding serves every mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from graphpipe.ops.attention import sparse_attention
from graphpipe.ops.attention.cluster_sparse import ClusterSparsePattern, cluster_sparse_attention

__all__ = [
    "ATTENTION_MODES",
    "KIND_EDGE",
    "KIND_SELF",
    "KIND_TOKEN",
    "AttentionContext",
    "attend",
    "cluster_sparse_context",
    "dense_attention_bytes",
    "dense_context",
    "kind_buckets",
    "make_context",
    "score_bias",
    "sparse_context",
]

ATTENTION_MODES = ("sparse", "cluster-sparse", "dense")
KIND_SELF, KIND_EDGE, KIND_TOKEN = 0, 1, 2          # SequenceBatch.edge_kind values


def kind_buckets(max_dist: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """int64 ``(3,)``: the bias bucket of edge kinds 0 (self), 1 (edge), 2 (token)."""
    return torch.tensor([0, 1, max_dist + 1], dtype=torch.int64, device=device)


@dataclass
class AttentionContext:
    """What every attention layer of one forward pass needs (built once per step).

    Attributes:
        mode: ``"sparse"``, ``"cluster-sparse"`` or ``"dense"``.
        batch_size, seq_len: B and S; positions are flattened to ``B·S``.
        indptr, indices: int64 CSR over the ``B·S`` queries (sparse modes; for
            cluster-sparse only when ``csp`` is None).
        buckets: int64 bias bucket per entry, ``(nnz,)`` (sparse modes) or
            ``(B, S, S)`` (dense); None when the model has no bias.
        csp: the cluster-sparse pattern, run by the block kernel (no bias).
        allowed: bool ``(B, S, S)``: the dense mask (query row, key column).
        exchange: set by sequence parallelism
            (:class:`graphpipe.train.sequence_parallel.HeadExchange`): :func:`attend` gets
            this rank's chunk of positions and routes it through the exchange's
            all-to-alls, :func:`score_bias` keeps the rank's heads; None otherwise.
    """

    mode: str
    batch_size: int
    seq_len: int
    indptr: torch.Tensor | None = None
    indices: torch.Tensor | None = None
    buckets: torch.Tensor | None = None
    csp: ClusterSparsePattern | None = None
    allowed: torch.Tensor | None = None
    exchange: Any = None


def _check_max_dist(max_dist: int) -> None:
    if isinstance(max_dist, bool) or not isinstance(max_dist, int) or max_dist < 2:
        raise ValueError(f"'max_dist' must be an integer >= 2 (got {max_dist!r})")


def sparse_context(batch: Any, *, max_dist: int = 8, with_bias: bool = True) -> AttentionContext:
    """The exact pattern of ``batch`` (buckets from ``edge_kind``)."""
    _check_max_dist(max_dist)
    buckets = None
    if with_bias:
        buckets = kind_buckets(max_dist, batch.edge_kind.device)[batch.edge_kind]
    return AttentionContext("sparse", int(batch.batch_size), int(batch.seq_len),
                            indptr=batch.indptr, indices=batch.indices, buckets=buckets)


def cluster_sparse_context(batch: Any, *, max_dist: int = 8, with_bias: bool = True
                           ) -> AttentionContext:
    """The cluster-sparse pattern of ``batch`` (``B == 1``, loader ``pattern="cluster-sparse"``).

    With ``with_bias`` the mask ``M`` is expanded to a CSR whose entries get the bucket of
    the same pair in the exact pattern (self, edge, token), or ``max_dist`` ("far") for
    pairs the format added."""
    _check_max_dist(max_dist)
    csp = getattr(batch, "cluster_sparse", None)
    if csp is None:
        raise ValueError("the batch has no cluster-sparse pattern: build the ClusterLoader with "
                         "pattern='cluster-sparse'")
    if int(batch.batch_size) != 1 or csp.size != int(batch.seq_len):
        raise ValueError(f"cluster-sparse attention needs one sequence of {csp.size} positions "
                         f"(got batch_size={batch.batch_size}, seq_len={batch.seq_len})")
    if not with_bias:
        return AttentionContext("cluster-sparse", 1, int(batch.seq_len), csp=csp)
    device = batch.indptr.device
    m_ptr, m_idx = csp.to_csr()
    s = int(batch.seq_len)
    ex_ptr = batch.indptr.cpu().numpy()
    ex_idx = batch.indices.cpu().numpy()
    ex_rows = np.repeat(np.arange(s, dtype=np.int64), np.diff(ex_ptr))
    ex_key = ex_rows * s + ex_idx                 # ascending: rows ascending, keys ascending per row
    order = np.argsort(ex_key, kind="stable")     # robust to any per-row order
    ex_key = ex_key[order]
    ex_kind = batch.edge_kind.cpu().numpy()[order]
    m_rows = np.repeat(np.arange(s, dtype=np.int64), np.diff(m_ptr))
    m_key = m_rows * s + m_idx
    pos = np.minimum(np.searchsorted(ex_key, m_key), max(ex_key.shape[0] - 1, 0))
    found = ex_key[pos] == m_key if ex_key.shape[0] else np.zeros(m_key.shape[0], bool)
    table = np.array([0, 1, max_dist + 1], dtype=np.int64)
    buckets = np.where(found, table[ex_kind[pos]] if ex_key.shape[0] else max_dist, max_dist)
    buckets = np.where(m_rows == m_idx, 0, buckets)
    return AttentionContext("cluster-sparse", 1, s,
                            indptr=torch.from_numpy(m_ptr).to(device),
                            indices=torch.from_numpy(m_idx).to(device),
                            buckets=torch.from_numpy(buckets.astype(np.int64)).to(device))


def dense_context(batch: Any, *, max_dist: int = 8, with_bias: bool = True,
                  restrict_to_pattern: bool = False, use_spd: bool = True) -> AttentionContext:
    """Full attention within each sequence (or, with ``restrict_to_pattern``, the sparse
    pattern as a dense mask).

    Full mask: query ``i`` attends key ``j`` of its sequence iff ``j`` is a real node or
    the global token, or ``j == i``. Buckets: the loader's SPD matrix when present and
    ``use_spd`` (and not ``restrict_to_pattern``), else self 0 / edge 1 / token
    ``max_dist + 1`` from the pattern and ``max_dist`` ("far") elsewhere."""
    _check_max_dist(max_dist)
    b, s = int(batch.batch_size), int(batch.seq_len)
    device = batch.indptr.device
    flat_rows = torch.repeat_interleave(torch.arange(b * s, device=device),
                                        batch.indptr[1:] - batch.indptr[:-1],
                                        output_size=int(batch.indices.shape[0]))
    seq = flat_rows // s
    qi, kj = flat_rows % s, batch.indices % s
    eye = torch.eye(s, dtype=torch.bool, device=device)[None]
    if restrict_to_pattern:
        allowed = torch.zeros(b, s, s, dtype=torch.bool, device=device)
        allowed[seq, qi, kj] = True
    else:
        valid_key = batch.mask.clone()
        if batch.global_token:
            valid_key[:, 0] = True
        allowed = valid_key[:, None, :] | eye
    buckets = None
    if with_bias:
        spd = getattr(batch, "spd", None)
        if spd is not None and use_spd and not restrict_to_pattern:
            buckets = spd.to(torch.int64).clamp(0, max_dist + 1)
        else:
            buckets = torch.full((b, s, s), max_dist, dtype=torch.int64, device=device)
            buckets.masked_fill_(eye, 0)
            buckets[seq, qi, kj] = kind_buckets(max_dist, device)[batch.edge_kind]
    return AttentionContext("dense", b, s, buckets=buckets, allowed=allowed)


def make_context(batch: Any, mode: str, *, max_dist: int = 8, with_bias: bool = True
                 ) -> AttentionContext:
    """The context of ``mode`` (one of :data:`ATTENTION_MODES`)."""
    if mode == "sparse":
        return sparse_context(batch, max_dist=max_dist, with_bias=with_bias)
    if mode == "cluster-sparse":
        return cluster_sparse_context(batch, max_dist=max_dist, with_bias=with_bias)
    if mode == "dense":
        return dense_context(batch, max_dist=max_dist, with_bias=with_bias)
    raise ValueError(f"'attention' must be one of {', '.join(ATTENTION_MODES)} (got {mode!r})")


def score_bias(ctx: AttentionContext, bias_table: torch.Tensor | None,
               dtype: torch.dtype = torch.float32) -> torch.Tensor | None:
    """The additive score bias of one step, computed once and shared by every layer.

    Args:
        ctx: from :func:`make_context`.
        bias_table: float ``(max_dist + 2, H)`` per-bucket, per-head bias, or None.
        dtype: the attention's dtype.

    Returns:
        sparse modes: ``(nnz, H)`` per entry (None without a table, or on the block
        kernel); dense: the ``(B, H, S, S)`` mask (bias, ``-inf`` where not allowed), or
        ``(B, 1, S, S)`` without a table.
    """
    use_table = bias_table is not None and ctx.buckets is not None
    if use_table and ctx.exchange is not None:      # sequence parallel: this rank's heads
        bias_table = bias_table[:, ctx.exchange.head_slice(int(bias_table.shape[1]))]
    if ctx.mode != "dense":
        if not use_table or ctx.csp is not None:
            return None
        return bias_table.to(dtype)[ctx.buckets]
    neg = torch.zeros(ctx.allowed.shape, dtype=dtype, device=ctx.allowed.device)
    neg.masked_fill_(~ctx.allowed, -math.inf)
    if not use_table:
        return neg[:, None]
    return bias_table.to(dtype)[ctx.buckets].permute(0, 3, 1, 2) + neg[:, None]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: AttentionContext,
           bias: torch.Tensor | None = None) -> torch.Tensor:
    """Multi-head attention of the flattened batch.

    Args:
        q, k, v: float ``(B·S, H, D)``.
        ctx: from :func:`make_context`.
        bias: from :func:`score_bias` (dense mode: required, it carries the mask).

    Returns:
        ``(B·S, H, D)``; scale ``1/sqrt(D)``.
    """
    if ctx.exchange is not None:   # q, k, v: this rank's chunk of positions
        return ctx.exchange.attend(q, k, v, ctx, bias)
    n, heads, dim = q.shape
    if n != ctx.batch_size * ctx.seq_len:
        raise ValueError(f"'q' must have B·S = {ctx.batch_size * ctx.seq_len} rows (got {n})")
    if ctx.mode == "dense":
        if bias is None:
            bias = score_bias(ctx, None, q.dtype)
        b, s = ctx.batch_size, ctx.seq_len
        qd, kd, vd = (t.view(b, s, heads, dim).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(qd, kd, vd, attn_mask=bias)
        return out.transpose(1, 2).reshape(n, heads, dim)
    if ctx.csp is not None:
        return cluster_sparse_attention(q, k, v, ctx.csp)
    return sparse_attention(q, k, v, ctx.indptr, ctx.indices, bias=bias)


def dense_attention_bytes(batch_size: int, seq_len: int, heads: int, num_layers: int, *,
                          device_type: str = "cpu", with_bias: bool = True) -> int:
    """Bytes a dense step is estimated to hold, beyond the sparse path's.

    The ``(B, H, S, S)`` float32 mask/bias (``S²·H·4`` bytes a sequence) and its
    gradient; on the CPU torch's math kernel also keeps the ``(B, H, S, S)`` attention
    probabilities and scores of every layer for the backward pass."""
    per_matrix = int(batch_size) * int(heads) * int(seq_len) ** 2 * 4
    matrices = 2 if with_bias else 1
    if device_type != "cuda":
        matrices += 2 * int(num_layers)
    return per_matrix * matrices
