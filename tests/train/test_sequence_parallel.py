"""Sequence parallelism (graphpipe/train/sequence_parallel.py): P=2 ranks (real gloo process
groups on loopback, started with torchrun's environment) give the one-process loss and
gradients to 1e-5 in float64 for Graphormer and GT with sparse, cluster-sparse and dense
attention; the all-to-alls are exact, inverse and adjoint; their volume is 4·(S/P)·d
elements per layer and direction; the trainer's weights after three steps and its
evaluation equal the one-process SequenceTrainer's."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from graphpipe.train.sequence_parallel import HeadExchange, free_port, shard_batch
from tests.conftest import communicate_all

WORKER = Path(__file__).with_name("seqpar_worker.py")
sys.path.insert(0, str(WORKER.parent))
import seqpar_worker as W


def _launch(world: int, *args: str, timeout: float = 600) -> None:
    """Run the worker as ``world`` ranks (torchrun's environment variables)."""
    env_base = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
                "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, str(WORKER), *args],
                              env={**env_base, "RANK": str(r), "LOCAL_RANK": str(r)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    outputs = [out for out, _err in communicate_all(procs, timeout)]
    codes = [p.returncode for p in procs]
    assert codes == [0] * world, "\n".join(f"rank {r} exit {c}:\n{o[-3000:]}"
                                           for r, (c, o) in enumerate(zip(codes, outputs)))


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("seqpar") / "steps.pt"
    _launch(2, "steps", str(out))
    return torch.load(out, weights_only=True)


@pytest.mark.parametrize("case", [f"{m}/{a}" for m, a in W.CASES])
def test_two_ranks_equal_one_process(steps: dict, case: str) -> None:
    r = steps[case]
    assert r["labelled"] > 10
    torch.testing.assert_close(r["loss"], r["ref_loss"], rtol=1e-5, atol=1e-5)
    assert set(r["grads"]) == set(r["ref_grads"])
    for name, g in r["grads"].items():
        ref = r["ref_grads"][name]
        torch.testing.assert_close(g, ref, rtol=1e-5, atol=1e-5, msg=lambda m, n=name: f"{n}: {m}")
        if "qkv" in name or "spatial" in name:
            assert float(ref.abs().max()) > 1e-8, f"{name}: zero gradient, the test is vacuous"


@pytest.mark.parametrize("case", ["graphormer/sparse", "gt/cluster-sparse"])
def test_all_to_all_volume(steps: dict, case: str) -> None:
    """Per layer and direction: one all-to-all of q, k, v (3·S/P·d elements sent) and one
    of the output (S/P·d): 4·(S/P)·d, the same again in the backward pass."""
    r = steps[case]
    per_rank = r["seq_len"] // 2
    calls, elements = r["fwd"].tolist()
    assert calls == 2 * W.LAYERS
    assert elements == 4 * per_rank * W.HIDDEN * W.LAYERS
    assert r["bwd"].tolist() == [calls, elements]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph, write_ogb_raw

    root = tmp_path_factory.mktemp("seqpar_store")
    write_ogb_raw(root / "raw", community_graph(400, W.CLASSES, avg_degree=6,
                                                feature_dim=W.DIM, seed=3))
    return ingest(root / "raw", root / "store").path


def test_trainer_two_ranks_equal_one_process(store: Path, tmp_path: Path) -> None:
    from graphpipe.train import SequenceTrainer

    out = tmp_path / "trainer.pt"
    _launch(2, "trainer", str(out), str(store))
    got = torch.load(out, weights_only=True)
    torch.set_num_threads(1)
    ref = SequenceTrainer(W.make_model("graphormer"), store, **W.TRAINER)
    result = ref.fit()
    for name, value in ref.model.state_dict().items():
        torch.testing.assert_close(got["state"][name], value, rtol=1e-5, atol=1e-7,
                                   msg=lambda m, n=name: f"{n}: {m}")
    rec = result.history[-1]
    assert abs(float(got["loss"]) - rec["loss"]) < 1e-6
    assert got["acc"].tolist() == [rec["valid_acc"], rec["test_acc"]]
    assert got["comm"].tolist()[0] == got["comm"].tolist()[1] > 0


def test_one_rank_is_the_plain_model() -> None:
    """Without a process group (P = 1) the exchange is the identity and the sharded
    forward is the model's own."""
    ex = HeadExchange()
    batch = W.make_batch("graphormer", "sparse", 1)
    model = W.make_model("graphormer")
    from graphpipe.train.sequence_parallel import parallel_forward

    torch.testing.assert_close(parallel_forward(model, batch, ex, "sparse"),
                               model(batch, attention="sparse"), rtol=0, atol=0)
    assert ex.forward_stats.calls == 0


def test_shard_batch_checks() -> None:
    batch = W.make_batch("gt", "sparse", 2)
    assert batch.seq_len % 2 == 0
    first, second = shard_batch(batch, 0, 2), shard_batch(batch, 1, 2)
    assert torch.equal(torch.cat([first.x, second.x], 1), batch.x)
    assert first.seq_len == second.seq_len == batch.seq_len // 2
    odd = W.make_batch("gt", "sparse", 1)
    if odd.seq_len % 2:
        with pytest.raises(ValueError, match="pad_multiple=2"):
            shard_batch(odd, 0, 2)
    token = W.make_batch("graphormer", "sparse", 2)
    assert shard_batch(token, 0, 2).global_token and not shard_batch(token, 1, 2).global_token


def test_resume_is_exact_with_dropout(store: Path, tmp_path: Path) -> None:
    """Dropout masks come from (seed, epoch, iteration, rank): 1 epoch + resume + 1 epoch
    gives the weights of 2 straight epochs, bit for bit."""
    from graphpipe.train import build_model
    from graphpipe.train.sequence_parallel_trainer import SequenceParallelTrainer

    torch.set_num_threads(1)

    def run(epochs: int, **kw) -> dict:
        torch.manual_seed(0)
        model = build_model("graphormer", W.DIM, 16, W.CLASSES, 2, heads=4, dropout=0.3)
        trainer = SequenceParallelTrainer(model, store, seq_len=63, parts=4, epochs=epochs,
                                          max_steps=2, lr=0.01, evaluation="none", quiet=True,
                                          checkpoint=kw.get("checkpoint"))
        trainer.fit(resume=kw.get("resume"))
        return trainer.model.state_dict()

    straight = run(2)
    run(1, checkpoint=tmp_path / "c.pt")
    resumed = run(2, resume=tmp_path / "c.pt", checkpoint=tmp_path / "c2.pt")
    for name, value in straight.items():
        assert torch.equal(resumed[name], value), name
