"""PyG's ``disjoint=True``: every seed of a batch gets its own sampled tree, so a node
reached from two seeds appears twice (once per tree) and ``batch.batch`` says which tree
each node belongs to. :class:`DisjointSampler` wraps any :class:`BaseSampler`: it samples
each seed as a one-seed batch under its own key and merges the trees in PyG's layout
(:func:`merge_trees`). On a typed graph :func:`sample_disjoint_typed` does the same per node
type (:func:`merge_typed_trees`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from graphpipe.loaders.sampler import BaseSampler
from graphpipe.ops.sampling import SampledBlock, SampleOutput
from graphpipe.ops.sampling.keys import tree_key
from graphpipe.ops.sampling.types import HeteroSampleOutput

__all__ = ["DisjointSampler", "merge_trees", "merge_typed_trees", "sample_disjoint_typed", "tree_key"]


class DisjointSampler(BaseSampler):
    """One tree per seed (PyG's ``disjoint=True``) from any sampler ``inner``.

    A batch's sample is a pure function of (graph, seeds, key): seed ``i`` is sampled
    by ``inner`` as a one-seed batch with key :func:`tree_key` ``(key, i)``.

    ``NeighborLoader(..., disjoint=True)`` wraps its sampler in one. On a four-node
    path ``0 -> 1 -> 2 -> 3`` (CSC by destination), seeds 2 and 3 both reach node 1:

    >>> import numpy as np
    >>> from graphpipe.loaders import LocalSampler
    >>> indptr, indices = np.array([0, 0, 1, 2, 3]), np.array([0, 1, 2])
    >>> sampler = DisjointSampler(LocalSampler(indptr, indices, [1, 1]))
    >>> out = sampler.sample_from_nodes([np.array([2, 3])], [7])[0]
    >>> out.n_id.tolist(), out.batch.tolist(), out.num_sampled_nodes
    ([2, 3, 1, 2, 0, 1], [0, 1, 0, 1, 0, 1], [2, 2, 2])
    """

    def __init__(self, inner: BaseSampler):
        self.inner = inner

    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray],
                          seeds: Sequence[int]) -> list[SampleOutput]:
        singles = [np.asarray(batch[i:i + 1], dtype=np.int64)
                   for batch in seed_batches for i in range(len(batch))]
        keys = [tree_key(key, i) for batch, key in zip(seed_batches, seeds) for i in range(len(batch))]
        trees = self.inner.sample_from_nodes(singles, keys) if singles else []
        out, start = [], 0
        for batch in seed_batches:
            out.append(merge_trees(trees[start:start + len(batch)]))
            start += len(batch)
        return out

    def __repr__(self) -> str:
        return f"DisjointSampler({self.inner!r})"


def merge_trees(trees: Sequence[SampleOutput]) -> SampleOutput:
    """One :class:`SampleOutput` of one-seed samples, in PyG's disjoint layout.

    Nodes are ordered by hop, then by tree (all seeds first, then every tree's hop-1
    nodes, ...), so each hop's nodes stay a contiguous range; ``n_id`` may repeat a
    global ID across trees; ``batch`` (int64 ``(num_nodes,)``) is each node's tree.
    Block rows and edges keep their order within each tree.
    """
    hops = len(trees[0].blocks) if trees else 0
    counts = np.array([t.num_sampled_nodes for t in trees], dtype=np.int64).reshape(len(trees), hops + 1)
    layer_start = np.concatenate([[0], np.cumsum(counts.sum(axis=0))])        # merged, per hop
    within = np.cumsum(counts, axis=0) - counts                                 # earlier trees, per hop
    maps = []
    for t in range(len(trees)):
        m = np.concatenate([layer_start[h] + within[t, h] + np.arange(counts[t, h]) for h in range(hops + 1)])
        maps.append(m.astype(np.int64))
    total = int(layer_start[-1])
    n_id = np.empty(total, dtype=np.int64)
    batch = np.empty(total, dtype=np.int64)
    for t, (tree, m) in enumerate(zip(trees, maps)):
        n_id[m] = np.asarray(tree.n_id)
        batch[m] = t
    blocks = [_merge_block([t.blocks[b] for t in trees], maps, int(layer_start[hops - b]),
                           int(layer_start[hops - b + 1])) for b in range(hops)]
    return SampleOutput(n_id=n_id, blocks=blocks, batch_size=len(trees),
                        num_sampled_nodes=[int(c) for c in counts.sum(axis=0)],
                        num_sampled_edges=[b.num_edges for b in reversed(blocks)], batch=batch)


def _merge_block(parts: Sequence[SampledBlock], maps: Sequence[np.ndarray], num_dst: int,
                 num_src: int) -> SampledBlock:
    """The trees' blocks of one layer as one block of the merged local IDs."""
    dst = np.concatenate([m[p.dst_of_edges()] for p, m in zip(parts, maps)] or [np.zeros(0, np.int64)])
    src = np.concatenate([m[np.asarray(p.indices)] for p, m in zip(parts, maps)] or [np.zeros(0, np.int64)])
    eid = np.concatenate([np.asarray(p.edge_ids) for p in parts] or [np.zeros(0, np.int64)])
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return SampledBlock(indptr=indptr, indices=src[order].astype(np.int64), num_dst=num_dst,
                        num_src=num_src, edge_ids=eid[order].astype(np.int64))


# -- typed graphs: the same trees per node type ---------------------------------------------------
def sample_disjoint_typed(sample: Callable[[list, list], list], seed_dicts: Sequence[dict[str, np.ndarray]],
                          keys: Sequence[int]) -> list[HeteroSampleOutput]:
    """PyG's ``disjoint=True`` on a typed graph: seed ``i`` of a batch (``{ntype: IDs}``,
    one type) is sampled as a one-seed batch with key :func:`tree_key` ``(key, i)`` by
    ``sample(seed_dicts, keys) -> [HeteroSampleOutput]``, and each batch's trees are merged
    (:func:`merge_typed_trees`); on one node type this is :class:`DisjointSampler`'s sample."""
    singles, tree_keys, sizes = [], [], []
    for seeds, key in zip(seed_dicts, keys):
        ((ntype, ids),) = seeds.items()
        sizes.append(len(ids))
        singles += [{ntype: np.asarray(ids[i:i + 1], dtype=np.int64)} for i in range(len(ids))]
        tree_keys += [tree_key(key, i) for i in range(len(ids))]
    trees = sample(singles, tree_keys) if singles else []
    out, start = [], 0
    for size in sizes:
        out.append(merge_typed_trees(trees[start:start + size]))
        start += size
    return out


def merge_typed_trees(trees: Sequence[HeteroSampleOutput]) -> HeteroSampleOutput:
    """One :class:`HeteroSampleOutput` of one-seed samples in PyG's disjoint layout, per
    node type as :func:`merge_trees` does it: nodes by hop, then by tree (``batch[t]`` each
    node's tree); each relation's edges by hop, within a hop by merged destination (stable)."""
    hops = trees[0].num_hops
    maps: dict[str, list[np.ndarray]] = {}
    n_id, batch, num_nodes = {}, {}, {}
    for t in trees[0].n_id:
        counts = np.array([tree.num_sampled_nodes[t] for tree in trees], dtype=np.int64).reshape(len(trees), hops + 1)
        layer_start = np.concatenate([[0], np.cumsum(counts.sum(axis=0))])
        within = np.cumsum(counts, axis=0) - counts
        maps[t] = [np.concatenate([layer_start[h] + within[k, h] + np.arange(counts[k, h]) for h in range(hops + 1)]
                                  ).astype(np.int64) for k in range(len(trees))]
        n_id[t] = np.empty(int(layer_start[-1]), dtype=np.int64)
        batch[t] = np.empty(int(layer_start[-1]), dtype=np.int64)
        for k, (tree, m) in enumerate(zip(trees, maps[t])):
            n_id[t][m] = np.asarray(tree.n_id[t])
            batch[t][m] = k
        num_nodes[t] = [int(c) for c in counts.sum(axis=0)]
    row, col, eids, num_edges = {}, {}, {}, {}
    for et in trees[0].row:
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        num_edges[et] = []
        for h in range(hops):
            hop = [_tree_hop(tree, et, h, maps[et[0]][k], maps[et[2]][k]) for k, tree in enumerate(trees)]
            r, c, e = (np.concatenate(list(part)) for part in zip(*hop))
            order = np.argsort(c, kind="stable")
            parts.append((r[order], c[order], e[order]))
            num_edges[et].append(int(order.shape[0]))
        row[et], col[et], eids[et] = (np.concatenate([p[i] for p in parts] or [np.zeros(0, np.int64)])
                                      for i in range(3))
    return HeteroSampleOutput(n_id=n_id, row=row, col=col, edge_ids=eids,
                              num_seeds={t: n[0] for t, n in num_nodes.items()}, num_sampled_nodes=num_nodes,
                              num_sampled_edges=num_edges, frontier=trees[0].frontier, batch=batch)


def _tree_hop(tree: HeteroSampleOutput, etype: tuple, hop: int, src_map: np.ndarray, dst_map: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(row, col, edge_ids)`` of ``tree``'s ``etype`` edges of ``hop``, in merged local IDs."""
    lo = sum(tree.num_sampled_edges[etype][:hop])
    hi = lo + tree.num_sampled_edges[etype][hop]
    return (src_map[np.asarray(tree.row[etype][lo:hi], dtype=np.int64)],
            dst_map[np.asarray(tree.col[etype][lo:hi], dtype=np.int64)],
            np.asarray(tree.edge_ids[etype][lo:hi], dtype=np.int64))
