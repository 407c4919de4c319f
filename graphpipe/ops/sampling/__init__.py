"""Neighbour sampling: uniform Fused-Map sampling behind one entry point,
:func:`sample_neighbors` (:mod:`.api`: ``backend="auto" | "reference" | "cpu" | "cuda"``,
the same output on every backend), with its result types (:mod:`.types`), stream keys
(:mod:`.keys`), the plain-Python oracle (:mod:`.reference`), the Numba CPU kernels
(:mod:`.cpu`), the numba.cuda kernels (:mod:`.cuda`), the ID map it fills (:mod:`.idmap`)
and PinSAGE random walks (:mod:`.random_walk`)."""

from .api import BACKENDS, sample_neighbors
from .cpu import sample_hop_global, sample_neighbors_batches
from .keys import batch_key, hop_key, stream_keys
from .reference import sample_hop_global_reference, sample_neighbors_reference
from .types import FRONTIERS, SampledBlock, SampleOutput

__all__ = ["BACKENDS", "FRONTIERS", "SampleOutput", "SampledBlock", "batch_key", "hop_key",
           "sample_hop_global", "sample_hop_global_reference", "sample_neighbors",
           "sample_neighbors_batches", "sample_neighbors_reference", "stream_keys"]
