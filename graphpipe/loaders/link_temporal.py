"""Temporal link prediction (PyG's ``LinkNeighborLoader(edge_label_time=..., time_attr=...,
temporal_strategy=...)``): every supervision edge has a time, and each of its endpoints
(and each negative drawn for it) grows its own temporal tree whose seed time is that
edge's time, so no sampled edge is newer than the supervision edge.

PyG's layout (``torch_geometric.sampler.neighbor_sampler.edge_sample`` with a time, which
is always disjoint there):

- binary / no negatives: ``src = [pos_src, neg_src]``, ``dst = [pos_dst, neg_dst]``
  (``M = ceil(P * amount)`` negatives); negative ``j`` has the time of positive
  ``j % P`` (``edge_label_time.repeat(...)[:P + M]``); the seeds are ``[src, dst]``,
  not deduplicated (one tree each), ``edge_label_index = arange(2 (P + M)).view(2, -1)``;
- triplet: seeds ``[pos_src, pos_dst, dst_neg]`` with ``P * K`` negative destinations,
  flat negative ``k * P + i`` drawn for positive ``i`` (its time), ``src_index =
  arange(P)``, ``dst_pos_index = arange(P, 2P)``, ``dst_neg_index[i, k] = 2P + k P + i``;
- with node times, a negative node newer than its time is redrawn (five rounds, then the
  oldest node), as PyG's ``neg_sample`` (which compares ``>=`` in its redraw rounds; here
  always ``node_time <= time``).

Here ``batch.batch`` names each node's tree (the seed's position in ``n_id[:batch_size]``)
and ``batch.seed_time`` holds each seed's time (PyG maps ``batch`` to ``batch % P``);
``batch.edge_label_time`` is the label edges' times (``(P + M,)``; triplet: ``(P,)``).
Seed-edge exclusion drops a positive's edge (both directions) wherever it was sampled, as
a tree's root reaches its neighbour through a tree-local copy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.link_exclude import MAX_PAIR_NODES, _pair_codes
from graphpipe.loaders.link_seeds import LinkSeeds, NegativeSpec, _draw
from graphpipe.loaders.stages import SampleStage
from graphpipe.loaders.temporal import build_temporal_sampler, check_temporal_options
from graphpipe.ops.sampling import SampledBlock, SampleOutput
from graphpipe.ops.sampling.temporal import check_seed_time

__all__ = ["TemporalLinkSeeds", "exclude_edges_anywhere", "plan_temporal_link_batch",
           "resolve_edge_label_time", "setup_temporal_link"]

_REDRAW_ROUNDS = 5


@dataclass
class TemporalLinkSeeds(LinkSeeds):
    """:class:`LinkSeeds` of a temporal link batch: ``nodes`` are one seed per tree (not
    unique), ``seed_time`` int64 ``(len(nodes),)`` their times, ``edge_label_time`` the
    label edges' times."""

    seed_time: np.ndarray | None = None
    edge_label_time: np.ndarray | None = None


def resolve_edge_label_time(edge_label_time: Any, edge_label_index: Any, data: Any,
                            num_pos: int) -> np.ndarray:
    """int64 ``(P,)`` times of the supervision edges: an array / tensor, or a link split's
    ``year`` (``edge_label_time`` the split's name, or None when ``edge_label_index`` is one)."""
    if edge_label_time is None or isinstance(edge_label_time, str):
        split = edge_label_time if edge_label_time is not None else edge_label_index
        if not isinstance(split, str) or data.store is None:
            raise ValueError("temporal link sampling ('time_attr') needs 'edge_label_time': one time "
                             "per supervision edge, or a link split of a store with link/<split>/year")
        if isinstance(edge_label_index, str) and split != edge_label_index:
            raise ValueError(f"'edge_label_time'={split!r} names another split than "
                             f"'edge_label_index'={edge_label_index!r}")
        from graphpipe.store.link import read_link_split

        year = read_link_split(data.store, split).year
        if year is None:
            raise ValueError(f"link split {split!r} of {data.store.path} has no link/{split}/year "
                             f"to use as 'edge_label_time'")
        times = np.asarray(year)
    else:
        if isinstance(edge_label_time, torch.Tensor):
            edge_label_time = edge_label_time.detach().cpu().numpy()
        times = np.asarray(edge_label_time)
    if times.ndim != 1 or times.shape[0] != num_pos:
        raise ValueError(f"'edge_label_time' must have one time per supervision edge, shape ({num_pos},) "
                         f"(got {times.shape})")
    if times.size and times.dtype.kind not in "iu":
        raise ValueError(f"'edge_label_time' must hold integer timestamps (got {times.dtype})")
    return check_seed_time(times, num_pos)


def setup_temporal_link(loader: Any, time_attr: str, strategy: str, options: dict) -> None:
    """Turn a built :class:`LinkNeighborLoader` temporal: its :class:`TemporalSampler` from
    ``time_attr`` (``options``: the loader's ``sampler``, ``shard``, ``frontier``,
    ``replace``, ``sampler_backend``, ``output``, ``num_threads`` as passed)."""
    replace = bool(options.get("replace", False))
    check_temporal_options(time_attr, None, strategy, sampler=options.get("sampler"),
                           shard=options.get("shard"), frontier=options.get("frontier"), replace=replace,
                           backend=options.get("sampler_backend", "auto"),
                           output=options.get("output", "minibatch"))
    loader.sampler = build_temporal_sampler(loader.graph, time_attr, loader.fanouts, strategy=strategy,
                                            replace=replace, num_threads=options.get("num_threads"))
    loader.sample = SampleStage(loader.sampler, loader._stats)
    loader.temporal = loader.disjoint = True


def _valid_negatives(nodes: np.ndarray, times: np.ndarray, node_time: np.ndarray | None,
                     neg: NegativeSpec, num_nodes: int, key: int, salt: int) -> np.ndarray:
    """``nodes`` with any node newer than its time redrawn (PyG's greedy rounds, then the
    oldest node)."""
    weight = neg.src_weight if salt == 1 else neg.dst_weight
    if node_time is None:
        return nodes
    nodes = nodes.copy()
    for r in range(_REDRAW_ROUNDS):
        bad = np.flatnonzero(node_time[nodes] > times)
        if bad.size == 0:
            return nodes
        nodes[bad] = _draw(bad.size, num_nodes, key, 16 * (r + 1) + salt, weight)
    bad = node_time[nodes] > times
    nodes[bad] = int(np.argmin(node_time))
    return nodes


def plan_temporal_link_batch(input_id: np.ndarray, src: np.ndarray, dst: np.ndarray, time: np.ndarray,
                             label: torch.Tensor | None, neg: NegativeSpec | None, num_nodes: int,
                             key: int, node_time: np.ndarray | None = None) -> TemporalLinkSeeds:
    """The :class:`TemporalLinkSeeds` of positives ``src[i] -> dst[i]`` at ``time[i]``
    (PyG's disjoint layout, negatives drawn from ``key`` as in
    :func:`~graphpipe.loaders.link_seeds.plan_link_batch`).

    >>> s = plan_temporal_link_batch(np.array([0, 1]), np.array([4, 2]), np.array([2, 7]),
    ...                              np.array([10, 20]), None, NegativeSpec("binary"), 10, key=1)
    >>> s.nodes.tolist(), s.seed_time.tolist(), s.edge_label_index.tolist()
    ([4, 2, 4, 6, 2, 7, 3, 3], [10, 20, 10, 20, 10, 20, 10, 20], [[0, 1, 2, 3], [4, 5, 6, 7]])
    >>> t = plan_temporal_link_batch(np.array([0, 1]), np.array([4, 2]), np.array([2, 7]),
    ...                              np.array([10, 20]), None, NegativeSpec("triplet", 2), 10, key=1)
    >>> t.seed_time.tolist(), t.dst_neg_index.tolist()   # negative [i, k] has edge i's time
    ([10, 20, 10, 20, 10, 20, 10, 20], [[4, 6], [5, 7]])
    """
    num_pos = int(src.shape[0])
    time = np.asarray(time, dtype=np.int64)
    seeds = TemporalLinkSeeds(input_id, src, dst, np.empty(0, dtype=np.int64))
    if neg is not None and neg.mode == "triplet":
        k = int(neg.amount)
        neg_time = np.tile(time, k)   # flat negative k * P + i is positive i's
        dst_neg = _valid_negatives(_draw(num_pos * k, num_nodes, key, 2, neg.dst_weight), neg_time,
                                   node_time, neg, num_nodes, key, 2)
        seeds.nodes = np.concatenate([src, dst, dst_neg]).astype(np.int64)
        seeds.seed_time = np.concatenate([time, time, neg_time])
        seeds.src_index = np.arange(num_pos, dtype=np.int64)
        seeds.dst_pos_index = np.arange(num_pos, 2 * num_pos, dtype=np.int64)
        rest = np.arange(2 * num_pos, (2 + k) * num_pos, dtype=np.int64).reshape(k, num_pos).T
        seeds.dst_neg_index = rest[:, 0].copy() if k == 1 else np.ascontiguousarray(rest)
        seeds.edge_label_time = time
        return seeds
    label_time = time
    if neg is not None:
        num_neg = math.ceil(num_pos * neg.amount)
        neg_time = np.resize(time, num_neg)   # negative j is positive j % P's (PyG's repeat)
        neg_src = _valid_negatives(_draw(num_neg, num_nodes, key, 1, neg.src_weight), neg_time,
                                   node_time, neg, num_nodes, key, 1)
        neg_dst = _valid_negatives(_draw(num_neg, num_nodes, key, 2, neg.dst_weight), neg_time,
                                   node_time, neg, num_nodes, key, 2)
        src, dst = np.concatenate([src, neg_src]), np.concatenate([dst, neg_dst])
        label_time = np.concatenate([time, neg_time])
        label = torch.ones(num_pos) if label is None else label
        label = torch.cat([label, label.new_zeros((num_neg, *label.shape[1:]))])
    seeds.nodes = np.concatenate([src, dst]).astype(np.int64)
    seeds.seed_time = np.concatenate([label_time, label_time])
    seeds.edge_label_index = np.arange(seeds.nodes.shape[0], dtype=np.int64).reshape(2, -1)
    seeds.edge_label = label
    seeds.edge_label_time = label_time
    return seeds


def _filter_block(block: SampledBlock, n_id: np.ndarray, banned: np.ndarray, num_nodes: int) -> SampledBlock:
    dst_local = block.dst_of_edges()
    codes = _pair_codes(n_id[block.indices], n_id[dst_local], num_nodes)
    pos = np.searchsorted(banned, codes)
    hit = (pos < banned.shape[0]) & (banned[np.minimum(pos, banned.shape[0] - 1)] == codes)
    if not hit.any():
        return block
    keep = ~hit
    indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst_local[keep], minlength=block.num_dst), out=indptr[1:])
    weight = None if block.edge_weight is None else block.edge_weight[keep]
    return SampledBlock(indptr, block.indices[keep], block.num_dst, block.num_src,
                        block.edge_ids[keep], weight)


def exclude_edges_anywhere(out: SampleOutput, src: np.ndarray, dst: np.ndarray, num_nodes: int) -> SampleOutput:
    """``out`` without any sampled edge, in any tree, equal to ``src[i] -> dst[i]`` or
    ``dst[i] -> src[i]`` (global IDs): seed-edge exclusion for one-tree-per-seed samples.

    >>> from graphpipe.ops.sampling import sample_neighbors
    >>> indptr, indices = np.array([0, 2, 4, 5]), np.array([1, 2, 0, 2, 0])
    >>> out = sample_neighbors(indptr, indices, np.array([0]), [-1, -1], seed=0)
    >>> kept = exclude_edges_anywhere(out, np.array([0]), np.array([1]), 3)
    >>> [b.num_edges for b in out.blocks], [b.num_edges for b in kept.blocks]  # 1->0, 0->1 dropped
    ([3, 2], [2, 1])
    """
    if num_nodes > MAX_PAIR_NODES:
        raise ValueError(f"seed-edge exclusion supports up to {MAX_PAIR_NODES} nodes (got {num_nodes})")
    if src.size == 0:
        return out
    banned = np.unique(np.concatenate([_pair_codes(src, dst, num_nodes), _pair_codes(dst, src, num_nodes)]))
    n_id = np.asarray(out.n_id, dtype=np.int64)
    blocks = [_filter_block(b, n_id, banned, num_nodes) for b in out.blocks]
    return SampleOutput(n_id=out.n_id, blocks=blocks, batch_size=out.batch_size,
                        num_sampled_nodes=list(out.num_sampled_nodes),
                        num_sampled_edges=[b.num_edges for b in reversed(blocks)], batch=out.batch,
                        seed_time=out.seed_time)
