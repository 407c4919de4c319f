"""Neighbour sampler (graphpipe.ops.sampling): fastgl.md 10.1 S1-S5 plus block conventions."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from graphpipe.ops.sampling import (
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


def csc_from_edges(src: np.ndarray, dst: np.ndarray, num_nodes: int, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(dst, kind="stable")
    indices = np.asarray(src)[order].astype(dtype)
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, indices


def mixed_graph(seed: int = 0, num_nodes: int = 300, dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Random graph with a hub of in-degree 120, a node of degree exactly 20, zero-in-degree and isolated nodes."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes - 10, 2500)  # nodes >= num_nodes-10 are never sources
    dst = rng.integers(0, num_nodes - 20, 2500)  # nodes >= num_nodes-20 have in-degree 0
    hub_src = rng.choice(num_nodes, 120, replace=False)
    deg20_src = rng.choice(num_nodes, 20, replace=False)
    src = np.concatenate([src, hub_src, deg20_src, [5, 5]])  # a duplicate edge 5->7
    dst = np.concatenate([dst, np.zeros(120, np.int64), np.full(20, num_nodes - 15), [7, 7]])
    return csc_from_edges(src, dst, num_nodes, dtype)


def assert_same_output(a: SampleOutput, b: SampleOutput) -> None:
    assert np.array_equal(a.n_id, b.n_id)
    assert a.batch_size == b.batch_size
    assert a.num_sampled_nodes == b.num_sampled_nodes
    assert a.num_sampled_edges == b.num_sampled_edges
    assert len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        assert (x.num_dst, x.num_src) == (y.num_dst, y.num_src)
        assert np.array_equal(x.indptr, y.indptr)
        assert np.array_equal(x.indices, y.indices)
        assert np.array_equal(x.edge_ids, y.edge_ids)


def check_structure(indptr, indices, seeds, fanouts, out: SampleOutput, replace: bool = False,
                    frontier: str = "new") -> None:
    """S1-S3 and the SampleOutput conventions, checked from global IDs only."""
    seeds = np.asarray(seeds)
    n_id = out.n_id
    assert n_id.dtype == np.int64
    assert out.batch_size == len(seeds)
    assert np.array_equal(n_id[: len(seeds)], seeds)  # seeds first, given order
    assert np.unique(n_id).size == n_id.size  # n_id unique
    assert len(out.blocks) == len(fanouts)
    assert out.blocks[0].num_src == len(n_id)
    assert out.blocks[-1].num_dst == len(seeds)
    assert sum(out.num_sampled_nodes) == len(n_id)
    assert out.num_sampled_nodes[0] == len(seeds)
    for outer, inner in zip(out.blocks[:-1], out.blocks[1:]):
        assert outer.num_dst == inner.num_src  # chaining
    hop_blocks = list(reversed(out.blocks))
    known = len(seeds)
    start = 0  # destinations before it are not expanded ("new": the earlier hops' nodes)
    for h, (fanout, blk) in enumerate(zip(fanouts, hop_blocks)):
        assert out.num_sampled_edges[h] == blk.num_edges
        assert blk.num_dst == known
        assert blk.num_src == known + out.num_sampled_nodes[h + 1]
        assert blk.indptr.dtype == blk.indices.dtype == blk.edge_ids.dtype == np.int64
        assert blk.indptr.shape == (blk.num_dst + 1,) and blk.indptr[0] == 0
        assert blk.indptr[-1] == blk.num_edges == blk.edge_ids.shape[0]
        if blk.num_edges:
            assert blk.indices.min() >= 0 and blk.indices.max() < blk.num_src
        # new nodes of this hop are exactly the sources not known before, in first-occurrence order
        new_local = blk.indices[blk.indices >= known]
        _, first = np.unique(new_local, return_index=True)
        assert np.array_equal(new_local[np.sort(first)], np.arange(known, blk.num_src))
        for d in range(blk.num_dst):
            v = int(n_id[d])
            lo, hi = int(indptr[v]), int(indptr[v + 1])
            deg = hi - lo
            eids = blk.edge_ids[blk.indptr[d]: blk.indptr[d + 1]]
            src_global = n_id[blk.indices[blk.indptr[d]: blk.indptr[d + 1]]]
            if d < start:
                assert eids.size == 0  # not on the frontier: not expanded again
                continue
            # S1: edge exists, edge id points at it
            assert np.all((eids >= lo) & (eids < hi))
            assert np.array_equal(indices[eids].astype(np.int64), src_global)
            # S2: counts and distinctness
            if fanout < 0:
                assert np.array_equal(eids, np.arange(lo, hi))
            elif replace:
                assert eids.size == (fanout if deg > 0 else 0)
            else:
                assert eids.size == min(fanout, deg)
                assert np.unique(eids).size == eids.size
                if deg <= fanout:
                    assert np.array_equal(np.sort(eids), np.arange(lo, hi))
        if frontier == "new":
            start = known
        known = blk.num_src


@pytest.mark.parametrize("fanouts", [[5, 3], [15, 10, 5], [40, 2], [-1, 4], [0, 3], [1]])
@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("frontier", ["new", "all"])
def test_matches_reference_and_structure(fanouts, replace, frontier):
    indptr, indices = mixed_graph(1)
    n = indptr.shape[0] - 1
    seeds = np.array([0, n - 15, 7, n - 1, n - 19, 3, 150, 42])  # hub, degree-20 node, duplicate edge, isolated
    out = sample_neighbors(indptr, indices, seeds, fanouts, replace=replace, seed=11, frontier=frontier)
    ref = sample_neighbors_reference(indptr, indices, seeds, fanouts, replace=replace, seed=11,
                                     frontier=frontier)
    assert_same_output(out, ref)
    check_structure(indptr, indices, seeds, fanouts, out, replace, frontier)


def test_int64_indices_and_table_growth():
    indptr, indices = mixed_graph(2, num_nodes=2000, dtype=np.int64)
    seeds = np.random.default_rng(3).permutation(2000)[:64]
    out = sample_neighbors(indptr, indices, seeds, [8, 8, 8], seed=5)
    assert_same_output(out, sample_neighbors_reference(indptr, indices, seeds, [8, 8, 8], seed=5))
    check_structure(indptr, indices, seeds, [8, 8, 8], out)
    assert len(out.n_id) > 64 * 4  # several table growths happened along the way


def test_star_graph_heavy_duplication():
    # every leaf's only in-neighbour is the centre; the centre has all leaves as in-neighbours
    leaves = np.arange(1, 51)
    src = np.concatenate([leaves, np.zeros(50, np.int64)])
    dst = np.concatenate([np.zeros(50, np.int64), leaves])
    indptr, indices = csc_from_edges(src, dst, 51)
    out = sample_neighbors(indptr, indices, leaves, [1, 10], seed=0)
    check_structure(indptr, indices, leaves, [1, 10], out)
    assert out.num_sampled_nodes == [50, 1, 0]
    assert out.n_id[50] == 0
    assert np.all(out.blocks[-1].indices == 50)


def test_empty_batch():
    indptr, indices = mixed_graph(0)
    out = sample_neighbors(indptr, indices, np.array([], dtype=np.int64), [3, 2])
    assert out.n_id.size == 0 and out.num_sampled_edges == [0, 0] and out.num_sampled_nodes == [0, 0, 0]


@settings(max_examples=40, deadline=None)
@given(
    num_nodes=st.integers(1, 40),
    num_edges=st.integers(0, 200),
    fanouts=st.lists(st.integers(-1, 40), min_size=1, max_size=3),
    replace=st.booleans(),
    seed=st.integers(0, 2**63),
    data=st.data(),
)
def test_property_fast_equals_reference(num_nodes, num_edges, fanouts, replace, seed, data):
    rng = np.random.default_rng(seed % 2**32)
    src = rng.integers(0, num_nodes, num_edges)
    dst = rng.integers(0, num_nodes, num_edges)
    indptr, indices = csc_from_edges(src, dst, num_nodes)
    k = data.draw(st.integers(0, num_nodes))
    seeds = rng.permutation(num_nodes)[:k]
    out = sample_neighbors(indptr, indices, seeds, fanouts, replace=replace, seed=seed)
    assert_same_output(out, sample_neighbors_reference(indptr, indices, seeds, fanouts, replace=replace, seed=seed))
    check_structure(indptr, indices, seeds, fanouts, out, replace)


def _inclusion_counts(indptr, indices, node: int, fanout: int, trials: int, replace: bool) -> tuple[np.ndarray, np.ndarray]:
    dst = np.full(trials, node, dtype=np.int64)
    keys = np.concatenate([stream_keys(hop_key(batch_key(t), 0), dst[:1]) for t in range(trials)])
    _ip, _src, eids = sample_hop_global(indptr, indices, dst, fanout, replace=replace, stream_keys=keys)
    lo, hi = int(indptr[node]), int(indptr[node + 1])
    per_trial = (eids - lo).reshape(trials, -1)
    return np.bincount(per_trial.ravel(), minlength=hi - lo), per_trial


@pytest.mark.parametrize("deg, fanout", [(20, 5), (100, 40)])
def test_uniform_without_replacement_chi_square(deg, fanout):
    src = np.arange(1, deg + 1)
    indptr, indices = csc_from_edges(src, np.zeros(deg, np.int64), deg + 1)
    trials = 20000
    counts, per_trial = _inclusion_counts(indptr, indices, 0, fanout, trials, replace=False)
    assert all(np.unique(row).size == fanout for row in per_trial[:200])
    assert stats.chisquare(counts).pvalue > 0.001  # each neighbour included w.p. fanout/deg
    if deg == 20:  # pairs: every 2-subset equally likely too (uniform subset, not just uniform marginals)
        pair_counts = np.zeros((deg, deg), np.int64)
        for row in per_trial:
            for a, b in itertools.combinations(sorted(row.tolist()), 2):
                pair_counts[a, b] += 1
        assert stats.chisquare(pair_counts[np.triu_indices(deg, 1)]).pvalue > 0.001


def test_uniform_with_replacement_chi_square():
    deg = 20
    indptr, indices = csc_from_edges(np.arange(1, deg + 1), np.zeros(deg, np.int64), deg + 1)
    counts, per_trial = _inclusion_counts(indptr, indices, 0, 5, 20000, replace=True)
    assert stats.chisquare(counts).pvalue > 0.001
    assert any(np.unique(row).size < 5 for row in per_trial)  # repeats do happen


def test_sample_hop_global_matches_reference_with_host_keys():
    indptr, indices = mixed_graph(4)
    dst = np.array([0, 0, 5, 285, 17, 0, 299])
    keys = np.random.default_rng(0).integers(0, 2**63, dst.size, dtype=np.int64).astype(np.uint64) * np.uint64(3)
    for fanout, replace in [(5, False), (40, False), (3, True), (-1, False)]:
        fast = sample_hop_global(indptr, indices, dst, fanout, replace=replace, stream_keys=keys)
        ref = sample_hop_global_reference(indptr, indices, dst, fanout, replace=replace, stream_keys=keys)
        for x, y in zip(fast, ref):
            assert np.array_equal(x, y)


def test_reproducible_and_thread_count_independent():
    indptr, indices = mixed_graph(5, num_nodes=1000)
    perm = np.random.default_rng(0).permutation(1000)
    batches = [perm[i * 50:(i + 1) * 50] for i in range(7)]
    keys = [100 + i for i in range(7)]
    one = sample_neighbors_batches(indptr, indices, batches, [6, 4], seeds=keys, num_threads=1)
    two = sample_neighbors_batches(indptr, indices, batches, [6, 4], seeds=keys, num_threads=2)
    for a, b, seeds, k in zip(one, two, batches, keys):
        assert_same_output(a, b)
        assert_same_output(a, sample_neighbors(indptr, indices, seeds, [6, 4], seed=k))
    other = sample_neighbors(indptr, indices, batches[0], [6, 4], seed=999)
    assert not all(np.array_equal(x.edge_ids, y.edge_ids) for x, y in zip(other.blocks, one[0].blocks))


def test_destination_draws_do_not_depend_on_local_order():
    # the same node as a destination in the same hop draws the same neighbours whatever its position
    indptr, indices = mixed_graph(6)
    a = sample_neighbors(indptr, indices, np.array([0, 1, 2]), [3], seed=9)
    b = sample_neighbors(indptr, indices, np.array([2, 0, 1]), [3], seed=9)
    ea, eb = a.blocks[0], b.blocks[0]
    assert np.array_equal(ea.edge_ids[ea.indptr[0]:ea.indptr[1]], eb.edge_ids[eb.indptr[1]:eb.indptr[2]])


def test_value_errors():
    indptr, indices = mixed_graph(0)
    n = indptr.shape[0] - 1
    with pytest.raises(ValueError, match=r"'fanouts' must not be empty \(got \[\]\)"):
        sample_neighbors(indptr, indices, np.array([1]), [])
    with pytest.raises(ValueError, match="'fanouts'"):
        sample_neighbors(indptr, indices, np.array([1]), [3, -2])
    with pytest.raises(ValueError, match=r"'seeds' must be unique \(got 4"):
        sample_neighbors(indptr, indices, np.array([1, 4, 2, 4]), [3])
    with pytest.raises(ValueError, match=rf"'seeds' must be node IDs in \[0, {n}\) \(got {n}\)"):
        sample_neighbors(indptr, indices, np.array([1, n]), [3])
    with pytest.raises(ValueError, match=r"\(got -1\)"):
        sample_neighbors(indptr, indices, np.array([-1, 2]), [3])
    with pytest.raises(ValueError, match="'seeds' must be 1-D"):
        sample_neighbors(indptr, indices, np.array([[1, 2]]), [3])
    with pytest.raises(ValueError, match="'seeds' must hold integer"):
        sample_neighbors(indptr, indices, np.array([1.5]), [3])
    bad = indptr.copy()
    bad[-1] += 1
    with pytest.raises(ValueError, match="'indptr' must end at"):
        sample_neighbors(bad, indices, np.array([1]), [3])
    bad = indptr + 1
    with pytest.raises(ValueError, match="'indptr' must start at 0"):
        sample_neighbors(bad, indices, np.array([1]), [3])
    with pytest.raises(ValueError, match="'seeds' must have one key per batch"):
        sample_neighbors_batches(indptr, indices, [np.array([1])], [3], seeds=[1, 2])
    with pytest.raises(ValueError, match="'num_threads' must be >= 1"):
        sample_neighbors_batches(indptr, indices, [np.array([1])], [3], seeds=[1], num_threads=0)
    with pytest.raises(ValueError, match="'seed_batches' must be unique|'seeds' must be unique"):
        sample_neighbors_batches(indptr, indices, [np.array([1, 1])], [3], seeds=[1])
    with pytest.raises(ValueError, match="'stream_keys' must have shape"):
        sample_hop_global(indptr, indices, np.array([1, 2]), 3, stream_keys=np.zeros(3, np.uint64))
