"""GPU path of the typed sampler: the relation loop of :mod:`graphpipe.ops.sampling.cpu`
(per hop, relations in ``graph.edge_types`` order, each destination type's frontier fixed
when the hop starts) calling the one-relation CUDA hop kernels of
:mod:`graphpipe.ops.sampling.cuda` (counts, scan, per-destination draws) per relation,
under the CPU's stream keys (``relation_key(hop_key(batch_key(seed), h), etype)``), so the
GPU draws the CPU's edges in the CPU's order.

Local IDs: each type's new sources are numbered on the host in first-appearance order
(destinations in frontier order, each destination's edges in draw order, relation after
relation), as the CPU's Fused-Map numbers them; so the result equals
:func:`graphpipe.ops.sampling.cpu.sample_typed`'s bit for bit (the CPU/GPU same-numbers
contract), not merely up to relabelling. The per-hop device-to-host copy is the one sync
the one-relation sampler already makes to size its outputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from graphpipe.ops.sampling.cuda import _sample_hop_device, _to_device, _to_host
from graphpipe.ops.sampling.keys import batch_key, hop_key
from graphpipe.ops.sampling.types import (
    EdgeType,
    HeteroCSC,
    HeteroSampleOutput,
    check_frontier,
    check_seed_dict,
    relation_key,
    resolve_fanouts,
)

__all__ = ["device_relations", "sample_typed_cuda"]


def device_relations(graph: HeteroCSC) -> dict[EdgeType, tuple[Any, Any]]:
    """Every relation's CSC copied to the GPU once (``(indptr, indices)`` device arrays)."""
    return {et: (_to_device(np.asarray(ip), np.int64), _to_device(np.asarray(ind), np.asarray(ind).dtype))
            for et, (ip, ind) in graph.csc.items()}


class _TypeIds:
    """One node type's local IDs: ``ids`` (first appearance order) and their lookup."""

    def __init__(self, seeds: np.ndarray):
        self.ids = np.asarray(seeds, dtype=np.int64)
        self._sorted, self._order = np.sort(self.ids), np.argsort(self.ids, kind="stable")

    def add(self, src: np.ndarray) -> np.ndarray:
        """int64 local ID of every global ID of ``src``, new ones numbered at first appearance."""
        pos = np.searchsorted(self._sorted, src)
        known = pos < self._sorted.shape[0]
        known[known] = self._sorted[pos[known]] == src[known]
        new, first = np.unique(src[~known], return_index=True)
        if new.shape[0]:
            self.ids = np.concatenate([self.ids, new[np.argsort(first, kind="stable")]])
            self._order = np.argsort(self.ids, kind="stable")
            self._sorted = self.ids[self._order]
        return self._order[np.searchsorted(self._sorted, src)]


def sample_typed_cuda(graph: HeteroCSC, seeds: Mapping[str, Any],
                      fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *, replace: bool = False,
                      seed: int = 0, frontier: str = "new",
                      relations: dict[EdgeType, tuple[Any, Any]] | None = None) -> HeteroSampleOutput:
    """The typed sampler on the GPU (arguments and result as
    :func:`graphpipe.ops.sampling.cpu.sample_typed`, which it equals); ``relations``: the
    graph already on the GPU (:func:`device_relations`), else copied for this call."""
    frontier = check_frontier(frontier)
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    seed_ids = check_seed_dict(graph, seeds)
    relations = device_relations(graph) if relations is None else relations
    types = {t: _TypeIds(ids) for t, ids in seed_ids.items()}
    span = {t: (0, s.ids.shape[0]) for t, s in types.items()}
    sampled = {t: [s.ids.shape[0]] for t, s in types.items()}
    parts: dict[EdgeType, list[list[np.ndarray]]] = {et: [[], [], []] for et in graph.edge_types}
    bkey = batch_key(seed)
    for h in range(len(next(iter(per_rel.values()), []))):
        hkey = hop_key(bkey, h)
        for et in graph.edge_types:
            begin, end = span[et[2]]
            dst = types[et[2]].ids[begin:end]
            row = col = eid = np.empty(0, np.int64)
            if dst.shape[0]:
                d_indptr, d_indices = relations[et]
                offsets, total, d_src, d_eid = _sample_hop_device(
                    d_indptr, d_indices, _to_device(dst, np.int64), per_rel[et][h], replace, None,
                    relation_key(hkey, et))
                if total:
                    counts = np.diff(_to_host(offsets))
                    row = types[et[0]].add(_to_host(d_src).astype(np.int64, copy=False))
                    col = begin + np.repeat(np.arange(dst.shape[0], dtype=np.int64), counts)
                    eid = _to_host(d_eid).astype(np.int64, copy=False)
            for part, arr in zip(parts[et], (row, col, eid)):
                part.append(arr)
        for t, s in types.items():
            prev_end = span[t][1]
            span[t] = (prev_end if frontier == "new" else 0, s.ids.shape[0])
            sampled[t].append(s.ids.shape[0] - prev_end)
    cat = {et: [np.concatenate(p) if p else np.empty(0, np.int64) for p in ps] for et, ps in parts.items()}
    return HeteroSampleOutput(
        n_id={t: s.ids for t, s in types.items()}, row={et: c[0] for et, c in cat.items()},
        col={et: c[1] for et, c in cat.items()}, edge_ids={et: c[2] for et, c in cat.items()},
        num_seeds={t: int(ids.shape[0]) for t, ids in seed_ids.items()}, num_sampled_nodes=sampled,
        num_sampled_edges={et: [int(a.shape[0]) for a in ps[0]] for et, ps in parts.items()},
        frontier=frontier)
