"""Neighbour sampling: uniform Fused-Map sampling (:mod:`.cpu`, GPU kernels in :mod:`.cuda`),
the ID map it fills (:mod:`.idmap`) and PinSAGE random walks (:mod:`.random_walk`)."""

from .cpu import (
    SampledBlock,
    SampleOutput,
    batch_key,
    hop_key,
    sample_hop_global,
    sample_hop_global_reference,
    sample_neighbors,
    sample_neighbors_batches,
    sample_neighbors_reference,
    stream_keys,
)

__all__ = [
    "SampleOutput",
    "SampledBlock",
    "batch_key",
    "hop_key",
    "sample_hop_global",
    "sample_hop_global_reference",
    "sample_neighbors",
    "sample_neighbors_batches",
    "sample_neighbors_reference",
    "stream_keys",
]
