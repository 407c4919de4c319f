"""Flow Parallelism: P gloo stages (real processes on loopback) against one process over
the same microbatches — the oracle is the one-stage run (same loss, same parameters)."""

from __future__ import annotations

import numpy as np
import pytest

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


def test_two_stages_equal_one_stage(store, tmp_path):
    config = FlowConfig(hidden=16, layers=4, dropout=0.3, lr=0.01, epochs=2, microbatches=3,
                        timeout_s=120)
    (tmp_path / "p1").mkdir()
    (tmp_path / "p2").mkdir()
    one = run_flow(store, 1, config, out_dir=tmp_path / "p1")
    two = run_flow(store, 2, config, out_dir=tmp_path / "p2")
    assert two["stages"] == 2 and two["microbatches"] == one["microbatches"] == 3
    for a, b in zip(one["records"], two["records"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["valid_acc"] == pytest.approx(b["valid_acc"], abs=1e-9)
    p1, p2 = _params(tmp_path / "p1", 1), _params(tmp_path / "p2", 2)
    assert sorted(p1) == sorted(p2)
    for name in p1:
        np.testing.assert_allclose(p1[name], p2[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert 0.0 < two["bubble"] < 1.0 and two["gpipe_bubble"] == pytest.approx(1 / 4)
