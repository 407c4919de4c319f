"""Loaders that feed training from a store: :class:`NeighborLoader` (sampled
neighbourhoods with Match-Reorder, feature reuse, a degree cache and prefetch) and
the :class:`MiniBatch` it yields; :class:`ClusterLoader` (node sequences for graph
transformers). The neighbour loader is a chain of stages (:mod:`graphpipe.loaders.stages`)
reading feature rows from row sources (:mod:`graphpipe.loaders.rows`); a seed shard
(:mod:`graphpipe.loaders.shard`) gives each data-parallel rank its part of an epoch."""

from graphpipe.loaders.cluster import ClusterLoader, SequenceBatch
from graphpipe.loaders.minibatch import Block, MiniBatch
from graphpipe.loaders.neighbor_loader import NeighborLoader
from graphpipe.loaders.rows import (
    ArrayRows,
    ChunkedRows,
    DegreeCachedRows,
    QuantizedRowSource,
    RowSource,
)
from graphpipe.loaders.sampler import BaseSampler, LocalSampler, SamplerInput
from graphpipe.loaders.shard import BaseShard, PartitionShard, SeedShard
from graphpipe.loaders.stages import GatherStage, ReorderStage, SampleStage, TransferStage
from graphpipe.loaders.stats import LoaderStats

__all__ = [
    "ArrayRows",
    "BaseSampler",
    "BaseShard",
    "Block",
    "ChunkedRows",
    "ClusterLoader",
    "DegreeCachedRows",
    "GatherStage",
    "LoaderStats",
    "LocalSampler",
    "MiniBatch",
    "NeighborLoader",
    "PartitionShard",
    "QuantizedRowSource",
    "ReorderStage",
    "RowSource",
    "SampleStage",
    "SamplerInput",
    "SeedShard",
    "SequenceBatch",
    "TransferStage",
]
