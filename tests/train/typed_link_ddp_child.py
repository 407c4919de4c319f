"""Typed data-parallel link prediction for tests/train/test_distributed_typed_link.py, run as
``python typed_link_ddp_child.py STORE OUT NPROC``: NPROC gloo ranks on loopback
(graphpipe.train.distributed.launch) take one SGD step with all neighbours (every rank
saves its batch's edge positions and its parameters), then train one evaluated epoch
(MRR) with a checkpoint and a metrics log (rank 0 writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.distributed import DistributedTypedLinkTrainer, init_process_group, launch
from graphpipe.train.trainer import typed_model_dims, typed_training_data
from graphpipe.train.typed_link import TypedLinkPredictor

BATCH, HIDDEN, SEED, NEGATIVES = 32, 8, 3, 20
WRITES = ("author", "writes", "paper")


def model(store) -> TypedLinkPredictor:
    graph = typed_training_data(store)
    torch.manual_seed(0)
    return TypedLinkPredictor("rgcn", typed_model_dims(graph), graph.num_nodes_dict,
                              graph.edge_types, WRITES, hidden=HIDDEN)


def trainer(store, **kw) -> DistributedTypedLinkTrainer:
    options = {"fanouts": [-1, -1], "batch_size": BATCH, "epochs": 1, "optimizer": "sgd",
               "lr": 0.5, "evaluation": "none", "seed": SEED, "eval_negatives": NEGATIVES,
               "quiet": True, **kw}
    return DistributedTypedLinkTrainer(model(store), store, **options)


def rank(store: str, out: str) -> None:
    init_process_group()
    out_dir = Path(out)
    t = trainer(store, max_steps=1)
    t.fit()
    np.save(out_dir / f"step_edges{t.rank}.npy", t.loader.epoch_edge_batches(0)[0])
    torch.save({k: v.detach().clone() for k, v in t.model.state_dict().items()},
               out_dir / f"step_params{t.rank}.pt")
    t = trainer(store, fanouts=[3, 2], optimizer="adam", lr=0.01, evaluation="link",
                checkpoint=out_dir / "ckpt1.pt", metrics_log=out_dir / "ckpt1.jsonl")
    t.fit()
    dist.barrier()  # not after an error: the launcher ends the other ranks
    dist.destroy_process_group()


if __name__ == "__main__":
    launch(rank, int(sys.argv[3]), (sys.argv[1], sys.argv[2]))
