"""GraphBolt's ``sample_neighbor`` stage: each batch's seeds sampled layer by layer with
graphpipe's sampler (:func:`graphpipe.ops.sampling.sample_neighbors`, ``frontier="all"``:
every node of a layer is expanded for the next, GraphBolt's and DGL's rule), fanouts input
layer first as GraphBolt lists them (``[15, 10, 5]``: 5 neighbours of each seed).

Batch ``i`` of epoch ``e`` is sampled with a key drawn from ``(seed, e, i)``, so a stage
built with the same ``seed`` samples the same subgraphs."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

from graphpipe.dgl.seeds import creation_seed
from graphpipe.graphbolt.base import Datapipe, functional_datapipe
from graphpipe.graphbolt.minibatch import MiniBatch, SampledSubgraph
from graphpipe.graphbolt.sampling_graph import SamplingGraph
from graphpipe.ops._core.checks import check_fanouts
from graphpipe.ops.sampling import sample_neighbors

__all__ = ["NeighborSampler"]



def _fanout_list(fanouts: Sequence[Any]) -> list[int]:
    """Ints from GraphBolt's fanouts (ints or one-element tensors)."""
    values = []
    for f in fanouts:
        if isinstance(f, torch.Tensor):
            if f.numel() != 1:
                raise ValueError("fanouts per edge type (heterogeneous graphs) are not supported")
            f = int(f.item())
        values.append(f)
    return check_fanouts(values)


def _subgraphs(out: Any, n_id: torch.Tensor, edge_id: np.ndarray | None) -> list[SampledSubgraph]:
    subs = []
    for block in out.blocks:
        slots = np.asarray(block.edge_ids, dtype=np.int64)
        eids = slots if edge_id is None else np.asarray(edge_id)[slots].astype(np.int64, copy=False)
        subs.append(SampledSubgraph(
            torch.from_numpy(np.ascontiguousarray(block.indptr, dtype=np.int64)),
            torch.from_numpy(np.ascontiguousarray(block.indices, dtype=np.int64)),
            n_id[:int(block.num_dst)], n_id[:int(block.num_src)], torch.from_numpy(eids)))
    return subs


@functional_datapipe("sample_neighbor")
class NeighborSampler(Datapipe):
    """``datapipe.sample_neighbor(graph, fanouts)``: sets each batch's
    ``sampled_subgraphs`` (input layer first) and ``input_nodes``.

    Args:
        datapipe: the stage before (an :class:`~graphpipe.graphbolt.ItemSampler`...).
        graph: a :class:`~graphpipe.graphbolt.SamplingGraph` (``dataset.graph``).
        fanouts: per layer, input layer first; ``-1`` takes every in-neighbour.
        replace: sample with replacement.
        prob_name: None only (uniform sampling).
        deduplicate: True only (GraphBolt's default).
        seed: graphpipe's sampling seed (None: from ``torch.initial_seed()`` and the
            stage's creation order).
        overlap_fetch, asynchronous, ...: GraphBolt's GPU options; no effect here.

    >>> from graphpipe.graphbolt import ItemSampler, ItemSet
    >>> graph = SamplingGraph(np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0]))
    >>> pipe = ItemSampler(ItemSet(torch.tensor([0]), names="seed_nodes"), batch_size=1)
    >>> batch = next(iter(pipe.sample_neighbor(graph, [-1, -1])))
    >>> batch.input_nodes.tolist(), [s.original_column_node_ids.tolist() for s in batch.sampled_subgraphs]
    ([0, 1, 2], [[0, 1, 2], [0]])
    """

    def __init__(self, datapipe: Iterable[MiniBatch], graph: SamplingGraph, fanouts: Sequence[Any],
                 replace: bool = False, prob_name: str | None = None, deduplicate: bool = True,
                 *, seed: int | None = None, **gpu_options: Any):
        if prob_name is not None or not deduplicate:
            raise ValueError("only uniform sampling (prob_name=None) with deduplicate=True is supported")
        unknown = sorted(set(gpu_options) - {"overlap_fetch", "asynchronous", "num_gpu_cached_edges",
                                             "gpu_cache_threshold", "layer_dependency", "batch_dependency"})
        if unknown:
            raise TypeError(f"sample_neighbor() got unexpected keyword argument(s) {', '.join(unknown)}")
        if not isinstance(graph, SamplingGraph):
            raise ValueError(f"'graph' must be a graphpipe.graphbolt.SamplingGraph (got {type(graph).__name__})")  # noqa: TRY004 - the project reports bad arguments as ValueError
        self.datapipe, self.graph, self.replace = datapipe, graph, bool(replace)
        self.fanouts = _fanout_list(fanouts)
        self.seed = creation_seed() if seed is None else int(seed)
        self._epoch = 0

    def sample(self, batch: MiniBatch, key: int) -> MiniBatch:
        """``batch`` with its sampled layers (``key``: the batch's random stream)."""
        seeds = batch.seed_nodes.cpu().numpy().astype(np.int64, copy=False)
        out = sample_neighbors(self.graph.indptr, self.graph.indices, seeds, self.fanouts[::-1],
                               replace=self.replace, seed=key, frontier="all")
        n_id = torch.from_numpy(np.ascontiguousarray(out.n_id, dtype=np.int64))
        batch.sampled_subgraphs = _subgraphs(out, n_id, self.graph.edge_id)
        batch.input_nodes = n_id
        return batch

    def __iter__(self) -> Iterator[MiniBatch]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        for i, batch in enumerate(self.datapipe):
            state = np.random.SeedSequence([self.seed, epoch, i]).generate_state(1, np.uint64)
            yield self.sample(batch, int(state[0] >> np.uint64(1)))
