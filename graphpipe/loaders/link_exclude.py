"""Seed edges removed from a sampled subgraph (no label leakage in link prediction).

After a batch's neighbourhoods are sampled, every sampled edge ``u -> v`` (global IDs)
that is one of the batch's positive edges, in either direction, is dropped from the
blocks (GraphBolt's ``exclude_seed_edges``, DGL's ``exclude="reverse_id"`` on a graph
with inverse edges). The node set stays as sampled; a node whose only sampled edges were
seed edges keeps fewer neighbours.
"""

from __future__ import annotations

import numpy as np

from graphpipe.ops.sampling import SampledBlock, SampleOutput

__all__ = ["MAX_PAIR_NODES", "exclude_seed_edges"]

MAX_PAIR_NODES = 3_037_000_499
"""Largest node count whose ``u * N + v`` pair codes fit in int64."""


def _pair_codes(src: np.ndarray, dst: np.ndarray, num_nodes: int) -> np.ndarray:
    return np.asarray(src, dtype=np.int64) * num_nodes + np.asarray(dst, dtype=np.int64)


def _filter_block(block: SampledBlock, n_id: np.ndarray, banned: np.ndarray,
                  num_nodes: int, num_seeds: int) -> SampledBlock:
    dst_local = block.dst_of_edges()
    # a seed edge joins two seed nodes, and seeds are the first local IDs
    cand = np.flatnonzero((block.indices < num_seeds) & (dst_local < num_seeds))
    codes = _pair_codes(n_id[block.indices[cand]], n_id[dst_local[cand]], num_nodes)
    pos = np.searchsorted(banned, codes)
    hit = (pos < banned.shape[0]) & (banned[np.minimum(pos, banned.shape[0] - 1)] == codes)
    if not hit.any():
        return block
    keep = np.ones(block.num_edges, dtype=bool)
    keep[cand[hit]] = False
    indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst_local[keep], minlength=block.num_dst), out=indptr[1:])
    weight = None if block.edge_weight is None else block.edge_weight[keep]
    return SampledBlock(indptr, block.indices[keep], block.num_dst, block.num_src,
                        block.edge_ids[keep], weight)


def exclude_seed_edges(out: SampleOutput, src: np.ndarray, dst: np.ndarray,
                       num_nodes: int) -> SampleOutput:
    """``out`` without any sampled edge equal to ``src[i] -> dst[i]`` or ``dst[i] -> src[i]``
    (every endpoint must be one of ``out``'s seeds, ``n_id[:batch_size]``).

    >>> import numpy as np
    >>> from graphpipe.ops.sampling import sample_neighbors
    >>> indptr, indices = np.array([0, 2, 4, 5]), np.array([1, 2, 0, 2, 0])
    >>> out = sample_neighbors(indptr, indices, np.array([0, 1]), [-1], seed=0)
    >>> kept = exclude_seed_edges(out, np.array([0]), np.array([1]), 3)
    >>> out.blocks[0].indices.tolist(), kept.blocks[0].indices.tolist()  # 1->0, 0->1 dropped
    ([1, 2, 0, 2], [2, 2])
    """
    if num_nodes > MAX_PAIR_NODES:
        raise ValueError(f"seed-edge exclusion supports up to {MAX_PAIR_NODES} nodes (got {num_nodes})")
    if src.size == 0:
        return out
    banned = np.unique(np.concatenate([_pair_codes(src, dst, num_nodes),
                                       _pair_codes(dst, src, num_nodes)]))
    n_id = np.asarray(out.n_id, dtype=np.int64)
    blocks = [_filter_block(b, n_id, banned, num_nodes, int(out.batch_size)) for b in out.blocks]
    return SampleOutput(n_id=out.n_id, blocks=blocks, batch_size=out.batch_size,
                        num_sampled_nodes=list(out.num_sampled_nodes),
                        num_sampled_edges=[b.num_edges for b in reversed(blocks)], batch=out.batch)
