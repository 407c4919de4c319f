"""The :class:`ClusterLoader`: sequences of nodes for graph transformers (TorchGT §2).

Node-level stores (one big graph): per epoch the input nodes are cut into
consecutive slices; each slice is one sequence (batch size 1). Graph-level stores
(many small graphs, ``graph/ptr`` + ``graph/label``): each graph is one sequence,
``batch_size`` graphs per batch, padded to the longest.

Every sequence carries its attention pattern, a CSR over queries:

- *graph edges* (``edge_kind`` 1): the edges of the subgraph induced by the
  sequence, **symmetrised**: query ``i`` attends to key ``j`` iff ``j -> i`` or
  ``i -> j`` is an edge of the store (TorchGT trains on symmetric edge lists, so a
  node sees its in- and out-neighbours inside the sequence). Self-loops and
  duplicate edges of the store are dropped here;
- *self-loops* (``edge_kind`` 0): exactly one per position (TorchGT's condition C1,
  so no attention row is empty), padding positions included;
- *global-token edges* (``edge_kind`` 2): with ``global_token`` a virtual node at
  position 0 attends to every node of its sequence and every node attends to it.

With ``reorder="metis"`` the nodes of each sequence are clustered by METIS on the
induced subgraph (:class:`graphpipe.ops.partition.SequencePartitioner`, cached by
node set) and reordered cluster by cluster, original order kept inside a cluster;
the token stays at position 0 as a cluster of its own. ``reorder="store"`` uses
the store's global partition (``graphpipe partition STORE --parts K``) restricted
to the sequence instead.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from graphpipe.ops.cluster_sparse import ClusterSparsePattern

__all__ = ["ClusterLoader", "SequenceBatch"]


@dataclass
class SequenceBatch:
    """``B`` sequences of ``S`` positions (padded; the global token, if any, at position 0).

    Attributes:
        node_ids: int64 ``(B, S)`` global node IDs in sequence (reordered) order; -1 at
            the global token and at padding.
        x: float32 ``(B, S, F)`` features of ``node_ids``; zeros at token/padding.
        y: int64 ``(B, S)`` node labels; -100 at token, padding, unlabelled (label < 0
            or NaN) and non-target positions (all positions of graph-level batches).
        mask: bool ``(B, S)``: True at real node positions (not token, not padding).
        indptr: int64 ``(B*S + 1,)``: attention pattern, CSR over queries of the
            flattened batch (sequence ``b`` occupies flat positions ``b*S .. b*S+S-1``;
            block-diagonal).
        indices: int64 ``(nnz,)`` key flat positions, ascending and distinct per row.
        edge_kind: int64 ``(nnz,)``: 0 self-loop (the token's own included), 1 graph
            edge, 2 global-token edge (either direction).
        in_degree: int64 ``(B, S)`` in-degree in the whole graph (node-level) or in its
            graph (graph-level) as stored, clamped to ``max_degree``; 0 at token/padding.
        out_degree: int64 ``(B, S)`` the same for out-degree.
        perm: int64 ``(B, S)``: reordered position ``p`` holds position ``perm[p]`` of
            the un-reordered sequence (identity with ``reorder="none"``, and always at
            the token and at padding).
        inverse: int64 ``(B, S)``: ``inverse[b, perm[b]] == arange(S)``.
        offsets: int64 ``(K + 1,)`` cluster boundaries over positions (the token is a
            cluster of its own at the front) when reordered and ``B == 1``; else None.
        cluster_sparse: the cluster-sparse rewrite of the pattern
            (:func:`graphpipe.ops.cluster_sparse.cluster_sparse_pattern`) when
            ``pattern="cluster-sparse"``; else None. ``indptr``/``indices`` keep the
            exact pattern.
        spd: int64 ``(B, S, S)`` shortest-path-distance buckets over the symmetrised
            induced subgraph: 0 self, ``1 .. max_dist-1`` hops, ``max_dist`` unreachable
            or farther; the token's row and column (its diagonal included) hold
            ``max_dist + 1``; padding rows/columns hold ``max_dist`` (0 on the
            diagonal). Only when ``S <= spd_max_len``; else None.
        graph_y: int64 ``(B,)`` graph labels (graph-level stores); else None.
        global_token: whether position 0 is a global token.
        batch_size: B.
        seq_len: S (padded length, token included).
    """

    node_ids: torch.Tensor
    x: torch.Tensor
    y: torch.Tensor
    mask: torch.Tensor
    indptr: torch.Tensor
    indices: torch.Tensor
    edge_kind: torch.Tensor
    in_degree: torch.Tensor
    out_degree: torch.Tensor
    perm: torch.Tensor
    inverse: torch.Tensor
    offsets: torch.Tensor | None
    cluster_sparse: ClusterSparsePattern | None
    spd: torch.Tensor | None
    graph_y: torch.Tensor | None
    global_token: bool
    batch_size: int
    seq_len: int

    def to(self, device: torch.device | str) -> SequenceBatch:
        """A copy with every tensor on ``device`` (the cluster-sparse pattern stays
        NumPy; use ``cluster_sparse.tensors(device)``)."""
        moved = {}
        for f in fields(self):
            value = getattr(self, f.name)
            moved[f.name] = value.to(device) if isinstance(value, torch.Tensor) else value
        return SequenceBatch(**moved)


class ClusterLoader:
    """Sequences for graph transformers (skeleton; the full loader follows)."""

    def __init__(self, *args, **kwargs) -> None:
        raise NotImplementedError("ClusterLoader is being implemented")
