"""Plain-Python oracle of heterogeneous sampling
(:func:`graphpipe.ops.sampling.hetero.sample_hetero_neighbors` must match it exactly):
Python ints for the RNG (the ``*_py`` twins of :mod:`graphpipe.ops._core.rng`), Python
sets for Floyd's algorithm, one dict per node type as its ID map.

Semantics (PyG's heterogeneous ``NeighborLoader``, torch-sparse / pyg-lib
``hetero_neighbor_sample``): per hop, relations in ``graph.edge_types`` order; relation
``(s, r, d)`` samples ``fanouts[(s, r, d)][hop]`` in-neighbours of every node of type
``d`` in its frontier and maps the sources into type ``s``'s table (a new source gets the
next local ID of ``s``). The frontier of ``d`` is fixed when the hop starts: the seeds of
``d`` in hop 1, then the nodes of ``d`` that the previous hop reached first
(``frontier="new"``), or every node of ``d`` known so far (``frontier="all"``, DGL's). A
destination's draws come from the stream ``(batch seed, hop, relation name, node ID)``.
The numbering of a hop's new nodes follows the order relations are expanded in
(``graph.edge_types``, as pyg-lib's ``data.edge_types``; torch-sparse walks its own
dictionary order, which changes the numbering but not the nodes or edges reached).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphpipe.ops._core.checks import check_node_ids
from graphpipe.ops.sampling.hetero_types import (
    HeteroCSC,
    HeteroSampleOutput,
    relation_key,
    resolve_fanouts,
)
from graphpipe.ops.sampling.keys import _stream_key_py, batch_key, hop_key
from graphpipe.ops.sampling.reference import sample_hop_global_reference
from graphpipe.ops.sampling.types import check_frontier

__all__ = ["check_seed_dict", "sample_hetero_neighbors_reference"]


def check_seed_dict(graph: HeteroCSC, seeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``{ntype: int64 seeds}`` for every node type (empty where none are given), after
    checking the graph was checked (:meth:`HeteroCSC.from_arrays`), the types exist and
    the IDs are in range and unique within their type."""
    if not getattr(graph, "checked", False):
        raise ValueError("'graph' must be built with HeteroCSC.from_arrays (its relations "
                         "checked once before any kernel indexes with them)")
    if not isinstance(seeds, Mapping):
        raise ValueError(f"'seeds' must be a dict {{node type: IDs}} "  # noqa: TRY004 - bad arguments are ValueError here
                         f"(got {type(seeds).__name__})")
    unknown = set(seeds) - set(graph.num_nodes)
    if unknown:
        raise ValueError(f"'seeds' names unknown node types {sorted(map(str, unknown))}")
    out = {}
    for t, n in graph.num_nodes.items():
        ids = check_node_ids(seeds.get(t, np.empty(0, np.int64)), n, f"seeds[{t!r}]")
        if ids.shape[0] != np.unique(ids).shape[0]:
            raise ValueError(f"'seeds[{t!r}]' must be unique node IDs")
        out[t] = ids
    return out


def sample_hetero_neighbors_reference(graph: HeteroCSC, seeds: Mapping[str, Any],
                                      fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *,
                                      replace: bool = False, seed: int = 0,
                                      frontier: str = "new") -> HeteroSampleOutput:
    """The oracle (module docstring); arguments as ``sample_hetero_neighbors``."""
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
