"""Temporal neighbour sampling on a typed graph (PyG's ``NeighborLoader(hetero_data,
time_attr=...)``), one tree per seed, with the semantics of :mod:`.temporal` per relation:

- seed ``i`` (of one node type) has time ``seed_time[i]``; every node of its tree inherits it;
- per hop, relation ``(s, r, d)`` expands the frontier of type ``d`` (the nodes of that type
  the hop before reached first, per tree, fixed when the hop starts) in
  ``graph.edge_types`` order; an in-edge ``u -> v`` is valid for tree ``i`` if
  ``edge_time[(s, r, d)][e] <= seed_time[i]`` (edge-level time) or ``node_time[s][u] <=
  seed_time[i]`` (node-level); a relation without timestamps (edge-level: none for it;
  node-level: none for its source type) is not filtered;
- ``"uniform"`` / ``"last"`` draw among a row's valid edges as :mod:`.temporal` does, from
  the stream ``(tree key, hop, relation, node)``: tree ``i``'s hop key
  (:func:`~graphpipe.ops.sampling.keys.tree_hop_keys`) through
  :func:`~graphpipe.ops.sampling.types.relation_key`, so a graph of one node type and the
  relation ``(_N, _E, _N)`` gives :func:`~graphpipe.ops.sampling.temporal.sample_temporal`'s
  sample (the tests check it);
- sources are deduplicated per (tree, type): a node reached by two trees appears once in each.

Layout (:class:`~graphpipe.ops.sampling.types.HeteroSampleOutput` with ``batch``): per type
the seeds, then each hop's new nodes (by relation, then by tree, then in discovery order);
each relation's edges by hop, within a hop by destination.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from graphpipe.ops._core.checks import check_choice, check_node_ids
from graphpipe.ops._core.rng import mix64_np
from graphpipe.ops.sampling.cpu import _scratch_for
from graphpipe.ops.sampling.keys import tree_hop_keys
from graphpipe.ops.sampling.temporal import (
    STRATEGIES,
    TemporalGraph,
    _insert,
    _relation_trees,
    check_seed_time,
    run_window,
    temporal_graph,
)
from graphpipe.ops.sampling.types import (
    DEFAULT_ETYPE,
    EdgeType,
    HeteroCSC,
    HeteroSampleOutput,
    relation_salt,
    resolve_fanouts,
)

__all__ = ["TypedTemporalGraph", "sample_temporal_typed", "sample_temporal_typed_batches",
           "typed_temporal_graph"]

_NO_TIME = np.iinfo(np.int64).min   # a relation without timestamps: every edge valid


@dataclass(frozen=True)
class TypedTemporalGraph:
    """A typed graph whose relations are :class:`~graphpipe.ops.sampling.temporal.TemporalGraph` s.

    Attributes:
        num_nodes: ``{ntype: N_t}``; edge_types: the relations in sampling order.
        relations: ``{etype: TemporalGraph}`` (each row sorted by time once).
        node_time: ``{ntype: int64 (N_t,)}`` the node times given (the seeds' default times).
        level: ``"edge"`` or ``"node"``.
    """

    num_nodes: dict[str, int]
    edge_types: list[EdgeType]
    relations: dict[EdgeType, TemporalGraph]
    node_time: dict[str, np.ndarray]
    level: str


def typed_temporal_graph(graph: HeteroCSC, *, node_time: Mapping[str, Any] | None = None,
                         edge_time: Mapping[Any, Any] | None = None) -> TypedTemporalGraph:
    """Prepare ``graph`` (checked, :meth:`HeteroCSC.from_arrays`) for :func:`sample_temporal_typed`.

    Args:
        node_time: ``{ntype: int (N_t,)}`` node times (node-level), or None.
        edge_time: ``{etype: int (E_r,)}`` edge times in each relation's CSC order
            (edge-level, taking precedence), or None. Give one of them.

    >>> import numpy as np
    >>> g = HeteroCSC.from_arrays({"a": 2, "b": 2}, {("b", "to", "a"): (np.array([0, 2, 2]), np.array([0, 1]))})
    >>> tg = typed_temporal_graph(g, node_time={"b": np.array([5, 1])})
    >>> tg.level, tg.relations[("b", "to", "a")].key.tolist()
    ('node', [1, 5])
    """
    if not getattr(graph, "checked", False):
        raise ValueError("'graph' must be built with HeteroCSC.from_arrays (checked relations)")
    if not node_time and not edge_time:
        raise ValueError("temporal sampling needs node times or edge times")
    level = "edge" if edge_time else "node"
    given = {tuple(k): v for k, v in (edge_time or {}).items()} if level == "edge" else dict(node_time)
    unknown = set(given) - set(graph.edge_types if level == "edge" else graph.num_nodes)
    if unknown:
        raise ValueError(f"{level} times name unknown {'relations' if level == 'edge' else 'node types'} "
                         f"{sorted(map(str, unknown))}")
    relations = {}
    for et in graph.edge_types:
        indptr, indices = graph.csc[et]
        times = given.get(et if level == "edge" else et[0])
        if times is None:   # not filtered: one time older than any seed's
            size = indices.shape[0] if level == "edge" else graph.num_nodes[et[0]]
            times = np.full(size, _NO_TIME, dtype=np.int64)
        relations[et] = temporal_graph(np.asarray(indptr), np.asarray(indices), num_src=graph.num_nodes[et[0]],
                                       **({"edge_time": times} if level == "edge" else {"node_time": times}))
    node_times = {} if level == "edge" else {t: check_seed_time(v, graph.num_nodes[t]) for t, v in given.items()}
    return TypedTemporalGraph(dict(graph.num_nodes), list(graph.edge_types), relations, node_times, level)


def _type_state(ids: np.ndarray, num_nodes: int) -> list[Any]:
    """``[ids, tree, table keys, table values, count]`` of one type, seed ``i`` as tree ``i``."""
    size = 16
    while size < 4 * max(1, ids.shape[0]):
        size *= 2
    keys, vals = np.full(size, -1, dtype=np.int64), np.empty(size, dtype=np.int64)
    trees = np.arange(ids.shape[0], dtype=np.int64)
    for i, u in enumerate(ids.tolist()):
        _insert(keys, vals, i * num_nodes + u, i)
    return [np.concatenate([ids, np.empty(16, np.int64)]), np.concatenate([trees, np.empty(16, np.int64)]),
            keys, vals, int(ids.shape[0])]


def _relation_keys(hkeys: np.ndarray, etype: EdgeType) -> np.ndarray:
    """uint64 ``(B,)``: :func:`relation_key` of every tree's hop key."""
    if tuple(etype) == DEFAULT_ETYPE:
        return np.ascontiguousarray(hkeys)
    return mix64_np(hkeys ^ np.uint64(relation_salt(etype)))


def sample_temporal_typed(graph: TypedTemporalGraph, seeds: Mapping[str, Any], seed_time: Any,
                          fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *, strategy: str = "uniform",
                          replace: bool = False, seed: int = 0) -> HeteroSampleOutput:
    """Temporal sampling of a typed graph, one tree per seed (module docstring).

    Args:
        graph: from :func:`typed_temporal_graph`.
        seeds: ``{ntype: int (B,)}`` of one node type (a node may repeat: one tree each).
        seed_time: int ``(B,)`` each seed's time.
        fanouts: per hop, seed hop first (``-1``: every valid edge), one list or ``{etype: list}``.
        strategy, replace, seed: as :func:`~graphpipe.ops.sampling.temporal.sample_temporal`.

    Returns:
        :class:`HeteroSampleOutput` with ``batch`` (each node's tree).

    Authors 0, 1 wrote paper 0 at times 5 and 1; paper 0 seeded at times 3 and 9 (the
    second tree sees both edges, by time):

    >>> import numpy as np
    >>> g = HeteroCSC.from_arrays({"paper": 1, "author": 2},
    ...                           {("author", "writes", "paper"): (np.array([0, 2]), np.array([0, 1]))})
    >>> tg = typed_temporal_graph(g, edge_time={("author", "writes", "paper"): np.array([5, 1])})
    >>> out = sample_temporal_typed(tg, {"paper": [0, 0]}, [3, 9], [-1])
    >>> out.n_id["author"].tolist(), out.batch["author"].tolist()
    ([1, 1, 0], [0, 1, 1])
    """
    strategy = check_choice("strategy", strategy, STRATEGIES)
    if strategy == "last" and replace:
        raise ValueError("'replace=True' has no meaning with strategy='last' (the most recent edges)")
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    if not isinstance(seeds, Mapping) or len(seeds) != 1 or next(iter(seeds)) not in graph.num_nodes:
        raise ValueError(f"'seeds' must be {{node type: IDs}} of one known node type (got {seeds!r})")
    ((stype, ids),) = seeds.items()
    ids = check_node_ids(ids, graph.num_nodes[stype])
    times = check_seed_time(seed_time, ids.shape[0])
    b = ids.shape[0]
    if b and b * max(graph.num_nodes.values()) >= 1 << 62:
        raise ValueError(f"a batch of {b} seeds on {max(graph.num_nodes.values())} nodes is too large")
    empty = np.empty(0, np.int64)
    state = {t: _type_state(ids if t == stype else empty, n) for t, n in graph.num_nodes.items()}
    span = {t: (0, s[4]) for t, s in state.items()}
    sampled = {t: [s[4]] for t, s in state.items()}
    parts: dict[EdgeType, list[list[np.ndarray]]] = {et: [[], [], []] for et in graph.edge_types}
    hops = len(next(iter(per_rel.values()), []))
    scratch_set, scratch_slots = _scratch_for(max([f for v in per_rel.values() for f in v] + [0]))
    hkeys = tree_hop_keys(seed, b, hops)
    for h in range(hops):
        for et in graph.edge_types:
            rel, src, dst = graph.relations[et], state[et[0]], state[et[2]]
            e_dst, e_src, e_slot, src[0], src[1], src[2], src[3], src[4] = _relation_trees(
                rel.indptr, rel.indices, rel.order, rel.key, dst[0], dst[1], *span[et[2]], times,
                per_rel[et][h], bool(replace), STRATEGIES.index(strategy), _relation_keys(hkeys[:, h], et),
                src[0], src[1], src[2], src[3], src[4], graph.num_nodes[et[0]], scratch_set, scratch_slots)
            for part, arr in zip(parts[et], (e_src, e_dst, e_slot)):
                part.append(arr)
        for t, s in state.items():
            sampled[t].append(s[4] - span[t][1])
            span[t] = (span[t][1], s[4])
    cat = {et: [np.concatenate(p) if p else empty for p in ps] for et, ps in parts.items()}
    return HeteroSampleOutput(
        n_id={t: s[0][:s[4]].copy() for t, s in state.items()},
        row={et: c[0] for et, c in cat.items()}, col={et: c[1] for et, c in cat.items()},
        edge_ids={et: c[2] for et, c in cat.items()},
        num_seeds={t: n[0] for t, n in sampled.items()}, num_sampled_nodes=sampled,
        num_sampled_edges={et: [int(a.shape[0]) for a in ps[0]] for et, ps in parts.items()},
        frontier="new", batch={t: s[1][:s[4]].copy() for t, s in state.items()})


def sample_temporal_typed_batches(graph: TypedTemporalGraph, seed_batches: Sequence[Mapping[str, Any]],
                                  seed_times: Sequence[Any], fanouts: Any, *, strategy: str = "uniform",
                                  replace: bool = False, keys: Sequence[int],
                                  num_threads: int | None = None) -> list[HeteroSampleOutput]:
    """:func:`sample_temporal_typed` of each batch of a window in parallel threads; result
    ``i`` equals the call with ``seed_batches[i]``, ``seed_times[i]`` and ``seed=keys[i]``."""
    if not len(keys) == len(seed_times) == len(seed_batches):
        raise ValueError(f"one key and one seed_time per batch ({len(seed_batches)} batches, "
                         f"{len(keys)} keys, {len(seed_times)} seed_times)")
    args = [(graph, b, t, fanouts) for b, t in zip(seed_batches, seed_times)]
    return run_window(sample_temporal_typed, args, keys, {"strategy": strategy, "replace": replace}, num_threads)
