"""The Bubble Interleaver's LM thread: no step while the gate is closed, every planned
step when it stays open, none finishing while the Collaborator holds it between steps."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.train.flow.interleaver import BubbleGate, LMWorker


@pytest.fixture(scope="module")
def task(tiny_text_store):
    from graphpipe.store import GraphStore
    from graphpipe.train.text.task import TextTask

    return TextTask.from_store(GraphStore.open(tiny_text_store), 12)


def _worker(task, gate):
    from graphpipe.train.text.build import TextConfig, build_lm_trainer

    config = TextConfig(lm_hidden=16, lm_layers=2, max_len=12, emb_dim=8, lm_batch_size=8)
    lm = build_lm_trainer(task, config, groups=np.zeros(len(task.labels), np.int64), num_groups=1, quiet=True)
    return LMWorker(lm, gate, epochs=1)


def test_closed_gate_holds_the_lm(task):
    gate = BubbleGate()
    worker = _worker(task, gate)
    worker.start()
    assert not worker.join(timeout=0.2) and worker.is_alive()
    assert worker.steps == 0 and worker.lm.steps_taken == 0
    worker.stop()  # releases the gate: at most the step it was waiting for
    assert worker.steps <= 1 and not worker.is_alive()


def test_open_gate_runs_every_step_and_sync_waits_for_a_step_boundary(task):
    gate = BubbleGate()
    worker = _worker(task, gate)
    assert worker.planned > 1
    worker.start()
    with worker.between_steps():  # the gate is closed again once we hold the LM
        held = worker.steps
        assert not gate.is_open and worker.steps == held
    gate.open()
    worker.join(timeout=120)
    assert not worker.is_alive() and worker.steps == worker.planned == worker.lm.steps_taken
    worker.stop()
    assert worker.cpu_seconds > 0.0
