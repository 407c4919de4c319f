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
  fanouts (and ``replace``); a loader given such a sampler calls it once;
* ``supports_time``: :meth:`BaseSampler.sample_from_nodes` takes ``seed_times=`` (one
  int64 array per batch: each seed's time), as temporal sampling needs
  (:class:`graphpipe.loaders.temporal.TemporalSampler`).
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from graphpipe.allocator import tune_allocator
from graphpipe.ops._core.backend import check_backend, numba_cuda_available
from graphpipe.ops.sampling import SampleOutput, sample_neighbors, sample_neighbors_batches
from graphpipe.ops.sampling.types import check_frontier

__all__ = ["SAMPLER_BACKENDS", "BaseSampler", "LocalSampler", "SampleOutput", "SamplerInput",
           "resolve_sampler_backend", "warm_sampling_kernels"]


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

    @property
    def supports_time(self) -> bool:
        """True when :meth:`sample_from_nodes` takes ``seed_times=`` (temporal sampling)."""
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


SAMPLER_BACKENDS = ("auto", "cpu", "cuda")


def resolve_sampler_backend(backend: str, device: Any = "cpu") -> str:
    """``"cpu"`` or ``"cuda"`` for a loader that delivers batches to ``device``: ``"auto"``
    samples on the GPU when ``device`` is a CUDA device and numba.cuda can run there, on
    the CPU otherwise; ``"cuda"`` needs numba.cuda (a GPU, or ``NUMBA_ENABLE_CUDASIM=1``).
    Every backend gives the same batches (the RNG contract of :mod:`graphpipe.ops.sampling`)."""
    check_backend(backend, SAMPLER_BACKENDS, name="sampler_backend")
    if backend == "auto":
        on_gpu = str(device).startswith("cuda")
        return "cuda" if on_gpu and numba_cuda_available() else "cpu"
    if backend == "cuda" and not numba_cuda_available():
        raise ValueError("'sampler_backend'='cuda' needs numba.cuda (no usable GPU and "
                         "NUMBA_ENABLE_CUDASIM is not set)")
    return backend


class LocalSampler(BaseSampler):
    """Uniform neighbour sampling with Fused-Map local IDs in this process: on the CPU
    (:func:`graphpipe.ops.sampling.sample_neighbors_batches`, the batches of a window in
    parallel threads) or on a GPU (the numba.cuda kernels, with the topology copied to the
    device once); both give the same batches.

    Args:
        indptr: int64 ``(N+1,)`` CSC offsets by destination.
        indices: int32/int64 ``(E,)`` in-neighbour global IDs.
        fanouts: neighbours per hop, seed hop first (``-1``: all).
        replace: sample with replacement.
        num_threads: worker threads per window (default: Numba's thread count).
        tune_malloc: call :func:`graphpipe.allocator.tune_allocator` (glibc: keep freed
            memory for reuse instead of faulting fresh pages in for every batch's arrays;
            process-wide, once; ``GRAPHPIPE_TUNE_MALLOC=0`` turns it off).
        backend: ``"auto"`` (default), ``"cpu"`` or ``"cuda"``
            (:func:`resolve_sampler_backend`; the chosen one is ``self.backend``).
        device: where the loader delivers batches; ``"auto"`` samples on a CUDA device.
        frontier: ``"new"`` (default; PyG: hops after the first expand only the previous
            hop's new nodes) or ``"all"`` (DGL: every hop expands every node known so far);
            :data:`graphpipe.ops.sampling.FRONTIERS`.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, fanouts: Sequence[int], *,
                 replace: bool = False, num_threads: int | None = None, tune_malloc: bool = True,
                 backend: str = "auto", device: Any = "cpu", frontier: str = "new"):
        if tune_malloc:
            tune_allocator()
        self.indptr = indptr
        self.indices = indices
        self.fanouts = [int(f) for f in fanouts]
        self.replace = bool(replace)
        self.frontier = check_frontier(frontier)
        self.num_threads = num_threads
        self.backend = resolve_sampler_backend(backend, device)
        self._device_graph = _to_gpu(indptr, indices) if self.backend == "cuda" else None

    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray],
                          seeds: Sequence[int]) -> list[SampleOutput]:
        if self._device_graph is not None:
            d_indptr, d_indices = self._device_graph
            return [sample_neighbors(d_indptr, d_indices, batch, self.fanouts, replace=self.replace,
                                     seed=int(key), backend="cuda", frontier=self.frontier)
                    for batch, key in zip(seed_batches, seeds)]
        return sample_neighbors_batches(self.indptr, self.indices, seed_batches, self.fanouts,
                                        replace=self.replace, seeds=seeds,
                                        num_threads=self.num_threads, frontier=self.frontier)

    def __repr__(self) -> str:
        return (f"LocalSampler(fanouts={self.fanouts}, replace={self.replace}, "
                f"backend={self.backend!r}, frontier={self.frontier!r})")


def warm_sampling_kernels(indptr: np.ndarray, indices: np.ndarray, fanouts: list[int], *,
                          replace: bool = False, frontier: str = "new") -> threading.Thread:
    """Load the CPU sampling kernels for the dtypes and flags of ``indptr`` / ``indices``
    (Numba's cached machine code: seconds on a busy machine) in a background thread, by
    sampling a one-node graph of the same array types; the returned thread is started.
    For a loader whose start-up waits on the disk anyway (the disk tier's hot-set fill):
    its first batch then does not pay the load.

    >>> t = warm_sampling_kernels(np.zeros(3, np.int64), np.zeros(2, np.int32), [2])
    >>> t.join(); t.is_alive()
    False
    """
    tiny_indptr = np.array([0, 1], dtype=indptr.dtype)
    tiny_indices = np.array([0], dtype=indices.dtype)
    for tiny, real in ((tiny_indptr, indptr), (tiny_indices, indices)):
        tiny.setflags(write=bool(real.flags.writeable))   # read-only maps: their own specialisation

    def work() -> None:
        with contextlib.suppress(Exception):  # a warm-up only: the real call reports errors
            LocalSampler(tiny_indptr, tiny_indices, fanouts, replace=replace, frontier=frontier,
                         backend="cpu", num_threads=1, tune_malloc=False).sample_from_nodes([np.array([0], np.int64)], [0])

    thread = threading.Thread(target=work, name="graphpipe-warm-sampler", daemon=True)
    thread.start()
    return thread


def _to_gpu(indptr: np.ndarray, indices: np.ndarray) -> tuple[Any, Any]:
    """The (already checked) CSC copied to the GPU once, as numba.cuda device arrays."""
    from numba import cuda

    return (cuda.to_device(np.ascontiguousarray(indptr, dtype=np.int64)),
            cuda.to_device(np.ascontiguousarray(indices)))
