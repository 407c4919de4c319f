"""Plain-Python oracle of :func:`graphpipe.ops.sampling.temporal.sample_temporal`: each tree
sampled on its own with Python lists, sets and dicts (a row's valid edges found by a
filter and ``sorted``, not by the prepared order and a binary search), then the trees
merged hop by hop in PyG's disjoint layout. Same random numbers (the Python twins of
:mod:`graphpipe.ops._core.rng`, the same keys), so the fast path must match it exactly."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphpipe.ops.sampling.keys import _stream_key_py, batch_key, hop_key, tree_key
from graphpipe.ops.sampling.reference import _choose_positions_py
from graphpipe.ops.sampling.types import SampledBlock, SampleOutput

__all__ = ["sample_temporal_reference"]


def _valid_slots(indptr, indices, v: int, t: int, node_time, edge_time) -> list[int]:
    """Row ``v``'s slots no newer than ``t``, by (time, slot)."""
    def time_of(slot: int) -> int:
        return int(edge_time[slot]) if edge_time is not None else int(node_time[int(indices[slot])])

    slots = [s for s in range(int(indptr[v]), int(indptr[v + 1])) if time_of(s) <= t]
    return sorted(slots, key=lambda s: (time_of(s), s))


def _choose(valid: list[int], fanout: int, strategy: str, replace: bool, state: int) -> list[int]:
    k = len(valid)
    if fanout < 0:
        return valid
    count = (fanout if k else 0) if replace else min(fanout, k)
    if strategy == "last" or (k <= count and not replace):
        return valid[k - count:]
    return [valid[p] for p in _choose_positions_py(k, count, replace, state)]


def _one_tree(indptr, indices, root: int, t: int, fanouts, strategy, replace, key, node_time, edge_time):
    """``(nodes per hop, edges per hop as (dst local, src local, slot))`` of one tree."""
    local = {root: 0}
    layers, edges = [[root]], []
    frontier = [root]
    bkey = batch_key(key)
    for h, fanout in enumerate(fanouts):
        hkey, new, hop_edges = hop_key(bkey, h), [], []
        for v in frontier:
            valid = _valid_slots(indptr, indices, v, t, node_time, edge_time)
            for slot in _choose(valid, fanout, strategy, replace, _stream_key_py(hkey, v)):
                u = int(indices[slot])
                if u not in local:
                    local[u] = len(local)
                    new.append(u)
                hop_edges.append((local[v], local[u], slot))
        layers.append(new)
        edges.append(hop_edges)
        frontier = new
    return layers, edges


def sample_temporal_reference(indptr, indices, seeds, seed_time, fanouts: Sequence[int], *,
                              node_time=None, edge_time=None, strategy: str = "uniform",
                              replace: bool = False, seed: int = 0) -> SampleOutput:
    """The oracle: the same arguments as :func:`temporal_graph` + :func:`sample_temporal`."""
    trees = [_one_tree(indptr, indices, int(s), int(t), list(fanouts), strategy, replace,
                       tree_key(seed, i), node_time, edge_time)
             for i, (s, t) in enumerate(zip(seeds, seed_time))]
    hops = len(fanouts)
    n_id, batch, where = [], [], {}   # where[(tree, tree-local id)] = merged local id
    for h in range(hops + 1):         # by hop, then by tree
        for i, (layers, _edges) in enumerate(trees):
            start = sum(len(layer) for layer in layers[:h])
            for j, u in enumerate(layers[h]):
                where[(i, start + j)] = len(n_id)
                n_id.append(u)
                batch.append(i)
    ends = np.cumsum([sum(len(t[0][h]) for t in trees) for h in range(hops + 1)])
    blocks = [_merged_block(trees, where, h, int(ends[h]), int(ends[h + 1])) for h in range(hops)]
    return SampleOutput(n_id=np.array(n_id, dtype=np.int64), blocks=blocks[::-1], batch_size=len(seeds),
                        num_sampled_nodes=[int(c) for c in np.diff(ends, prepend=0)],
                        num_sampled_edges=[b.num_edges for b in blocks], batch=np.array(batch, np.int64))


def _merged_block(trees, where, h: int, num_dst: int, num_src: int) -> SampledBlock:
    """Hop ``h``'s edges of every tree, by merged destination, each row in draw order."""
    rows: dict[int, list[tuple[int, int]]] = {}
    for i, (_layers, edges) in enumerate(trees):
        for d, u, slot in edges[h]:
            rows.setdefault(where[(i, d)], []).append((where[(i, u)], slot))
    indptr = [0]
    src, slots = [], []
    for d in range(num_dst):
        for u, slot in rows.get(d, []):
            src.append(u)
            slots.append(slot)
        indptr.append(len(src))
    return SampledBlock(indptr=np.array(indptr, np.int64), indices=np.array(src, np.int64),
                        num_dst=num_dst, num_src=num_src, edge_ids=np.array(slots, np.int64))
