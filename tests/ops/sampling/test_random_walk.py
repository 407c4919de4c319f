"""PinSAGE random-walk sampler (graphpipe.ops.sampling.random_walk)."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.sampling.random_walk import sample_random_walk, sample_random_walk_reference


def csc(src, dst, n):
    src, dst = np.asarray(src), np.asarray(dst)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(np.int32)


def random_graph(seed=0, n=150, m=900):
    rng = np.random.default_rng(seed)
    return csc(rng.integers(0, n, m), rng.integers(0, n - 10, m), n)


def within_hops(indptr, indices, v: int, hops: int) -> set[int]:
    frontier, seen = {v}, set()
    for _ in range(hops):
        frontier = {int(u) for w in frontier for u in indices[indptr[w]:indptr[w + 1]]}
        seen |= frontier
    return seen


def assert_same(a, b):
    assert np.array_equal(a.n_id, b.n_id)
    assert a.num_sampled_nodes == b.num_sampled_nodes and a.num_sampled_edges == b.num_sampled_edges
    for x, y in zip(a.blocks, b.blocks):
        assert (x.num_dst, x.num_src) == (y.num_dst, y.num_src)
        assert np.array_equal(x.indptr, y.indptr) and np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.edge_weight, y.edge_weight) and np.array_equal(x.edge_ids, y.edge_ids)


@pytest.mark.parametrize("num_neighbors, restart_prob, num_walks", [([5, 3], 0.5, 10), ([2], 0.0, 4), ([10, 10], 0.3, 20)])
def test_matches_reference_and_structure(num_neighbors, restart_prob, num_walks):
    indptr, indices = random_graph(1)
    seeds = np.array([0, 5, 149, 77, 12])
    kw = {"walk_length": 3, "restart_prob": restart_prob, "num_walks": num_walks, "seed": 3}
    out = sample_random_walk(indptr, indices, seeds, num_neighbors, **kw)
    assert_same(out, sample_random_walk_reference(indptr, indices, seeds, num_neighbors, **kw))
    assert np.array_equal(out.n_id[:5], seeds) and np.unique(out.n_id).size == out.n_id.size
    assert out.blocks[0].num_src == out.n_id.size and out.blocks[-1].num_dst == 5
    for outer, inner in zip(out.blocks[:-1], out.blocks[1:]):
        assert outer.num_dst == inner.num_src
    for blk, k in zip(reversed(out.blocks), num_neighbors):
        assert blk.edge_weight.dtype == np.float32 and np.all(blk.edge_ids == -1)
        for d in range(blk.num_dst):
            lo, hi = blk.indptr[d], blk.indptr[d + 1]
            v = int(out.n_id[d])
            nbrs = out.n_id[blk.indices[lo:hi]]
            w = blk.edge_weight[lo:hi]
            assert hi - lo <= k and np.unique(nbrs).size == nbrs.size and v not in nbrs.tolist()
            assert set(nbrs.tolist()) <= within_hops(indptr, indices, v, 3)  # reachable in <= walk_length steps
            assert np.all(w >= 1) and w.sum() <= num_walks * 3
            assert np.all(np.diff(w) <= 0)  # most visited first


def test_deterministic_cycle():
    # directed cycle i -> i+1: the only in-neighbour of i is i-1, so every walk from v visits v-1, v-2, v-3
    n = 10
    indptr, indices = csc(np.arange(n), (np.arange(n) + 1) % n, n)
    out = sample_random_walk(indptr, indices, np.array([5]), [3], walk_length=3, restart_prob=0.0, num_walks=7)
    blk = out.blocks[0]
    assert out.n_id.tolist() == [5, 2, 3, 4]  # equal counts: smaller global ID first
    assert blk.indices.tolist() == [1, 2, 3] and blk.edge_weight.tolist() == [7.0, 7.0, 7.0]
    # with k=2 the tie is broken by the smaller global ID
    out = sample_random_walk(indptr, indices, np.array([5]), [2], walk_length=3, restart_prob=0.0, num_walks=7)
    assert out.n_id.tolist() == [5, 2, 3]


def test_restart_prob_shortens_walks():
    n = 10
    indptr, indices = csc(np.arange(n), (np.arange(n) + 1) % n, n)
    out = sample_random_walk(indptr, indices, np.array([5]), [3], walk_length=3, restart_prob=0.5, num_walks=4000, seed=1)
    w = dict(zip(out.n_id[out.blocks[0].indices].tolist(), out.blocks[0].edge_weight.tolist()))
    # P(reach step s) = 0.5**s: about 2000, 1000, 500 visits
    assert abs(w[4] - 2000) < 150 and abs(w[3] - 1000) < 120 and abs(w[2] - 500) < 90


def test_reproducible_and_seed_dependent():
    indptr, indices = random_graph(2)
    seeds = np.arange(0, 100, 9)
    a = sample_random_walk(indptr, indices, seeds, [4, 4], seed=5)
    assert_same(a, sample_random_walk(indptr, indices, seeds, [4, 4], seed=5))
    b = sample_random_walk(indptr, indices, seeds, [4, 4], seed=6)
    assert not np.array_equal(a.n_id, b.n_id) or not np.array_equal(a.blocks[-1].edge_weight, b.blocks[-1].edge_weight)


def test_value_errors():
    indptr, indices = random_graph(0)
    for kwargs, msg in [
        ({"num_neighbors": []}, r"'num_neighbors' must not be empty \(got \[\]\)"),
        ({"num_neighbors": [-1]}, "'num_neighbors' entries must be >= 0"),
        ({"num_neighbors": [3], "walk_length": 0}, r"'walk_length' must be >= 1 \(got 0\)"),
        ({"num_neighbors": [3], "restart_prob": 1.0}, r"'restart_prob' must be in \[0, 1\) \(got 1.0\)"),
        ({"num_neighbors": [3], "num_walks": 0}, "'num_walks' must be in"),
    ]:
        nn = kwargs.pop("num_neighbors")
        with pytest.raises(ValueError, match=msg):
            sample_random_walk(indptr, indices, np.array([1, 2]), nn, **kwargs)
    with pytest.raises(ValueError, match=r"'seeds' must be unique \(got 2"):
        sample_random_walk(indptr, indices, np.array([2, 2]), [3])
    with pytest.raises(ValueError, match=r"'seeds' must be node IDs in \[0, 150\)"):
        sample_random_walk(indptr, indices, np.array([150]), [3])
