"""Flow Parallelism: P gloo stages (real processes on loopback) against one process over
the same microbatches — the oracle is the one-stage run (same loss, same parameters)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.train.flow.launch import run_flow
from graphpipe.train.flow.trainer import FlowConfig


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph, write_ogb_raw

    tmp = tmp_path_factory.mktemp("flow")
    write_ogb_raw(tmp / "raw", community_graph(300, 3, feature_dim=8, seed=0))
    return str(ingest(tmp / "raw", tmp / "store").path)


def _params(folder, stages):
    out = {}
    for s in range(stages):
        with np.load(folder / f"stage{s}.npz") as z:
            out.update({k: z[k] for k in z.files})
    return out


CONFIG = FlowConfig(hidden=16, layers=4, dropout=0.3, lr=0.01, epochs=2, microbatches=3,
                    timeout_s=120)


@pytest.fixture(scope="module")
def two_stages(store, tmp_path_factory):
    """2 epochs on 2 stages, with a checkpoint: (folder with stage*.npz and two.pt, result)."""
    out = tmp_path_factory.mktemp("p2")
    return out, run_flow(store, 2, CONFIG, out_dir=out, checkpoint=out / "two.pt")


def test_two_stages_equal_one_stage(store, two_stages, tmp_path):
    (tmp_path / "p1").mkdir()
    one = run_flow(store, 1, CONFIG, out_dir=tmp_path / "p1")
    folder, two = two_stages
    assert two["stages"] == 2 and two["microbatches"] == one["microbatches"] == 3
    for a, b in zip(one["records"], two["records"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["valid_acc"] == pytest.approx(b["valid_acc"], abs=1e-9)
    p1, p2 = _params(tmp_path / "p1", 1), _params(folder, 2)
    assert sorted(p1) == sorted(p2)
    for name in p1:
        np.testing.assert_allclose(p1[name], p2[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert 0.0 < two["bubble"] < 1.0 and two["gpipe_bubble"] == pytest.approx(1 / 4)


def _close(a: dict, b: dict, **tol) -> None:
    assert sorted(a) == sorted(b)
    for name, value in a.items():
        if isinstance(value, dict):
            _close(value, b[name], **tol)
        else:
            torch.testing.assert_close(value, b[name], **tol, msg=name)


def test_one_epoch_then_resume_equals_two_epochs(store, two_stages, tmp_path):
    """The checkpoint of 1 epoch on 2 stages, resumed on 2 stages for 1 more, is the 2-epoch
    run (weights, Adam state, records, test acc); resumed on 1 stage (layers remapped; ``M``
    the checkpoint's, not the 1-stage rule's 1), the same run within the 1-vs-2-stage
    tolerance above."""
    folder, two = two_stages
    run_flow(store, 2, FlowConfig(**{**CONFIG.as_dict(), "epochs": 1}),
             checkpoint=tmp_path / "one.pt")
    resumed = run_flow(store, 2, CONFIG, resume=tmp_path / "one.pt", checkpoint=tmp_path / "b.pt")
    straight = torch.load(folder / "two.pt", weights_only=True)
    again = torch.load(tmp_path / "b.pt", weights_only=True)
    assert straight["epoch"] == again["epoch"] == 2 and resumed["resumed_from"] == 1
    _close(straight["model_state"], again["model_state"], rtol=0, atol=1e-6)
    _close(straight["optimizer_state"]["state"], again["optimizer_state"]["state"], rtol=0, atol=1e-6)
    assert resumed["test_acc"] == two["test_acc"]
    assert [r["loss"] for r in resumed["records"]] == [r["loss"] for r in two["records"]]

    auto_m = FlowConfig(**{**CONFIG.as_dict(), "microbatches": None})
    one_stage = run_flow(store, 1, auto_m, resume=tmp_path / "one.pt", checkpoint=tmp_path / "c.pt")
    assert one_stage["microbatches"] == 3 and one_stage["resumed_from"] == 1
    remapped = torch.load(tmp_path / "c.pt", weights_only=True)
    _close(straight["model_state"], remapped["model_state"], rtol=1e-5, atol=1e-6)
