"""The Lazy Tuner (thesis §8.6 oracles): groups, exits, Eq. 5.1, depth actually run."""

from __future__ import annotations

import numpy as np
import torch

from graphpipe.train.text.lazy_tuner import (
    EarlyExitLM,
    GroupBatches,
    eq51_weights,
    exit_layers,
    node_groups,
)
from graphpipe.train.text.lm import LMEncoder, build_lm


def test_groups_star_and_distinct_degrees() -> None:
    star = np.array([99] + [1] * 99)
    g = node_groups(star)
    assert g[0] == 3 and set(g[1:]) == {0}
    g = node_groups(np.arange(1, 101))
    assert np.bincount(g).tolist() == [25, 25, 25, 25] and np.all(np.diff(g) >= 0)
    # rule B on a power-law graph: almost everything in C1
    rng = np.random.default_rng(0)
    deg = np.minimum(rng.pareto(1.2, 1000).astype(np.int64) + 2, 500)
    assert (node_groups(deg, "equal-width") == 0).mean() >= 0.9


def test_exits_and_eq51() -> None:
    assert exit_layers(12) == [3, 6, 9, 12]
    # per-exit losses [4, 3, 2, 1]: one batch per group of equal size, weights give the mean
    groups = np.repeat(np.arange(4), 10)
    w = eq51_weights(groups, 4)
    per_exit = np.array([4.0, 3.0, 2.0, 1.0])
    # epoch sum over batches of size 10: sum_g w_g * L_g * (10 / 10) / (n / B) = mean
    assert np.isclose((w * per_exit).sum() / (len(groups) / 10), 2.5)
    # unequal groups: the epoch objective is still the plain mean over exits
    groups = np.array([0] * 30 + [1] * 6 + [3] * 4)
    w = eq51_weights(groups, 4)
    counts = np.bincount(groups, minlength=4)
    total = (w * counts * np.array([4.0, 3.0, 2.0, 1.0])).sum() / counts.sum()
    assert np.isclose(total, (4.0 + 3.0 + 1.0) / 3)


def test_a_c1_batch_runs_a_quarter_of_the_layers() -> None:
    torch.manual_seed(0)
    lm = EarlyExitLM(LMEncoder(build_lm("bert", vocab_size=30, hidden=16, layers=12, heads=2,
                                        max_len=8)), 8, 3)
    ran: list[int] = []
    for i, layer in enumerate(lm.encoder.layers):
        layer.register_forward_hook(lambda *a, i=i: ran.append(i))
    ids = torch.randint(5, 30, (4, 6))
    for exit_, depth in enumerate([3, 6, 9, 12]):
        ran.clear()
        emb, logits = lm(ids, torch.ones_like(ids), exit_)
        assert len(ran) == depth and emb.shape == (4, 8) and logits.shape == (4, 3)


def test_group_batches_plan() -> None:
    groups = np.array([0, 0, 0, 1, 2, 3, 3, 3])
    batches = GroupBatches(np.arange(8), groups, 2, seed=1)
    plan = batches.plan()
    assert [g for g, _ in plan] == [3, 3, 2, 1, 0, 0] and len(batches) == 6
    assert sorted(np.concatenate([b for _, b in plan]).tolist()) == list(range(8))
    batches.set_epoch(1)
    assert [b.tolist() for _, b in batches.plan()] != [b.tolist() for _, b in plan]
    shuffled = GroupBatches(np.arange(8), groups, 2, seed=1, order="shuffled")
    assert sorted(g for g, _ in shuffled.plan()) == [0, 0, 1, 2, 3, 3]
    assert np.isclose(batches.compute_fraction([1, 2, 3, 4], 4), (3 * 1 + 2 + 3 + 3 * 4) / 32)
