"""Dual-interleaved attention: structure-search oracles on small graphs (complete graph,
path, star, cycle, missing self-loops, disconnected with and without a global token,
sampled reachability) and the schedule (the digest's O12 examples, exactly
min(switch_freq, n) full iterations, forced full when an enforced condition fails)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders.cluster import SequenceBatch
from graphpipe.train.interleave import InterleaveScheduler, StructureSearch, full_iterations


def _csr(n: int, edges: list[tuple[int, int]], *, self_loops: bool = True, token: bool = False):
    """Symmetric pattern of ``edges`` (positions shifted by one with a token at 0)."""
    off = int(token)
    size = n + off
    pairs = {(a + off, b + off) for a, b in edges} | {(b + off, a + off) for a, b in edges}
    if self_loops:
        pairs |= {(i, i) for i in range(size)}
    if token:
        pairs |= {(0, i) for i in range(size)} | {(i, 0) for i in range(size)}
    rows = [[] for _ in range(size)]
    for r, c in sorted(pairs):
        rows[r].append(c)
    indptr = np.zeros(size + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.array([c for r in rows for c in r], dtype=np.int64)
    return indptr, indices


def _complete(n):
    return [(a, b) for a in range(n) for b in range(a + 1, n)]


def _path(n):
    return [(i, i + 1) for i in range(n - 1)]


def test_complete_graph_passes_everything() -> None:
    for test in ("dirac", "random-graph", "none"):
        r = StructureSearch(1, hamiltonian=test)(*_csr(7, _complete(7)))
        assert (r.self_loops, r.hamiltonian, r.reachable) == (True, True, True), test
        assert r.failed() == [] and r.min_degree == 6 and r.exact


def test_path_needs_enough_layers() -> None:
    n = 8
    short = StructureSearch(n - 2, hamiltonian="none")(*_csr(n, _path(n)))
    assert not short.reachable and short.failed() == ["reachable"]
    enough = StructureSearch(n - 1, hamiltonian="none")(*_csr(n, _path(n)))
    assert enough.reachable
    # the path is Hamiltonian, but the sufficient Dirac-type tests cannot see it
    assert not StructureSearch(n - 1, hamiltonian="dirac")(*_csr(n, _path(n))).hamiltonian
    assert not StructureSearch(n - 1, hamiltonian="random-graph")(*_csr(n, _path(n))).hamiltonian


def test_dirac_oracles() -> None:
    search = StructureSearch(4, hamiltonian="dirac")
    star = [(0, i) for i in range(1, 6)]
    assert not search(*_csr(6, star)).hamiltonian                   # min degree 1 < 3
    assert search(*_csr(4, [(0, 1), (1, 2), (2, 3), (3, 0)])).hamiltonian  # C4: 2 >= 2
    assert not search(*_csr(5, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 0)])).hamiltonian  # C5: 2 < 2.5
    assert search(*_csr(1, [])).hamiltonian
    assert search(*_csr(2, [(0, 1)])).hamiltonian and not search(*_csr(2, [])).hamiltonian
    # K_6 minus a perfect matching: degree 4 >= 3
    k6 = [e for e in _complete(6) if e not in {(0, 1), (2, 3), (4, 5)}]
    assert search(*_csr(6, k6)).hamiltonian


def test_random_graph_test() -> None:
    search = StructureSearch(2, hamiltonian="random-graph", random_graph_c=1.0)
    assert search(*_csr(10, _complete(10))).hamiltonian
    # dense random graph: n·p >= ln n and min degree >= n·p/2
    rng = np.random.default_rng(0)
    edges = [(a, b) for a, b in _complete(30) if rng.random() < 0.6]
    r = search(*_csr(30, edges))
    deg = np.bincount(np.array(edges).ravel(), minlength=30)
    p_hat = 2 * len(edges) / (30 * 29)
    assert r.hamiltonian == (30 * p_hat >= np.log(30) and deg.min() >= 30 * p_hat / 2)
    assert r.hamiltonian
    with pytest.raises(ValueError, match="'hamiltonian'"):
        StructureSearch(2, hamiltonian="ore")


def test_missing_self_loop_fails_c1() -> None:
    indptr, indices = _csr(5, _complete(5), self_loops=False)
    r = StructureSearch(2, hamiltonian="none")(indptr, indices)
    assert not r.self_loops and r.failed() == ["self_loops"]


def test_disconnected_graph_and_the_global_token() -> None:
    edges = [(0, 1), (1, 2), (3, 4)]
    r = StructureSearch(4, hamiltonian="none")(*_csr(5, edges))
    assert not r.reachable
    with_token = StructureSearch(2, hamiltonian="none")(*_csr(5, edges, token=True), token=0)
    assert with_token.reachable and with_token.num_nodes == 5
    one_layer = StructureSearch(1, hamiltonian="none")(*_csr(5, edges, token=True), token=0)
    assert not one_layer.reachable                   # 1 -> token -> 4 needs two layers


def test_padding_is_left_out() -> None:
    indptr, indices = _csr(6, _complete(4))          # positions 4, 5: isolated "padding"
    real = np.array([True] * 4 + [False] * 2)
    assert StructureSearch(1)(indptr, indices, real=real).failed() == []
    assert not StructureSearch(1, hamiltonian="none")(indptr, indices).reachable


def test_sampled_reachability() -> None:
    n = 40
    far = StructureSearch(n, hamiltonian="none", exact_limit=0, samples=4)(*_csr(n, _path(n)))
    assert far.reachable
    near = StructureSearch(3, hamiltonian="none", exact_limit=0, samples=4)(*_csr(n, _path(n)))
    assert not near.reachable and not near.exact
    proved = StructureSearch(4, hamiltonian="none", exact_limit=0)(*_csr(n, _complete(n)))
    assert proved.reachable and proved.exact          # 2·ecc = 2 <= 4


def test_schedule_examples() -> None:
    assert full_iterations(10, 5) == {1, 3, 5, 7, 9}          # 1-based 2, 4, 6, 8, 10
    assert full_iterations(3, 5) == {0, 1, 2}
    assert full_iterations(2, 5) == {0, 1}
    assert full_iterations(10, 0) == set()
    assert full_iterations(0, 5) == set()


def test_schedule_counts() -> None:
    for n in range(41):
        for f in range(13):
            points = full_iterations(n, f)
            assert len(points) == min(f, n), (n, f)
            assert all(0 <= p < n for p in points)
    with pytest.raises(ValueError, match="'switch_freq'"):
        full_iterations(5, -1)


def _batch(indptr: np.ndarray, indices: np.ndarray, *, token: bool) -> SequenceBatch:
    s = indptr.shape[0] - 1
    mask = torch.ones(1, s, dtype=torch.bool)
    if token:
        mask[0, 0] = False
    zeros = torch.zeros(1, s, dtype=torch.int64)
    return SequenceBatch(
        node_ids=torch.arange(s)[None], x=torch.zeros(1, s, 2), y=zeros - 100, mask=mask,
        indptr=torch.from_numpy(indptr), indices=torch.from_numpy(indices),
        edge_kind=torch.ones(indices.shape[0], dtype=torch.int64), in_degree=zeros,
        out_degree=zeros, perm=torch.arange(s)[None], inverse=torch.arange(s)[None], offsets=None,
        cluster_sparse=None, spd=None, graph_y=None, global_token=token, batch_size=1, seq_len=s)


def test_scheduler_forces_full_when_an_enforced_condition_fails() -> None:
    disconnected = _batch(*_csr(6, [(0, 1), (2, 3)]), token=False)
    hub = _batch(*_csr(6, [(0, 1), (2, 3)], token=True), token=True)
    sched = InterleaveScheduler(2, search=StructureSearch(2))
    assert sched.start_epoch(6) == {2, 5}
    modes = [sched.decide(i, disconnected).mode for i in range(6)]
    assert modes == ["full"] * 6
    decision = sched.decide(0, hub)
    assert decision.mode == "sparse" and decision.search.failed() == ["hamiltonian"]
    strict = InterleaveScheduler(2, search=StructureSearch(2),
                                 enforce=("self_loops", "reachable", "hamiltonian"))
    strict.start_epoch(6)
    assert strict.decide(0, hub).mode == "full"
    plain = InterleaveScheduler(3)
    plain.start_epoch(9)
    assert [plain.decide(i, disconnected).mode for i in range(9)].count("full") == 3
    with pytest.raises(ValueError, match="start_epoch"):
        InterleaveScheduler(1).decide(0)
    with pytest.raises(ValueError, match="'enforce'"):
        InterleaveScheduler(1, enforce=("connected",))
