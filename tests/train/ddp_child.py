"""Data-parallel scenarios for tests/train/test_distributed.py, run as
``python ddp_child.py STORE OUT NPROC SCENARIO [SCENARIO ...]``: NPROC gloo ranks on
loopback (graphpipe.train.distributed.launch) run the scenarios in order; rank 0 (and,
for the one-step scenarios, every rank) saves what the test compares under OUT."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.store import GraphStore
from graphpipe.train import build_model
from graphpipe.train.distributed import DistributedTrainer, init_process_group, launch

BATCH, HIDDEN, SEED = 64, 16, 3


def model(store: GraphStore) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_model("sage", store.feature_dim, HIDDEN, 8, 2, dropout=0.0)


def trainer(store: GraphStore, **kw) -> DistributedTrainer:
    options = {"fanouts": [3, 2], "batch_size": BATCH, "epochs": 1, "optimizer": "sgd", "lr": 0.5,
               "evaluation": "none", "seed": SEED, "quiet": True, **kw}
    return DistributedTrainer(model(store), store, **options)


def save_params(t: DistributedTrainer, path: Path) -> None:
    torch.save({k: v.detach().clone() for k, v in t.model.state_dict().items()}, path)


def one_step(store: GraphStore, out: Path, name: str, fanouts: list[int]) -> None:
    t = trainer(store, fanouts=fanouts, max_steps=1)
    t.fit()
    np.save(out / f"{name}_seeds{t.rank}.npy", t.loader.epoch_batches(0)[0])
    save_params(t, out / f"{name}_params{t.rank}.pt")


def epochs(store: GraphStore, out: Path, name: str, **kw) -> None:
    t = trainer(store, optimizer="adam", lr=0.01, **kw)
    result = t.fit()
    if t.is_main:
        save_params(t, out / f"{name}_params.pt")
        (out / f"{name}_history.json").write_text(json.dumps(result.history))


def scenario(name: str, store: GraphStore, out: Path) -> None:
    if name in ("step_full", "step_sampled"):
        one_step(store, out, name, [-1, -1] if name == "step_full" else [3, 2])
    elif name == "straight2":      # two epochs, evaluated, logged
        epochs(store, out, name, epochs=2, evaluation="full", metrics_log=out / "straight2.jsonl")
    elif name == "ckpt1":          # the first of them, checkpointed
        epochs(store, out, name, epochs=1, evaluation="full", checkpoint=out / "ckpt1.pt",
               metrics_log=out / "ckpt1.jsonl")
    elif name == "resume2":        # the second from the checkpoint
        t = trainer(store, optimizer="adam", lr=0.01, epochs=2, evaluation="full")
        result = t.fit(resume=out / "ckpt1.pt")
        if t.is_main:
            save_params(t, out / "resume2_params.pt")
            (out / "resume2_history.json").write_text(json.dumps(result.history))
    elif name == "resume_single":  # from a one-process Trainer's checkpoint
        t = trainer(store, optimizer="adam", lr=0.01, epochs=2, evaluation="full")
        result = t.fit(resume=out / "single1.pt")
        if t.is_main:
            save_params(t, out / "resume_single_params.pt")
            (out / "resume_single_history.json").write_text(json.dumps(result.history))
    elif name == "parts":          # partition-aware seeds
        t = trainer(store, shard="parts", epochs=1)
        seeds = np.concatenate(t.loader.epoch_batches(0))
        np.save(out / f"parts_seeds{t.rank}.npy", seeds)
        (out / f"parts_history{t.rank}.json").write_text(json.dumps(t.fit().history))
    else:
        raise ValueError(f"unknown scenario {name!r}")


def rank(store_path: str, out: str, scenarios: list[str]) -> None:
    init_process_group()
    store = GraphStore.open(store_path)
    for name in scenarios:
        scenario(name, store, Path(out))
    dist.barrier()  # not after an error: the launcher ends the other ranks
    dist.destroy_process_group()


if __name__ == "__main__":
    launch(rank, int(sys.argv[3]), (sys.argv[1], sys.argv[2], sys.argv[4:]))
