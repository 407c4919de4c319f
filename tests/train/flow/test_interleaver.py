"""The Bubble Interleaver's LM thread: no step while the gate is closed, every planned
step when it stays open, none finishing while the Collaborator holds it between steps."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.train.flow.interleaver import BubbleGate, LMWorker


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    from torch_geometric.data import Data

    from graphpipe.interop.pyg_text import write_pyg_text_store
    from graphpipe.synthetic.tag import tag_graph
    from graphpipe.train.text.task import TextTask

    g, titles, _ = tag_graph(60, 2, seed=0)
    data = Data(x=torch.from_numpy(g.features), y=torch.from_numpy(g.labels),
                edge_index=torch.from_numpy(np.stack([g.src, g.dst])))
    for name, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        data[name] = torch.zeros(60, dtype=torch.bool)
        data[name][torch.from_numpy(g.splits[split])] = True
    data.text = titles
    store = write_pyg_text_store(data, tmp_path_factory.mktemp("lmw") / "s", vocab_size=120)
    return TextTask.from_store(store, 12)


def _worker(task, gate):
    from graphpipe.train.text.build import TextConfig, build_lm_trainer

    config = TextConfig(lm_hidden=16, lm_layers=2, max_len=12, emb_dim=8, lm_batch_size=8)
    lm = build_lm_trainer(task, config, groups=np.zeros(60, np.int64), num_groups=1, quiet=True)
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
