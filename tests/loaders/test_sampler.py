"""The sampler interface: declared capabilities and their defaults, :class:`SamplerInput`,
and how NeighborLoader uses them (stream only a sampler that declares ``supports_stream``,
hand fanouts only to one that declares ``supports_bind_fanouts``, refuse a non-sampler)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import BaseSampler, LocalSampler, NeighborLoader, SamplerInput
from graphpipe.ops.sampling import sample_neighbors

N = 400
FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    deg = rng.integers(0, 8, size=N)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    indices = rng.integers(0, N, size=int(indptr[-1])).astype(np.int64)
    x = rng.standard_normal((N, 3)).astype(np.float32)
    return {"indptr": indptr, "indices": indices, "x": x}


class _Counting(LocalSampler):
    """The local sampler, declaring abilities as told and counting what the loader calls."""

    def __init__(self, graph, stream: bool, bind: bool):
        super().__init__(graph["indptr"], graph["indices"], FANOUTS, num_threads=1)
        self._stream, self._bind = stream, bind
        self.streams = self.binds = 0

    @property
    def supports_stream(self) -> bool:
        return self._stream

    @property
    def supports_bind_fanouts(self) -> bool:
        return self._bind

    def sample_stream(self, windows, *, depth=2):
        self.streams += 1
        return super().sample_stream(windows, depth=depth)

    def bind_fanouts(self, fanouts, replace=False):
        self.binds += 1
        assert list(fanouts) == FANOUTS


def test_defaults_and_sampler_input(graph) -> None:
    local = LocalSampler(graph["indptr"], graph["indices"], FANOUTS, num_threads=1)
    assert not local.supports_stream and not local.supports_bind_fanouts
    local.bind_fanouts([9, 9])  # the default takes nothing: the sampler keeps its own
    assert local.fanouts == FANOUTS
    windows = [SamplerInput([np.arange(5), np.arange(5, 9)], [1, 2]),
               SamplerInput([np.arange(20, 30)], [3])]
    seed_batches, keys = windows[0]  # a tuple
    assert keys == [1, 2] and len(seed_batches) == 2
    streamed = list(local.sample_stream(iter(windows), depth=2))
    assert len(streamed) == 2
    for window, outputs in zip(windows, streamed):
        for seeds, key, out in zip(window.seed_batches, window.keys, outputs, strict=True):
            want = sample_neighbors(graph["indptr"], graph["indices"], seeds, FANOUTS, seed=key)
            assert np.array_equal(out.n_id, want.n_id)


@pytest.mark.parametrize("stream,bind", [(False, False), (True, True)])
def test_loader_asks_the_declared_capabilities(graph, stream: bool, bind: bool) -> None:
    want = [b.n_id for b in NeighborLoader(graph, FANOUTS, batch_size=50, input_nodes=None, seed=1, window=2, shuffle=True)]
    for prefetch in (0, 2):
        sampler = _Counting(graph, stream, bind)
        loader = NeighborLoader(graph, FANOUTS, batch_size=50, input_nodes=None, seed=1, window=2,
                                sampler=sampler, prefetch=prefetch, shuffle=True)
        got = [b.n_id for b in loader]
        assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
        assert sampler.binds == int(bind)
        assert sampler.streams == int(stream and prefetch > 0)


def test_a_non_sampler_is_refused(graph) -> None:
    class DuckSampler:  # has the method, but declares nothing
        def sample_from_nodes(self, seed_batches, seeds):
            raise AssertionError("never called")

    with pytest.raises(ValueError, match="'sampler' must be a graphpipe.loaders.BaseSampler"):
        NeighborLoader(graph, FANOUTS, batch_size=50, input_nodes=None, sampler=DuckSampler(), shuffle=True)
    with pytest.raises(TypeError):
        BaseSampler()  # sample_from_nodes is abstract
