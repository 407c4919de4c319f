"""Typed data-parallel scenarios for tests/train/test_distributed_typed.py (``node``: the
target type's seeds) and tests/train/test_distributed_typed_link.py (``link``: one
relation's edges), run as ``python typed_ddp_child.py STORE OUT NPROC node|link``: NPROC
gloo ranks on loopback (graphpipe.train.distributed.launch) take one SGD step with all
neighbours (every rank saves its first batch, seed or edge positions, as
``step_batch<rank>.npy`` and its parameters), then train one evaluated epoch with a
checkpoint and a metrics log (rank 0 writes them)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.distributed import (
    DistributedTypedLinkTrainer,
    DistributedTypedTrainer,
    init_process_group,
    launch,
)
from graphpipe.train.hetero_models import build_hetero_model
from graphpipe.train.trainer import typed_model_dims, typed_training_data
from graphpipe.train.typed_link import TypedLinkPredictor

BATCH, HIDDEN, SEED, CLASSES, NEGATIVES = 32, 8, 3, 4, 20
WRITES = ("author", "writes", "paper")


def model(data) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_hetero_model("rgcn", typed_model_dims(data), data.num_nodes_dict, HIDDEN, CLASSES,
                              2, data.edge_types, "paper", dropout=0.0)


def link_model(store) -> TypedLinkPredictor:
    graph = typed_training_data(store)
    torch.manual_seed(0)
    return TypedLinkPredictor("rgcn", typed_model_dims(graph), graph.num_nodes_dict,
                              graph.edge_types, WRITES, hidden=HIDDEN)


def _options(**kw) -> dict:
    return {"fanouts": [-1, -1], "batch_size": BATCH, "epochs": 1, "optimizer": "sgd",
            "lr": 0.5, "evaluation": "none", "seed": SEED, "quiet": True, **kw}


def _node(store_path: str):
    data = typed_training_data(store_path)
    return (lambda **kw: DistributedTypedTrainer(model(data), data, **_options(**kw)),
            lambda t: t.loader.epoch_batches(0)[0], "sampled")


def _link(store_path: str):
    return (lambda **kw: DistributedTypedLinkTrainer(link_model(store_path), store_path,
                                                     **_options(eval_negatives=NEGATIVES, **kw)),
            lambda t: t.loader.epoch_edge_batches(0)[0], "link")


def rank(store_path: str, out: str, task: str) -> None:
    init_process_group()
    out_dir = Path(out)
    trainer, first_batch, evaluation = (_link if task == "link" else _node)(store_path)
    t = trainer(max_steps=1)
    t.fit()
    np.save(out_dir / f"step_batch{t.rank}.npy", first_batch(t))
    torch.save({k: v.detach().clone() for k, v in t.model.state_dict().items()},
               out_dir / f"step_params{t.rank}.pt")
    t = trainer(fanouts=[3, 2], optimizer="adam", lr=0.01, evaluation=evaluation,
                checkpoint=out_dir / "ckpt1.pt", metrics_log=out_dir / "ckpt1.jsonl")
    t.fit()
    dist.barrier()  # not after an error: the launcher ends the other ranks
    dist.destroy_process_group()


if __name__ == "__main__":
    launch(rank, int(sys.argv[3]), (sys.argv[1], sys.argv[2], sys.argv[4]))
