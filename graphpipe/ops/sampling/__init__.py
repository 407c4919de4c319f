"""Neighbour sampling: uniform Fused-Map sampling behind one entry point,
:func:`sample_neighbors` (:mod:`.api`: ``backend="auto" | "reference" | "cpu" | "cuda"``,
the same output on every backend), for a graph of one relation (its CSC) or a typed graph
(a :class:`HeteroCSC`, the number of relations picking the kernel), with its types
(:mod:`.types`), stream keys (:mod:`.keys`), the plain-Python oracles (:mod:`.reference`),
the Numba CPU kernels (:mod:`.cpu`), the numba.cuda kernels (:mod:`.cuda`), the ID map it
fills (:mod:`.idmap`), PinSAGE random walks (:mod:`.random_walk`) and temporal sampling
(:mod:`.temporal`: :func:`sample_temporal` over a :func:`temporal_graph`, one tree per seed,
its oracle in :mod:`.temporal_reference`)."""

from .api import BACKENDS, sample_neighbors
from .cpu import sample_hop_global, sample_neighbors_batches
from .keys import batch_key, hop_key, stream_keys
from .reference import (
    sample_hetero_neighbors_reference,
    sample_hop_global_reference,
    sample_neighbors_reference,
)
from .temporal import TemporalGraph, sample_temporal, temporal_graph
from .temporal_reference import sample_temporal_reference
from .types import (
    DEFAULT_ETYPE,
    DEFAULT_NTYPE,
    FRONTIERS,
    EdgeType,
    HeteroCSC,
    HeteroSampleOutput,
    SampledBlock,
    SampleOutput,
    as_etype,
    etype_str,
    resolve_fanouts,
)

__all__ = ["BACKENDS", "DEFAULT_ETYPE", "DEFAULT_NTYPE", "FRONTIERS", "EdgeType", "HeteroCSC",
           "HeteroSampleOutput", "SampleOutput", "SampledBlock", "TemporalGraph", "as_etype",
           "batch_key", "etype_str", "hop_key", "resolve_fanouts", "sample_hetero_neighbors",
           "sample_hetero_neighbors_batches", "sample_hetero_neighbors_reference",
           "sample_hop_global", "sample_hop_global_reference", "sample_neighbors",
           "sample_neighbors_batches", "sample_neighbors_reference", "sample_temporal",
           "sample_temporal_reference", "stream_keys", "temporal_graph"]

sample_hetero_neighbors, sample_hetero_neighbors_batches = sample_neighbors, sample_neighbors_batches  # former names
