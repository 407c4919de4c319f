"""What a sampler returns: one :class:`SampledBlock` per hop (DGL's block convention, local
IDs) inside a :class:`SampleOutput`. Every backend of :func:`graphpipe.ops.sampling.sample_neighbors`
and the random-walk sampler build their result with :func:`assemble`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["FRONTIERS", "SampleOutput", "SampledBlock", "assemble", "check_frontier"]

FRONTIERS = ("new", "all")
"""Which nodes a hop after the first expands: ``"new"`` only the nodes the hop before
reached first (PyG's ``NeighborLoader``, torch-sparse / pyg-lib ``neighbor_sample``);
``"all"`` every node known so far, seeds included (DGL's ``NeighborSampler``)."""


def check_frontier(frontier: str) -> str:
    """``frontier`` if it is one of :data:`FRONTIERS`, else ``ValueError``."""
    if not isinstance(frontier, str) or frontier not in FRONTIERS:
        raise ValueError(f"'frontier' must be one of {FRONTIERS} (got {frontier!r})")
    return frontier


@dataclass
class SampledBlock:
    """One layer of a sampled subgraph in DGL's block convention (local IDs).

    Attributes:
        indptr: int64 (num_dst+1,) local CSC offsets by destination.
        indices: int64 (num_edges,) local source IDs in ``[0, num_src)``.
        num_dst: destinations are local IDs ``0..num_dst-1`` (a prefix of the sources).
        num_src: number of source nodes (local IDs ``0..num_src-1``).
        edge_ids: int64 (num_edges,) position of each sampled edge in the store's CSC
            ``indices`` (edge slot), for edge features; -1 for edges that are not graph
            edges (random-walk neighbourhoods).
        edge_weight: optional float32 (num_edges,) weight per edge (random-walk visit
            counts); ``None`` for uniform sampling.
    """

    indptr: np.ndarray
    indices: np.ndarray
    num_dst: int
    num_src: int
    edge_ids: np.ndarray
    edge_weight: np.ndarray | None = None

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def dst_of_edges(self) -> np.ndarray:
        """int64 (num_edges,) local destination ID of every edge (CSC expanded)."""
        return np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.indptr))


@dataclass
class SampleOutput:
    """A sampled multi-hop subgraph of one batch.

    Attributes:
        n_id: int64 (num_nodes,) global IDs; seeds first (local 0..B-1 in the given
            order), then each hop's new nodes in discovery order.
        blocks: ``blocks[0]`` is the outermost layer (input layer, ``num_src ==
            len(n_id)``); ``blocks[-1]`` has ``num_dst == batch_size`` (DGL/PyG model
            order). ``blocks[l].num_dst == blocks[l+1].num_src``.
        batch_size: number of seeds.
        num_sampled_nodes: per hop, seeds first (length ``len(fanouts)+1``).
        num_sampled_edges: per hop, seed hop first (length ``len(fanouts)``).
        batch: int64 ``(num_nodes,)`` for a disjoint sample (one tree per seed, IDs may
            repeat across trees): the tree of each node; None otherwise.
        seed_time: int64 ``(batch_size,)`` for a temporal sample: each seed's time (every
            node of its tree was sampled no later than it); None otherwise.
    """

    n_id: np.ndarray
    blocks: list[SampledBlock]
    batch_size: int
    num_sampled_nodes: list[int] = field(default_factory=list)
    num_sampled_edges: list[int] = field(default_factory=list)
    batch: np.ndarray | None = None
    seed_time: np.ndarray | None = None


def assemble(n_id: np.ndarray, batch_size: int, hops: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]) -> SampleOutput:
    """A :class:`SampleOutput` from ``n_id`` and per-hop ``(indptr, local_src, edge_ids, num_dst,
    num_src)``, seed hop first (blocks come out outermost first)."""
    blocks = [
        SampledBlock(indptr=ip, indices=src, num_dst=nd, num_src=ns, edge_ids=eid)
        for ip, src, eid, nd, ns in reversed(hops)
    ]
    num_sampled_nodes = [batch_size] + [ns - nd for (_, _, _, nd, ns) in hops]
    return SampleOutput(
        n_id=n_id,
        blocks=blocks,
        batch_size=batch_size,
        num_sampled_nodes=num_sampled_nodes,
        num_sampled_edges=[int(h[1].shape[0]) for h in hops],
    )
