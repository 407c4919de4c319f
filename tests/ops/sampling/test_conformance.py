"""One conformance suite for every backend of ``sample_neighbors(backend=...)``.

:class:`SamplerTests` holds the cases; each backend subclasses it (like zarr's
``StoreTests``): every backend must return exactly the output of the plain-Python oracle
(``sample_neighbors_reference``) and reject the same bad arguments. ``TestCuda`` runs where
numba.cuda can (a GPU); on other machines ``test_cuda_suite_under_simulator`` runs that same
class in a subprocess under ``NUMBA_ENABLE_CUDASIM=1`` (small graphs: the simulator runs
every GPU thread in Python).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from graphpipe.ops._core.backend import numba_cuda_available
from graphpipe.ops.sampling import SampleOutput, sample_neighbors, sample_neighbors_reference
from graphpipe.ops.sampling.api import canonical_local_ids
from graphpipe.ops.sampling.types import assemble


def csc_graph(num_nodes: int, num_edges: int, seed: int, dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Random CSC by destination with a few zero in-degree nodes."""
    rng = np.random.default_rng(seed)
    dst = rng.integers(0, num_nodes, num_edges)
    dst[dst % 11 == 3] = 0  # nodes 3, 14, ... get no in-edges, node 0 a hub
    src = rng.integers(0, num_nodes, num_edges)
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    return indptr, src[order].astype(dtype)


def assert_same(got: SampleOutput, want: SampleOutput) -> None:
    """Bit-for-bit equality of two sample outputs (IDs, blocks, counts)."""
    assert np.array_equal(np.asarray(got.n_id), want.n_id)
    assert got.batch_size == want.batch_size
    assert list(got.num_sampled_nodes) == list(want.num_sampled_nodes)
    assert list(got.num_sampled_edges) == list(want.num_sampled_edges)
    assert len(got.blocks) == len(want.blocks)
    for g, w in zip(got.blocks, want.blocks):
        assert (g.num_dst, g.num_src) == (w.num_dst, w.num_src)
        for name in ("indptr", "indices", "edge_ids"):
            assert np.array_equal(np.asarray(getattr(g, name)), getattr(w, name)), name


CASES = [
    # num_nodes, num_edges, seeds, fanouts, replace, seed, index dtype
    (90, 500, [0, 17, 61, 3, 44], [4, 3], False, 7, np.int64),
    (90, 500, [5, 2, 88], [2, 2, 2], True, 1, np.int32),
    (60, 300, [1, 0, 14], [-1], False, 0, np.int64),
    (60, 300, [9, 30], [0, 3], False, 5, np.int32),
    (40, 0, [4, 7], [3, 2], False, 2, np.int64),  # no edges at all
]


class SamplerTests:
    """Cases every backend of ``sample_neighbors`` must pass."""

    backend: str = ""

    def sample(self, *args, **kwargs) -> SampleOutput:
        return sample_neighbors(*args, backend=self.backend, **kwargs)

    @pytest.mark.parametrize("case", range(len(CASES)))
    def test_matches_reference(self, case: int) -> None:
        n, e, seeds, fanouts, replace, seed, dtype = CASES[case]
        indptr, indices = csc_graph(n, e, seed=case, dtype=dtype)
        seeds = np.array(seeds, dtype=np.int64)
        want = sample_neighbors_reference(indptr, indices, seeds, fanouts, replace=replace,
                                          seed=seed)
        got = self.sample(indptr, indices, seeds, fanouts, replace=replace, seed=seed)
        assert_same(got, want)

    @pytest.mark.parametrize("case", range(len(CASES)))
    def test_frontier_all_matches_reference(self, case: int) -> None:
        n, e, seeds, fanouts, replace, seed, dtype = CASES[case]
        indptr, indices = csc_graph(n, e, seed=case, dtype=dtype)
        seeds = np.array(seeds, dtype=np.int64)
        want = sample_neighbors_reference(indptr, indices, seeds, fanouts, replace=replace,
                                          seed=seed, frontier="all")
        got = self.sample(indptr, indices, seeds, fanouts, replace=replace, seed=seed,
                          frontier="all")
        assert_same(got, want)

    def test_frontier_new_expands_only_the_previous_hops_new_nodes(self) -> None:
        indptr, indices = csc_graph(90, 900, seed=6)
        seeds = np.array([0, 5, 9, 12])
        out = self.sample(indptr, indices, seeds, [3, 2, 2], seed=4)  # the default
        first = 0
        for block in reversed(out.blocks):  # seed hop first
            deg = np.diff(np.asarray(block.indptr))
            assert not deg[:first].any()  # nodes of earlier hops are not expanded again
            first = block.num_dst

    def test_seed_changes_the_draws_only(self) -> None:
        indptr, indices = csc_graph(90, 900, seed=3)
        seeds = np.array([0, 1, 2, 3, 4, 5])
        a = self.sample(indptr, indices, seeds, [3, 3], seed=1)
        b = self.sample(indptr, indices, seeds, [3, 3], seed=2)
        assert np.array_equal(a.n_id[:6], seeds) and np.array_equal(b.n_id[:6], seeds)
        assert not all(np.array_equal(x.edge_ids, y.edge_ids) for x, y in zip(a.blocks, b.blocks))

    @pytest.mark.parametrize("seeds,fanouts,match", [
        ([0, 1, 1], [2], "'seeds' must be unique"),
        ([0, 90], [2], r"'seeds' must be node IDs in \[0, 90\)"),
        ([0, 1], [], r"'fanouts' must not be empty \(got \[\]\)"),
        ([0, 1], [2, -2], "'fanouts' entries must be integers >= -1"),
    ])
    def test_rejects_bad_arguments(self, seeds, fanouts, match) -> None:
        indptr, indices = csc_graph(90, 300, seed=4)
        with pytest.raises(ValueError, match=match):
            self.sample(indptr, indices, np.array(seeds), fanouts)

    def test_rejects_unknown_frontier(self) -> None:
        indptr, indices = csc_graph(90, 300, seed=4)
        with pytest.raises(ValueError, match="'frontier' must be one of"):
            self.sample(indptr, indices, np.array([0, 1]), [2], frontier="old")


class TestReference(SamplerTests):
    backend = "reference"


class TestCpu(SamplerTests):
    backend = "cpu"


class TestAuto(SamplerTests):
    """Host arrays: ``"auto"`` is the CPU path."""

    backend = "auto"


@pytest.mark.skipif(not numba_cuda_available(), reason="numba.cuda cannot run here (see "
                    "test_cuda_suite_under_simulator)")
class TestCuda(SamplerTests):
    backend = "cuda"


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", reason="already simulated")
def test_cuda_suite_under_simulator(suite_under) -> None:
    suite_under(__file__, "TestCuda", NUMBA_ENABLE_CUDASIM="1")


def test_unknown_backend_and_cuda_without_numba_cuda() -> None:
    indptr, indices = csc_graph(20, 60, seed=0)
    with pytest.raises(ValueError, match="'backend' must be one of"):
        sample_neighbors(indptr, indices, np.array([0]), [2], backend="gpu")
    if not numba_cuda_available():
        with pytest.raises(ValueError, match="'backend'='cuda' needs numba.cuda"):
            sample_neighbors(indptr, indices, np.array([0]), [2], backend="cuda")


def scramble(out: SampleOutput, seed: int) -> SampleOutput:
    """``out`` with each hop's new local IDs permuted at random (what GPU Fused-Map may
    give): rows of later blocks follow their destinations, edges keep their row order."""
    rng = np.random.default_rng(seed)
    relabel = np.arange(out.n_id.shape[0])  # canonical local ID -> scrambled
    hops = []
    for block in reversed(out.blocks):
        lo, hi = block.num_dst, block.num_src
        relabel[lo:hi] = lo + rng.permutation(hi - lo)
        canon_of_row = np.empty(block.num_dst, dtype=np.int64)
        canon_of_row[relabel[:block.num_dst]] = np.arange(block.num_dst)
        deg = np.diff(block.indptr)[canon_of_row]
        indptr = np.zeros(block.num_dst + 1, dtype=np.int64)
        np.cumsum(deg, out=indptr[1:])
        take = np.repeat(block.indptr[canon_of_row] - indptr[:-1], deg) + np.arange(indptr[-1])
        hops.append((indptr, relabel[block.indices[take]], block.edge_ids[take], lo, hi))
    n_id = np.empty_like(out.n_id)
    n_id[relabel] = out.n_id
    return assemble(n_id, out.batch_size, hops)


@pytest.mark.parametrize("case", range(len(CASES)))
def test_canonical_local_ids_undoes_any_relabelling(case: int) -> None:
    """What makes the CUDA backend's output equal the CPU's: the CPU numbering is
    recovered from any per-hop permutation of new IDs."""
    n, e, seeds, fanouts, replace, seed, dtype = CASES[case]
    indptr, indices = csc_graph(n, e, seed=case, dtype=dtype)
    want = sample_neighbors(indptr, indices, np.array(seeds), fanouts, replace=replace,
                            seed=seed, backend="cpu")
    for s in range(3):
        scrambled = scramble(want, s)
        assert_same(canonical_local_ids(scrambled), want)
    if want.n_id.shape[0] > len(seeds) + 1:
        assert not np.array_equal(scramble(want, 0).n_id, want.n_id) or \
            not np.array_equal(scramble(want, 1).n_id, want.n_id)


def test_frontier_new_is_all_restricted_to_the_frontier() -> None:
    """The oracle's two conventions agree where they must: a destination that both expand
    draws the same edges (same stream key), hop 1 is identical, and ``"new"`` never
    reaches a node ``"all"`` does not."""
    indptr, indices = csc_graph(90, 900, seed=8)
    seeds = np.array([2, 7, 40])
    new = sample_neighbors_reference(indptr, indices, seeds, [3, 3, 2], seed=9, frontier="new")
    full = sample_neighbors_reference(indptr, indices, seeds, [3, 3, 2], seed=9, frontier="all")
    assert np.array_equal(new.blocks[-1].edge_ids, full.blocks[-1].edge_ids)
    assert set(new.n_id.tolist()) <= set(full.n_id.tolist())
    for hop, (b_new, b_all) in enumerate(zip(reversed(new.blocks), reversed(full.blocks))):
        for v in range(b_new.num_dst):
            lo, hi = b_new.indptr[v], b_new.indptr[v + 1]
            if hi == lo:
                continue
            g = new.n_id[v]  # same global node in "all": its local row there
            w = int(np.flatnonzero(full.n_id == g)[0])
            assert w < b_all.num_dst, (hop, g)
            assert np.array_equal(b_new.edge_ids[lo:hi], b_all.edge_ids[b_all.indptr[w]:b_all.indptr[w + 1]])
    assert sum(new.num_sampled_edges) < sum(full.num_sampled_edges)
