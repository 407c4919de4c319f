"""PinSAGE-style random-walk neighbourhood sampler on the Fused-Map table.

For every destination ``v`` of a hop, ``num_walks`` random walks start at ``v`` and
follow in-edges of the store's CSC (``indices[indptr[u]:indptr[u+1]]`` are the
in-neighbours of ``u``), each for at most ``walk_length`` transitions. Before each
transition the walk stops with probability ``restart_prob`` (DGL's ``random_walk``
``restart_prob`` / PinSAGE's termination probability); it also stops at a node with no
in-neighbours. Every node visited after the start (the start itself excluded) is
counted; the ``k`` most visited become ``v``'s neighbours (ties: smaller global ID
first), with their visit counts as ``edge_weight``.

The output is the same :class:`~graphpipe.ops.sampling.SampleOutput` as uniform
sampling (DGL block convention, seeds first, Fused-Map local IDs assigned while
sampling), except that ``edge_ids`` are -1 (a walk neighbour is not a graph edge) and
each block carries ``edge_weight`` (float32 visit counts).

Random numbers: the same counter-based streams as the uniform sampler, one per
(batch seed, hop, destination global ID), so results do not depend on thread count or
local-ID order. ``sample_random_walk_reference`` is the plain-Python oracle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

from graphpipe.ops._core.checks import check_csc as _check_graph
from graphpipe.ops._core.checks import check_node_ids as _check_seeds
from graphpipe.ops._core.rng import bounded as _bounded
from graphpipe.ops._core.rng import bounded_py as _bounded_py
from graphpipe.ops._core.rng import uniform32 as _uniform32
from graphpipe.ops._core.rng import uniform32_py as _uniform32_py
from graphpipe.ops.sampling.cpu import _hop_reserve, _insert_seeds
from graphpipe.ops.sampling.idmap import (
    EMPTY_KEY,
    HASH_MIX,
    table_capacity,
    table_insert_or_get,
)
from graphpipe.ops.sampling.keys import _stream_key, _stream_key_py, batch_key, hop_key
from graphpipe.ops.sampling.types import SampledBlock, SampleOutput

__all__ = ["sample_random_walk", "sample_random_walk_reference"]

_MAX_COUNT_BITS = 16
_NODE_BITS = 47


@numba.njit(cache=True, nogil=True)
def _walk_hop(indptr, indices, n_id, num_nodes, num_dst, k, num_walks, walk_length, stop_threshold, hkey,
              keys, values, num_graph_nodes):
    visits = np.empty(num_walks * walk_length, dtype=np.int64)
    order_keys = np.empty(num_walks * walk_length, dtype=np.int64)
    sel_nodes = np.empty(num_dst * k, dtype=np.int64)
    sel_counts = np.empty(num_dst * k, dtype=np.float32)
    local_indptr = np.zeros(num_dst + 1, dtype=np.int64)
    total = 0
    for i in range(num_dst):
        v = n_id[i]
        state = _stream_key(hkey, v)
        nv = 0
        for _ in range(num_walks):
            cur = v
            for _ in range(walk_length):
                state, u = _uniform32(state)
                if u < stop_threshold:
                    break
                lo = indptr[cur]
                deg = indptr[cur + 1] - lo
                if deg == 0:
                    break
                state, t = _bounded(state, deg)
                cur = np.int64(indices[lo + t])
                if cur != v:
                    visits[nv] = cur
                    nv += 1
        # count visits: sort, run-length, then order by (-count, node)
        vs = np.sort(visits[:nv])
        m = 0
        j = 0
        while j < nv:
            node = vs[j]
            c = 0
            while j < nv and vs[j] == node:
                c += 1
                j += 1
            order_keys[m] = ((np.int64(1) << _MAX_COUNT_BITS) - c) << _NODE_BITS | node
            m += 1
        ranked = np.sort(order_keys[:m])
        take = min(m, k)
        for q in range(take):
            key = ranked[q]
            sel_nodes[total + q] = key & ((np.int64(1) << _NODE_BITS) - 1)
            sel_counts[total + q] = (np.int64(1) << _MAX_COUNT_BITS) - (key >> _NODE_BITS)
        total += take
        local_indptr[i + 1] = total
    n_id, keys, values = _hop_reserve(n_id, num_nodes, total, keys, values, num_graph_nodes)
    local_src = np.empty(total, dtype=np.int64)
    for e in range(total):
        u = sel_nodes[e]
        lid, is_new = table_insert_or_get(keys, values, u, num_nodes, HASH_MIX)
        if is_new:
            n_id[num_nodes] = u
            num_nodes += 1
        local_src[e] = lid
    return local_indptr, local_src, sel_counts[:total].copy(), n_id, num_nodes, keys, values


def _check_walk_args(num_neighbors, walk_length, restart_prob, num_walks) -> list[int]:
    try:
        num_neighbors = [int(k) for k in num_neighbors]
    except TypeError:
        raise ValueError(f"'num_neighbors' must be a sequence of integers (got {num_neighbors!r})") from None
    if not num_neighbors:
        raise ValueError("'num_neighbors' must not be empty (got [])")
    if min(num_neighbors) < 0:
        raise ValueError(f"'num_neighbors' entries must be >= 0 (got {num_neighbors})")
    if int(walk_length) < 1:
        raise ValueError(f"'walk_length' must be >= 1 (got {walk_length})")
    if not 0.0 <= float(restart_prob) < 1.0:
        raise ValueError(f"'restart_prob' must be in [0, 1) (got {restart_prob})")
    if not 1 <= int(num_walks) < (1 << _MAX_COUNT_BITS) // max(1, int(walk_length)):
        raise ValueError(f"'num_walks' must be in [1, {(1 << _MAX_COUNT_BITS) // max(1, int(walk_length))}) (got {num_walks})")
    return num_neighbors


def _stop_threshold(restart_prob: float) -> int:
    return round(float(restart_prob) * 2**32)


def _assemble_walk(n_id, batch_size, hops) -> SampleOutput:
    blocks = [SampledBlock(indptr=ip, indices=src, num_dst=nd, num_src=ns,
                           edge_ids=np.full(src.shape[0], -1, dtype=np.int64), edge_weight=w)
              for ip, src, w, nd, ns in reversed(hops)]
    return SampleOutput(n_id=n_id, blocks=blocks, batch_size=batch_size,
                        num_sampled_nodes=[batch_size] + [ns - nd for (_, _, _, nd, ns) in hops],
                        num_sampled_edges=[int(h[1].shape[0]) for h in hops])


def sample_random_walk(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    num_neighbors: Sequence[int],
    *,
    walk_length: int = 3,
    restart_prob: float = 0.5,
    num_walks: int = 10,
    seed: int = 0,
) -> SampleOutput:
    """PinSAGE random-walk neighbourhoods of ``seeds``, hop by hop, with Fused-Map local IDs.

    Args:
        indptr: int64 (N+1,) CSC offsets by destination.
        indices: int32/int64 (E,) in-neighbour global IDs.
        seeds: int (B,) unique global IDs; local IDs ``0..B-1``.
        num_neighbors: per hop (seed hop first), the top-``k`` most visited nodes kept.
        walk_length: maximum transitions per walk (PinSAGE: 3).
        restart_prob: probability of ending a walk before each transition.
        num_walks: walks started at every destination.
        seed: integer key of this batch's random streams.

    Returns:
        :class:`SampleOutput`; blocks carry ``edge_weight`` float32 visit counts,
        ``edge_ids`` are -1.
    """
    indptr, indices = _check_graph(indptr, indices)
    num_neighbors = _check_walk_args(num_neighbors, walk_length, restart_prob, num_walks)
    seeds = _check_seeds(seeds, indptr.shape[0] - 1)
    num_graph_nodes = indptr.shape[0] - 1
    batch_size = seeds.shape[0]
    keys = np.full(table_capacity(batch_size), EMPTY_KEY, dtype=indices.dtype)
    values = np.full(keys.shape[0], -1, dtype=np.int32)
    n_id = np.empty(batch_size, dtype=np.int64)
    dup = _insert_seeds(seeds.astype(indices.dtype, copy=False), keys, values, n_id)
    if dup >= 0:
        raise ValueError(f"'seeds' must be unique (got {int(seeds[dup])} more than once)")
    bkey = batch_key(seed)
    num_nodes = batch_size
    hops = []
    for h, k in enumerate(num_neighbors):
        num_dst = num_nodes
        local_indptr, local_src, weights, n_id, num_nodes, keys, values = _walk_hop(
            indptr, indices, n_id, num_nodes, num_dst, k, int(num_walks), int(walk_length),
            _stop_threshold(restart_prob), np.uint64(hop_key(bkey, h)), keys, values, num_graph_nodes)
        hops.append((local_indptr, local_src, weights, num_dst, num_nodes))
    return _assemble_walk(n_id[:num_nodes], batch_size, hops)


def sample_random_walk_reference(indptr, indices, seeds, num_neighbors: Sequence[int], *, walk_length: int = 3,
                                 restart_prob: float = 0.5, num_walks: int = 10, seed: int = 0) -> SampleOutput:
    """Plain-Python oracle for :func:`sample_random_walk` (same RNG, dict ID map)."""
    num_neighbors = _check_walk_args(num_neighbors, walk_length, restart_prob, num_walks)
    stop = _stop_threshold(restart_prob)
    local_of: dict[int, int] = {}
    n_id = [int(s) for s in seeds]
    for s in n_id:
        if s in local_of:
            raise ValueError(f"'seeds' must be unique (got {s} more than once)")
        local_of[s] = len(local_of)
    bkey = batch_key(seed)
    hops = []
    for h, k in enumerate(num_neighbors):
        hkey = hop_key(bkey, h)
        num_dst = len(n_id)
        ip, src, weights = [0], [], []
        for v in n_id[:num_dst]:
            state = _stream_key_py(hkey, v)
            counts: dict[int, int] = {}
            for _ in range(num_walks):
                cur = v
                for _ in range(walk_length):
                    state, u = _uniform32_py(state)
                    if u < stop:
                        break
                    lo, hi = int(indptr[cur]), int(indptr[cur + 1])
                    if hi == lo:
                        break
                    state, t = _bounded_py(state, hi - lo)
                    cur = int(indices[lo + t])
                    if cur != v:
                        counts[cur] = counts.get(cur, 0) + 1
            for node, c in sorted(counts.items(), key=lambda nc: (-nc[1], nc[0]))[:k]:
                if node not in local_of:
                    local_of[node] = len(local_of)
                    n_id.append(node)
                src.append(local_of[node])
                weights.append(c)
            ip.append(len(src))
        hops.append((np.asarray(ip, np.int64), np.asarray(src, np.int64), np.asarray(weights, np.float32),
                     num_dst, len(n_id)))
    return _assemble_walk(np.asarray(n_id, np.int64), len(seeds), hops)
