"""DistributedTypedLinkTrainer on a real two-rank gloo group over loopback
(tests/train/typed_ddp_child.py): the two ranks take disjoint halves of the one
permutation of the training edges (DistributedSampler's split), one step on two ranks
equals one step in one process on the union of their batches (the mean of their losses;
all neighbours, R-GCN with learnable embeddings for the featureless types), the epoch's
figures are all-reduced and logged by rank 0 with the valid / test MRR, and the
two-rank checkpoint resumes in one process."""

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
from graphpipe.loaders import SeedShard, TypedLinkNeighborLoader
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.train.typed_link import TypedLinkTrainer

sys.path.insert(0, str(Path(__file__).parent))
from typed_ddp_child import BATCH, NEGATIVES, SEED, WRITES
from typed_ddp_child import link_model as model

CHILD = Path(__file__).with_name("typed_ddp_child.py")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("typed_link_ddp")
    mag = mag_dataset(papers=150, authors=150, institutions=6, fields=12, num_classes=3,
                      feature_dim=8, seed=2)
    return ingest(write_ogb_mag(root / "src", mag), root / "store")


@pytest.fixture(scope="module")
def run(store, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("typed_link_ddp_out")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(CHILD), str(store.path), str(out), "2", "link"],
                          check=False, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _one(store, **kw) -> TypedLinkTrainer:
    return TypedLinkTrainer(model(store), store, fanouts=[-1, -1], seed=SEED, quiet=True,
                            eval_negatives=NEGATIVES, **kw)


def _grads(net, split, shard: SeedShard | None) -> dict[str, torch.Tensor]:
    """Gradients of the BCE loss on the first training batch of ``shard`` (the trainer's loader)."""
    train = split.edges["train"]
    loader = TypedLinkNeighborLoader(split.graphs["train"], [-1, -1],
                                     edge_label_index=(WRITES, (train.src, train.dst)),
                                     neg_sampling="binary", batch_size=BATCH, shuffle=True,
                                     seed=SEED, exclude_seed_edges=True, shard=shard)
    batch = next(iter(loader))
    net.zero_grad()
    F.binary_cross_entropy_with_logits(net(batch), batch[WRITES].edge_label.float()).backward()
    return {k: (torch.zeros_like(p) if p.grad is None else p.grad.clone())
            for k, p in net.named_parameters()}


def _sgd_step(net, grads: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    optimizer = torch.optim.SGD(net.parameters(), lr=0.5, momentum=0.9)
    for k, p in net.named_parameters():
        p.grad = grads[k]
    optimizer.step()
    return {k: v.detach() for k, v in net.state_dict().items()}


def test_two_ranks_step_equals_one_step_on_the_union(run: Path, store) -> None:
    edges = [np.load(run / f"step_batch{r}.npy") for r in range(2)]
    one = _one(store, batch_size=2 * BATCH)
    first = one.loader.epoch_edge_batches(0)[0]  # the one permutation's first 2 * BATCH edges
    for r in range(2):  # DistributedSampler's split of it: positions r, r + 2, ...
        assert edges[r].tolist() == first[r::2].tolist()
    assert len(edges[0]) == BATCH and not set(edges[0]) & set(edges[1])
    net = model(store)
    per_rank = [_grads(net, one.split, SeedShard(r, 2)) for r in range(2)]
    expect = _sgd_step(net, {k: (per_rank[0][k] + per_rank[1][k]) / 2 for k in per_rank[0]})
    for r in range(2):
        got = torch.load(run / f"step_params{r}.pt", weights_only=True)
        assert got.keys() == expect.keys()
        for k, value in got.items():
            torch.testing.assert_close(value, expect[k], rtol=1e-5, atol=1e-6, msg=k)
    alone = _sgd_step(model(store), per_rank[0])  # the check can fail: one rank's batch alone differs
    assert any(not torch.allclose(alone[k], expect[k], rtol=1e-5, atol=1e-6) for k in expect)


def test_metrics_reduced_and_logged_on_rank_zero(run: Path, store) -> None:
    (record,) = [json.loads(x) for x in (run / "ckpt1.jsonl").read_text().splitlines()]
    ranks = record["ranks"]
    train = _one(store, batch_size=BATCH).split.edges["train"].num_pos
    assert record["world_size"] == 2 and [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["steps"] == ranks[1]["steps"] == record["steps"] == -(-train // 2 // BATCH)
    assert ranks[0]["seeds"] == ranks[1]["seeds"] == 2 * -(-train // 2)  # positives + negatives
    params = sum(p.numel() for p in model(store).parameters())
    assert ranks[0]["allreduce_bytes"] == ranks[1]["allreduce_bytes"] == 4 * params * record["steps"]
    assert record["metric"] == "mrr" and 0.0 < record["valid_acc"] <= 1.0
    for split in ("valid", "test"):  # the same ranks' hits, broadcast from rank 0 with the MRR
        hits = [record[f"{split}_hits@{k}"] for k in (1, 3, 10)]
        assert 0.0 <= hits[0] <= hits[1] <= hits[2] <= 1.0 and hits[0] <= record[f"{split}_acc"]
    assert all(r["rows_gathered"] > 0 for r in ranks)


def test_two_rank_checkpoint_resumes_in_one_process(run: Path, store) -> None:
    resumed = TypedLinkTrainer(model(store), store, fanouts=[3, 2], batch_size=BATCH, epochs=2,
                               optimizer="adam", lr=0.01, seed=SEED, eval_negatives=NEGATIVES,
                               max_steps=2, quiet=True)
    result = resumed.fit(resume=run / "ckpt1.pt")
    assert [r["epoch"] for r in result.history] == [0, 1] and result.epochs_completed == 2
    assert "world_size" not in result.history[1]
