"""Typed data-parallel scenarios for tests/train/test_distributed_typed.py, run as
``python typed_ddp_child.py STORE OUT NPROC``: NPROC gloo ranks on loopback
(graphpipe.train.distributed.launch) take one SGD step with all neighbours (every rank
saves its seeds and parameters), then train one evaluated epoch with a checkpoint and
a metrics log (rank 0 writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.distributed import DistributedTypedTrainer, init_process_group, launch
from graphpipe.train.hetero_models import build_hetero_model
from graphpipe.train.trainer import typed_model_dims, typed_training_data

BATCH, HIDDEN, SEED, CLASSES = 32, 8, 3, 4


def model(data) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_hetero_model("rgcn", typed_model_dims(data), data.num_nodes_dict, HIDDEN, CLASSES,
                              2, data.edge_types, "paper", dropout=0.0)


def trainer(data, **kw) -> DistributedTypedTrainer:
    options = {"fanouts": [-1, -1], "batch_size": BATCH, "epochs": 1, "optimizer": "sgd",
               "lr": 0.5, "evaluation": "none", "seed": SEED, "quiet": True, **kw}
    return DistributedTypedTrainer(model(data), data, **options)


def rank(store_path: str, out: str) -> None:
    init_process_group()
    data, out_dir = typed_training_data(store_path), Path(out)
    t = trainer(data, max_steps=1)
    t.fit()
    np.save(out_dir / f"step_seeds{t.rank}.npy", t.loader.epoch_batches(0)[0])
    torch.save({k: v.detach().clone() for k, v in t.model.state_dict().items()},
               out_dir / f"step_params{t.rank}.pt")
    t = trainer(data, fanouts=[3, 2], optimizer="adam", lr=0.01, evaluation="sampled",
                checkpoint=out_dir / "ckpt1.pt", metrics_log=out_dir / "ckpt1.jsonl")
    t.fit()
    dist.barrier()  # not after an error: the launcher ends the other ranks
    dist.destroy_process_group()


if __name__ == "__main__":
    launch(rank, int(sys.argv[3]), (sys.argv[1], sys.argv[2]))
