"""Plain-Python oracles of the neighbour sampler: the same RNG (Python-int twins of
:mod:`graphpipe.ops._core.rng`), Python sets for Floyd's algorithm and a dict per node type
as the ID map. Every backend of :func:`graphpipe.ops.sampling.sample_neighbors` must match
:func:`sample_neighbors_reference` (one relation) and
:func:`sample_hetero_neighbors_reference` (a :class:`~graphpipe.ops.sampling.types.HeteroCSC`)
exactly (the CUDA kernels up to the order of each hop's new local IDs, which the public API
canonicalises).

Typed semantics (PyG's heterogeneous ``NeighborLoader``, torch-sparse / pyg-lib
``hetero_neighbor_sample``): per hop, relations in ``graph.edge_types`` order; relation
``(s, r, d)`` samples ``fanouts[(s, r, d)][hop]`` in-neighbours of every node of type
``d`` in its frontier and maps the sources into type ``s``'s table (a new source gets the
next local ID of ``s``). The frontier of ``d`` is fixed when the hop starts: the seeds of
``d`` in hop 1, then the nodes of ``d`` that the previous hop reached first
(``frontier="new"``), or every node of ``d`` known so far (``frontier="all"``, DGL's). A
destination's draws come from the stream ``(batch seed, hop, relation name, node ID)``
(:func:`~graphpipe.ops.sampling.types.relation_key`; the homogeneous relation ``(_N, _E, _N)``
uses the hop's own stream, so it samples exactly as :func:`sample_neighbors_reference`).
The numbering of a hop's new nodes follows the order relations are expanded in
(``graph.edge_types``, as pyg-lib's ``data.edge_types``; torch-sparse walks its own
dictionary order, which changes the numbering but not the nodes or edges reached).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphpipe.ops._core.checks import check_csc as _check_csc
from graphpipe.ops._core.checks import check_fanouts as _check_fanouts
from graphpipe.ops._core.checks import check_node_ids as _check_node_ids
from graphpipe.ops._core.rng import bounded_py as _bounded_py
from graphpipe.ops.sampling.keys import _stream_key_py, batch_key, hop_key
from graphpipe.ops.sampling.types import (
    HeteroCSC,
    HeteroSampleOutput,
    SampleOutput,
    check_frontier,
    check_seed_dict,
    relation_key,
    resolve_fanouts,
)
from graphpipe.ops.sampling.types import assemble as _assemble

__all__ = ["sample_hetero_neighbors_reference", "sample_hop_global_reference",
           "sample_neighbors_reference"]


def _choose_positions_py(deg: int, count: int, replace: bool, state: int) -> list[int]:
    if replace:
        out = []
        for _ in range(count):
            state, t = _bounded_py(state, deg)
            out.append(t)
        return out
    chosen: list[int] = []
    members: set[int] = set()
    for j in range(deg - count, deg):
        state, t = _bounded_py(state, j + 1)
        if t in members:
            t = j
        members.add(t)
        chosen.append(t)
    return chosen


def _count_for(deg: int, fanout: int, replace: bool) -> int:
    if fanout < 0:
        return deg
    if replace:
        return fanout if deg > 0 else 0
    return min(fanout, deg)


def sample_hop_global_reference(indptr, indices, dst_global, fanout: int, *, replace: bool, stream_keys) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Oracle for :func:`sample_hop_global` (Python ints, Python sets)."""
    ip = [0]
    src: list[int] = []
    eids: list[int] = []
    for v, skey in zip(dst_global, stream_keys):
        start, end = int(indptr[int(v)]), int(indptr[int(v) + 1])
        deg = end - start
        count = _count_for(deg, fanout, replace)
        if fanout < 0 or (not replace and deg <= fanout):
            pos = list(range(count))
        else:
            pos = _choose_positions_py(deg, count, replace, int(skey))
        for p in pos:
            eids.append(start + p)
            src.append(int(indices[start + p]))
        ip.append(len(src))
    return np.asarray(ip, dtype=np.int64), np.asarray(src, dtype=np.int64), np.asarray(eids, dtype=np.int64)


def sample_neighbors_reference(indptr, indices, seeds, fanouts: Sequence[int], *, replace: bool = False,
                               seed: int = 0, frontier: str = "new") -> SampleOutput:
    """Plain-Python oracle for :func:`sample_neighbors`: same RNG, dict ID map.

    ``frontier="all"``: hop ``h`` expands every node known before it; ``"new"``: only the
    nodes the hop before reached first (the others keep empty rows in the block)."""
    frontier = check_frontier(frontier)
    indptr, indices = _check_csc(indptr, indices)
    fanouts = _check_fanouts(fanouts)
    seeds = [int(s) for s in _check_node_ids(seeds, indptr.shape[0] - 1)]
    local_of: dict[int, int] = {}
    for s in seeds:
        if s in local_of:
            raise ValueError(f"'seeds' must be unique (got {s} more than once)")
        local_of[s] = len(local_of)
    n_id = list(seeds)
    bkey = batch_key(seed)
    hops = []
    first = 0  # destinations before it are not expanded
    for h, fanout in enumerate(fanouts):
        num_dst = len(n_id)
        hkey = hop_key(bkey, h)
        dst = n_id[first:num_dst]
        ip, src, eids = sample_hop_global_reference(
            indptr, indices, dst, fanout, replace=replace, stream_keys=[_stream_key_py(hkey, v) for v in dst])
        ip = np.concatenate([np.zeros(first, dtype=np.int64), ip])  # empty rows before the frontier
        if frontier == "new":
            first = num_dst
        local_src = []
        for g in src.tolist():
            if g not in local_of:
                local_of[g] = len(local_of)
                n_id.append(g)
            local_src.append(local_of[g])
        hops.append((ip, np.asarray(local_src, dtype=np.int64), eids, num_dst, len(n_id)))
    return _assemble(np.asarray(n_id, dtype=np.int64), len(seeds), hops)


def sample_hetero_neighbors_reference(graph: HeteroCSC, seeds: Mapping[str, Any],
                                      fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *,
                                      replace: bool = False, seed: int = 0,
                                      frontier: str = "new") -> HeteroSampleOutput:
    """The typed oracle (module docstring); arguments as
    :func:`graphpipe.ops.sampling.sample_neighbors` with a ``HeteroCSC``."""
    frontier = check_frontier(frontier)
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    seed_ids = check_seed_dict(graph, seeds)
    n_id = {t: [int(v) for v in ids] for t, ids in seed_ids.items()}
    local = {t: {v: i for i, v in enumerate(ids)} for t, ids in n_id.items()}
    span = {t: (0, len(ids)) for t, ids in n_id.items()}
    parts: dict[Any, list[list[int]]] = {et: [[], [], []] for et in graph.edge_types}
    sampled_nodes = {t: [len(ids)] for t, ids in n_id.items()}
    sampled_edges: dict[Any, list[int]] = {et: [] for et in graph.edge_types}
    num_hops = len(next(iter(per_rel.values()), []))
    bkey = batch_key(seed)
    for h in range(num_hops):
        hkey = hop_key(bkey, h)
        for et in graph.edge_types:
            src_t, _, dst_t = et
            begin, end = span[dst_t]
            dst = n_id[dst_t][begin:end]
            rkey = relation_key(hkey, et)
            indptr, indices = graph.csc[et]
            ip, src, eids = sample_hop_global_reference(
                indptr, indices, dst, per_rel[et][h], replace=replace,
                stream_keys=[_stream_key_py(rkey, v) for v in dst])
            row, col, eid = parts[et]
            for i in range(len(dst)):
                for e in range(int(ip[i]), int(ip[i + 1])):
                    g = int(src[e])
                    if g not in local[src_t]:
                        local[src_t][g] = len(n_id[src_t])
                        n_id[src_t].append(g)
                    row.append(local[src_t][g])
                    col.append(begin + i)
                    eid.append(int(eids[e]))
            sampled_edges[et].append(int(ip[-1]))
        for t, ids in n_id.items():
            prev_end = span[t][1]
            span[t] = (prev_end if frontier == "new" else 0, len(ids))
            sampled_nodes[t].append(len(ids) - prev_end)
    as64 = lambda v: np.asarray(v, dtype=np.int64)
    return HeteroSampleOutput(
        n_id={t: as64(v) for t, v in n_id.items()},
        row={et: as64(p[0]) for et, p in parts.items()},
        col={et: as64(p[1]) for et, p in parts.items()},
        edge_ids={et: as64(p[2]) for et, p in parts.items()},
        num_seeds={t: len(ids) for t, ids in seed_ids.items()},
        num_sampled_nodes=sampled_nodes, num_sampled_edges=sampled_edges, frontier=frontier)
