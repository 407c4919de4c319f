"""Temporal neighbour sampling: the Numba kernels against the plain-Python oracle, and
the properties that define it (no sampled edge newer than its tree's seed time; "last"
takes the most recent; every valid edge with fanout -1; one common time = the
non-temporal disjoint sampler)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphpipe.loaders import LocalSampler
from graphpipe.loaders.disjoint import DisjointSampler
from graphpipe.ops.sampling.keys import batch_key, hop_key, tree_hop_keys, tree_key
from graphpipe.ops.sampling.temporal import TemporalGraph, sample_temporal, temporal_graph
from graphpipe.ops.sampling.temporal_reference import sample_temporal_reference


def _graph(seed: int, n: int = 40, e: int = 300, horizon: int = 30):
    rng = np.random.default_rng(seed)
    dst = np.sort(rng.integers(0, n, e))
    src = rng.integers(0, n, e).astype(np.int32)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src, rng.integers(0, horizon, e), rng.integers(0, horizon, n), rng


def _same(a, b) -> None:
    assert np.array_equal(a.n_id, b.n_id) and np.array_equal(a.batch, b.batch)
    assert a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges
    assert len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        assert (x.num_dst, x.num_src) == (y.num_dst, y.num_src)
        for name in ("indptr", "indices", "edge_ids"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name


def _edges(out):
    """``(tree, dst global, slot)`` of every sampled edge."""
    rows = []
    for block in out.blocks:
        dst = block.dst_of_edges()
        rows += zip(out.batch[dst].tolist(), out.n_id[dst].tolist(), block.edge_ids.tolist())
    return rows


LEVELS = ["edge", "node"]
CASES = [("uniform", False, [3, 2, -1]), ("uniform", True, [4, 2]), ("last", False, [2, 3, 1]),
         ("uniform", False, [40, 40])]   # fanout > 32: Floyd's scratch set


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(("strategy", "replace", "fanouts"), CASES)
@pytest.mark.parametrize("graph_seed", [0, 1, 2])
def test_same_as_reference(level: str, strategy: str, replace: bool, fanouts: list[int], graph_seed: int) -> None:
    indptr, indices, edge_time, node_time, rng = _graph(graph_seed, e=900 if max(fanouts) > 32 else 300)
    times = {"edge_time": edge_time} if level == "edge" else {"node_time": node_time}
    graph = temporal_graph(indptr, indices, **times)
    seeds = rng.integers(0, 40, 12)                     # repeats allowed: one tree each
    seed_time = rng.integers(-2, 35, 12)
    for key in (0, 7, 123456789):
        ours = sample_temporal(graph, seeds, seed_time, fanouts, strategy=strategy, replace=replace, seed=key)
        ref = sample_temporal_reference(indptr, indices, seeds, seed_time, fanouts, strategy=strategy,
                                        replace=replace, seed=key, **times)
        _same(ours, ref)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31), level=st.sampled_from(LEVELS), strategy=st.sampled_from(["uniform", "last"]),
       fanouts=st.lists(st.integers(-1, 5), min_size=1, max_size=3), n=st.integers(1, 30),
       e=st.integers(0, 200))
def test_no_sampled_edge_is_newer_than_its_seed(seed, level, strategy, fanouts, n, e) -> None:
    indptr, indices, edge_time, node_time, rng = _graph(seed, n=n, e=e, horizon=10)
    times = {"edge_time": edge_time} if level == "edge" else {"node_time": node_time}
    graph = temporal_graph(indptr, indices, **times)
    seeds, seed_time = rng.integers(0, n, 6), rng.integers(0, 12, 6)
    out = sample_temporal(graph, seeds, seed_time, fanouts, strategy=strategy, seed=seed)
    for tree, _dst, slot in _edges(out):
        when = edge_time[slot] if level == "edge" else node_time[indices[slot]]
        assert when <= seed_time[tree]
    assert np.array_equal(out.n_id[:6], seeds) and np.array_equal(out.batch[:6], np.arange(6))
    _same(out, sample_temporal_reference(indptr, indices, seeds, seed_time, fanouts, strategy=strategy,
                                         seed=seed, **times))


def _valid(indptr, edge_time, v: int, t: int) -> list[int]:
    return [s for s in range(indptr[v], indptr[v + 1]) if edge_time[s] <= t]


@pytest.mark.parametrize("fanout", [1, 3, -1])
def test_last_takes_the_most_recent_and_uniform_stays_valid(fanout: int) -> None:
    indptr, indices, edge_time, _nt, rng = _graph(5, n=20, e=400)
    graph = temporal_graph(indptr, indices, edge_time=edge_time)
    seeds, seed_time = np.arange(20), rng.integers(0, 30, 20)
    last = sample_temporal(graph, seeds, seed_time, [fanout], strategy="last")
    uniform = sample_temporal(graph, seeds, seed_time, [fanout], seed=3)
    for out, is_last in ((last, True), (uniform, False)):
        block = out.blocks[0]
        for v in range(20):
            got = block.edge_ids[block.indptr[v]:block.indptr[v + 1]].tolist()
            valid = _valid(indptr, edge_time, v, seed_time[v])
            want = len(valid) if fanout < 0 else min(fanout, len(valid))
            assert len(got) == want and len(set(got)) == want and set(got) <= set(valid)
            if is_last:   # the newest `want` valid edges (ties: the later slot)
                newest = sorted(valid, key=lambda s: (edge_time[s], s))[len(valid) - want:]
                assert sorted(got) == sorted(newest)


def test_one_common_time_is_the_disjoint_sampler() -> None:
    indptr, indices, _et, _nt, rng = _graph(9, n=60, e=700)
    graph = temporal_graph(indptr, indices, edge_time=np.zeros(700, dtype=np.int64))
    seeds = rng.choice(60, 16, replace=False)
    disjoint = DisjointSampler(LocalSampler(indptr, indices, [3, 2], tune_malloc=False, backend="cpu"))
    for key in (1, 99):
        want = disjoint.sample_from_nodes([seeds], [key])[0]
        got = sample_temporal(graph, seeds, np.zeros(16, dtype=np.int64), [3, 2], seed=key)
        _same(got, want)


def test_seed_time_before_every_edge_samples_nothing() -> None:
    indptr, indices, edge_time, _nt, _rng = _graph(3)
    graph = temporal_graph(indptr, indices, edge_time=edge_time)
    out = sample_temporal(graph, np.array([0, 1, 1]), np.full(3, -1), [5, 5])
    assert out.n_id.tolist() == [0, 1, 1] and out.num_sampled_edges == [0, 0]


def test_tree_keys_are_the_disjoint_keys() -> None:
    keys = tree_hop_keys(2**63 + 5, 4, 3)
    for i in range(4):
        for h in range(3):
            assert int(keys[i, h]) == hop_key(batch_key(tree_key(2**63 + 5, i)), h)


def test_bad_arguments() -> None:
    indptr, indices, edge_time, node_time, _rng = _graph(1)
    with pytest.raises(ValueError, match="'node_time' or 'edge_time'"):
        temporal_graph(indptr, indices)
    with pytest.raises(ValueError, match="'edge_time' must have shape"):
        temporal_graph(indptr, indices, edge_time=edge_time[:-1])
    with pytest.raises(ValueError, match="integer timestamps"):
        temporal_graph(indptr, indices, node_time=node_time.astype(float))
    with pytest.raises(ValueError, match=r"'indices' must be node IDs in \[0, 40\)"):
        temporal_graph(indptr, np.where(np.arange(300) == 7, 40, indices), edge_time=edge_time)
    graph = temporal_graph(indptr, indices, edge_time=edge_time)
    with pytest.raises(ValueError, match=r"'order' must hold CSC slots in \[0, 300\)"):
        TemporalGraph(indptr, indices, graph.order + 1, graph.key, "edge")
    with pytest.raises(ValueError, match="'key' must be an int64 array"):
        TemporalGraph(indptr, indices, graph.order, graph.key[:-1], "edge")
    with pytest.raises(ValueError, match="'seeds' must be node IDs"):
        sample_temporal(graph, np.array([40]), np.array([0]), [2])
    with pytest.raises(ValueError, match="'seed_time' must have shape"):
        sample_temporal(graph, np.array([1, 2]), np.array([0]), [2])
    with pytest.raises(ValueError, match="'strategy' must be one of"):
        sample_temporal(graph, np.array([1]), np.array([0]), [2], strategy="recent")
    with pytest.raises(ValueError, match="replace=True"):
        sample_temporal(graph, np.array([1]), np.array([0]), [2], strategy="last", replace=True)
