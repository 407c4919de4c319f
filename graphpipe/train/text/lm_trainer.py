"""Fine-tuning the LM on node labels (``graphpipe train --model lm``, and the LM half of
UniTG, TAPE and GLEM): a classification head on mean-pooled tokens, early exits by
centrality group when the model has several (:mod:`~graphpipe.train.text.lazy_tuner`).

- training nodes are the ``train`` split's nodes with text (a node without text gives
  the LM nothing to learn from), plus GLEM's pseudo-labelled nodes, which make a share
  ``pseudo_weight`` of the loss (GLEM's ``lm_pl_weight``,
  :func:`~graphpipe.train.text.base.pseudo_label_weights`);
- one step per batch of one group, its loss weighted by Eq. 5.1's group weight;
- :func:`encode` runs nodes through their group's exit without gradients, in batches:
  embeddings and logits (evaluation, the Modality Collaborator, TAPE's features,
  ``graphpipe embed``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from graphpipe.train.text.base import TextTrainable, adamw, pseudo_label_weights
from graphpipe.train.text.lazy_tuner import EarlyExitLM, GroupBatches
from graphpipe.train.text.task import split_accuracy

__all__ = ["LMTrainer", "encode"]

ENCODE_BATCH = 256


@torch.no_grad()
def encode(model: EarlyExitLM, inputs: Any, nodes: np.ndarray, exits: np.ndarray | None = None,
           *, batch_size: int = ENCODE_BATCH) -> tuple[torch.Tensor, torch.Tensor]:
    """``(embeddings (n, emb_dim), logits (n, C))`` of ``nodes``, node ``i`` leaving at
    ``exits[i]`` (default: the last exit)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    nodes = np.asarray(nodes, dtype=np.int64)
    exits = np.full(nodes.size, model.groups - 1) if exits is None else np.asarray(exits)
    emb = torch.zeros(nodes.size, model.emb_dim)
    logits = torch.zeros(nodes.size, model.num_classes)
    for g in np.unique(exits):
        where = np.flatnonzero(exits == g)
        for s in range(0, where.size, batch_size):
            pos = where[s:s + batch_size]
            ids, mask = inputs.batch(nodes[pos])
            e, out = model(ids.to(device), mask.to(device), int(g))
            emb[pos], logits[pos] = e.cpu(), out.cpu()
    model.train(was_training)
    return emb, logits


class LMTrainer(TextTrainable):
    """The LM alone, as a :class:`~graphpipe.train.loop.Trainable`."""

    shown_keys = ("lm_layers_run",)

    def __init__(self, model: EarlyExitLM, inputs: Any, labels: np.ndarray,
                 splits: dict[str, np.ndarray], has_text: np.ndarray, *,
                 groups: np.ndarray | None = None, batch_size: int = 32, order: str = "descending",
                 epochs: int, lr: float = 5e-4, weight_decay: float = 0.01,
                 patience: int | None = None, seed: int = 0,
                 pseudo: tuple[np.ndarray, np.ndarray] | None = None, pseudo_weight: float = 0.8,
                 checkpoint: str | None = None, metrics_log: str | None = None, quiet: bool = False):
        super().__init__(epochs=epochs, lr=lr, weight_decay=weight_decay, patience=patience,
                         seed=seed, checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet)
        self.model, self.inputs, self.labels, self.splits = model, inputs, labels, splits
        self.groups = np.zeros(len(labels), np.int64) if groups is None else np.asarray(groups)
        self.targets = labels.astype(np.int64).copy()
        self.node_weight = np.ones(len(labels), dtype=np.float32)
        train = splits["train"][has_text[splits["train"]]]
        if pseudo is not None:
            extra = pseudo[0][has_text[pseudo[0]]]
            self.targets[pseudo[0]] = pseudo[1]
            gold_w, pseudo_w = pseudo_label_weights(len(train), len(extra), pseudo_weight)
            self.node_weight[train] = gold_w
            self.node_weight[extra] = pseudo_w
            train = np.concatenate([train, extra])
        self.loader = GroupBatches(train, self.groups, batch_size, order=order, seed=seed,
                                   num_groups=model.groups)
        self.optimizer = adamw([{"params": model.parameters(), "lr": lr}], weight_decay)
        self.label, self.layers_run, self.steps_taken = "lm", 0, 0

    def lm_step(self, group: int, nodes: np.ndarray) -> tuple[float, int, int]:
        """One optimizer step on a batch of ``group`` (Eq. 5.1 weight)."""
        ids, mask = self.inputs.batch(nodes)
        device = next(self.model.parameters()).device
        self.optimizer.zero_grad(set_to_none=True)
        _, logits = self.model(ids.to(device), mask.to(device), group)
        target = torch.as_tensor(self.targets[nodes]).to(device)
        weight = torch.as_tensor(self.node_weight[nodes]).to(device)
        loss = (F.cross_entropy(logits, target, reduction="none") * weight).mean()
        (loss * float(self.loader.weights[group])).backward()
        self.optimizer.step()
        self.layers_run += self.model.depths[group] * len(nodes)
        self.steps_taken += 1
        return loss.item(), len(nodes), int((logits.argmax(-1) == target).sum())

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        group, nodes = batch
        return self.lm_step(int(group), nodes)

    def epoch_extra(self, epoch: int) -> dict[str, Any]:
        run, self.layers_run = self.layers_run, 0
        return {"lm_layers_run": run}

    def evaluate(self) -> dict[str, float]:
        nodes = np.concatenate([self.splits[s] for s in ("train", "valid", "test")
                                if s in self.splits])
        _, logits = encode(self.model, self.inputs, nodes, self.groups[nodes])
        full = torch.zeros(len(self.labels), self.model.num_classes)
        full[torch.as_tensor(nodes)] = logits
        return split_accuracy(full, self.labels, self.splits)
