"""DistributedTypedTrainer on a real two-rank gloo group over loopback
(tests/train/typed_ddp_child.py): one step on two ranks equals one step in one process
on the union of their seed batches (all neighbours, R-GCN with learnable embeddings for
the featureless types), the epoch's figures are all-reduced and logged by rank 0, and
the two-rank checkpoint resumes in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from graphpipe.ingest import ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.train.trainer import TypedTrainer, typed_training_data

sys.path.insert(0, str(Path(__file__).parent))
from typed_ddp_child import BATCH, SEED, model

CHILD = Path(__file__).with_name("typed_ddp_child.py")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("typed_ddp")
    mag = mag_dataset(papers=300, authors=300, institutions=10, fields=20, num_classes=4,
                      feature_dim=8, seed=2)
    ingest(write_ogb_mag(root / "src", mag), root / "store")
    return typed_training_data(root / "store")


@pytest.fixture(scope="module")
def run(data, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("typed_ddp_out")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(CHILD), str(data.store.path), str(out), "2", "node"],
                          check=False, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _labels(data, batch) -> torch.Tensor:
    y = np.asarray(data.typed_labels("paper")).reshape(-1)
    return torch.from_numpy(y[batch.n_id["paper"][: batch.batch_size].numpy()].astype(np.int64))


def _step(data, seeds: np.ndarray) -> dict[str, torch.Tensor]:
    net = model(data)
    loader = NeighborLoader(data, [-1, -1], input_nodes=("paper", seeds), batch_size=len(seeds))
    batch = next(iter(loader))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    F.cross_entropy(net(batch), _labels(data, batch)).backward()
    optimizer.step()
    return {k: v.detach() for k, v in net.state_dict().items()}


def test_two_ranks_step_equals_one_step_on_the_union(run: Path, data) -> None:
    seeds = [np.load(run / f"step_batch{r}.npy") for r in range(2)]
    one = TypedTrainer(model(data), data, fanouts=[-1, -1], batch_size=2 * BATCH, seed=SEED)
    first = one.loader.epoch_batches(0)[0]  # the one permutation's first 2 * BATCH seeds
    for r in range(2):  # DistributedSampler's split of it: positions r, r + 2, ...
        assert seeds[r].tolist() == first[r::2].tolist()
    assert len(seeds[0]) == BATCH and not set(seeds[0]) & set(seeds[1])
    expect = _step(data, np.concatenate(seeds))
    for r in range(2):
        got = torch.load(run / f"step_params{r}.pt", weights_only=True)
        assert got.keys() == expect.keys()
        for k, value in got.items():
            torch.testing.assert_close(value, expect[k], rtol=1e-5, atol=1e-6, msg=k)
    alone = _step(data, seeds[0])  # the check can fail: one rank's batch alone differs
    assert any(not torch.allclose(alone[k], expect[k], rtol=1e-5, atol=1e-6) for k in expect)


def test_metrics_reduced_and_logged_on_rank_zero(run: Path, data) -> None:
    (record,) = [json.loads(x) for x in (run / "ckpt1.jsonl").read_text().splitlines()]
    ranks = record["ranks"]
    train = int((np.asarray(data.typed_labels("paper")).reshape(-1)[
        np.asarray(data.typed_split("paper", "train"))] >= 0).sum())
    assert record["world_size"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["steps"] == ranks[1]["steps"] == record["steps"] == -(-train // 2 // BATCH)
    assert ranks[0]["seeds"] == ranks[1]["seeds"] == -(-train // 2)
    params = sum(p.numel() for p in model(data).parameters())
    assert ranks[0]["allreduce_bytes"] == ranks[1]["allreduce_bytes"] == 4 * params * record["steps"]
    assert all(r["rows_gathered"] > 0 for r in ranks) and 0.0 <= record["valid_acc"] <= 1.0


def test_two_rank_checkpoint_resumes_in_one_process(run: Path, data) -> None:
    resumed = TypedTrainer(model(data), data, fanouts=[3, 2], batch_size=BATCH, epochs=2,
                           optimizer="adam", lr=0.01, seed=SEED, quiet=True)
    result = resumed.fit(resume=run / "ckpt1.pt")
    assert [r["epoch"] for r in result.history] == [0, 1] and result.epochs_completed == 2
    assert "world_size" not in result.history[1]
