""":class:`TypedLinkNeighborLoader`: PyG's ``LinkNeighborLoader`` on a typed graph
(``HeteroData``, a typed store, a typed :class:`~graphpipe.loaders.GraphData`) for the
edges of one relation ``(src, rel, dst)``.

Per batch, as PyG's heterogeneous ``edge_sample`` (non-disjoint): ``batch_size``
positive edges of the relation (shuffled per epoch with ``shuffle=True``), with
``neg_sampling="binary"`` ``ceil(P * amount)`` negatives whose sources are drawn
uniformly among the source type's nodes and destinations among the destination type's;
the seeds are ``unique(sources)`` of the source type and ``unique(destinations)`` of the
destination type (one ``unique`` of both when they are one type), sampled in one typed
pass (every relation, the loader's fanouts) and gathered per type as the
:class:`~graphpipe.loaders.NeighborLoader` does. The batch
(:class:`~graphpipe.loaders.HeteroMiniBatch`) carries, on the relation,
``batch[rel].edge_label_index`` (row 0 into ``n_id[src]``, row 1 into ``n_id[dst]``),
``edge_label`` (with negatives: 1 for positives, 0 for negatives) and ``input_id`` (the positives'
positions in ``edge_label_index``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.link_edges import EdgeBatches, edge_pairs
from graphpipe.loaders.link_seeds import resolve_negatives
from graphpipe.loaders.neighbor_loader import NeighborLoader
from graphpipe.loaders.typed_batch import HeteroMiniBatch, typed_batch_from_sample
from graphpipe.ops._core.rng import U64_MASK, mix64_py
from graphpipe.ops.negative import negative_sample
from graphpipe.ops.sampling import HeteroSampleOutput
from graphpipe.ops.sampling.types import EdgeType, as_etype, etype_str

__all__ = ["TypedLinkNeighborLoader", "exclude_typed_seed_edges", "plan_typed_link_batch"]


def plan_typed_link_batch(src: np.ndarray, dst: np.ndarray, amount: float | None,
                          num_src: int, num_dst: int, same_type: bool, key: int
                          ) -> tuple[dict[str, np.ndarray], np.ndarray, torch.Tensor | None]:
    """``(seeds, edge_label_index, edge_label)`` of positives ``src[i] -> dst[i]`` with
    ``ceil(P * amount)`` binary negatives drawn from ``key`` (``amount`` None: none, and
    no ``edge_label``, as PyG's).
    ``seeds``: ``{"src": unique sources, "dst": unique destinations}`` (``{"src": ...}``
    alone when ``same_type``: one ``unique`` of both ends).

    >>> seeds, index, label = plan_typed_link_batch(np.array([3, 1]), np.array([0, 0]), None,
    ...                                             4, 2, False, key=0)
    >>> seeds["src"].tolist(), seeds["dst"].tolist(), index.tolist(), label
    ([1, 3], [0], [[1, 0], [0, 0]], None)
    >>> plan_typed_link_batch(np.array([3, 1]), np.array([0, 0]), 1.0, 4, 2, False, 0)[2].tolist()
    [1.0, 1.0, 0.0, 0.0]
    """
    label = None
    if amount is not None:
        num_pos = int(src.shape[0])
        num_neg = math.ceil(num_pos * amount)
        src = np.concatenate([src, negative_sample(num_neg, num_src, seed=mix64_py((key + 1) & U64_MASK))])
        dst = np.concatenate([dst, negative_sample(num_neg, num_dst, seed=mix64_py((key + 2) & U64_MASK))])
        label = torch.cat([torch.ones(num_pos), torch.zeros(num_neg)])
    if same_type:
        nodes, inverse = np.unique(np.concatenate([src, dst]), return_inverse=True)
        return {"src": nodes}, inverse.reshape(2, -1), label
    src_nodes, src_inv = np.unique(src, return_inverse=True)
    dst_nodes, dst_inv = np.unique(dst, return_inverse=True)
    return {"src": src_nodes, "dst": dst_nodes}, np.stack([src_inv, dst_inv]), label


def exclude_typed_seed_edges(out: HeteroSampleOutput, relation: EdgeType, src: np.ndarray,
                             dst: np.ndarray) -> HeteroSampleOutput:
    """``out`` without any sampled edge of ``relation`` equal to a positive ``src[i] ->
    dst[i]``, nor of its reverse (``(dst, rev_<rel>, src)``, or ``relation`` itself within
    one type) equal to ``dst[i] -> src[i]`` (global IDs); the node sets stay as sampled.

    >>> from graphpipe.loaders import GraphData
    >>> from graphpipe.ops.sampling import sample_neighbors
    >>> rel, rev = ("a", "to", "b"), ("b", "rev_to", "a")
    >>> g = GraphData.from_dicts({"a": 2, "b": 2}, {rel: (np.array([0, 1, 1]), np.array([0, 0, 1]))})
    >>> out = sample_neighbors(g.with_reverse_relations().graph, {"a": [0], "b": [0]}, [-1])
    >>> kept = exclude_typed_seed_edges(out, rel, np.array([0]), np.array([0]))
    >>> [(int(out.n_id["a"][r]), int(out.n_id["b"][c])) for r, c in zip(out.row[rel], out.col[rel])]
    [(0, 0), (1, 0)]
    >>> [(int(kept.n_id["a"][r]), int(kept.n_id["b"][c])) for r, c in zip(kept.row[rel], kept.col[rel])]
    [(1, 0)]
    >>> kept.num_sampled_edges[rel], kept.num_sampled_edges[rev]
    ([1], [0])
    """
    s, r, d = relation
    rev = relation if s == d else (d, "rev_" + r, s)
    width = max(out.n_id[d].max(initial=0), out.n_id[s].max(initial=0)) + 1
    forward, backward = src * width + dst, dst * width + src
    banned = ({relation: np.unique(np.concatenate([forward, backward]))} if s == d
              else {relation: np.unique(forward), rev: np.unique(backward)})
    row, col, ids, counts = dict(out.row), dict(out.col), dict(out.edge_ids), dict(out.num_sampled_edges)
    for et, codes in banned.items():
        if et not in out.row or codes.size == 0:
            continue
        code = out.n_id[et[0]][out.row[et]].astype(np.int64) * width + out.n_id[et[2]][out.col[et]]
        pos = np.minimum(np.searchsorted(codes, code), codes.shape[0] - 1)
        keep = codes[pos] != code
        hops = np.repeat(np.arange(len(counts[et])), counts[et])
        row[et], col[et], ids[et] = out.row[et][keep], out.col[et][keep], out.edge_ids[et][keep]
        counts[et] = np.bincount(hops[keep], minlength=len(counts[et])).tolist()
    return replace(out, row=row, col=col, edge_ids=ids, num_sampled_edges=counts)


class TypedLinkNeighborLoader(EdgeBatches, NeighborLoader):
    """Mini-batches of one relation's edges with their endpoints' sampled typed
    neighbourhoods (module docstring), PyG's ``LinkNeighborLoader`` on ``HeteroData``.

    Args:
        data: a typed graph (what a typed :class:`~graphpipe.loaders.NeighborLoader` takes).
        num_neighbors: one list for every relation or ``{relation: list}``.
        edge_label_index: ``(relation, edges)``: the relation (``(src, rel, dst)`` or
            ``"src___rel___dst"``) and its supervision edges (``(src IDs, dst IDs)`` or a
            ``(2, P)`` array / tensor), or ``(relation, None)``: every edge of it.
        neg_sampling: None or ``"binary"`` (or ``{"mode": "binary", "amount": a}``; uniform).
        batch_size, shuffle, drop_last, seed: over the supervision edges.
        exclude_seed_edges: drop each batch's positive edges from its sampled relation and
            their reverses from the reverse relation (:func:`exclude_typed_seed_edges`), so
            a model cannot read its labels off the messages (default False, PyG's behaviour).
        **kwargs: the typed :class:`~graphpipe.loaders.NeighborLoader` options.

    Two authors write three papers; seeds are the ``writes`` edges, all neighbours:

    >>> from graphpipe.loaders import GraphData
    >>> data = GraphData.from_dicts({"author": 2, "paper": 3},
    ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
    ...     x={"paper": np.eye(3, dtype=np.float32)}).with_reverse_relations()
    >>> rel = ("author", "writes", "paper")
    >>> loader = TypedLinkNeighborLoader(data, [-1], edge_label_index=(rel, None), batch_size=2)
    >>> batch = next(iter(loader))
    >>> batch["author"].n_id.tolist(), batch["paper"].n_id.tolist()   # paper 2: author 1's
    ([0, 1], [0, 2])
    >>> batch[rel].edge_label_index.tolist(), batch[rel].input_id.tolist()
    ([[0, 1], [0, 0]], [0, 1])
    """

    def __init__(self, data: Any, num_neighbors: Any = None, *, edge_label_index: Any,
                 neg_sampling: Any = None, batch_size: int = 1, exclude_seed_edges: bool = False,
                 **kwargs: Any):
        for refused in ("input_nodes", "edge_label", "edge_label_time", "time_attr",
                        "neg_sampling_ratio"):
            if kwargs.get(refused) not in (None, False):
                raise ValueError(f"TypedLinkNeighborLoader does not support {refused!r}")
            kwargs.pop(refused, None)
        if not (isinstance(edge_label_index, (tuple, list)) and len(edge_label_index) == 2):
            raise ValueError("'edge_label_index' must be (relation, edges) on a typed graph")
        relation, edges = edge_label_index
        et = as_etype(relation)
        super().__init__(data, num_neighbors, et[0], batch_size=batch_size, **kwargs)
        if not self.typed:
            raise ValueError("TypedLinkNeighborLoader needs a typed graph; use LinkNeighborLoader")
        if et not in self.graph.graph.csc:
            raise ValueError(f"the graph has no relation {etype_str(et)!r}")
        self.relation = et
        self.edge_src, self.edge_dst = self._edges(edges)
        neg = resolve_negatives(neg_sampling, np.zeros(1, dtype=np.int64), 0)
        if neg is not None and (neg.mode != "binary" or neg.src_weight is not None
                                or neg.dst_weight is not None):
            raise ValueError("typed link batches draw 'binary' uniform negatives only")
        self.neg_amount = None if neg is None else float(neg.amount)
        self.exclude_seed_edges = bool(exclude_seed_edges)

    def _edges(self, edges: Any) -> tuple[np.ndarray, np.ndarray]:
        et, counts = self.relation, self.graph.graph.num_nodes
        if edges is None:
            indptr, indices = self.graph.typed_csc(et)
            dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(np.asarray(indptr)))
            return np.asarray(indices, dtype=np.int64), dst
        src, dst = edge_pairs(edges, "(relation, (src, dst) or a (2, P) array)")
        for arr, t in ((src, et[0]), (dst, et[2])):
            if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= counts[t]):
                raise ValueError(f"'edge_label_index' must hold {t!r} IDs in [0, {counts[t]})")
        return src, dst

    def _seed_dict(self, seeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        s, _, d = self.relation
        return {s: seeds["src"]} if "dst" not in seeds else {s: seeds["src"], d: seeds["dst"]}

    def _produce_typed(self, epoch: int, sample_ahead: bool = False) -> Iterator[HeteroMiniBatch]:
        """One epoch: each window's batches planned (negatives from the batch's key),
        sampled in parallel threads (or by ``sampler``), gathered per type (``sample_ahead``:
        not used, the windows run one after another)."""
        batches = self.epoch_edge_batches(epoch)
        keys = self.batch_keys(epoch, len(batches))
        s, _, d = self.relation
        counts, stats = self.graph.graph.num_nodes, self._stats.current
        for w in range(0, len(batches), self.window):
            window, window_keys = batches[w:w + self.window], keys[w:w + self.window]
            plans = [plan_typed_link_batch(self.edge_src[p], self.edge_dst[p], self.neg_amount,
                                           counts[s], counts[d], s == d, k)
                     for p, k in zip(window, window_keys)]
            t0 = time.perf_counter()
            outs = self._sample_typed([self._seed_dict(p[0]) for p in plans], window_keys)
            if self.exclude_seed_edges:
                outs = [exclude_typed_seed_edges(o, self.relation, self.edge_src[p], self.edge_dst[p])
                        for o, p in zip(outs, window)]
            stats.sample_s += time.perf_counter() - t0
            for positions, key, (seeds, index, label), out in zip(window, window_keys, plans, outs):
                t0 = time.perf_counter()
                batch = typed_batch_from_sample(out, self.gather(out.n_id, key), self.graph, s,
                                                seeds["src"])
                batch.input_id = None
                batch.extra[self.relation] = {
                    "edge_label_index": torch.from_numpy(np.ascontiguousarray(index, dtype=np.int64)),
                    "edge_label": label, "input_id": torch.from_numpy(positions)}
                stats.gather_s += time.perf_counter() - t0
                yield batch if self.device.type == "cpu" else batch.to(self.device)

    def __repr__(self) -> str:
        return (f"TypedLinkNeighborLoader(relation={etype_str(self.relation)!r}, "
                f"num_neighbors={self.fanouts}, batch_size={self.batch_size}, "
                f"edges={self.edge_src.shape[0]}, negatives={self.neg_amount})")
