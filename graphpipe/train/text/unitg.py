"""UniTG in one process (thesis ch. 5): the LM and the GNN learn in one job.

Per GNN epoch ``j`` (``J`` in all), :class:`UniTGTrainer` runs

1. its share of the LM's fine-tuning steps: ``lm_epochs`` passes of the Lazy Tuner
   (early exits by centrality group, Eq. 5.1) spread evenly over the first
   ``lm_share · J`` GNN epochs [R: the thesis runs the LM in the GNN pipeline's bubbles
   on other processes; here the two interleave in one process, so the LM's share of the
   wall time is what the Lazy Tuner saves];
2. one full-graph GNN step on its current inputs;
3. the Modality Collaborator: when the schedule says so (Δt from
   ``{0.3, 0.2, 0.1, 0.02}·J``), every node with text is encoded by the partly tuned LM
   through its group's exit and replaces its GNN input row; nodes without text keep their
   projected raw features.

No checkpoint hand-off, no cold start: the GNN trains from the first epoch on raw
features and picks up the LM's embeddings as they come. Evaluation and the reported
``test acc`` are the GNN's (at the best valid epoch).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch import nn

from graphpipe.train.checkpoint import CheckpointError
from graphpipe.train.text.base import TextTrainable, adamw
from graphpipe.train.text.collaborator import GnnInputs, SyncSchedule
from graphpipe.train.text.gnn import GnnTrainer
from graphpipe.train.text.lazy_tuner import GroupBatches
from graphpipe.train.text.lm_trainer import LMTrainer, encode

__all__ = ["UniTGPlan", "UniTGTrainer"]


class UniTGPlan:
    """The batches of GNN epoch ``j``: its LM batches (``("lm", group, nodes)``), then
    ``("gnn",)``; a pure function of the seed and ``j`` (resumable)."""

    def __init__(self, lm_batches: GroupBatches, lm_epochs: int, gnn_epochs: int,
                 lm_share: float):
        self.lm, self.lm_epochs = lm_batches, lm_epochs
        self.seed, self.epoch = lm_batches.seed, 0
        self.per_lm_epoch = len(lm_batches)
        self.total = lm_epochs * self.per_lm_epoch
        self.carrying = self.carrying_epochs(gnn_epochs, lm_share)
        self._plans: dict[int, list] = {}

    @staticmethod
    def carrying_epochs(gnn_epochs: int, lm_share: float) -> int:
        """The GNN epochs the LM's steps are spread over: ``lm_share · J``, at least one."""
        return max(1, min(gnn_epochs, round(lm_share * gnn_epochs)))

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _span(self, j: int) -> range:
        if j >= self.carrying:
            return range(0)
        return range(self.total * j // self.carrying, self.total * (j + 1) // self.carrying)

    def _lm_batch(self, k: int) -> tuple[int, np.ndarray]:
        e = k // self.per_lm_epoch
        if e not in self._plans:
            self._plans = {e: None}
            self.lm.set_epoch(e)
            self._plans[e] = self.lm.plan()
        return self._plans[e][k % self.per_lm_epoch]

    def __len__(self) -> int:
        return len(self._span(self.epoch)) + 1

    def __iter__(self) -> Iterator[tuple]:
        for k in self._span(self.epoch):
            yield ("lm", *self._lm_batch(k))
        yield ("gnn",)


class UniTGTrainer(TextTrainable):
    """LM (Lazy Tuner) + GNN (Modality Collaborator) in one :func:`loop.fit` run."""

    shown_keys = ("lm_steps", "synced", "delta")

    def __init__(self, lm: LMTrainer, gnn: GnnTrainer, inputs: GnnInputs, has_text: np.ndarray,
                 *, lm_epochs: int, lm_share: float = 0.6, patience: int | None = None,
                 sync_patience: int = 20, checkpoint: str | None = None,
                 metrics_log: str | None = None, quiet: bool = False):
        super().__init__(epochs=gnn.epochs, lr=gnn.lr, weight_decay=gnn.weight_decay,
                         patience=patience, seed=gnn.seed, checkpoint=checkpoint,
                         metrics_log=metrics_log, quiet=quiet)
        self.lm, self.gnn, self.inputs = lm, gnn, inputs
        self.model = nn.ModuleDict({"gnn": gnn.model, "lm": lm.model})
        self.optimizer = adamw([{"params": gnn.model.parameters(), "lr": gnn.lr},
                                {"params": lm.model.parameters(), "lr": lm.lr}], gnn.weight_decay)
        lm.optimizer = gnn.optimizer = self.optimizer
        self.loader = UniTGPlan(lm.loader, lm_epochs, gnn.epochs, lm_share)
        self.schedule = SyncSchedule(gnn.epochs, patience=sync_patience)
        self.text_nodes = np.flatnonzero(has_text)
        self.label = "unitg"
        self._epoch_stats: dict[str, Any] = {}
        self._synced_at_step = -1
        self.setting = {"epochs": gnn.epochs, "lm_epochs": lm_epochs, "lm_share": lm_share,
                        "sync_patience": sync_patience, "groups": lm.model.groups}

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        if batch[0] == "lm":
            self._epoch_stats["lm_steps"] = self._epoch_stats.get("lm_steps", 0) + 1
            self.lm.lm_step(int(batch[1]), batch[2])
            return 0.0, 0, 0
        loss, n, right = self.gnn.step(None, epoch, iteration)
        if self.schedule.record(epoch + 1, loss):
            self.sync()
        return loss, n, right

    def sync(self) -> None:
        """Encode every node with text through its group's exit; replace its GNN input.
        When the LM has taken no step since the last sync (its epochs are done), the
        embeddings would be the same: nothing is recomputed."""
        steps = self.lm.steps_taken
        if steps == self._synced_at_step:
            self._epoch_stats["synced"] = "same"
            return
        self._synced_at_step = steps
        t0 = time.perf_counter()
        nodes = self.text_nodes
        emb, _ = encode(self.lm.model, self.lm.inputs, nodes, self.lm.groups[nodes])
        self.inputs.replace(torch.as_tensor(nodes), emb)
        self._epoch_stats["synced"] = round(time.perf_counter() - t0, 2)

    def epoch_extra(self, epoch: int) -> dict[str, Any]:
        stats, self._epoch_stats = self._epoch_stats, {}
        return {"lm_steps": stats.get("lm_steps", 0), "synced": stats.get("synced", "-"),
                "delta": self.schedule.delta, "lm_layers_run": self.lm.epoch_extra(epoch)[
                    "lm_layers_run"]}

    def evaluate(self) -> dict[str, float]:
        return self.gnn.evaluate()

    def extra_state(self) -> dict[str, Any]:
        return {"schedule": self.schedule.state(), "x": self.inputs.x.cpu().clone(),
                "encoded": self.inputs.encoded.cpu().clone(), "setting": dict(self.setting),
                "lm_steps": self.lm.steps_taken, "synced_at_step": self._synced_at_step}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        if state.get("setting") != self.setting:
            raise CheckpointError(f"checkpoint was written by a UniTG run with "
                                  f"{state.get('setting')}; this run has {self.setting} (the "
                                  "LM's spread and the sync schedule depend on them)")
        self.schedule.load(state["schedule"])
        self.lm.steps_taken, self._synced_at_step = state["lm_steps"], state["synced_at_step"]
        self.inputs.x.copy_(state["x"])
        self.inputs.encoded.copy_(state["encoded"])
