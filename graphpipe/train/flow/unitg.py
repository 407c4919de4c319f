"""UniTG on the pipeline (``graphpipe train STORE --model unitg --pipeline P``): the GNN is
a :class:`~.revgcn.RevGCN` in ``P`` stages (:class:`~.trainer.FlowTrainer`), the LM (the
Lazy Tuner's early exits, :mod:`graphpipe.train.text.lazy_tuner`) lives on stage 0 with
the GNN's input rows, and the Modality Collaborator
(:class:`~graphpipe.train.text.collaborator.SyncSchedule`, decided on every rank from the
same losses) replaces stage 0's input rows with LM embeddings.

Where the LM's steps run (``interleave``):

- ``True`` — the **Bubble Interleaver** (the LM takes as many steps as the bubbles have
  time for, so the result depends on timing) (:mod:`.interleaver`): a thread on stage 0 runs
  the LM's ``lm_epochs`` passes only while the stage waits for a message; the GNN's
  epochs never wait for the LM except at a sync (between two LM steps);
- ``False`` (the default: the same steps, so the same result, on every run) — in line: before each GNN epoch, stage 0 runs that epoch's share of the LM's
  steps (spread over the first ``lm_share · J`` epochs, as the one-process
  :class:`~graphpipe.train.text.unitg.UniTGTrainer`), and the other stages wait.

The result adds to :meth:`.trainer.FlowTrainer.fit`'s: ``lm_steps`` / ``lm_planned``,
``lm_cpu_seconds`` (CPU time of the LM's steps), ``syncs``.

Checkpoints (``checkpoint``; ``fit(resume=...)``): the GNN's as :mod:`.checkpoint`
(``train.kind`` ``"flow-unitg"``), plus, under ``unitg``, what the run carries besides:
the LM's weights and AdamW state, its steps taken, the Modality Collaborator's schedule
(Δt level, smoothed loss F, its counter, the last sync), stage 0's input rows and which
nodes hold an LM embedding, the syncs so far — and stage 0's RNG (the LM's dropout),
taken between two LM steps when the LM runs in the bubbles. A resume must share the
LM's and the schedule's settings (:func:`resume_settings`), not ``J`` itself: ``J``
only matters through the Δt values and the epochs the LM's steps are spread over.
"""

from __future__ import annotations

import contextlib
import copy
import os
import time
from typing import Any

import numpy as np
import torch

from graphpipe.train.checkpoint import CheckpointError, rng_state
from graphpipe.train.flow.checkpoint import UNITG_KIND
from graphpipe.train.flow.interleaver import BubbleGate, LMWorker
from graphpipe.train.flow.trainer import FlowConfig, FlowData, FlowTrainer
from graphpipe.train.text.build import TextConfig, build_lm_trainer
from graphpipe.train.text.collaborator import GnnInputs, SyncSchedule
from graphpipe.train.text.lazy_tuner import node_groups
from graphpipe.train.text.lm_trainer import encode
from graphpipe.train.text.task import TextTask
from graphpipe.train.text.unitg import UniTGPlan

__all__ = ["UniTGFlow", "resume_settings"]

_TEXT_SETTINGS = ("lm_kind", "lm_hidden", "lm_layers", "lm_heads", "max_len", "lm_epochs",
                  "lm_lr", "lm_batch_size", "emb_dim", "grouping", "groups", "exit_order",
                  "sync_patience")


def resume_settings(text: TextConfig, epochs: int, interleave: bool) -> dict[str, Any]:
    """What a UniTG resume must share besides the GNN's settings: the LM's and the Lazy
    Tuner's settings, where the LM runs, the Δt values and (LM in line) the epochs its
    steps are spread over (a run of ``epochs`` GNN epochs)."""
    settings = {k: getattr(text, k) for k in _TEXT_SETTINGS}
    settings.update(interleave=bool(interleave),
                    sync_deltas=SyncSchedule(epochs, patience=text.sync_patience).deltas)
    if not interleave:
        settings["lm_carrying_epochs"] = UniTGPlan.carrying_epochs(epochs, text.lm_share)
    return settings


class UniTGFlow:
    """One rank of a pipelined UniTG run (module docstring)."""

    def __init__(self, task: TextTask, text: TextConfig, flow: FlowConfig, *, rank: int = 0,
                 stages: int = 1, parts: np.ndarray | None = None, interleave: bool = False,
                 checkpoint: str | os.PathLike | None = None):
        self.task, self.text, self.rank, self.interleave = task, text, rank, interleave
        self.schedule = SyncSchedule(flow.epochs, patience=text.sync_patience)
        self.syncs, self._synced_at = 0, -1
        self.lm = self.inputs = self.worker = self.plan = None
        self.gate = BubbleGate() if interleave and rank == 0 else None
        if rank == 0:
            self.groups = node_groups(task.degrees, text.grouping, text.groups)
            self.lm = build_lm_trainer(task, text, groups=self.groups, num_groups=text.groups,
                                       quiet=True)
            self.inputs = GnnInputs(task.features, text.emb_dim, seed=text.seed)
            self.text_nodes = np.flatnonzero(task.has_text)
            if interleave:
                self.worker = LMWorker(self.lm, self.gate, text.lm_epochs)
            else:
                self.plan = UniTGPlan(self.lm.loader, text.lm_epochs, flow.epochs, text.lm_share)
        data = FlowData(task.indptr, task.indices, task.features, task.labels, task.splits,
                        task.num_classes)
        self.flow = FlowTrainer(data, flow, rank=rank, stages=stages, parts=parts, gate=self.gate,
                                on_epoch=self._after, before_epoch=self._before,
                                x=None if self.inputs is None else self.inputs.x,
                                in_dim=text.emb_dim, checkpoint=checkpoint)
        self.flow.kind = UNITG_KIND
        self.flow.settings.update(resume_settings(text, flow.epochs, interleave))
        if self.lm is not None:
            self.flow.extra_state = self._checkpoint_extra
        self._lm_cpu = 0.0

    # -- the LM's steps ------------------------------------------------------------------------
    def _before(self, epoch: int) -> None:
        if self.plan is None:
            return
        self.plan.set_epoch(epoch)
        t0 = time.thread_time()
        for batch in self.plan:
            if batch[0] == "lm":
                self.lm.lm_step(int(batch[1]), batch[2])
        self._lm_cpu += time.thread_time() - t0

    def _after(self, epoch: int, record: dict[str, Any]) -> None:
        if self.schedule.record(epoch + 1, record["loss"]) and self.rank == 0:
            if self.worker is not None:
                with self.worker.between_steps():
                    self._sync()
            else:
                self._sync()
        record["delta"] = self.schedule.delta

    def _sync(self) -> None:
        """Every node with text through its group's exit, into stage 0's input rows; not
        before the LM has taken one epoch of steps [R: with the LM in the bubbles, a
        sync at 0.3J could otherwise swap the raw features for an LM that has barely
        started], nor again when it has taken no step since the last sync."""
        if self.lm.steps_taken == self._synced_at or self.lm.steps_taken < len(self.lm.loader):
            return
        self._synced_at = self.lm.steps_taken
        nodes = self.text_nodes
        emb, _ = encode(self.lm.model, self.lm.inputs, nodes, self.groups[nodes])
        self.inputs.replace(torch.as_tensor(nodes), emb)
        self.syncs += 1

    # -- checkpoints ---------------------------------------------------------------------------
    def _checkpoint_extra(self) -> dict[str, Any]:
        """Stage 0's entries of the checkpoint (module docstring): copies, taken between two
        LM steps."""
        held = self.worker.between_steps() if self.worker is not None else contextlib.nullcontext()
        with held:
            return copy.deepcopy({"rng": rng_state(), "unitg": {
                "lm_state": self.lm.model.state_dict(), "lm_optimizer": self.lm.optimizer.state_dict(),
                "lm_steps": self.lm.steps_taken, "syncs": self.syncs, "synced_at": self._synced_at,
                "schedule": self.schedule.state(), "x": self.inputs.x,
                "encoded": self.inputs.encoded}})

    def _restore(self, state: dict[str, Any]) -> None:
        extra = state.get("unitg")
        try:
            self.schedule.load(extra["schedule"])
            self.syncs, self._synced_at = int(extra["syncs"]), int(extra["synced_at"])
            if self.lm is None:
                return
            self.lm.model.load_state_dict(extra["lm_state"])
            self.lm.optimizer.load_state_dict(extra["lm_optimizer"])
            self.lm.steps_taken = int(extra["lm_steps"])
            self.inputs.x.copy_(extra["x"])
            self.inputs.encoded.copy_(extra["encoded"])
        except (KeyError, TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"checkpoint: its UniTG state does not fit this run "
                                  f"({type(exc).__name__})") from None
        if self.worker is not None:
            self.worker.start_step = self.lm.steps_taken

    # -- the run -------------------------------------------------------------------------------
    def fit(self, resume: str | os.PathLike | dict[str, Any] | None = None) -> dict[str, Any]:
        """Train (module docstring; ``resume``: a checkpoint's path or state); the result of
        this rank (rank 0: the LM's figures)."""
        if resume is not None:
            resume = self.flow.read_resume(resume)
            self._restore(resume)
        if self.worker is not None:
            self.worker.start()
        try:
            result = self.flow.fit(resume=resume)
        finally:
            if self.worker is not None:
                self.worker.stop()
        if self.lm is not None:
            worker = self.worker
            result.update(lm_steps=self.lm.steps_taken, syncs=self.syncs,
                          lm_planned=worker.planned if worker else self.plan.total,
                          lm_cpu_seconds=worker.cpu_seconds if worker else self._lm_cpu,
                          gate_open_seconds=self.gate.open_seconds if self.gate else 0.0)
        return result
