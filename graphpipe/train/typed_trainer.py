"""Node classification on a typed store: :class:`TypedTrainer`.

The seeds are the labelled nodes of the store's target type (``store.target_type``, or
``target_type=``); batches come from :class:`graphpipe.loaders.HeteroNeighborLoader`
(one fanout list per hop for every relation, or a dict per relation) and the model is a
typed model (:func:`graphpipe.train.hetero_models.build_hetero_model`) or an MLP on the
target type's features (the baseline). Evaluation is sampled (the same fanouts, no
shuffle) over the target type's ``train`` / ``valid`` / ``test`` splits, scored with
OGB's accuracy. The epoch loop, checkpoints and early stopping are
:func:`graphpipe.train.loop.fit`'s, as for :class:`graphpipe.train.Trainer`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.train import loop
from graphpipe.train.checkpoint import CheckpointError, load_checkpoint
from graphpipe.train.loop import (
    ProgressBar,
    TrainResult,
    check_checkpoint_model,
    check_checkpoint_optimizer,
    fmt_acc,
)
from graphpipe.train.trainer import accuracy, make_optimizer

__all__ = ["TypedTrainer", "typed_model_dims", "typed_training_data"]

_SPLITS = ("train", "valid", "test")


def typed_training_data(store: Any, *, reverse: bool = True) -> Any:
    """The :class:`graphpipe.loaders.HeteroGraphData` a typed run trains on: the store's
    relations, plus their reverses (PyG's ``ToUndirected``) when ``reverse`` (OGB ships
    each relation one way; without the reverses no message reaches a paper from its
    fields). ``store``: a typed GraphStore, its path, or a HeteroGraphData (as is)."""
    from graphpipe.loaders import HeteroGraphData
    from graphpipe.loaders.graph_data import add_reverse_relations
    from graphpipe.store import GraphStore, open_store

    if isinstance(store, HeteroGraphData):
        return store
    store = store if isinstance(store, GraphStore) else open_store(store)
    if not store.is_typed:
        raise ValueError(f"store {str(store.path)!r} has one node type: train it with "
                         "graphpipe.train.Trainer")
    data = HeteroGraphData.from_store(store)
    return add_reverse_relations(data) if reverse else data


def typed_model_dims(store: Any) -> dict[str, int | None]:
    """Node type -> feature width (None for a type without features) of a typed store
    (or a HeteroGraphData)."""
    dims: dict[str, int | None] = {}
    for t in store.node_types:
        x = store.typed_features(t)
        dims[t] = None if x is None else int(x.shape[1])
    return dims


def _labels(store: Any, target: str) -> np.ndarray:
    y = store.typed_labels(target)
    if y is None:
        raise ValueError(f"target type {target!r} has no labels")
    y = np.asarray(y)
    return y[:, 0] if y.ndim == 2 else y


class TypedTrainer:
    """Train a typed model on the labelled nodes of a typed store's target type.

    Args:
        model: a model from :func:`graphpipe.train.hetero_models.build_hetero_model`, or
            :class:`graphpipe.train.models.MLP` (target-type features only).
        store: a typed :class:`graphpipe.store.GraphStore` or its path (reverse relations
            added, :func:`typed_training_data`), or a
            :class:`graphpipe.loaders.HeteroGraphData` (used as it is).
        fanouts: neighbours per hop for every relation (one entry per layer), or a dict
            relation -> list.
        target_type: the classified node type (default: the store's ``target_type``).
        batch_size, epochs, optimizer, lr, weight_decay, patience, eval_every, seed,
        max_steps, checkpoint, metrics_log, quiet, on_epoch: as for
            :class:`graphpipe.train.Trainer`.
        evaluation: ``"sampled"`` (the default and only full-graph-free choice here) or
            ``"none"``.
    """

    is_main = True

    def __init__(self, model: nn.Module, store: Any, *, fanouts: Any, target_type: str | None = None,
                 batch_size: int = 1024, epochs: int = 5, optimizer: str = "adam",
                 lr: float = 0.003, weight_decay: float = 0.0, patience: int | None = None,
                 evaluation: str = "sampled", eval_batch_size: int = 4096, eval_every: int = 1,
                 seed: int = 0, max_steps: int | None = None,
                 checkpoint: str | os.PathLike | None = None,
                 metrics_log: str | os.PathLike | None = None, quiet: bool = False,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None):
        self.store = typed_training_data(store)
        self.target = target_type or self.store.target_type
        if self.target not in self.store.node_types:
            raise ValueError(f"target type {self.target!r} is not a node type of the store "
                             f"({', '.join(self.store.node_types)})")
        if evaluation not in ("sampled", "none", "auto", "full"):
            raise ValueError(f"'evaluation' must be sampled or none (got {evaluation!r})")
        self.evaluation = "none" if evaluation == "none" else "sampled"
        self.model, self.fanouts = model, fanouts
        self.batch_size, self.epochs, self.eval_batch_size = int(batch_size), int(epochs), int(eval_batch_size)
        self.optimizer_name, self.lr, self.weight_decay = optimizer, float(lr), float(weight_decay)
        self.patience, self.eval_every, self.seed, self.max_steps = patience, int(eval_every), int(seed), max_steps
        self.checkpoint = Path(checkpoint) if checkpoint is not None else None
        self.metrics_log = Path(metrics_log) if metrics_log is not None else None
        self.quiet, self.on_epoch = bool(quiet), on_epoch
        self.labels = _labels(self.store, self.target)
        self.optimizer = make_optimizer(model, optimizer, self.lr, self.weight_decay)
        self.loader = self._loader(self._split_ids("train"), self.batch_size, True, self.seed)

    # ---------------------------------------------------------------------------- pieces
    def _split_ids(self, split: str) -> np.ndarray:
        if split not in self.store.typed_split_names(self.target):
            raise ValueError(f"type {self.target!r} has no "
                             f"{split!r} split")
        ids = np.asarray(self.store.typed_split(self.target, split), dtype=np.int64)
        return ids[self.labels[ids] >= 0]

    def _loader(self, ids: np.ndarray, batch_size: int, shuffle: bool, seed: int) -> Any:
        from graphpipe.loaders import HeteroNeighborLoader

        return HeteroNeighborLoader(self.store, self.fanouts, input_nodes=(self.target, ids),
                                    batch_size=batch_size, shuffle=shuffle, seed=seed)

    def _logits(self, batch: Any) -> torch.Tensor:
        if getattr(self.model, "uses_graph", True):
            return self.model(batch)
        x = batch.x[self.target][: batch.batch_size]
        return self.model(x.to(next(self.model.parameters()).dtype))

    def _targets(self, batch: Any) -> torch.Tensor:
        seeds = batch.n_id[self.target][: batch.batch_size].cpu().numpy()
        return torch.from_numpy(self.labels[seeds].astype(np.int64))

    # ---------------------------------------------------------------------------- the loop
    def fit(self, resume: str | os.PathLike | None = None) -> TrainResult:
        """Train for the remaining epochs (all, or those after ``resume``'s)."""
        return loop.fit(self, resume)

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """One epoch of optimizer steps; its metrics record."""
        self.model.train()
        total = len(self.loader) if self.max_steps is None else min(self.max_steps, len(self.loader))
        bar = ProgressBar(total, f"epoch {epoch}", enabled=not self.quiet)
        loss_sum, seen, steps, t0 = 0.0, 0, 0, time.perf_counter()
        try:
            for batch in self.loader:
                y = self._targets(batch)
                loss = F.cross_entropy(self._logits(batch), y, ignore_index=-1)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.optimizer.step()
                steps, seen = steps + 1, seen + int(batch.batch_size)
                loss_sum += float(loss.detach()) * int(batch.batch_size)
                bar.advance(loss_sum / seen)
                if self.max_steps is not None and steps >= self.max_steps:
                    break
        finally:
            bar.close()
        return {"epoch": epoch, "loss": loss_sum / max(seen, 1), "train_acc": None,
                "valid_acc": None, "test_acc": None, "steps": steps,
                "seconds": time.perf_counter() - t0, "eval_seconds": 0.0}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy of the target type's ``train``, ``valid`` and ``test`` nodes."""
        was = self.model.training
        self.model.eval()
        try:
            out = {}
            for split in _SPLITS:
                ys, preds = [], []
                for batch in self._loader(self._split_ids(split), self.eval_batch_size, False, self.seed):
                    ys.append(self._targets(batch))
                    preds.append(self._logits(batch).argmax(1).cpu())
                out[split] = accuracy(torch.cat(ys), torch.cat(preds)) if ys else 0.0
            return out
        finally:
            self.model.train(was)

    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line."""
        return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  "
                f"train {fmt_acc(record['train_acc'])}  valid {fmt_acc(record['valid_acc'])}  "
                f"test {fmt_acc(record['test_acc'])}  time {record['seconds']:.2f}s "
                f"(+{record['eval_seconds']:.2f}s eval)  batches {record['steps']}")

    # ---------------------------------------------------------------------------- checkpoints
    def checkpoint_extra(self) -> dict[str, Any]:
        """The trainer's checkpoint key ``train`` (checked on resume)."""
        return {"train": {"batch_size": self.batch_size, "fanouts": self.fanouts,
                          "seed": self.seed, "target_type": self.target,
                          "num_nodes": dict(self.store.num_nodes_dict)}}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """Rebuild the training loader if the checkpoint's loader seed differs."""
        seed = int(state["loader"]["seed"])
        if seed != self.loader.seed:
            self.loader = self._loader(self._split_ids("train"), self.batch_size, True, seed)

    def check_resume(self, path: str | os.PathLike) -> dict[str, Any]:
        """Load the checkpoint at ``path``; :class:`CheckpointError` unless it fits."""
        path = Path(path)
        state = load_checkpoint(path)
        check_checkpoint_model(state, self.model, path)
        train = state.get("train", {})
        for key, value in (("batch_size", self.batch_size), ("target_type", self.target),
                           ("num_nodes", dict(self.store.num_nodes_dict))):
            if key in train and train[key] != value:
                raise CheckpointError(f"checkpoint {str(path)!r} was trained with {key}="
                                      f"{train[key]}; this run has {key}={value}")
        check_checkpoint_optimizer(state, self.optimizer_name, path)
        return state
