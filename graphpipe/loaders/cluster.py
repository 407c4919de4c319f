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
to the sequence instead. ``pattern="cluster-sparse"`` adds the block format of
:func:`graphpipe.ops.attention.cluster_sparse.cluster_sparse_pattern` over those clusters.

Graph-level store layout (written by
:func:`graphpipe.synthetic.graph_level.write_graph_level_store`):
``graph/ptr`` int64 ``(G + 1,)`` (graph ``g`` owns nodes ``[ptr[g], ptr[g + 1])``),
``graph/label`` int64 ``(G,)``, and split tables holding **graph** IDs.

Usage::

    loader = ClusterLoader(store, seq_len=4096, input_nodes="train", parts=8)
    for batch in loader:          # SequenceBatch, B = 1
        out = model(batch.x, batch.indptr, batch.indices, batch.edge_kind, ...)
        loss = cross_entropy(out.view(-1, C), batch.y.view(-1), ignore_index=-100)

    graphs = ClusterLoader(graph_store, batch_size=32, input_nodes="train")
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

import numba
import numpy as np
import torch

from graphpipe.loaders.graph_data import GraphData, node_ids, resolve_graph_data
from graphpipe.ops._core.checks import check_int
from graphpipe.ops.attention.cluster_sparse import (
    ClusterSparsePattern,
    ThresholdTuner,
    cluster_sparse_pattern,
)
from graphpipe.ops.partition import (
    SequencePartitioner,
    cluster_offsets,
    cluster_permutation,
    induced_subgraph,
    symmetric_csr,
)
from graphpipe.store.derived import partition_keys

__all__ = [
    "ClusterLoader",
    "SequenceBatch",
    "SequencePlan",
    "plan_sequence",
    "sequence_pattern",
    "shortest_path_buckets",
]

IGNORE_INDEX = -100
EDGE_SELF, EDGE_GRAPH, EDGE_TOKEN = 0, 1, 2
GRAPH_PTR, GRAPH_LABEL = "graph/ptr", "graph/label"


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
            (:func:`graphpipe.ops.attention.cluster_sparse.cluster_sparse_pattern`) when
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



# =========================================================================== one sequence


def sequence_pattern(sub_indptr: np.ndarray, sub_indices: np.ndarray, global_token: bool
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attention pattern of one sequence in its own (un-reordered) order, as COO.

    Args:
        sub_indptr: int ``(n + 1,)`` local CSC of the subgraph induced by the sequence
            (:func:`graphpipe.ops.partition.induced_subgraph`).
        sub_indices: int ``(E_sub,)`` local source of every in-edge.
        global_token: put a global token at position 0 (node ``i`` at position ``i + 1``).

    Returns:
        ``(rows, cols, kind)``, int64 ``(nnz,)``: query position, key position and edge
        kind (0 self-loop, 1 symmetrised graph edge, 2 token edge) of every entry,
        sorted by ``(row, col)``, no duplicates. ``nnz = 2·M + s (+ 2·n with the token)``
        for ``M`` undirected non-loop edges and ``s = n (+ 1)`` positions.
    """
    n = int(sub_indptr.shape[0]) - 1
    t = int(bool(global_token))
    s = n + t
    xadj, adjncy = symmetric_csr(sub_indptr, sub_indices)
    loops = np.arange(s, dtype=np.int64)
    rows = [np.repeat(np.arange(n, dtype=np.int64), np.diff(xadj)) + t, loops]
    cols = [adjncy.astype(np.int64) + t, loops]
    kinds = [np.full(adjncy.shape[0], EDGE_GRAPH, np.int64), np.full(s, EDGE_SELF, np.int64)]
    if t:
        nodes = np.arange(1, s, dtype=np.int64)
        token = np.zeros(n, dtype=np.int64)
        rows += [token, nodes]
        cols += [nodes, token]
        kinds.append(np.full(2 * n, EDGE_TOKEN, np.int64))
    row, col, kind = np.concatenate(rows), np.concatenate(cols), np.concatenate(kinds)
    order = np.lexsort((col, row))
    return row[order], col[order], kind[order]


@dataclass
class SequencePlan:
    """One sequence before padding, in its un-reordered order (token, if any, at 0).

    Attributes:
        node_ids: int64 ``(n,)`` global IDs of the nodes, in slice order.
        rows, cols, kind: int64 ``(nnz,)`` the pattern (:func:`sequence_pattern`).
        perm: int64 ``(s,)``: reordered position ``p`` holds position ``perm[p]``.
        inverse: int64 ``(s,)``: ``inverse[perm] == arange(s)``.
        offsets: int64 ``(K + 1 (+ 1 with the token),)`` cluster boundaries over the
            reordered positions, or None without reordering.
        in_degree, out_degree: int64 ``(n,)`` degrees inside the induced subgraph as
            stored (self-loops and duplicate edges counted), unclamped.
        xadj, adjncy: int64 symmetrised adjacency of the ``n`` nodes (no self-loops).
        global_token: whether position 0 is a token.
    """

    node_ids: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    kind: np.ndarray
    perm: np.ndarray
    inverse: np.ndarray
    offsets: np.ndarray | None
    in_degree: np.ndarray
    out_degree: np.ndarray
    xadj: np.ndarray
    adjncy: np.ndarray
    global_token: bool

    @property
    def size(self) -> int:
        """s: positions of the sequence, token included."""
        return int(self.node_ids.shape[0]) + int(self.global_token)


def plan_sequence(indptr: np.ndarray, indices: np.ndarray, node_ids: np.ndarray, *,
                  global_token: bool, parts: np.ndarray | None = None,
                  num_parts: int | None = None) -> SequencePlan:
    """Pattern, reordering and local degrees of the sequence ``node_ids``.

    Args:
        indptr, indices: the graph's CSC by destination.
        node_ids: int ``(n,)`` distinct global node IDs in slice order.
        global_token: prepend a global token (its own cluster at the front).
        parts: int ``(n,)`` cluster of every node (e.g. METIS on the induced subgraph),
            or None for no reordering.
        num_parts: K (``parts < K``); default ``parts.max() + 1``.

    Returns:
        A :class:`SequencePlan`.
    """
    node_ids = np.asarray(node_ids, dtype=np.int64)
    n = int(node_ids.shape[0])
    t = int(bool(global_token))
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, node_ids)
    rows, cols, kind = sequence_pattern(sub_ptr, sub_idx, global_token)
    xadj, adjncy = symmetric_csr(sub_ptr, sub_idx)
    if parts is None:
        perm_n = np.arange(n, dtype=np.int64)
        offsets = None
    else:
        parts = np.asarray(parts, dtype=np.int64)
        k = int(num_parts) if num_parts is not None else (int(parts.max()) + 1 if n else 1)
        perm_n, _ = cluster_permutation(parts, k)
        node_offsets = cluster_offsets(parts, k)
        offsets = np.concatenate([[0], node_offsets + 1]).astype(np.int64) if t else node_offsets
    perm = np.concatenate([np.zeros(t, np.int64), perm_n + t]).astype(np.int64)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.shape[0], dtype=np.int64)
    return SequencePlan(
        node_ids=node_ids, rows=rows, cols=cols, kind=kind, perm=perm, inverse=inverse,
        offsets=offsets, in_degree=np.diff(sub_ptr).astype(np.int64),
        out_degree=np.bincount(sub_idx, minlength=n).astype(np.int64),
        xadj=xadj, adjncy=adjncy, global_token=bool(global_token))


@numba.njit(cache=True, nogil=True)
def _bfs_buckets(xadj, adjncy, max_dist, out):  # pragma: no cover - compiled
    n = xadj.shape[0] - 1
    queue = np.empty(max(n, 1), dtype=np.int64)
    for src in range(n):
        dist = out[src]
        dist[src] = 0
        head, tail = 0, 1
        queue[0] = src
        while head < tail:
            v = queue[head]
            head += 1
            d = dist[v]
            if d + 1 >= max_dist:
                continue
            for e in range(xadj[v], xadj[v + 1]):
                u = adjncy[e]
                if u != src and dist[u] == max_dist:
                    dist[u] = d + 1
                    queue[tail] = u
                    tail += 1


def shortest_path_buckets(xadj: np.ndarray, adjncy: np.ndarray, max_dist: int) -> np.ndarray:
    """Hop distances of an undirected graph, bucketed.

    Args:
        xadj, adjncy: int symmetric adjacency (CSR, :func:`symmetric_csr`), ``n`` nodes.
        max_dist: >= 1; distances ``>= max_dist`` and unreachable pairs get ``max_dist``.

    Returns:
        int64 ``(n, n)``: 0 on the diagonal, ``d`` for ``1 <= d < max_dist`` hops,
        else ``max_dist``.
    """
    xadj = np.ascontiguousarray(xadj, dtype=np.int64)
    adjncy = np.ascontiguousarray(adjncy, dtype=np.int64)
    n = int(xadj.shape[0]) - 1
    out = np.full((n, n), int(max_dist), dtype=np.int64)
    _bfs_buckets(xadj, adjncy, int(max_dist), out)
    return out


def _spd_matrix(plan: SequencePlan, size: int, max_dist: int) -> np.ndarray:
    """int64 ``(size, size)`` spd buckets of a padded sequence, in reordered order."""
    s, t = plan.size, int(plan.global_token)
    full = np.full((size, size), max_dist, dtype=np.int64)
    np.fill_diagonal(full, 0)
    full[t:s, t:s] = shortest_path_buckets(plan.xadj, plan.adjncy, max_dist)
    if t:
        full[0, :s] = max_dist + 1
        full[:s, 0] = max_dist + 1
    order = np.concatenate([plan.perm, np.arange(s, size, dtype=np.int64)])
    return full[np.ix_(order, order)]


def _positions(plan: SequencePlan, node_values: np.ndarray, token_value: int) -> np.ndarray:
    """int64 ``(s,)``: per-node values ``(n,)`` laid out in the plan's reordered positions."""
    unordered = np.full(plan.size, token_value, dtype=np.int64)
    unordered[int(plan.global_token):] = node_values
    return unordered[plan.perm]


def _csr(rows: np.ndarray, cols: np.ndarray, kind: np.ndarray, size: int
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """COO → CSR over ``size`` queries, keys ascending within a row."""
    order = np.lexsort((cols, rows))
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=size), out=indptr[1:])
    return indptr, cols[order], kind[order]


# =========================================================================== the loader

_REORDERS = ("metis", "none", "store")
_PATTERNS = ("sparse", "cluster-sparse")
_PLACEMENTS = ("random", "cover")


def _check_choice(value: Any, name: str, choices: tuple) -> Any:
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"'{name}' must be one of {list(choices)} (got {value!r})")
    return value


def _node_labels(labels: np.ndarray | None, num_nodes: int) -> np.ndarray | None:
    """int64 ``(N,)`` labels with -100 where unlabelled (negative or NaN), or None."""
    if labels is None:
        return None
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise ValueError(f"'store' labels must hold one class per node for ClusterLoader "
                         f"(got shape {labels.shape})")
    if labels.dtype.kind == "f":
        bad = ~np.isfinite(labels)
        out = np.where(bad, IGNORE_INDEX, labels).astype(np.int64)
    else:
        out = labels.astype(np.int64)
    out[out < 0] = IGNORE_INDEX
    return out


class ClusterLoader:
    """Cluster-ordered sequences with their attention patterns, for graph transformers.

    **Node-level stores** (no ``graph/ptr`` array): per epoch the input nodes are put
    in order (``shuffle``) and cut into consecutive slices of ``seq_len`` positions,
    i.e. ``seq_len - 1`` nodes with ``global_token`` (``seq_len`` without); the last
    slice is shorter unless ``drop_last``. Each slice is one :class:`SequenceBatch`
    with ``B = 1`` and ``S`` = its length (token included; rounded up to
    ``pad_multiple`` with padding). ``y`` holds the node labels (-100 where
    unlabelled); degrees are those of the whole graph.

    **Graph-level stores** (``graph/ptr`` int64 ``(G + 1,)``: graph ``g`` owns nodes
    ``[ptr[g], ptr[g + 1])``; ``graph/label`` int64 ``(G,)``; the store's splits hold
    *graph* IDs, see :mod:`graphpipe.synthetic.graph_level`): each graph is
    one sequence, ``batch_size`` graphs per batch padded to the longest (or to
    ``seq_len`` when given), ``graph_y`` the graph labels, ``y`` all -100, degrees
    within the graph. Padding positions get only a self-loop.

    The pattern, the reordering and the ``spd`` buckets are described in the module
    docstring and :class:`SequenceBatch`. METIS results are cached per node set
    (``shuffle="once"``, the default, keeps the sequences fixed across epochs as in
    TorchGT, so METIS runs once per sequence).

    Args:
        store: a :class:`graphpipe.store.GraphStore` or a store path (node-level also
            accepts what :class:`NeighborLoader` accepts: arrays dict / tuple).
        seq_len: positions per sequence, token included (node-level: required, >= 1,
            >= 2 with the token; graph-level: None = longest graph of the batch, or a
            fixed padded length every graph must fit in).
        input_nodes: a split name (``"train"``, ...), ``"all"``/None, int IDs or a
            boolean mask: node IDs (node-level) or graph IDs (graph-level).
        batch_size: graphs per batch (graph-level, default 32); node-level: None or 1.
        global_token: a global token at position 0 of every sequence.
        reorder: ``"metis"`` (per-sequence METIS, ``parts`` clusters), ``"store"`` (the
            store's ``partition/k{parts}`` restricted to the sequence, order kept within
            clusters) or ``"none"``.
        parts: K clusters per sequence (clamped to the sequence's node count for METIS).
        pattern: ``"sparse"`` or ``"cluster-sparse"`` (adds
            :attr:`SequenceBatch.cluster_sparse`; needs ``B == 1``).
        block: d_b of the cluster-sparse format.
        threshold: cluster-sparse transfer threshold: a float (a multiplier of the
            sequence's ``β_G = nnz / S²`` when ``threshold_relative``, else absolute),
            or a :class:`graphpipe.ops.attention.cluster_sparse.ThresholdTuner` (its current
            threshold, read per sequence; :meth:`set_threshold` replaces it).
        threshold_relative: see ``threshold``.
        placement: ``"random"`` or ``"cover"`` sub-block placement (seeded by ``seed``).
        shuffle: ``"once"`` (one seeded permutation, the same every epoch), True
            (reshuffled every epoch from ``(seed, epoch)``) or False (input order).
        drop_last: drop the last, incomplete sequence (node-level) or batch.
        seed: seed of shuffling, METIS and block placement.
        max_degree: degrees are clamped to ``[0, max_degree]``.
        max_dist: spd bucket of far/unreachable pairs (>= 1); the token gets ``max_dist + 1``.
        spd_max_len: compute ``spd`` only when ``S <= spd_max_len`` (0: never).
        pad_multiple: round ``S`` up to a multiple of this (e.g. the sequence-parallel
            degree P).
        metis_recursive: METIS recursive bisection instead of k-way.
        cache_size: sequences whose METIS result is cached.
        device: where batches go.

    A six-node ring (node ``i`` hears from ``i - 1`` and ``i + 1``) in sequences of four
    positions: the global token, then three nodes in input order:

    >>> import numpy as np
    >>> indptr = np.array([0, 2, 4, 6, 8, 10, 12])
    >>> indices = np.array([1, 5, 0, 2, 1, 3, 2, 4, 3, 5, 4, 0])
    >>> x, y = np.arange(12, dtype=np.float32).reshape(6, 2), np.array([0, 1, 0, 1, 0, 1])
    >>> loader = ClusterLoader((indptr, indices, x, y), seq_len=4, input_nodes=None,
    ...                        reorder="none", shuffle=False)
    >>> [seq.node_ids.tolist() for seq in loader]
    [[[-1, 0, 1, 2]], [[-1, 3, 4, 5]]]
    >>> seq = next(iter(loader))
    >>> seq.mask.tolist(), seq.y.tolist(), tuple(seq.x.shape)
    ([[False, True, True, True]], [[-100, 0, 1, 0]], (1, 4, 2))
    >>> seq.indptr.tolist()     # attention pattern, CSR over the 4 query positions
    [0, 4, 7, 11, 14]
    >>> seq.indices.tolist()
    [0, 1, 2, 3, 0, 1, 2, 0, 1, 2, 3, 0, 2, 3]
    >>> seq.edge_kind.tolist()  # 0 self-loop, 1 graph edge, 2 global token
    [0, 2, 2, 2, 2, 0, 1, 2, 1, 0, 1, 2, 1, 0]

    With METIS (the default) the nodes of a sequence are put in cluster order;
    ``offsets`` holds the cluster boundaries (the token is a cluster of its own):

    >>> loader = ClusterLoader((indptr, indices, x, y), seq_len=7, input_nodes=None, parts=2)
    >>> seq = next(iter(loader))
    >>> sorted(seq.node_ids[seq.mask].tolist()), len(seq.offsets) - 1
    ([0, 1, 2, 3, 4, 5], 3)
    """

    def __init__(self, store: Any, seq_len: int | None = None, *,
                 input_nodes: str | np.ndarray | torch.Tensor | None = "train",
                 batch_size: int | None = None, global_token: bool = True,
                 reorder: str = "metis", parts: int = 8, pattern: str = "sparse", block: int = 16,
                 threshold: float | ThresholdTuner = 5.0, threshold_relative: bool = True,
                 placement: str = "random", shuffle: bool | str = "once", drop_last: bool = False,
                 seed: int = 0, max_degree: int = 511, max_dist: int = 16, spd_max_len: int = 512,
                 pad_multiple: int = 1, metis_recursive: bool = False, cache_size: int = 256,
                 device: str | torch.device = "cpu") -> None:
        self.global_token = bool(global_token)
        self.reorder = _check_choice(reorder, "reorder", _REORDERS)
        self.pattern = _check_choice(pattern, "pattern", _PATTERNS)
        self.placement = _check_choice(placement, "placement", _PLACEMENTS)
        self.parts = check_int("parts", parts, 1)
        self.block = check_int("block", block, 1)
        self.seed = check_int("seed", seed, 0)
        self.max_degree = check_int("max_degree", max_degree, 0)
        self.max_dist = check_int("max_dist", max_dist, 1)
        self.spd_max_len = check_int("spd_max_len", spd_max_len, 0)
        self.pad_multiple = check_int("pad_multiple", pad_multiple, 1)
        cache_size = check_int("cache_size", cache_size, 0)
        if shuffle not in (True, False, "once"):
            raise ValueError(f"'shuffle' must be True, False or 'once' (got {shuffle!r})")
        self.shuffle = shuffle
        self.drop_last = bool(drop_last)
        self.threshold_relative = bool(threshold_relative)
        self.set_threshold(threshold)
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"'device' is not a torch device (got {device!r})") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"'device' is {device!r} but CUDA is not available")

        self.data: GraphData = resolve_graph_data(store)
        self.store = self.data.store
        self.graph_level = self.store is not None and self.store.has_array(GRAPH_PTR)
        self._indptr = np.ascontiguousarray(self.data.indptr, dtype=np.int64)
        self._indices = np.ascontiguousarray(self.data.indices)
        min_len = 2 if self.global_token else 1
        if self.graph_level:
            self._init_graph_level(seq_len, batch_size, input_nodes, min_len)
        else:
            self._init_node_level(seq_len, batch_size, input_nodes, min_len)
        if self.pattern == "cluster-sparse" and self.batch_size != 1:
            raise ValueError(f"'pattern' 'cluster-sparse' needs one sequence per batch "
                             f"(got batch_size={self.batch_size})")
        self._store_parts = self._stored_partition() if self.reorder == "store" else None
        self.partitioner = SequencePartitioner(
            self._indptr, self._indices, self.parts, recursive=bool(metis_recursive),
            seed=self.seed, cache_size=cache_size) if self.reorder == "metis" else None
        self.feature_dim = self.data.feature_dim() if self.data.feature_chunks is not None else 0
        self._epoch = 0

    # -- construction helpers -------------------------------------------------------------------
    def _init_node_level(self, seq_len: Any, batch_size: Any, input_nodes: Any, min_len: int) -> None:
        if seq_len is None:
            raise ValueError("'seq_len' is required for node-level stores (got None)")
        self.seq_len = check_int("seq_len", seq_len, min_len)
        if batch_size not in (None, 1) or isinstance(batch_size, bool):
            raise ValueError(f"'batch_size' must be None or 1 for node-level stores: one sequence "
                             f"per batch (got {batch_size!r})")
        self.batch_size = 1
        self.items_per_batch = self.seq_len - int(self.global_token)

        if isinstance(input_nodes, str) and input_nodes == "all":
            input_nodes = None
        self.input_nodes = node_ids(input_nodes, self.data.num_nodes, self.data.split)
        self.labels = _node_labels(self.data.typed_labels(self.data.target_type), self.data.num_nodes)
        self.graph_ptr = None
        self.graph_labels = None
        self._in_degree = np.diff(self._indptr).astype(np.int64)
        self._out_degree = np.bincount(self._indices, minlength=self.data.num_nodes).astype(np.int64)

    def _init_graph_level(self, seq_len: Any, batch_size: Any, input_nodes: Any, min_len: int) -> None:
        ptr = np.asarray(self.store.array(GRAPH_PTR), dtype=np.int64)
        n = self.data.num_nodes
        if ptr.ndim != 1 or ptr.shape[0] < 1 or ptr[0] != 0 or ptr[-1] != n or np.any(np.diff(ptr) < 0):
            raise ValueError(f"'store' array {GRAPH_PTR!r} must rise from 0 to num_nodes={n}")
        self.graph_ptr = ptr
        num_graphs = ptr.shape[0] - 1
        if self.store.has_array(GRAPH_LABEL):
            self.graph_labels = np.asarray(self.store.array(GRAPH_LABEL), dtype=np.int64).reshape(-1)
            if self.graph_labels.shape[0] != num_graphs:
                raise ValueError(f"'store' array {GRAPH_LABEL!r} has {self.graph_labels.shape[0]} "
                                 f"rows for {num_graphs} graphs")
        else:
            self.graph_labels = np.full(num_graphs, IGNORE_INDEX, dtype=np.int64)
        self.labels = None
        self.batch_size = 32 if batch_size is None else check_int("batch_size", batch_size, 1)
        self.items_per_batch = self.batch_size
        self.input_nodes = self._graph_ids(input_nodes, num_graphs)
        self.seq_len = check_int("seq_len", seq_len, min_len, allow_none=True)
        if self.seq_len is not None and self.input_nodes.size:
            longest = int(np.diff(ptr)[self.input_nodes].max()) + int(self.global_token)
            if longest > self.seq_len:
                raise ValueError(f"'seq_len' must fit the largest input graph with its token "
                                 f"({longest} positions; got {self.seq_len})")

    def _graph_ids(self, input_nodes: Any, num_graphs: int) -> np.ndarray:
        if input_nodes is None or (isinstance(input_nodes, str) and input_nodes == "all"):
            return np.arange(num_graphs, dtype=np.int64)
        if isinstance(input_nodes, str):
            ids = self.data.split(input_nodes)
        else:
            if isinstance(input_nodes, torch.Tensor):
                input_nodes = input_nodes.detach().cpu().numpy()
            ids = np.asarray(input_nodes)
            if ids.dtype == bool:
                if ids.shape != (num_graphs,):
                    raise ValueError(f"'input_nodes' as a mask must have shape ({num_graphs},) "
                                     f"(got {ids.shape})")
                ids = np.flatnonzero(ids)
            elif ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
                raise ValueError(f"'input_nodes' must be a split name, graph IDs or a mask "
                                 f"(got dtype {ids.dtype}, shape {ids.shape})")
        ids = ids.astype(np.int64, copy=False)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_graphs):
            raise ValueError(f"'input_nodes' must be graph IDs in [0, {num_graphs}) "
                             f"(got range {int(ids.min())} .. {int(ids.max())})")
        if np.unique(ids).shape[0] != ids.shape[0]:
            raise ValueError("'input_nodes' must not repeat a graph (got duplicates)")
        return ids

    def _stored_partition(self) -> np.ndarray:
        key = partition_keys(self.parts)["part"]
        if self.store is None or not self.store.has_array(key):
            raise ValueError(f"'reorder' 'store' needs the store's {self.parts}-way partition "
                             f"({key!r}; run `graphpipe partition STORE --parts {self.parts}`)")
        return np.asarray(self.store.array(key), dtype=np.int64)

    # -- settings ------------------------------------------------------------------------------
    def set_threshold(self, threshold: float | ThresholdTuner) -> None:
        """Replace the cluster-sparse threshold (a float or a ThresholdTuner)."""
        if not isinstance(threshold, ThresholdTuner):
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.number)) \
                    or not threshold >= 0:
                raise ValueError(f"'threshold' must be a non-negative number or a ThresholdTuner "
                                 f"(got {threshold!r})")
            threshold = float(threshold)
        self.threshold = threshold

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` run epoch ``epoch`` (its order depends only on
        ``(seed, epoch)``)."""
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or epoch < 0:
            raise ValueError(f"'epoch' must be an integer >= 0 (got {epoch!r})")
        self._epoch = int(epoch)

    @property
    def degree_vocab(self) -> int:
        """Embedding rows needed for ``in_degree``/``out_degree``: ``max_degree + 1``."""
        return self.max_degree + 1

    @property
    def spd_vocab(self) -> int:
        """Embedding rows needed for ``spd``: buckets ``0 .. max_dist + 1``."""
        return self.max_dist + 2

    @property
    def num_classes(self) -> int | None:
        """Classes of ``graph_y`` (graph-level) or ``y`` (node-level), when known."""
        if self.store is None:
            return int(self.labels.max()) + 1 if self.labels is not None and self.labels.size else None
        meta = self.store.manifest.get("graph_level" if self.graph_level else "labels") or {}
        value = meta.get("num_classes")
        return None if value is None else int(value)

    @property
    def epoch(self) -> int:
        """The epoch the next ``iter()`` runs."""
        return self._epoch

    # -- epoch plan ----------------------------------------------------------------------------
    def __len__(self) -> int:
        n, per = int(self.input_nodes.shape[0]), self.items_per_batch
        return n // per if self.drop_last else -(-n // per)

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The batches of ``epoch``: int64 node IDs of each sequence (node-level, slice
        order) or graph IDs of each batch (graph-level)."""
        ids = self.input_nodes
        if self.shuffle == "once":
            ids = np.random.default_rng([self.seed]).permutation(ids)
        elif self.shuffle:
            ids = np.random.default_rng([self.seed, int(epoch)]).permutation(ids)
        per = self.items_per_batch
        batches = [ids[i:i + per] for i in range(0, ids.shape[0], per)]
        if self.drop_last and batches and batches[-1].shape[0] < per:
            batches.pop()
        return batches

    def __iter__(self) -> Iterator[SequenceBatch]:
        epoch = self._epoch
        self._epoch += 1
        return (self.make_batch(items) for items in self.epoch_batches(epoch))

    # -- one batch -----------------------------------------------------------------------------
    def plan(self, node_ids: np.ndarray) -> SequencePlan:
        """The :class:`SequencePlan` of one sequence of global node IDs (slice order)."""
        node_ids = np.asarray(node_ids, dtype=np.int64)
        parts = None
        if self.partitioner is not None:
            parts = self.partitioner(node_ids).parts
        elif self._store_parts is not None:
            parts = self._store_parts[node_ids]
        return plan_sequence(self._indptr, self._indices, node_ids, global_token=self.global_token,
                             parts=parts, num_parts=self.parts)

    def make_batch(self, items: np.ndarray) -> SequenceBatch:
        """The :class:`SequenceBatch` of one entry of :meth:`epoch_batches`."""
        items = np.asarray(items, dtype=np.int64)
        if self.graph_level:
            plans = [self.plan(np.arange(self.graph_ptr[g], self.graph_ptr[g + 1], dtype=np.int64))
                     for g in items.tolist()]
            graph_y = torch.from_numpy(self.graph_labels[items].copy())
        else:
            plans = [self.plan(items)]
            graph_y = None
        batch = self._collate(plans, graph_y)
        return batch if self.device.type == "cpu" else batch.to(self.device)

    def _padded_len(self, plans: list[SequencePlan]) -> int:
        size = max(p.size for p in plans)
        if self.graph_level and self.seq_len is not None:
            size = self.seq_len
        size = max(size, 1)
        return -(-size // self.pad_multiple) * self.pad_multiple

    def _degrees(self, plan: SequencePlan) -> tuple[np.ndarray, np.ndarray]:
        """Unclamped (in, out) degree of the plan's nodes (un-reordered order)."""
        if self.graph_level:
            return plan.in_degree, plan.out_degree
        return self._in_degree[plan.node_ids], self._out_degree[plan.node_ids]

    def _collate(self, plans: list[SequencePlan], graph_y: torch.Tensor | None) -> SequenceBatch:
        b_count, size = len(plans), self._padded_len(plans)
        node_ids = np.full((b_count, size), -1, dtype=np.int64)
        perm = np.tile(np.arange(size, dtype=np.int64), (b_count, 1))
        inverse = perm.copy()
        in_deg = np.zeros((b_count, size), dtype=np.int64)
        out_deg = np.zeros((b_count, size), dtype=np.int64)
        rows, cols, kinds = [], [], []
        for b, plan in enumerate(plans):
            s = plan.size
            perm[b, :s], inverse[b, :s] = plan.perm, plan.inverse
            node_in, node_out = self._degrees(plan)
            node_ids[b, :s] = _positions(plan, plan.node_ids, -1)
            in_deg[b, :s] = _positions(plan, node_in, 0)
            out_deg[b, :s] = _positions(plan, node_out, 0)
            pad = np.arange(s, size, dtype=np.int64)
            rows += [plan.inverse[plan.rows] + b * size, pad + b * size]
            cols += [plan.inverse[plan.cols] + b * size, pad + b * size]
            kinds += [plan.kind, np.full(pad.shape[0], EDGE_SELF, np.int64)]
        indptr, indices, edge_kind = _csr(np.concatenate(rows), np.concatenate(cols),
                                          np.concatenate(kinds), b_count * size)
        mask = node_ids >= 0
        offsets = self._offsets(plans, size)
        spd = None
        if size <= self.spd_max_len:
            spd = torch.from_numpy(np.stack([_spd_matrix(p, size, self.max_dist) for p in plans]))
        cs = self._cluster_sparse(plans[0], indptr, indices, size) \
            if self.pattern == "cluster-sparse" else None
        return SequenceBatch(
            node_ids=torch.from_numpy(node_ids), x=torch.from_numpy(self._features(node_ids, mask)),
            y=torch.from_numpy(self._labels(node_ids, mask)), mask=torch.from_numpy(mask),
            indptr=torch.from_numpy(indptr), indices=torch.from_numpy(indices),
            edge_kind=torch.from_numpy(edge_kind),
            in_degree=torch.from_numpy(np.minimum(in_deg, self.max_degree)),
            out_degree=torch.from_numpy(np.minimum(out_deg, self.max_degree)),
            perm=torch.from_numpy(perm), inverse=torch.from_numpy(inverse),
            offsets=None if offsets is None else torch.from_numpy(offsets),
            cluster_sparse=cs, spd=spd, graph_y=graph_y, global_token=self.global_token,
            batch_size=b_count, seq_len=size)

    def _offsets(self, plans: list[SequencePlan], size: int) -> np.ndarray | None:
        """Cluster boundaries of a one-sequence batch (padding: one more cluster)."""
        if len(plans) != 1 or plans[0].offsets is None:
            return None
        offsets = plans[0].offsets
        return np.append(offsets, size).astype(np.int64) if plans[0].size < size else offsets.copy()

    def _cluster_sparse(self, plan: SequencePlan, indptr: np.ndarray, indices: np.ndarray,
                        size: int) -> ClusterSparsePattern:
        offsets = self._offsets([plan], size)
        if offsets is None:  # no reordering: the nodes form one cluster (token and padding apart)
            t = int(self.global_token)
            offsets = np.array(sorted({0, t, plan.size, size}), dtype=np.int64)
        beta_g = float(indices.shape[0]) / float(size * size)
        if isinstance(self.threshold, ThresholdTuner):
            threshold = self.threshold.threshold(beta_g)
        else:
            threshold = self.threshold * beta_g if self.threshold_relative else self.threshold
        return cluster_sparse_pattern(indptr, indices, offsets, threshold=threshold,
                                      block_size=self.block, placement=self.placement, seed=self.seed)

    def _features(self, node_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """float32 ``(B, S, F)``: feature rows of ``node_ids``, zeros elsewhere."""
        out = np.zeros(node_ids.shape + (self.feature_dim,), dtype=np.float32)
        if not self.feature_dim:
            return out
        ids = node_ids[mask]
        if self.store is not None:
            rows = self.store.features(ids)
        else:
            rows = self.data.feature_chunks[0][ids]
        out[mask] = np.asarray(rows, dtype=np.float32).reshape(ids.shape[0], self.feature_dim)
        return out

    def _labels(self, node_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """int64 ``(B, S)`` node labels, -100 at token, padding and unlabelled nodes."""
        y = np.full(node_ids.shape, IGNORE_INDEX, dtype=np.int64)
        if self.labels is not None:
            y[mask] = self.labels[node_ids[mask]]
        return y

    def __repr__(self) -> str:
        kind = "graph-level" if self.graph_level else "node-level"
        return (f"ClusterLoader({kind}, seq_len={self.seq_len}, batch_size={self.batch_size}, "
                f"batches={len(self)}, global_token={self.global_token}, reorder={self.reorder!r}, "
                f"parts={self.parts}, pattern={self.pattern!r})")
