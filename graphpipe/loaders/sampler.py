"""The sampler interface the loaders compose (PyG ``BaseSampler`` style) and the local
Fused-Map sampler.

A sampler turns a window of seed batches (a :class:`SamplerInput`) into sampled
subgraphs; it knows nothing about features, devices or batch order. A subclass of
:class:`BaseSampler` plugs into :class:`graphpipe.loaders.NeighborLoader`
(``sampler=``), e.g. a remote sampler that asks a sampling service over Arrow Flight.
It implements :meth:`BaseSampler.sample_from_nodes` and declares its optional
abilities (zarr's ``supports_*`` style; the loader asks these, never ``hasattr``):

* ``supports_stream``: :meth:`BaseSampler.sample_stream` keeps several windows in
  flight itself; a prefetching loader then streams its windows through it instead of
  sampling one window ahead in a helper thread;
* ``supports_bind_fanouts``: :meth:`BaseSampler.bind_fanouts` takes the loader's
  fanouts (and ``replace``); a loader given such a sampler calls it once.
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import numpy as np

from graphpipe.allocator import tune_allocator
from graphpipe.ops.sampling import SampleOutput, sample_neighbors_batches

__all__ = ["BaseSampler", "LocalSampler", "SampleOutput", "SamplerInput"]


class SamplerInput(NamedTuple):
    """One window of seed batches for a sampler (PyG's ``NodeSamplerInput``, per window).
    A tuple, so ``seed_batches, keys = window`` unpacks it.

    Attributes:
        seed_batches: per batch, int64 ``(B_i,)`` unique global node IDs (the seeds).
        keys: per batch, a non-negative integer random key.
    """

    seed_batches: Sequence[np.ndarray]
    keys: Sequence[int]


class BaseSampler(abc.ABC):
    """Samples the multi-hop neighbourhoods of a window of seed batches.

    Subclasses implement :meth:`sample_from_nodes`; the optional abilities have
    defaults and are declared by ``supports_*`` properties (see the module docstring).
    """

    @property
    def supports_stream(self) -> bool:
        """True when :meth:`sample_stream` keeps windows in flight itself (default False:
        the loader samples one window ahead in a helper thread instead)."""
        return False

    @property
    def supports_bind_fanouts(self) -> bool:
        """True when the sampler takes the loader's fanouts through :meth:`bind_fanouts`."""
        return False

    def bind_fanouts(self, fanouts: Sequence[int], replace: bool = False) -> None:
        """Take the loader's ``fanouts`` and ``replace`` (default: the sampler has its own,
        nothing to do)."""

    def sample_stream(self, windows: Iterable[SamplerInput], *,
                      depth: int = 2) -> Iterator[list[SampleOutput]]:
        """What :meth:`sample_from_nodes` returns for each ``(seed_batches, keys)`` of
        ``windows``, in order, up to ``depth`` windows in flight (default: one window at a
        time, in the caller's thread)."""
        for seed_batches, keys in windows:
            yield self.sample_from_nodes(seed_batches, keys)

    @abc.abstractmethod
    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray],
                          seeds: Sequence[int]) -> list[SampleOutput]:
        """Sample one subgraph per seed batch.

        Args:
            seed_batches: per batch, int64 ``(B_i,)`` unique global node IDs (the seeds).
            seeds: per batch, a non-negative integer random key; the result for a batch
                must be a pure function of (graph, its seed batch, its key), so
                that loaders are reproducible whatever the window or thread count.

        Returns:
            One :class:`graphpipe.ops.sampling.SampleOutput` per batch, in the order
            given: ``n_id`` (int64 global IDs, seeds first) and ``blocks``
            (``blocks[0]`` the input layer with ``num_src == len(n_id)``,
            ``blocks[-1].num_dst == B_i``; destinations a prefix of sources).
        """


class LocalSampler(BaseSampler):
    """Uniform neighbour sampling with Fused-Map local IDs in this process
    (:func:`graphpipe.ops.sampling.sample_neighbors_batches`); the batches of a window
    are sampled in parallel threads.

    Args:
        indptr: int64 ``(N+1,)`` CSC offsets by destination.
        indices: int32/int64 ``(E,)`` in-neighbour global IDs.
        fanouts: neighbours per hop, seed hop first (``-1``: all).
        replace: sample with replacement.
        num_threads: worker threads per window (default: Numba's thread count).
        tune_malloc: call :func:`graphpipe.allocator.tune_allocator` (glibc: keep freed
            memory for reuse instead of faulting fresh pages in for every batch's arrays;
            process-wide, once; ``GRAPHPIPE_TUNE_MALLOC=0`` turns it off).
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, fanouts: Sequence[int], *,
                 replace: bool = False, num_threads: int | None = None, tune_malloc: bool = True):
        if tune_malloc:
            tune_allocator()
        self.indptr = indptr
        self.indices = indices
        self.fanouts = [int(f) for f in fanouts]
        self.replace = bool(replace)
        self.num_threads = num_threads

    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray],
                          seeds: Sequence[int]) -> list[SampleOutput]:
        return sample_neighbors_batches(self.indptr, self.indices, seed_batches, self.fanouts,
                                        replace=self.replace, seeds=seeds,
                                        num_threads=self.num_threads)

    def __repr__(self) -> str:
        return f"LocalSampler(fanouts={self.fanouts}, replace={self.replace})"
