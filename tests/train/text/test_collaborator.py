"""The Modality Collaborator (thesis §8.7 oracles): the Δt schedule and the fallback."""

from __future__ import annotations

import numpy as np
import torch

from graphpipe.train.text.collaborator import GnnInputs, SyncSchedule


def test_schedule_steps_down_on_20_decreases() -> None:
    s = SyncSchedule(1000)
    deltas = []
    for j in range(1, 200):
        s.record(j, 100.0 / j)
        deltas.append(s.delta)
    assert deltas[19] == 300 and deltas[20] == 200 and deltas[40] == 100 and deltas[60] == 20
    assert deltas[-1] == 20 and s.steps == [21, 41, 61]


def test_flat_loss_syncs_every_03j_and_a_bump_resets_the_counter() -> None:
    s = SyncSchedule(1000)
    assert [j for j in range(1, 1001) if s.record(j, 1.0)] == [300, 600, 900]
    s = SyncSchedule(100)
    losses = [1.0 / j for j in range(1, 15)] + [5.0] + [1.0 / j for j in range(1, 16)]
    for j, loss in enumerate(losses, start=1):
        s.record(j, loss)
    assert s.steps == [] and s.delta == 30   # 13 decreases, a bump, then 15 after it


def test_fallback_keeps_projected_raw_features() -> None:
    raw = np.random.default_rng(0).standard_normal((20, 5)).astype(np.float32)
    inputs = GnnInputs(raw, 8, seed=3)
    projected = torch.from_numpy(raw) @ inputs.projection
    emb = torch.randn(10, 8)
    inputs.replace(torch.arange(10), emb)
    assert torch.equal(inputs.x[:10], emb) and torch.allclose(inputs.x[10:], projected[10:])
    assert inputs.encoded.sum() == 10
    q = inputs.projection   # (5, 8) with orthonormal rows: a fixed, norm-keeping map
    assert torch.allclose(q @ q.T, torch.eye(5), atol=1e-5)
    same = GnnInputs(raw, 5)
    assert same.projection is None and torch.equal(same.x, torch.from_numpy(raw))
