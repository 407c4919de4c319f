"""Uniform neighbour sampling with Fused-Map ID assignment (CPU, Numba).

Graph input: the store's CSC by destination. ``indptr`` int64 (N+1,), ``indices``
int32 or int64 (E,): the in-neighbours of global node ``v`` are
``indices[indptr[v]:indptr[v+1]]`` and the *edge slot* of a neighbour is its position
in ``indices`` (what ``SampledBlock.edge_ids`` holds).

Sampling semantics (``fanouts`` seed hop first, PyG order; DGL block convention):

- hop 1 samples ``fanouts[0]`` in-neighbours of every seed. Hop ``h > 1`` samples
  ``fanouts[h-1]`` in-neighbours of its *frontier* (``frontier=``,
  :data:`graphpipe.ops.sampling.types.FRONTIERS`): with ``"new"`` (default) only the
  nodes hop ``h-1`` reached first, like PyG's ``NeighborLoader`` (torch-sparse's and pyg-lib's
  ``neighbor_sample`` expand ``samples[begin:end]``, the previous hop's new nodes); with
  ``"all"`` every node discovered in hops ``< h`` (seeds included), exactly like DGL's
  ``NeighborSampler.sample_blocks``.
  Either way the block of hop ``h`` has destinations ``n_id[:num_dst]`` (all nodes
  known before hop ``h``; with ``"new"`` those before the frontier have empty rows)
  and sources ``n_id[:num_src]`` (those plus the hop's new nodes), so the
  destinations are a prefix of the sources. A destination expanded under both
  conventions draws the same edges (same stream key).
- uniform without replacement by default: ``min(fanout, deg)`` distinct neighbours per
  destination, all of them (in CSC order) when ``deg <= fanout``; Floyd's algorithm on
  positions in the row otherwise. ``replace=True``: ``fanout`` independent uniform draws
  (none when ``deg == 0``). ``fanout == -1``: all neighbours.
- random numbers: counter-based. Each (batch seed, hop, destination global ID) gets its
  own SplitMix64 stream, so a destination's draws do not depend on thread count, batch
  order or local-ID order (the GPU path in :mod:`graphpipe.ops.sampling.cuda` draws the
  same numbers). Bounded integers use Lemire's unbiased multiply-and-reject method.
- Fused-Map: every sampled source is inserted into a batch-sized open-addressing table
  (:mod:`graphpipe.ops.sampling.idmap`) while sampling; first insertion assigns the next local ID.
  The table grows (rehash) only when a hop's upper bound of distinct nodes would push
  its load above 0.5; it never exceeds the power of two ≥ 2·N.

Typed graphs (:class:`~graphpipe.ops.sampling.types.HeteroCSC`, :func:`sample_typed`):
the number of relations picks the kernel, as GraphBolt's sampler does. One node type and
one relation go through :func:`_sample_batch` (all hops in one nogil call), the
homogeneous fast path; several relations through the relation loop
(:func:`_sample_relations`): per hop, one :func:`_relation_hop` call per relation in
``graph.edge_types`` order, built from the same hop primitives (``_hop_counts``,
``_hop_reserve``, ``_hop_fill`` with its prefetch pipeline). Relation ``(s, r, d)``
expands the frontier of type ``d`` (fixed when the hop starts) and Fused-Maps its sources
into type ``s``'s table (one table per node type, its seeds inserted first); its draws
come from the stream ``(batch seed, hop, relation name, node ID)``
(:func:`~graphpipe.ops.sampling.types.relation_key`), and the homogeneous relation
``(_N, _E, _N)`` draws from the hop's own stream, so a homogeneous graph sampled as a typed
one returns the homogeneous sample. The kernels index only with values checked before they
run: the relations by :meth:`HeteroCSC.from_arrays`, the seeds by their type's node count.

Random numbers come from :mod:`graphpipe.ops._core.rng`, stream keys from
:mod:`graphpipe.ops.sampling.keys`, the result types from :mod:`graphpipe.ops.sampling.types`;
:mod:`graphpipe.ops.sampling.reference` holds the plain-Python oracles that these fast
paths must match exactly (same RNG, dict ID maps).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np

from graphpipe.ops._core.checks import check_csc as _check_graph
from graphpipe.ops._core.checks import check_fanouts as _check_fanouts
from graphpipe.ops._core.checks import check_node_ids as _check_seeds
from graphpipe.ops._core.intrinsics import prefetch as _prefetch
from graphpipe.ops._core.rng import bounded as _bounded
from graphpipe.ops.sampling.idmap import (
    EMPTY_KEY,
    HASH_MIX,
    home_slot,
    table_grow,
    table_insert_or_get,
)
from graphpipe.ops.sampling.keys import _stream_key, batch_key, hop_key
from graphpipe.ops.sampling.types import (
    DEFAULT_ETYPE,
    EdgeType,
    HeteroCSC,
    HeteroSampleOutput,
    SampleOutput,
    check_frontier,
    check_seed_dict,
    relation_key,
    resolve_fanouts,
    split_graph_args,
)
from graphpipe.ops.sampling.types import assemble as _assemble

__all__ = [
    "sample_hop_global",
    "sample_neighbors",
    "sample_neighbors_batches",
    "sample_typed",
]


@numba.njit(cache=True, nogil=True, inline="always")
def _pick_count(deg, fanout, replace):
    """Neighbours a node of in-degree ``deg`` gets: all (``fanout < 0``), ``fanout`` draws
    with replacement (none without neighbours), else ``min(deg, fanout)``."""
    if fanout < 0:
        return deg
    if replace:
        return fanout if deg > 0 else 0
    return min(deg, fanout)


@numba.njit(cache=True, nogil=True, inline="always")
def _choose_positions(out, base, deg, count, replace, state, scratch_set, scratch_slots):
    """Write ``count`` row positions into ``out[base:base+count]`` (draw order).

    Without replacement: Floyd's algorithm (positions distinct, uniform ``count``-subset);
    membership by linear scan for small ``count``, else a scratch open-addressing set.
    """
    if replace:
        for q in range(count):
            state, t = _bounded(state, deg)
            out[base + q] = t
        return
    if count <= 32:
        first = deg - count
        for j in range(first, deg):
            q = j - first
            state, t = _bounded(state, j + 1)
            for p in range(q):
                if out[base + p] == t:
                    t = j
                    break
            out[base + q] = t
        return
    mask = scratch_set.shape[0] - 1
    first = deg - count
    for j in range(first, deg):
        q = j - first
        state, t = _bounded(state, j + 1)
        # membership of t; if present, take j (never present: j is larger than all drawn so far)
        slot = (t * 0x9E3779B1) & mask
        found = False
        while scratch_set[slot] != -1:
            if scratch_set[slot] == t:
                found = True
                break
            slot = (slot + 1) & mask
        if found:
            t = j
            slot = (t * 0x9E3779B1) & mask
            while scratch_set[slot] != -1:
                slot = (slot + 1) & mask
        scratch_set[slot] = t
        scratch_slots[q] = slot
        out[base + q] = t
    for p in range(count):
        scratch_set[scratch_slots[p]] = -1


def _scratch_for(fanout: int) -> tuple[np.ndarray, np.ndarray]:
    if fanout <= 32:
        return np.full(1, -1, dtype=np.int64), np.empty(1, dtype=np.int64)
    size = 1 << (2 * fanout - 1).bit_length()
    return np.full(size, -1, dtype=np.int64), np.empty(fanout, dtype=np.int64)


# --------------------------------------------------------------------------------------
# Hop kernels

_PREFETCH_DISTANCE = 16


@numba.njit(cache=True, nogil=True)
def _hop_counts(indptr, n_id, num_dst, fanout, replace, first=0):
    """Edges per destination of one hop; destinations ``< first`` are not expanded
    (``frontier="new"``: nodes of earlier hops keep empty rows)."""
    local_indptr = np.zeros(num_dst + 1, dtype=np.int64)
    starts = np.zeros(num_dst, dtype=np.int64)
    degs = np.zeros(num_dst, dtype=np.int64)
    total = 0
    for i in range(first, num_dst):
        if i + _PREFETCH_DISTANCE < num_dst:
            _prefetch(indptr, n_id[i + _PREFETCH_DISTANCE])
        v = n_id[i]
        s = indptr[v]
        deg = indptr[v + 1] - s
        starts[i] = s
        degs[i] = deg
        c = _pick_count(deg, fanout, replace)
        total += c
        local_indptr[i + 1] = total
    return local_indptr, starts, degs, total


@numba.njit(cache=True, nogil=True)
def _hop_reserve(n_id, num_nodes, total, keys, values, num_graph_nodes):
    """Grow ``n_id`` and the table so a hop adding ≤ ``total`` nodes keeps the load ≤ 0.5."""
    bound = num_nodes + total
    bound = min(bound, num_graph_nodes)
    if n_id.shape[0] < bound:
        grown = np.empty(max(bound, 2 * n_id.shape[0]) if 2 * n_id.shape[0] < num_graph_nodes else bound,
                         dtype=np.int64)
        grown[:num_nodes] = n_id[:num_nodes]
        n_id = grown
    if keys.shape[0] < 2 * bound:
        size = keys.shape[0]
        while size < 2 * bound:
            size *= 2
        keys, values = table_grow(keys, values, size, HASH_MIX)
    return n_id, keys, values


@numba.njit(cache=True, nogil=True)
def _hop_fill(indptr, indices, dst_ids, n_id, num_nodes, num_dst, fanout, replace, hkey, keys,
              values, local_indptr, starts, degs, local_src, edge_ids, scratch_set, scratch_slots,
              first=0):
    """Sample one hop of destinations ``dst_ids[first:num_dst]`` into ``edge_ids``/``local_src``
    (length = the hop's edge count) and Fused-Map the sources into ``n_id`` (the sources'
    ID list, ``num_nodes`` long so far: ``dst_ids`` itself for one relation, the source
    type's for a typed relation); ``n_id`` and the table must already be reserved.
    Returns the new node count."""
    total = local_src.shape[0]
    # pass 1: choose the edge slots (touches only edge_ids)
    for i in range(first, num_dst):
        base = local_indptr[i]
        count = local_indptr[i + 1] - base
        if count == 0:
            continue
        start = starts[i]
        deg = degs[i]
        if fanout < 0 or (not replace and deg <= fanout):
            for q in range(count):
                edge_ids[base + q] = start + q
        else:
            state = _stream_key(hkey, dst_ids[i])
            _choose_positions(edge_ids, base, deg, count, replace, state, scratch_set, scratch_slots)
            for q in range(count):
                edge_ids[base + q] += start
    # pass 2: read the sources and Fused-Map them, edge order; software-pipelined so the
    # random reads of ``indices`` and of the table are in flight D and 2D edges ahead
    size = keys.shape[0]
    dist = _PREFETCH_DISTANCE
    for e in range(total):
        if e + 2 * dist < total:
            _prefetch(indices, edge_ids[e + 2 * dist])
        if e + dist < total:
            slot = home_slot(indices[edge_ids[e + dist]], size, HASH_MIX)
            _prefetch(keys, slot)
            _prefetch(values, slot)
        u = indices[edge_ids[e]]
        lid, is_new = table_insert_or_get(keys, values, u, num_nodes, HASH_MIX)
        if is_new:
            n_id[num_nodes] = u
            num_nodes += 1
        local_src[e] = lid
    return num_nodes


@numba.njit(cache=True, nogil=True)
def _relation_hop(indptr, indices, dst_ids, begin, end, fanout, replace, rkey, src_ids, src_count,
                  keys, values, num_src_nodes, scratch_set, scratch_slots):
    """One relation in one hop: sample in-neighbours of ``dst_ids[begin:end]`` and Fused-Map
    the sources into the source type's ``src_ids``/table (the hop primitives above, so the
    fill runs the prefetch pipeline). Returns ``(row, col, edge_ids, src_ids, src_count,
    keys, values)``: local source, local destination and edge slot per sampled edge;
    ``src_ids`` and the table may be reallocated (grown) here."""
    dst = dst_ids[begin:end]
    num_dst = end - begin
    local_indptr, starts, degs, total = _hop_counts(indptr, dst, num_dst, fanout, replace)
    src_ids, keys, values = _hop_reserve(src_ids, src_count, total, keys, values, num_src_nodes)
    row = np.empty(total, dtype=np.int64)
    edge_ids = np.empty(total, dtype=np.int64)
    src_count = _hop_fill(indptr, indices, dst, src_ids, src_count, num_dst, fanout, replace, rkey,
                          keys, values, local_indptr, starts, degs, row, edge_ids, scratch_set,
                          scratch_slots)
    col = np.empty(total, dtype=np.int64)
    for i in range(num_dst):
        for e in range(local_indptr[i], local_indptr[i + 1]):
            col[e] = begin + i
    return row, col, edge_ids, src_ids, src_count, keys, values


@numba.njit(cache=True, nogil=True)
def _sample_batch(indptr, indices, seeds, fanouts, replace, hop_keys, new_only):
    """All hops of one batch in one nogil call (``new_only``: ``frontier="new"``).

    Returns ``(dup, n_id, meta, indptrs, local_srcs, edge_ids)``: ``dup`` the index of
    the first repeated seed or -1; ``meta[h] = (num_dst, num_src)``; the last three are
    typed lists with one exactly-sized array per hop (exact sizes: a capacity-bound
    buffer would cost a page fault per 4 KiB touched on every batch).
    """
    num_graph_nodes = indptr.shape[0] - 1
    batch_size = seeds.shape[0]
    num_hops = fanouts.shape[0]
    meta = np.zeros((num_hops, 2), dtype=np.int64)
    indptrs = numba.typed.List.empty_list(numba.types.int64[::1])
    local_srcs = numba.typed.List.empty_list(numba.types.int64[::1])
    edge_ids_list = numba.typed.List.empty_list(numba.types.int64[::1])
    size = 16
    while size < 2 * batch_size:
        size *= 2
    keys = np.full(size, EMPTY_KEY, dtype=indices.dtype)
    values = np.full(size, -1, dtype=np.int32)
    n_id = np.empty(max(batch_size, 1), dtype=np.int64)
    dup = _insert_seeds(seeds, keys, values, n_id)
    if dup >= 0:
        return dup, n_id[:0], meta, indptrs, local_srcs, edge_ids_list
    max_fanout = 0
    for h in range(num_hops):
        max_fanout = max(max_fanout, fanouts[h])
    if max_fanout > 32:
        ssize = 16
        while ssize < 2 * max_fanout:
            ssize *= 2
        scratch_set = np.full(ssize, -1, dtype=np.int64)
        scratch_slots = np.empty(max_fanout, dtype=np.int64)
    else:
        scratch_set = np.full(1, -1, dtype=np.int64)
        scratch_slots = np.empty(1, dtype=np.int64)
    num_nodes = batch_size
    first = 0
    for h in range(num_hops):
        fanout = fanouts[h]
        num_dst = num_nodes
        local_indptr, starts, degs, total = _hop_counts(indptr, n_id, num_dst, fanout, replace, first)
        n_id, keys, values = _hop_reserve(n_id, num_nodes, total, keys, values, num_graph_nodes)
        local_src = np.empty(total, dtype=np.int64)
        edge_ids = np.empty(total, dtype=np.int64)
        num_nodes = _hop_fill(indptr, indices, n_id, n_id, num_nodes, num_dst, fanout, replace, hop_keys[h],
                              keys, values, local_indptr, starts, degs, local_src, edge_ids, scratch_set,
                              scratch_slots, first)
        if new_only:
            first = num_dst
        meta[h, 0] = num_dst
        meta[h, 1] = num_nodes
        indptrs.append(local_indptr)
        local_srcs.append(local_src)
        edge_ids_list.append(edge_ids)
    return -1, n_id[:num_nodes], meta, indptrs, local_srcs, edge_ids_list


@numba.njit(cache=True, nogil=True)
def _insert_seeds(seeds, keys, values, n_id):
    """Insert the seeds as local 0..B-1; returns the index of the first duplicate or -1."""
    for i in range(seeds.shape[0]):
        _, is_new = table_insert_or_get(keys, values, seeds[i], i, HASH_MIX)
        if not is_new:
            return i
        n_id[i] = seeds[i]
    return -1


@numba.njit(cache=True, nogil=True)
def _sample_hop_global_kernel(indptr, indices, dst_global, fanout, replace, skeys, scratch_set, scratch_slots):
    num_dst = dst_global.shape[0]
    local_indptr, starts, degs, total = _hop_counts(indptr, dst_global, num_dst, fanout, replace)
    edge_ids = np.empty(total, dtype=np.int64)
    src_global = np.empty(total, dtype=np.int64)
    for i in range(num_dst):
        base = local_indptr[i]
        count = local_indptr[i + 1] - base
        if count == 0:
            continue
        start = starts[i]
        deg = degs[i]
        if fanout < 0 or (not replace and deg <= fanout):
            for q in range(count):
                edge_ids[base + q] = start + q
        else:
            _choose_positions(edge_ids, base, deg, count, replace, skeys[i], scratch_set, scratch_slots)
            for q in range(count):
                edge_ids[base + q] += start
        for q in range(count):
            src_global[base + q] = indices[edge_ids[base + q]]
    return local_indptr, src_global, edge_ids


# --------------------------------------------------------------------------------------
# Public API


def _relation_keys(seed: int, num_hops: int, etype: EdgeType) -> np.ndarray:
    """uint64 (num_hops,): ``relation_key(hop_key(batch_key(seed), h), etype)``; the hop keys
    themselves for :data:`~graphpipe.ops.sampling.types.DEFAULT_ETYPE` (one relation)."""
    bkey = batch_key(seed)
    return np.array([relation_key(hop_key(bkey, h), etype) for h in range(num_hops)], dtype=np.uint64)


def _sample_validated(indptr, indices, seeds, fanouts, replace, seed, frontier="new",
                      etype: EdgeType = DEFAULT_ETYPE) -> SampleOutput:
    """One batch of one relation from checked arguments: all hops in one nogil call."""
    dup, n_id, meta, indptrs, local_srcs, edge_ids = _sample_batch(
        indptr, indices, seeds, np.asarray(fanouts, dtype=np.int64), bool(replace),
        _relation_keys(seed, len(fanouts), etype), frontier == "new")
    if dup >= 0:
        raise ValueError(f"'seeds' must be unique (got {int(seeds[dup])} more than once)")
    hops = [(ip, src, eid, num_dst, num_src)
            for ip, src, eid, (num_dst, num_src) in zip(indptrs, local_srcs, edge_ids, meta.tolist())]
    return _assemble(n_id, seeds.shape[0], hops)


def sample_neighbors(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    fanouts: Sequence[int],
    *,
    replace: bool = False,
    seed: int = 0,
    frontier: str = "new",
) -> SampleOutput:
    """The CPU sampler of one relation (arguments, result and errors as
    :func:`graphpipe.ops.sampling.sample_neighbors` with ``(indptr, indices, ...)``; the
    block convention in the module docstring).

    >>> out = sample_neighbors(np.array([0, 1, 2]), np.array([1, 0]), np.array([0]), [1])
    >>> out.n_id.tolist()
    [0, 1]
    """
    indptr, indices = _check_graph(indptr, indices)
    fanouts = _check_fanouts(fanouts)
    seeds = _check_seeds(seeds, indptr.shape[0] - 1)
    return _sample_validated(indptr, indices, seeds, fanouts, replace, seed, check_frontier(frontier))


# --------------------------------------------------------------------------------------
# Typed graphs: one relation through _sample_batch, several through the relation loop


def _new_state(ids: np.ndarray) -> list[Any]:
    """``[ids buffer, count, keys, values]`` of one node type with its seeds inserted."""
    size = 16
    while size < 2 * ids.shape[0]:
        size *= 2
    keys = np.full(size, EMPTY_KEY, dtype=np.int64)
    values = np.full(size, -1, dtype=np.int32)
    buf = np.empty(max(16, ids.shape[0]), dtype=np.int64)
    if _insert_seeds(ids, keys, values, buf) >= 0:  # pragma: no cover - checked before
        raise ValueError("'seeds' must be unique within each node type")
    return [buf, int(ids.shape[0]), keys, values]


def _concat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays) if arrays else np.empty(0, np.int64)


def _edge_pairs(rows: list[np.ndarray], cols: list[np.ndarray]) -> np.ndarray:
    """int64 ``(2, E)``: the hops' local sources in row 0, destinations in row 1, in one
    buffer (so that :meth:`HeteroSampleOutput.edge_index` hands it out without a copy)."""
    out = np.empty((2, sum(a.shape[0] for a in rows)), dtype=np.int64)
    if rows:
        np.concatenate(rows, out=out[0])
        np.concatenate(cols, out=out[1])
    return out


def _sample_relations(graph: HeteroCSC, seed_ids: dict[str, np.ndarray],
                      per_rel: dict[EdgeType, list[int]], replace: bool, seed: int,
                      frontier: str) -> HeteroSampleOutput:
    """One typed batch from checked arguments: per hop, one :func:`_relation_hop` call per
    relation in ``graph.edge_types`` order, each destination type's frontier fixed when
    the hop starts."""
    state = {t: _new_state(ids) for t, ids in seed_ids.items()}
    span = {t: (0, s[1]) for t, s in state.items()}
    parts: dict[EdgeType, list[list[np.ndarray]]] = {et: [[], [], []] for et in graph.edge_types}
    sampled_nodes = {t: [s[1]] for t, s in state.items()}
    scratch_set, scratch_slots = _scratch_for(max([f for v in per_rel.values() for f in v] + [0]))
    bkey = batch_key(seed)
    for h in range(len(next(iter(per_rel.values()), []))):
        hkey = hop_key(bkey, h)
        for et in graph.edge_types:
            src, dst = state[et[0]], state[et[2]]
            indptr, indices = graph.csc[et]
            row, col, eid, src[0], src[1], src[2], src[3] = _relation_hop(
                indptr, indices, dst[0], *span[et[2]], per_rel[et][h], replace,
                np.uint64(relation_key(hkey, et)), src[0], src[1], src[2], src[3],
                graph.num_nodes[et[0]], scratch_set, scratch_slots)
            for part, arr in zip(parts[et], (row, col, eid)):
                part.append(arr)
        for t, s in state.items():
            prev_end = span[t][1]
            span[t] = (prev_end if frontier == "new" else 0, s[1])
            sampled_nodes[t].append(s[1] - prev_end)
    pairs = {et: _edge_pairs(p[0], p[1]) for et, p in parts.items()}
    return HeteroSampleOutput(
        n_id={t: s[0][:s[1]] for t, s in state.items()},
        row={et: e[0] for et, e in pairs.items()},
        col={et: e[1] for et, e in pairs.items()},
        edge_ids={et: _concat(p[2]) for et, p in parts.items()},
        num_seeds={t: int(ids.shape[0]) for t, ids in seed_ids.items()},
        num_sampled_nodes=sampled_nodes,
        num_sampled_edges={et: [int(a.shape[0]) for a in p[0]] for et, p in parts.items()},
        frontier=frontier)


def _sample_typed_checked(graph: HeteroCSC, seed_ids: dict[str, np.ndarray],
                          per_rel: dict[EdgeType, list[int]], replace: bool, seed: int,
                          frontier: str) -> HeteroSampleOutput:
    """One typed batch: a graph of one node type and one relation is sampled by the
    one-relation kernel (:func:`_sample_batch`, all hops in one call) under its relation's
    keys, which draws what the relation loop draws; any other graph by the loop."""
    if len(graph.edge_types) != 1 or len(graph.num_nodes) != 1:
        return _sample_relations(graph, seed_ids, per_rel, replace, seed, frontier)
    (et,) = graph.edge_types
    indptr, indices = graph.csc[et]
    out = _sample_validated(indptr, indices, seed_ids[et[0]], per_rel[et], replace, seed,
                            frontier, et)
    hops = out.blocks[::-1]
    pair = _edge_pairs([b.indices for b in hops], [b.dst_of_edges() for b in hops])
    return HeteroSampleOutput(
        n_id={et[0]: out.n_id}, row={et: pair[0]}, col={et: pair[1]},
        edge_ids={et: _concat([b.edge_ids for b in hops])}, num_seeds={et[0]: out.batch_size},
        num_sampled_nodes={et[0]: list(out.num_sampled_nodes)},
        num_sampled_edges={et: list(out.num_sampled_edges)}, frontier=frontier)


def sample_typed(graph: HeteroCSC, seeds: Mapping[str, Any],
                 fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *, replace: bool = False,
                 seed: int = 0, frontier: str = "new") -> HeteroSampleOutput:
    """The CPU sampler of a typed graph (arguments and result as
    :func:`graphpipe.ops.sampling.sample_neighbors` with a ``HeteroCSC``).

    >>> g = HeteroCSC.from_arrays({"a": 2}, {("a", "to", "a"): (np.array([0, 1, 2]), np.array([1, 0]))})
    >>> sample_typed(g, {"a": [0]}, [1]).n_id["a"].tolist()
    [0, 1]
    """
    if not isinstance(graph, HeteroCSC):
        raise ValueError(f"'graph' must be a HeteroCSC (got {type(graph).__name__})")  # noqa: TRY004 - bad arguments are ValueError here
    frontier = check_frontier(frontier)
    per_rel = resolve_fanouts(fanouts, graph.edge_types)
    return _sample_typed_checked(graph, check_seed_dict(graph, seeds), per_rel, bool(replace),
                                 int(seed), frontier)


# --------------------------------------------------------------------------------------
# Windows of batches in parallel threads

_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(num_threads: int) -> ThreadPoolExecutor:
    """A process-wide worker pool per thread count (threads are reused across windows)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(num_threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=num_threads, thread_name_prefix="graphpipe-sample")
            _POOLS[num_threads] = pool
        return pool


def sample_neighbors_batches(*graph_batches_fanouts: Any, seeds: Sequence[int],
                             replace: bool = False, frontier: str = "new",
                             num_threads: int | None = None) -> list[Any]:
    """Sample the batches of a window in parallel threads (the kernels release the GIL).

    Two call forms, as :func:`graphpipe.ops.sampling.sample_neighbors`:
    ``(indptr, indices, seed_batches, fanouts)`` (one relation, ``seed_batches`` int
    ``(B_i,)`` arrays, :class:`SampleOutput` s) or ``(graph, seed_batches, fanouts)`` (a
    :class:`HeteroCSC`, ``seed_batches`` ``{ntype: IDs}`` dicts,
    :class:`HeteroSampleOutput` s). Result ``i`` equals the one-batch call with
    ``seed_batches[i]`` and ``seed=seeds[i]``, whatever ``num_threads`` is.

    Args:
        seeds: per batch, the integer random key (same length as ``seed_batches``).
        num_threads: worker threads; default ``numba.get_num_threads()`` (≤ batches).

    >>> indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    >>> outs = sample_neighbors_batches(indptr, indices, [[0], [1]], [1], seeds=[0, 1])
    >>> [o.n_id.tolist() for o in outs]
    [[0, 1], [1, 0]]
    >>> g = HeteroCSC.homogeneous(indptr, indices)
    >>> [o.n_id["_N"].tolist() for o in sample_neighbors_batches(g, [{"_N": [0]}], [1], seeds=[0])]
    [[0, 1]]
    """
    graph, seed_batches, fanouts = split_graph_args(graph_batches_fanouts, "seed_batches")
    frontier = check_frontier(frontier)
    if isinstance(graph, HeteroCSC):
        per_rel = resolve_fanouts(fanouts, graph.edge_types)
        batches = [check_seed_dict(graph, b) for b in seed_batches]
        run, fixed = _sample_typed_checked, (graph,)
        tail: tuple[Any, ...] = (per_rel, bool(replace))
    else:
        indptr, indices = _check_graph(*graph)
        batches = [_check_seeds(b, indptr.shape[0] - 1, "seed_batches") for b in seed_batches]
        run, fixed, tail = _sample_validated, (indptr, indices), (_check_fanouts(fanouts), replace)
    keys = [int(s) for s in seeds]
    if len(keys) != len(batches):
        raise ValueError(f"'seeds' must have one key per batch ({len(batches)}) (got {len(keys)})")
    threads = numba.get_num_threads() if num_threads is None else int(num_threads)
    if threads < 1:
        raise ValueError(f"'num_threads' must be >= 1 (got {num_threads})")
    jobs = [(*fixed, b, *tail, k, frontier) for b, k in zip(batches, keys)]
    if min(threads, len(jobs)) <= 1:
        return [run(*job) for job in jobs]
    pool = _pool(min(threads, len(jobs)))
    return [f.result() for f in [pool.submit(run, *job) for job in jobs]]


def sample_hop_global(
    indptr: np.ndarray,
    indices: np.ndarray,
    dst_global: np.ndarray,
    fanout: int,
    *,
    replace: bool = False,
    stream_keys: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One hop in global IDs, before any ID map (what the GPU sampling kernel computes).

    Args:
        dst_global: int (num_dst,) global destination IDs (duplicates allowed here).
        stream_keys: uint64 (num_dst,) initial RNG state per destination; use
            ``stream_keys(hop_key(batch_key(seed), hop), dst_global)`` to reproduce
            :func:`sample_neighbors`, or any host-chosen values.

    Returns:
        ``(indptr_local, src_global, edge_ids)``: int64 (num_dst+1,), int64 (num_edges,)
        global source per edge, int64 (num_edges,) edge slot per edge.
    """
    indptr, indices = _check_graph(indptr, indices)
    fanout = _check_fanouts([fanout])[0]
    dst = _check_seeds(dst_global, indptr.shape[0] - 1, "dst_global")
    skeys = np.ascontiguousarray(stream_keys, dtype=np.uint64)
    if skeys.shape != dst.shape:
        raise ValueError(f"'stream_keys' must have shape {dst.shape} (got {skeys.shape})")
    scratch_set, scratch_slots = _scratch_for(fanout)
    return _sample_hop_global_kernel(indptr, indices, dst, fanout, bool(replace), skeys, scratch_set, scratch_slots)
