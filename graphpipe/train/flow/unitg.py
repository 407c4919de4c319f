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
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from graphpipe.train.flow.interleaver import BubbleGate, LMWorker
from graphpipe.train.flow.trainer import FlowConfig, FlowData, FlowTrainer
from graphpipe.train.text.build import TextConfig, build_lm_trainer
from graphpipe.train.text.collaborator import GnnInputs, SyncSchedule
from graphpipe.train.text.lazy_tuner import node_groups
from graphpipe.train.text.lm_trainer import encode
from graphpipe.train.text.task import TextTask
from graphpipe.train.text.unitg import UniTGPlan

__all__ = ["UniTGFlow"]


class UniTGFlow:
    """One rank of a pipelined UniTG run (module docstring)."""

    def __init__(self, task: TextTask, text: TextConfig, flow: FlowConfig, *, rank: int = 0,
                 stages: int = 1, parts: np.ndarray | None = None, interleave: bool = False):
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
                                in_dim=text.emb_dim)
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

    # -- the run -------------------------------------------------------------------------------
    def fit(self) -> dict[str, Any]:
        """Train (module docstring); the result of this rank (rank 0: the LM's figures)."""
        if self.worker is not None:
            self.worker.start()
        try:
            result = self.flow.fit()
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
