"""Match-degree matrix and Greedy Reorder against their references (fastgl.md §10.4)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from graphpipe.ops.features.reorder import (
    OverlapWorkspace,
    greedy_reorder,
    greedy_reorder_reference,
    intersection_size,
    match_degree_matrix,
    match_degree_matrix_reference,
    overlap_matrix,
)


def _random_sets(rng: np.random.Generator, n: int, universe: int = 60) -> list[np.ndarray]:
    return [rng.choice(universe, size=int(rng.integers(0, 25)), replace=False) for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("method", ["bitmap", "merge"])
def test_matrix_matches_python_sets(seed: int, method: str) -> None:
    rng = np.random.default_rng(seed)
    sets = _random_sets(rng, 7)
    sets[1] = np.concatenate([sets[1], sets[1][:3]])  # repeats inside a set are ignored
    fast = match_degree_matrix(sets, method)
    ref = match_degree_matrix_reference(sets)
    np.testing.assert_allclose(fast, ref, rtol=0, atol=1e-15)
    assert np.array_equal(fast, fast.T)
    assert fast.min() >= 0.0 and fast.max() <= 1.0
    assert np.all(np.diag(fast) == 0.0)
    for i, j in itertools.combinations(range(len(sets)), 2):
        a, b = set(sets[i].tolist()), set(sets[j].tolist())
        expected = len(a & b) / min(len(a), len(b)) if min(len(a), len(b)) else 0.0
        assert fast[i, j] == pytest.approx(expected)
        assert intersection_size(sets[i], sets[j]) == len(a & b)


@pytest.mark.parametrize("method", ["bitmap", "merge"])
def test_matrix_identical_and_disjoint_sets(method: str) -> None:
    m = match_degree_matrix([np.arange(10), np.arange(10), np.arange(100, 105), np.arange(3)], method)
    assert m[0, 1] == 1.0 and m[0, 2] == 0.0 and m[0, 3] == 1.0 and m[2, 3] == 0.0


def test_bitmap_and_merge_agree_past_64_sets() -> None:
    rng = np.random.default_rng(5)
    sets = [rng.choice(3000, size=int(rng.integers(1, 200)), replace=False) for _ in range(70)]
    bitmap = match_degree_matrix(sets, "bitmap")
    assert np.array_equal(bitmap, match_degree_matrix(sets, "merge"))
    assert np.allclose(bitmap, match_degree_matrix_reference(sets))


def _assert_greedy(order: np.ndarray, m: np.ndarray) -> None:
    n = len(m)
    assert sorted(order.tolist()) == list(range(n))
    assert order[0] == 0
    for i in range(n - 1):
        rest = [k for k in range(n) if k not in set(order[: i + 1].tolist())]
        best = max(m[order[i], k] for k in rest)
        assert m[order[i], order[i + 1]] == best
        assert order[i + 1] == min(k for k in rest if m[order[i], k] == best)


@pytest.mark.parametrize("seed", range(20))
def test_greedy_equals_reference_small(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(1, 9))
    # coarse values force ties
    m = rng.integers(0, 4, size=(n, n)) / 4.0
    m = np.triu(m, 1) + np.triu(m, 1).T
    order = greedy_reorder(m)
    assert order.tolist() == greedy_reorder_reference(m)
    _assert_greedy(order, m)


def test_greedy_on_sampled_like_sets() -> None:
    rng = np.random.default_rng(7)
    sets = _random_sets(rng, 8, universe=40)
    m = match_degree_matrix(sets)
    order = greedy_reorder(m)
    assert order.tolist() == greedy_reorder_reference(m)
    _assert_greedy(order, m)


def test_zero_rows_give_a_permutation() -> None:
    sets = [np.arange(5), np.arange(100, 110), np.arange(3), np.arange(200, 201), np.zeros(0, int)]
    m = match_degree_matrix(sets)
    order = greedy_reorder(m)
    assert sorted(order.tolist()) == [0, 1, 2, 3, 4] and order[0] == 0
    assert order.tolist() == [0, 2, 1, 3, 4]


def test_fig6_example() -> None:
    # m13 > m12: batch 3 follows batch 1 (0-based: [0, 2, 1])
    sets = [np.array([0, 3, 4, 10]), np.array([0, 20, 21, 22]), np.array([0, 3, 4, 12])]
    assert greedy_reorder(match_degree_matrix(sets)).tolist() == [0, 2, 1]


def test_errors() -> None:
    with pytest.raises(ValueError, match="matrix"):
        greedy_reorder(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="node_sets"):
        match_degree_matrix([np.array([0.5, 1.0])])
    with pytest.raises(ValueError, match="method"):
        match_degree_matrix([np.array([1])], "dense")


@pytest.mark.parametrize("method", ["bitmap", "merge"])
def test_overlap_matrix_counts(method: str) -> None:
    rng = np.random.default_rng(9)
    sets = _random_sets(rng, 6)
    overlap, sizes = overlap_matrix(sets, method)
    py = [set(s.tolist()) for s in sets]
    assert sizes.tolist() == [len(a) for a in py]
    for i, j in itertools.product(range(6), range(6)):
        assert overlap[i, j] == (0 if i == j else len(py[i] & py[j]))


def test_workspace_is_reused_and_left_clean() -> None:
    rng = np.random.default_rng(11)
    workspace = OverlapWorkspace(500, 20)
    for n in (3, 9, 20):
        sets = [rng.choice(500, size=60, replace=False) for _ in range(n)]
        got = match_degree_matrix(sets, "bitmap", workspace=workspace)
        assert np.allclose(got, match_degree_matrix_reference(sets))
        assert not workspace.member.any()
