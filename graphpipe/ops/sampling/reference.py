"""Plain-Python oracles of the neighbour sampler: the same RNG (Python-int twins of
:mod:`graphpipe.ops._core.rng`), Python sets for Floyd's algorithm and a dict as the ID
map. Every backend of :func:`graphpipe.ops.sampling.sample_neighbors` must match
:func:`sample_neighbors_reference` exactly (the CUDA kernels up to the order of each
hop's new local IDs, which the public API canonicalises)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphpipe.ops._core.checks import check_csc as _check_csc
from graphpipe.ops._core.checks import check_fanouts as _check_fanouts
from graphpipe.ops._core.checks import check_node_ids as _check_node_ids
from graphpipe.ops._core.rng import bounded_py as _bounded_py
from graphpipe.ops.sampling.keys import _stream_key_py, batch_key, hop_key
from graphpipe.ops.sampling.types import SampleOutput, check_frontier
from graphpipe.ops.sampling.types import assemble as _assemble

__all__ = ["sample_hop_global_reference", "sample_neighbors_reference"]


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
