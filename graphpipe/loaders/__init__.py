"""Loaders that feed training from a store: :class:`NeighborLoader` (sampled
neighbourhoods with Match-Reorder, feature reuse, a degree cache and prefetch) and
the :class:`MiniBatch` it yields; :class:`ClusterLoader` (node sequences for graph
transformers); :class:`LinkNeighborLoader` (edges with their endpoints' neighbourhoods,
negatives, seed-edge exclusion). The neighbour loader is a chain of stages
(:mod:`graphpipe.loaders.stages`) reading feature rows from row sources
(:mod:`graphpipe.loaders.rows`); a seed shard
(:mod:`graphpipe.loaders.shard`) gives each data-parallel rank its part of an epoch.
Every loader reads one :class:`GraphData` (a homogeneous graph is its one-type case).
Typed graphs: the same :class:`NeighborLoader` over a typed :class:`GraphData` (a PyG
``HeteroData``, a typed store) yields :class:`HeteroMiniBatch` es, HeteroData's face
(``HeteroNeighborLoader`` and ``HeteroGraphData`` are aliases). Temporal sampling (PyG's ``time_attr``):
:class:`TemporalSampler` (:mod:`graphpipe.loaders.temporal`), built by ``NeighborLoader``."""

from graphpipe.loaders.cluster import ClusterLoader, SequenceBatch
from graphpipe.loaders.graph_data import GraphData, HeteroGraphData
from graphpipe.loaders.link_loader import LinkMiniBatch, LinkNeighborLoader
from graphpipe.loaders.minibatch import Block, MiniBatch
from graphpipe.loaders.neighbor_loader import HeteroNeighborLoader, NeighborLoader
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
from graphpipe.loaders.temporal import TemporalSampler
from graphpipe.loaders.typed_batch import HeteroMiniBatch
from graphpipe.loaders.typed_link_loader import TypedLinkNeighborLoader

__all__ = [
    "ArrayRows",
    "BaseSampler",
    "BaseShard",
    "Block",
    "ChunkedRows",
    "ClusterLoader",
    "DegreeCachedRows",
    "GatherStage",
    "GraphData",
    "HeteroGraphData",
    "HeteroMiniBatch",
    "HeteroNeighborLoader",
    "LinkMiniBatch",
    "LinkNeighborLoader",
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
    "TemporalSampler",
    "TransferStage",
    "TypedLinkNeighborLoader",
]
