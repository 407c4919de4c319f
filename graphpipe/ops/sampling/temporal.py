"""Temporal neighbour sampling (PyG's ``NeighborLoader(time_attr=..., temporal_strategy=...)``),
one tree per seed (PyG's ``disjoint=True``, which temporal sampling implies there too).

Semantics, as pyg-lib's ``neighbor_sample`` with a time attribute:

- every seed ``i`` carries a time ``seed_time[i]`` and grows its own tree; every node of
  that tree inherits the seed's time (the *tree time*), whatever hop reached it;
- an in-edge ``u -> v`` of a node ``v`` of tree ``i`` may be sampled only if it is no
  newer than the tree time: ``edge_time[e] <= seed_time[i]`` (edge-level time), or, with
  node times only, ``node_time[u] <= seed_time[i]`` (the neighbour's time, as PyG);
- ``strategy="uniform"``: ``min(fanout, k)`` of the ``k`` valid edges uniformly without
  replacement (``replace=True``: ``fanout`` independent draws; ``fanout=-1``: all);
  ``strategy="last"``: the ``min(fanout, k)`` most recent valid edges;
- the order in which a row's valid edges are seen is by ``(time, CSC slot)``: "most
  recent" breaks ties by the later slot, and when every edge is valid with one common
  time the draws equal the non-temporal sampler's under the same keys
  (:mod:`graphpipe.ops.sampling.cpu` through ``DisjointSampler``), which the tests check;
- frontier ``"new"`` (PyG): hop ``h > 1`` expands the nodes hop ``h - 1`` reached first,
  deduplicated per tree; a node reached from two seeds appears once per tree.

Layout (PyG's disjoint output, :func:`graphpipe.loaders.disjoint.merge_trees`): nodes by
hop, then by tree, then in discovery order; ``SampleOutput.batch`` names each node's
tree; ``blocks[l]`` are DGL-style blocks whose rows before the frontier are empty.

Random numbers: tree ``i`` of a batch with key ``seed`` draws from the streams of
``tree_key(seed, i)`` (:mod:`graphpipe.ops.sampling.keys`), one SplitMix64 stream per
(tree, hop, destination) as in the non-temporal sampler (:mod:`graphpipe.ops._core.rng`).

:func:`temporal_graph` prepares the graph once: each CSC row's slots sorted by time
(``order``, int64 ``(E,)``) and the sorted times (``key``), so a row's valid edges are the
prefix found by binary search. Indices and times are checked there, seeds and seed
times by :func:`sample_temporal`, before any kernel reads them.
:mod:`graphpipe.ops.sampling.temporal_reference` is the plain-Python oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from graphpipe.ops._core.checks import check_choice, check_csc, check_fanouts, check_node_ids
from graphpipe.ops.sampling.cpu import _choose_positions, _pool, _scratch_for
from graphpipe.ops.sampling.keys import _stream_key, tree_hop_keys
from graphpipe.ops.sampling.types import SampledBlock, SampleOutput

__all__ = ["STRATEGIES", "TemporalGraph", "check_seed_time", "run_window", "sample_temporal", "sample_temporal_batches",
           "temporal_graph"]

STRATEGIES = ("uniform", "last")
"""``temporal_strategy`` values (PyG's): uniform among the valid edges, or the most recent."""


@dataclass(frozen=True)
class TemporalGraph:
    """A CSC graph with its edges' times, each row's slots sorted by time.

    Attributes:
        indptr: int64 ``(N+1,)``; indices: int32/int64 ``(E,)`` (CSC by destination).
        order: int64 ``(E,)``: ``order[indptr[v]:indptr[v+1]]`` are row ``v``'s slots by
            ``(time, slot)``.
        key: int64 ``(E,)``: the time of ``order``'s slots (non-decreasing per row).
        level: ``"edge"`` (edge times) or ``"node"`` (the neighbour's node time).
        num_src: source nodes (a typed relation's source type); ``-1``: the ``N`` rows.
    """

    indptr: np.ndarray
    indices: np.ndarray
    order: np.ndarray
    key: np.ndarray
    level: str
    num_src: int = -1

    def __post_init__(self) -> None:
        """Every array the kernels index with is checked once here (``O(N + E)``)."""
        indptr, indices = check_csc(self.indptr, self.indices)
        e = indices.shape[0]
        n = indptr.shape[0] - 1 if self.num_src < 0 else self.num_src
        if int(np.diff(indptr).min(initial=0)) < 0:
            raise ValueError("'indptr' must be non-decreasing")
        if e and (int(indices.min()) < 0 or int(indices.max()) >= n):
            raise ValueError(f"'indices' must be node IDs in [0, {n})")
        for name in ("order", "key"):
            arr = getattr(self, name)
            if not isinstance(arr, np.ndarray) or arr.dtype != np.int64 or arr.shape != (e,):
                raise ValueError(f"'{name}' must be an int64 array of shape ({e},)")
        if e and (int(self.order.min()) < 0 or int(self.order.max()) >= e):
            raise ValueError(f"'order' must hold CSC slots in [0, {e})")
        check_choice("level", self.level, ("edge", "node"))
        object.__setattr__(self, "indptr", indptr)
        object.__setattr__(self, "indices", indices)

    @property
    def num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)


def _as_times(values: np.ndarray, length: int, name: str) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1 or values.shape[0] != length:
        raise ValueError(f"'{name}' must have shape ({length},) (got {values.shape})")
    if values.size and values.dtype.kind not in "iu":
        raise ValueError(f"'{name}' must hold integer timestamps (got {values.dtype})")
    return np.ascontiguousarray(values, dtype=np.int64)


@numba.njit(cache=True, nogil=True, parallel=True)
def _sort_rows(indptr, times):  # pragma: no cover - compiled
    """Per row, its slots ordered by (time, slot) and those times."""
    order = np.empty(times.shape[0], dtype=np.int64)
    key = np.empty(times.shape[0], dtype=np.int64)
    for v in numba.prange(indptr.shape[0] - 1):
        lo, hi = indptr[v], indptr[v + 1]
        perm = np.argsort(times[lo:hi], kind="mergesort")  # stable: ties keep slot order
        for j in range(hi - lo):
            order[lo + j] = lo + perm[j]
            key[lo + j] = times[lo + perm[j]]
    return order, key


def temporal_graph(indptr: np.ndarray, indices: np.ndarray, *, node_time: np.ndarray | None = None,
                   edge_time: np.ndarray | None = None, num_src: int | None = None) -> TemporalGraph:
    """Prepare a CSC graph for :func:`sample_temporal` (sorts every row by time once).

    Args:
        indptr, indices: CSC by destination (``indices`` checked to lie in ``[0, N)``).
        node_time: int ``(N,)`` node timestamps: an edge ``u -> v`` is valid for a tree
            whose time is at least ``node_time[u]``.
        edge_time: int ``(E,)`` edge timestamps in CSC order (a store's ``csc/time``);
            takes precedence over ``node_time`` (give one of them).
        num_src: source nodes when they are not the ``N`` destinations (a typed
            relation; ``node_time`` then has ``num_src`` entries).

    >>> import numpy as np
    >>> g = temporal_graph(np.array([0, 3]), np.array([0, 0, 0]), edge_time=np.array([5, 1, 3]))
    >>> g.order.tolist(), g.key.tolist(), g.level
    ([1, 2, 0], [1, 3, 5], 'edge')
    """
    indptr, indices = check_csc(indptr, indices)
    n = indptr.shape[0] - 1 if num_src is None else int(num_src)
    if int(np.diff(indptr).min(initial=0)) < 0:   # before the row sort slices by it
        raise ValueError("'indptr' must be non-decreasing")
    if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= n):  # before node_time[indices]
        raise ValueError(f"'indices' must be node IDs in [0, {n})")
    if edge_time is None and node_time is None:
        raise ValueError("temporal sampling needs 'node_time' or 'edge_time'")
    if edge_time is not None:
        times, level = _as_times(edge_time, indices.shape[0], "edge_time"), "edge"
    else:
        times, level = _as_times(node_time, n, "node_time")[indices], "node"
    order, key = _sort_rows(indptr, times)
    return TemporalGraph(indptr, indices, order, key, level, -1 if num_src is None else n)


def check_seed_time(seed_time: np.ndarray, count: int) -> np.ndarray:
    """int64 ``(count,)`` seed times (one per seed)."""
    return _as_times(seed_time, count, "seed_time")


# --------------------------------------------------------------------------------------
# Kernels


@numba.njit(cache=True, nogil=True, inline="always")
def _valid_count(key, lo, hi, t):
    """Slots ``lo..hi-1`` of a row (times ``key``, non-decreasing) with time ``<= t``."""
    a, b = lo, hi
    while a < b:
        mid = (a + b) >> 1
        if key[mid] <= t:
            a = mid + 1
        else:
            b = mid
    return a - lo


@numba.njit(cache=True, nogil=True, inline="always")
def _count_for(k, fanout, replace):
    if fanout < 0:
        return k
    if replace:
        return fanout if k > 0 else 0
    return min(fanout, k)


@numba.njit(cache=True, nogil=True)
def _grow(arr, need):  # pragma: no cover - compiled
    if arr.shape[0] >= need:
        return arr
    out = np.empty(max(need, 2 * arr.shape[0]), dtype=arr.dtype)
    out[:arr.shape[0]] = arr
    return out


@numba.njit(cache=True, nogil=True)
def _insert(table_keys, table_vals, key, value):  # pragma: no cover - compiled
    """Insert ``key`` (>= 0) if absent; returns its value (``value`` when inserted)."""
    mask = table_keys.shape[0] - 1
    mixed = np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)
    slot = np.int64(mixed ^ (mixed >> np.uint64(29))) & mask
    while table_keys[slot] != -1:
        if table_keys[slot] == key:
            return table_vals[slot]
        slot = (slot + 1) & mask
    table_keys[slot] = key
    table_vals[slot] = value
    return value


@numba.njit(cache=True, nogil=True)
def _rehash(table_keys, table_vals, size):  # pragma: no cover - compiled
    new_keys = np.full(size, -1, dtype=np.int64)
    new_vals = np.empty(size, dtype=np.int64)
    for s in range(table_keys.shape[0]):
        if table_keys[s] != -1:
            _insert(new_keys, new_vals, table_keys[s], table_vals[s])
    return new_keys, new_vals


@numba.njit(cache=True, nogil=True)
def _pick(graph_key, order, lo, k, count, strategy, replace, state, out, base, scratch_set,
          scratch_slots):  # pragma: no cover - compiled
    """Write the CSC slots of ``count`` of a row's ``k`` valid edges into ``out[base:]``."""
    if strategy == 1 or k <= count and not replace:   # "last", or every valid edge
        first = k - count
        for q in range(count):
            out[base + q] = order[lo + first + q]
        return
    _choose_positions(out, base, k, count, replace, state, scratch_set, scratch_slots)
    for q in range(count):
        out[base + q] = order[lo + out[base + q]]


@numba.njit(cache=True, nogil=True)
def _relation_trees(indptr, indices, order, key, dst_ids, dst_tree, begin, end, seed_time, fanout, replace,
                    strategy, rkeys, src_ids, src_tree, table_keys, table_vals, count, num_src,
                    scratch_set, scratch_slots):  # pragma: no cover - compiled
    """One relation in one hop over the frontier ``dst_ids[begin:end]`` (trees ``dst_tree``):
    each row's valid edges picked from the stream ``(rkeys[tree], node)``, sources inserted
    per (tree, node) into the source type's arrays and table (``count`` nodes so far; on one
    node type ``src_ids`` may be ``dst_ids`` itself). Returns ``(e_dst, e_src, e_slot,
    src_ids, src_tree, table_keys, table_vals, count)``; the arrays may be reallocated."""
    e_dst = np.empty(16, dtype=np.int64)
    e_src = np.empty(16, dtype=np.int64)
    e_slot = np.empty(16, dtype=np.int64)
    num_edges = 0
    for d in range(begin, end):
        v, t = dst_ids[d], dst_tree[d]
        lo = indptr[v]
        k = _valid_count(key, lo, indptr[v + 1], seed_time[t])
        c = _count_for(k, fanout, replace)
        if c == 0:
            continue
        e_slot = _grow(e_slot, num_edges + c)
        e_dst = _grow(e_dst, num_edges + c)
        e_src = _grow(e_src, num_edges + c)
        _pick(key, order, lo, k, c, strategy, replace, _stream_key(rkeys[t], v), e_slot, num_edges,
              scratch_set, scratch_slots)
        for q in range(num_edges, num_edges + c):
            u = indices[e_slot[q]]
            if 2 * (count + 1) > table_keys.shape[0]:
                table_keys, table_vals = _rehash(table_keys, table_vals, 2 * table_keys.shape[0])
            local = _insert(table_keys, table_vals, t * num_src + u, count)
            if local == count:
                src_ids = _grow(src_ids, count + 1)
                src_tree = _grow(src_tree, count + 1)
                src_ids[count] = u
                src_tree[count] = t
                count += 1
            e_dst[q] = d
            e_src[q] = local
        num_edges += c
    return (e_dst[:num_edges], e_src[:num_edges], e_slot[:num_edges], src_ids, src_tree, table_keys,
            table_vals, count)


@numba.njit(cache=True, nogil=True)
def _append(out, used, part):  # pragma: no cover - compiled
    out = _grow(out, used + part.shape[0])
    out[used:used + part.shape[0]] = part
    return out


@numba.njit(cache=True, nogil=True)
def _sample_trees(indptr, indices, order, key, seeds, seed_time, fanouts, replace, strategy, hkeys,
                  scratch_set, scratch_slots):  # pragma: no cover - compiled
    """Every tree of a batch, hop by hop (module docstring): one :func:`_relation_trees` call
    per hop, the node type its own source type. Returns ``(n_id, tree, layer_end (H+1,),
    e_dst, e_src, e_slot, edge_end (H+1,))``."""
    n = indptr.shape[0] - 1
    b = seeds.shape[0]
    n_id = np.empty(max(16, 4 * b), dtype=np.int64)
    tree = np.empty(n_id.shape[0], dtype=np.int64)
    size = 16
    while size < 4 * b:
        size *= 2
    table_keys = np.full(size, -1, dtype=np.int64)
    table_vals = np.empty(size, dtype=np.int64)
    for i in range(b):
        n_id[i] = seeds[i]
        tree[i] = i
        _insert(table_keys, table_vals, i * n + seeds[i], i)
    hops = fanouts.shape[0]
    layer_end = np.zeros(hops + 1, dtype=np.int64)
    edge_end = np.zeros(hops + 1, dtype=np.int64)
    layer_end[0] = b
    e_dst = np.empty(16, dtype=np.int64)
    e_src = np.empty(16, dtype=np.int64)
    e_slot = np.empty(16, dtype=np.int64)
    num_nodes, num_edges, first = b, 0, 0
    for h in range(hops):
        last = num_nodes
        d, s, sl, n_id, tree, table_keys, table_vals, num_nodes = _relation_trees(
            indptr, indices, order, key, n_id, tree, first, last, seed_time, fanouts[h], replace, strategy,
            np.ascontiguousarray(hkeys[:, h]), n_id, tree, table_keys, table_vals, num_nodes, n,
            scratch_set, scratch_slots)
        e_dst = _append(e_dst, num_edges, d)
        e_src = _append(e_src, num_edges, s)
        e_slot = _append(e_slot, num_edges, sl)
        num_edges += d.shape[0]
        first = last
        layer_end[h + 1] = num_nodes
        edge_end[h + 1] = num_edges
    return (n_id[:num_nodes], tree[:num_nodes], layer_end, e_dst[:num_edges], e_src[:num_edges],
            e_slot[:num_edges], edge_end)


# --------------------------------------------------------------------------------------
# Public entry point


def _blocks(layer_end: np.ndarray, e_dst: np.ndarray, e_src: np.ndarray, e_slot: np.ndarray,
            edge_end: np.ndarray) -> list[SampledBlock]:
    """Per hop, the block of its edges (seed hop first)."""
    blocks = []
    for h in range(layer_end.shape[0] - 1):
        lo, hi = int(edge_end[h]), int(edge_end[h + 1])
        num_dst, num_src = int(layer_end[h]), int(layer_end[h + 1])
        indptr = np.zeros(num_dst + 1, dtype=np.int64)
        np.cumsum(np.bincount(e_dst[lo:hi], minlength=num_dst), out=indptr[1:])
        blocks.append(SampledBlock(indptr=indptr, indices=e_src[lo:hi].copy(), num_dst=num_dst,
                                   num_src=num_src, edge_ids=e_slot[lo:hi].copy()))
    return blocks


def sample_temporal(graph: TemporalGraph, seeds: np.ndarray, seed_time: np.ndarray,
                    fanouts: Sequence[int], *, strategy: str = "uniform", replace: bool = False,
                    seed: int = 0) -> SampleOutput:
    """Temporal neighbour sampling, one tree per seed (module docstring).

    Args:
        graph: from :func:`temporal_graph`.
        seeds: int ``(B,)`` node IDs in ``[0, N)`` (a node may repeat: one tree each).
        seed_time: int ``(B,)`` the time of each seed (its tree's time).
        fanouts: per hop, seed hop first; ``-1``: every valid edge.
        strategy: ``"uniform"`` or ``"last"`` (the most recent; ``replace`` must be False).
        replace: draw with replacement (``"uniform"`` only).
        seed: the batch's random key; the output is a pure function of the arguments.

    Returns:
        :class:`SampleOutput` with ``batch`` (each node's tree), ``seed_time`` and
        ``edge_ids`` the CSC slots of the sampled edges.

    A star into node 0 whose in-edges from 1, 2, 3 happened at times 5, 1, 3; seed 0 at
    time 4 sees only the edges of times 1 and 3, and ``"last"`` takes the newest of them:

    >>> import numpy as np
    >>> g = temporal_graph(np.array([0, 3, 3, 3, 3]), np.array([1, 2, 3]),
    ...                    edge_time=np.array([5, 1, 3]))
    >>> out = sample_temporal(g, np.array([0]), np.array([4]), [1], strategy="last")
    >>> out.n_id.tolist(), out.blocks[0].edge_ids.tolist()
    ([0, 3], [2])

    Node 0 as a seed at times 4 and 9: two trees; the second sees every edge (by time):

    >>> out = sample_temporal(g, np.array([0, 0]), np.array([4, 9]), [-1])
    >>> out.n_id.tolist(), out.batch.tolist()
    ([0, 0, 2, 3, 2, 3, 1], [0, 1, 0, 0, 1, 1, 1])
    """
    strategy = check_choice("strategy", strategy, STRATEGIES)
    if strategy == "last" and replace:
        raise ValueError("'replace=True' has no meaning with strategy='last' (the most recent edges)")
    fanouts = check_fanouts(fanouts)
    seeds = check_node_ids(seeds, graph.num_nodes)
    seed_time = check_seed_time(seed_time, seeds.shape[0])
    if seeds.shape[0] and seeds.shape[0] * graph.num_nodes >= 1 << 62:
        raise ValueError(f"a batch of {seeds.shape[0]} seeds on {graph.num_nodes} nodes is too large")
    scratch_set, scratch_slots = _scratch_for(max(fanouts))
    hkeys = tree_hop_keys(seed, seeds.shape[0], len(fanouts))
    n_id, tree, layer_end, e_dst, e_src, e_slot, edge_end = _sample_trees(
        graph.indptr, graph.indices, graph.order, graph.key, seeds, seed_time,
        np.asarray(fanouts, dtype=np.int64), bool(replace), STRATEGIES.index(strategy), hkeys,
        scratch_set, scratch_slots)
    blocks = _blocks(layer_end, e_dst, e_src, e_slot, edge_end)
    return SampleOutput(n_id=n_id, blocks=blocks[::-1], batch_size=int(seeds.shape[0]),
                        num_sampled_nodes=[int(c) for c in np.diff(layer_end, prepend=0)],
                        num_sampled_edges=[int(c) for c in np.diff(edge_end)], batch=tree,
                        seed_time=seed_time)


def sample_temporal_batches(graph: TemporalGraph, seed_batches: Sequence[np.ndarray],
                            seed_times: Sequence[np.ndarray], fanouts: Sequence[int], *,
                            strategy: str = "uniform", replace: bool = False, keys: Sequence[int],
                            num_threads: int | None = None) -> list[SampleOutput]:
    """:func:`sample_temporal` of each batch of a window, in parallel threads (the kernel
    releases the GIL); result ``i`` equals ``sample_temporal(graph, seed_batches[i],
    seed_times[i], fanouts, ..., seed=keys[i])`` whatever ``num_threads`` is."""
    if not len(keys) == len(seed_times) == len(seed_batches):
        raise ValueError(f"one key and one seed_time per batch ({len(seed_batches)} batches, "
                         f"{len(keys)} keys, {len(seed_times)} seed_times)")
    args = [(graph, b, t, fanouts) for b, t in zip(seed_batches, seed_times)]
    return run_window(sample_temporal, args, keys, {"strategy": strategy, "replace": replace}, num_threads)


def run_window(sample: Callable[..., Any], args: Sequence[tuple], keys: Sequence[int], options: dict,
               num_threads: int | None) -> list[Any]:
    """``[sample(*args[i], seed=keys[i], **options)]`` in parallel threads (the kernels
    release the GIL); the results do not depend on ``num_threads``."""
    threads = min(int(num_threads or numba.get_num_threads()), max(1, len(args)))
    if threads < 1:
        raise ValueError(f"'num_threads' must be >= 1 (got {num_threads})")
    if threads == 1:
        return [sample(*a, seed=int(k), **options) for a, k in zip(args, keys)]
    pool = _pool(threads)
    futures = [pool.submit(sample, *a, seed=int(k), **options) for a, k in zip(args, keys)]
    return [f.result() for f in futures]
