"""Loaders that feed training from a store: :class:`NeighborLoader` (sampled
neighbourhoods with Match-Reorder, feature reuse, a degree cache and prefetch) and
the :class:`MiniBatch` it yields."""

from graphpipe.loaders.cluster import ClusterLoader, SequenceBatch
from graphpipe.loaders.minibatch import Block, MiniBatch
from graphpipe.loaders.neighbor_loader import NeighborLoader
from graphpipe.loaders.sampler import BaseSampler, LocalSampler
from graphpipe.loaders.stages import (
    FeatureCache,
    GatherStage,
    LoaderStats,
    ReorderStage,
    SampleStage,
    TransferStage,
)

__all__ = [
    "BaseSampler",
    "Block",
    "ClusterLoader",
    "FeatureCache",
    "GatherStage",
    "LoaderStats",
    "LocalSampler",
    "MiniBatch",
    "NeighborLoader",
    "ReorderStage",
    "SampleStage",
    "SequenceBatch",
    "TransferStage",
]
