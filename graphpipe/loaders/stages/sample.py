"""The ``sample`` stage: a window of seed batches → one sampled subgraph per batch, through
the loader's :class:`graphpipe.loaders.BaseSampler` (one call per window, or the
sampler's own stream when it declares ``supports_stream``)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence

import numpy as np

from graphpipe.loaders.sampler import BaseSampler, SamplerInput
from graphpipe.loaders.stats import StatsRef
from graphpipe.ops.sampling import SampleOutput

__all__ = ["SampleStage"]


class SampleStage:
    """``sample``: a window of seed batches → one :class:`SampleOutput` per batch."""

    def __init__(self, sampler: BaseSampler, stats_ref: StatsRef):
        self.sampler = sampler
        self._stats = stats_ref

    def __call__(self, seed_batches: Sequence[np.ndarray], keys: Sequence[int],
                 seed_times: Sequence[np.ndarray] | None = None) -> list[SampleOutput]:
        """One :class:`SampleOutput` per batch; ``seed_times`` (temporal sampling: one int64
        array per batch) go to a sampler that ``supports_time``."""
        t0 = time.perf_counter()
        if seed_times is None:
            outputs = self.sampler.sample_from_nodes(seed_batches, keys)
        else:
            outputs = self.sampler.sample_from_nodes(seed_batches, keys, seed_times=seed_times)
        if len(outputs) != len(seed_batches):
            raise ValueError(f"'sampler' returned {len(outputs)} outputs for {len(seed_batches)} batches")
        self._stats.current.sample_s += time.perf_counter() - t0
        return outputs

    def stream(self, windows: Sequence[SamplerInput], depth: int = 2) -> Iterator[list[SampleOutput]]:
        """The outputs of each window in order, through the sampler's ``sample_stream``
        (``depth`` windows in flight); the time spent waiting for each counts as sampling."""
        source = self.sampler.sample_stream(windows, depth=depth)
        try:
            for seed_batches, _keys in windows:
                t0 = time.perf_counter()
                outputs = next(source, None)
                if outputs is None or len(outputs) != len(seed_batches):
                    got = "no window" if outputs is None else f"{len(outputs)} outputs"
                    raise ValueError(f"'sampler' stream returned {got} for a window of {len(seed_batches)} batches")
                self._stats.current.sample_s += time.perf_counter() - t0
                yield outputs
        finally:
            source.close()
