"""A GNN trained full-graph on given input rows (the LM's embeddings, raw features, or a
mix): the GNN half of UniTG, TAPE and GLEM. One optimizer step per epoch over every
training node; optional pseudo-labelled nodes (GLEM) make a share ``pseudo_weight`` of
the loss (GLEM's ``gnn_pl_weight``, :func:`~graphpipe.train.text.base.pseudo_label_weights`).

>>> import numpy as np, torch
>>> from graphpipe.train.text.task import FullGraph
>>> from graphpipe.train.models import build_model
>>> g = FullGraph(np.array([0, 1, 2, 3]), np.array([2, 0, 1]), layers=1)
>>> _ = torch.manual_seed(0)
>>> t = GnnTrainer(build_model("sage", 2, 4, 2, 1, dropout=0.0), g, torch.eye(3, 2),
...                np.array([0, 1, 0]), {"train": np.array([0, 1]), "valid": np.array([2]),
...                "test": np.array([2])}, epochs=20, lr=0.05, quiet=True)
>>> result = t.fit()
>>> result.history[-1]["loss"] < result.history[0]["loss"], result.history[-1]["batch_acc"]
(True, 1.0)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from graphpipe.train.loop import EpochSteps
from graphpipe.train.text.base import TextTrainable, adamw, pseudo_label_weights
from graphpipe.train.text.task import FullGraph, split_accuracy

__all__ = ["GnnTrainer"]


class GnnTrainer(TextTrainable):
    """Full-graph training of ``model`` (a BlockModel) on the rows ``x``."""

    def __init__(self, model: torch.nn.Module, graph: FullGraph, x: torch.Tensor,
                 labels: np.ndarray, splits: dict[str, np.ndarray], *, epochs: int,
                 lr: float = 0.01, weight_decay: float = 0.0, patience: int | None = None,
                 seed: int = 0, pseudo: tuple[np.ndarray, np.ndarray] | None = None,
                 pseudo_weight: float = 0.05, checkpoint: str | None = None,
                 metrics_log: str | None = None, quiet: bool = False):
        super().__init__(epochs=epochs, lr=lr, weight_decay=weight_decay, patience=patience,
                         seed=seed, checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet)
        self.model, self.graph, self.x = model, graph, x
        self.labels, self.splits = labels, splits
        self.optimizer = adamw([{"params": model.parameters(), "lr": lr}], weight_decay)
        self.loader = EpochSteps(seed)
        self.label = "gnn"
        nodes, targets = [splits["train"]], [labels[splits["train"]]]
        weights = [np.ones(len(splits["train"]))]
        if pseudo is not None:
            gold_w, pseudo_w = pseudo_label_weights(len(splits["train"]), len(pseudo[0]),
                                                    pseudo_weight)
            weights = [np.full(len(splits["train"]), gold_w)]
            nodes.append(pseudo[0])
            targets.append(pseudo[1])
            weights.append(np.full(len(pseudo[0]), pseudo_w))
        device = x.device
        self.nodes = torch.as_tensor(np.concatenate(nodes), dtype=torch.int64, device=device)
        self.targets = torch.as_tensor(np.concatenate(targets), dtype=torch.int64, device=device)
        self.weights = torch.as_tensor(np.concatenate(weights), dtype=torch.float32, device=device)
        self.last_loss = float("nan")

    def logits(self) -> torch.Tensor:
        """``(N, C)`` of the current model on the current inputs."""
        return self.model(self.graph.batch(self.x))

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        self.optimizer.zero_grad(set_to_none=True)
        out = self.logits()[self.nodes]
        losses = F.cross_entropy(out, self.targets, reduction="none")
        loss = (losses * self.weights).sum() / self.weights.sum()
        loss.backward()
        self.optimizer.step()
        self.last_loss = loss.item()
        right = int((out.argmax(-1) == self.targets).sum())
        return self.last_loss, int(self.nodes.numel()), right

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        self.model.eval()
        return split_accuracy(self.logits(), self.labels, self.splits)

    @torch.no_grad()
    def predict(self) -> np.ndarray:
        """Predicted class of every node (GLEM's pseudo-labels)."""
        self.model.eval()
        return self.logits().argmax(-1).cpu().numpy()
