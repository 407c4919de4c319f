"""Neighbour sampling: uniform Fused-Map sampling behind one entry point,
:func:`sample_neighbors` (:mod:`.api`: ``backend="auto" | "reference" | "cpu" | "cuda"``,
the same output on every backend), with its result types (:mod:`.types`), stream keys
(:mod:`.keys`), the plain-Python oracle (:mod:`.reference`), the Numba CPU kernels
(:mod:`.cpu`), the numba.cuda kernels (:mod:`.cuda`), the ID map it fills (:mod:`.idmap`),
PinSAGE random walks (:mod:`.random_walk`) and heterogeneous (typed) sampling
(:mod:`.hetero`: :func:`sample_hetero_neighbors` over a :class:`HeteroCSC`, its oracle in
:mod:`.hetero_reference`, its types in :mod:`.hetero_types`); temporal sampling
(:mod:`.temporal`: :func:`sample_temporal` over a :func:`temporal_graph`, one tree per seed,
its oracle in :mod:`.temporal_reference`)."""

from .api import BACKENDS, sample_neighbors
from .cpu import sample_hop_global, sample_neighbors_batches
from .hetero import sample_hetero_neighbors, sample_hetero_neighbors_batches
from .hetero_reference import sample_hetero_neighbors_reference
from .hetero_types import HeteroCSC, HeteroSampleOutput
from .keys import batch_key, hop_key, stream_keys
from .reference import sample_hop_global_reference, sample_neighbors_reference
from .temporal import TemporalGraph, sample_temporal, temporal_graph
from .temporal_reference import sample_temporal_reference
from .types import FRONTIERS, SampledBlock, SampleOutput

__all__ = ["BACKENDS", "FRONTIERS", "HeteroCSC", "HeteroSampleOutput", "SampleOutput",
           "SampledBlock", "TemporalGraph", "batch_key", "hop_key", "sample_hetero_neighbors",
           "sample_hetero_neighbors_batches", "sample_hetero_neighbors_reference",
           "sample_hop_global", "sample_hop_global_reference", "sample_neighbors",
           "sample_neighbors_batches", "sample_neighbors_reference", "sample_temporal",
           "sample_temporal_reference", "stream_keys", "temporal_graph"]
