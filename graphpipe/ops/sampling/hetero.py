"""Heterogeneous Fused-Map sampling: per-relation fanouts, typed local IDs.

:func:`sample_hetero_neighbors` samples a typed multi-hop neighbourhood with PyG's
semantics for a heterogeneous ``NeighborLoader`` (stated in
:mod:`graphpipe.ops.sampling.hetero_reference`, the plain-Python oracle this path matches
exactly): per hop, each relation ``(src, rel, dst)`` in ``graph.edge_types`` order
expands the frontier of type ``dst`` (fixed when the hop starts) and Fused-Maps the
sampled sources into type ``src``'s ID table while it samples: one open-addressing table
per node type (:mod:`graphpipe.ops.sampling.idmap`), the seeds of a type inserted first.

One Numba call per (hop, relation) does the work, releasing the GIL, so
:func:`sample_hetero_neighbors_batches` samples a window of batches in parallel threads.
Random numbers: the project's one generator (:mod:`graphpipe.ops._core.rng`), one
SplitMix64 stream per (batch seed, hop, relation, destination ID)
(:func:`graphpipe.ops.sampling.hetero_types.relation_key`); Floyd's algorithm without
replacement, Lemire bounds, exactly as the homogeneous sampler
(:mod:`graphpipe.ops.sampling.cpu`). The kernels index only with values checked before
they run: the relations by :meth:`HeteroCSC.from_arrays` (every slice and index in
bounds), the seeds by their type's node count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numba
import numpy as np

from graphpipe.ops.sampling.cpu import _choose_positions, _hop_counts, _insert_seeds, _pool
from graphpipe.ops.sampling.hetero_reference import (
    check_seed_dict,
    sample_hetero_neighbors_reference,
)
from graphpipe.ops.sampling.hetero_types import (
    EdgeType,
    HeteroCSC,
    HeteroSampleOutput,
    relation_key,
    resolve_fanouts,
)
from graphpipe.ops.sampling.idmap import EMPTY_KEY, HASH_MIX, table_grow, table_insert_or_get
from graphpipe.ops.sampling.keys import _stream_key, batch_key, hop_key
from graphpipe.ops.sampling.types import check_frontier

__all__ = ["HETERO_BACKENDS", "sample_hetero_neighbors", "sample_hetero_neighbors_batches"]

HETERO_BACKENDS = ("cpu", "reference")


@numba.njit(cache=True, nogil=True)
def _rel_counts(indptr, dst_ids, begin, end, fanout, replace):
    """Edges per expanded destination ``dst_ids[begin:end]``: local offsets, CSC starts, degrees."""
    return _hop_counts(indptr, dst_ids[begin:end], end - begin, fanout, replace)


@numba.njit(cache=True, nogil=True)
def _reserve(src_ids, src_count, total, keys, values, num_src_nodes):
    """Room for ``total`` more sources: ``src_ids`` and the table (load <= 0.5) grown."""
    bound = min(src_count + total, num_src_nodes)
    if src_ids.shape[0] < bound:
        grown = np.empty(min(max(bound, 2 * src_ids.shape[0]), num_src_nodes), dtype=np.int64)
        grown[:src_count] = src_ids[:src_count]
        src_ids = grown
    if keys.shape[0] < 2 * bound:
        size = keys.shape[0]
        while size < 2 * bound:
            size *= 2
        keys, values = table_grow(keys, values, size, HASH_MIX)
    return src_ids, keys, values


@numba.njit(cache=True, nogil=True)
def _rel_hop(indptr, indices, dst_ids, begin, end, fanout, replace, rkey, src_ids, src_count,
             keys, values, num_src_nodes, scratch_set, scratch_slots):
    """One relation in one hop: sample in-neighbours of ``dst_ids[begin:end]`` and map
    the sources into the source type's table. Returns ``(row, col, edge_ids, src_ids,
    src_count, keys, values)`` (``src_ids`` and the table may be reallocated)."""
    offsets, starts, degs, total = _rel_counts(indptr, dst_ids, begin, end, fanout, replace)
    src_ids, keys, values = _reserve(src_ids, src_count, total, keys, values, num_src_nodes)
    edge_ids = np.empty(total, dtype=np.int64)
    row = np.empty(total, dtype=np.int64)
    col = np.empty(total, dtype=np.int64)
    for i in range(end - begin):
        base = offsets[i]
        count = offsets[i + 1] - base
        for q in range(count):
            col[base + q] = begin + i
        if count == 0:
            continue
        if fanout < 0 or (not replace and degs[i] <= fanout):
            for q in range(count):
                edge_ids[base + q] = starts[i] + q
        else:
            state = _stream_key(rkey, dst_ids[begin + i])
            _choose_positions(edge_ids, base, degs[i], count, replace, state, scratch_set, scratch_slots)
            for q in range(count):
                edge_ids[base + q] += starts[i]
    for e in range(total):
        u = indices[edge_ids[e]]
        lid, is_new = table_insert_or_get(keys, values, u, src_count, HASH_MIX)
        if is_new:
            src_ids[src_count] = u
            src_count += 1
        row[e] = lid
    return row, col, edge_ids, src_ids, src_count, keys, values


def _new_state(ids: np.ndarray) -> list[Any]:
    """``[ids buffer, count, keys, values]`` of one type with its seeds inserted."""
    size = 16
    while size < 2 * ids.shape[0]:
        size *= 2
    keys = np.full(size, EMPTY_KEY, dtype=np.int64)
    values = np.full(size, -1, dtype=np.int32)
    buf = np.empty(max(16, ids.shape[0]), dtype=np.int64)
    if _insert_seeds(ids, keys, values, buf) >= 0:  # pragma: no cover - checked before
        raise ValueError("'seeds' must be unique within each node type")
    return [buf, int(ids.shape[0]), keys, values]


def _scratch(per_rel: dict[EdgeType, list[int]]) -> tuple[np.ndarray, np.ndarray]:
    top = max([f for v in per_rel.values() for f in v] + [0])
    if top <= 32:
        return np.full(1, -1, dtype=np.int64), np.empty(1, dtype=np.int64)
    return np.full(1 << (2 * top - 1).bit_length(), -1, dtype=np.int64), np.empty(top, dtype=np.int64)


def _sample_checked(graph: HeteroCSC, seed_ids: dict[str, np.ndarray],
                    per_rel: dict[EdgeType, list[int]], replace: bool, seed: int,
                    frontier: str) -> HeteroSampleOutput:
    """One batch from checked arguments (one kernel call per hop and relation)."""
    state = {t: _new_state(ids) for t, ids in seed_ids.items()}
    span = {t: (0, s[1]) for t, s in state.items()}
    parts: dict[EdgeType, list[list[np.ndarray]]] = {et: [[], [], []] for et in graph.edge_types}
    sampled_nodes = {t: [s[1]] for t, s in state.items()}
    scratch_set, scratch_slots = _scratch(per_rel)
    bkey = batch_key(seed)
    for h in range(len(next(iter(per_rel.values()), []))):
        hkey = hop_key(bkey, h)
        for et in graph.edge_types:
            src, dst = state[et[0]], state[et[2]]
            begin, end = span[et[2]]
            indptr, indices = graph.csc[et]
            row, col, eid, src[0], src[1], src[2], src[3] = _rel_hop(
                indptr, indices, dst[0], begin, end, per_rel[et][h], bool(replace),
                np.uint64(relation_key(hkey, et)), src[0], src[1], src[2], src[3],
                graph.num_nodes[et[0]], scratch_set, scratch_slots)
            for part, arr in zip(parts[et], (row, col, eid)):
                part.append(arr)
        for t, s in state.items():
            prev_end = span[t][1]
            span[t] = (prev_end if frontier == "new" else 0, s[1])
            sampled_nodes[t].append(s[1] - prev_end)
    cat = lambda arrs: np.concatenate(arrs) if arrs else np.empty(0, np.int64)
    return HeteroSampleOutput(
        n_id={t: s[0][:s[1]] for t, s in state.items()},
        row={et: cat(p[0]) for et, p in parts.items()},
        col={et: cat(p[1]) for et, p in parts.items()},
        edge_ids={et: cat(p[2]) for et, p in parts.items()},
        num_seeds={t: int(ids.shape[0]) for t, ids in seed_ids.items()},
        num_sampled_nodes=sampled_nodes,
        num_sampled_edges={et: [int(a.shape[0]) for a in p[0]] for et, p in parts.items()},
        frontier=frontier)


def sample_hetero_neighbors(graph: HeteroCSC, seeds: Mapping[str, Any],
                            fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *,
                            replace: bool = False, seed: int = 0, frontier: str = "new",
                            backend: str = "cpu") -> HeteroSampleOutput:
    """Sample a typed multi-hop neighbourhood of ``seeds`` with Fused-Map typed local IDs.

    Args:
        graph: the relations, checked (:meth:`HeteroCSC.from_arrays`).
        seeds: ``{ntype: int (B_t,)}`` unique global IDs per type (local ``0..B_t-1``).
        fanouts: one list for every relation, or ``{etype: list}`` for each relation
            (tuple or ``"src___rel___dst"`` keys), seed hop first; ``-1`` all, ``0`` none
            (:func:`~graphpipe.ops.sampling.hetero_types.resolve_fanouts`).
        replace: sample with replacement.
        seed: integer key of the batch's random stream; the output is a pure function of
            (graph, seeds, fanouts, replace, seed, frontier) on every backend.
        frontier: ``"new"`` (PyG, default: a hop expands the nodes of each type that the
            hop before reached first) or ``"all"`` (DGL: every node known so far).
        backend: ``"cpu"`` (Numba) or ``"reference"`` (the plain-Python oracle).

    Returns:
        :class:`~graphpipe.ops.sampling.hetero_types.HeteroSampleOutput`.

    Raises:
        ValueError: bad fanouts (unknown or missing relations, uneven lengths), unknown
            seed types, out-of-range or repeated seeds, an unknown backend or frontier.

    Authors write papers; papers cite papers. Two hops from paper 0:

    >>> import numpy as np
    >>> g = HeteroCSC.from_arrays({"paper": 3, "author": 2}, {
    ...     ("author", "writes", "paper"): (np.array([0, 1, 2, 3]), np.array([0, 1, 1])),
    ...     ("paper", "cites", "paper"): (np.array([0, 2, 2, 3]), np.array([1, 2, 0]))})
    >>> out = sample_hetero_neighbors(g, {"paper": np.array([0])}, [1, 1], seed=3)
    >>> {t: ids.tolist() for t, ids in out.n_id.items()}
    {'paper': [0, 2], 'author': [0, 1]}
    >>> cites = ("paper", "cites", "paper")      # hop 1: 2 -> 0; hop 2: 0 -> 2 (local 1)
    >>> out.row[cites].tolist(), out.col[cites].tolist()
    ([1, 0], [0, 1])
    >>> out.num_sampled_nodes, out.num_sampled_edges[("author", "writes", "paper")]
    ({'paper': [1, 1, 0], 'author': [0, 1, 1]}, [1, 1])
    >>> ref = sample_hetero_neighbors(g, {"paper": np.array([0])}, [1, 1], seed=3,
    ...                               backend="reference")
    >>> all(np.array_equal(ref.row[e], out.row[e]) for e in g.edge_types)
    True
    """
    if backend not in HETERO_BACKENDS:
        raise ValueError(f"'backend' must be one of {HETERO_BACKENDS} (got {backend!r})")
    if not isinstance(graph, HeteroCSC):
        raise ValueError(f"'graph' must be a HeteroCSC (got {type(graph).__name__})")  # noqa: TRY004 - bad arguments are ValueError here
    if backend == "reference":
        return sample_hetero_neighbors_reference(graph, seeds, fanouts, replace=replace,
                                                 seed=seed, frontier=frontier)
    frontier = check_frontier(frontier)
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    return _sample_checked(graph, check_seed_dict(graph, seeds), per_rel, bool(replace),
                           int(seed), frontier)


def sample_hetero_neighbors_batches(graph: HeteroCSC, seed_batches: Sequence[Mapping[str, Any]],
                                    fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *,
                                    seeds: Sequence[int], replace: bool = False,
                                    frontier: str = "new",
                                    num_threads: int | None = None) -> list[HeteroSampleOutput]:
    """The batches of a window sampled in parallel threads; result ``i`` equals
    ``sample_hetero_neighbors(graph, seed_batches[i], fanouts, seed=seeds[i], ...)``
    whatever ``num_threads`` is (default ``numba.get_num_threads()``, at most one per batch).

    >>> import numpy as np
    >>> g = HeteroCSC.from_arrays({"a": 2}, {("a", "to", "a"): (np.array([0, 1, 2]), np.array([1, 0]))})
    >>> outs = sample_hetero_neighbors_batches(g, [{"a": [0]}, {"a": [1]}], [1], seeds=[0, 1])
    >>> [o.n_id["a"].tolist() for o in outs]
    [[0, 1], [1, 0]]
    """
    if not isinstance(graph, HeteroCSC):
        raise ValueError(f"'graph' must be a HeteroCSC (got {type(graph).__name__})")  # noqa: TRY004 - bad arguments are ValueError here
    frontier = check_frontier(frontier)
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    batches = [check_seed_dict(graph, b) for b in seed_batches]
    keys = [int(s) for s in seeds]
    if len(keys) != len(batches):
        raise ValueError(f"'seeds' must have one key per batch ({len(batches)}) (got {len(keys)})")
    threads = numba.get_num_threads() if num_threads is None else int(num_threads)
    if threads < 1:
        raise ValueError(f"'num_threads' must be >= 1 (got {num_threads})")
    threads = min(threads, max(1, len(batches)))
    args = [(graph, b, per_rel, bool(replace), k, frontier) for b, k in zip(batches, keys)]
    if threads == 1:
        return [_sample_checked(*a) for a in args]
    return [f.result() for f in [_pool(threads).submit(_sample_checked, *a) for a in args]]
