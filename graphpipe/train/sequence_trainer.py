"""The :class:`SequenceTrainer`: graph transformers trained on ClusterLoader sequences.

One epoch = one pass of a :class:`graphpipe.loaders.ClusterLoader` over the ``train``
nodes (node-level stores: one sequence of ``seq_len`` positions per step) or graphs
(graph-level stores, ``graph/ptr``: ``batch_size`` padded graphs per step), AdamW by
default, cross-entropy with ``ignore_index=-100`` on every labelled position (node
level) or on ``graph_y`` (graph level), one optimizer step per batch.

**Attention per iteration** (``attention=``):

- ``"sparse"``: the sequence's exact pattern, every step;
- ``"cluster-sparse"``: the loader's cluster-sparse format every step; with
  ``threshold="auto"`` (default) TorchGT's Auto Tuner
  (:class:`graphpipe.ops.attention.cluster_sparse.ThresholdTuner`) steps once per epoch on the
  epoch's mean loss and time, and the loader is handed the tuner
  (:meth:`ClusterLoader.set_threshold`), so the next epoch's patterns use the new
  threshold ``multiplier · β_G``; a number is a fixed multiplier of ``β_G``;
- ``"interleaved"``: :class:`graphpipe.train.interleave.InterleaveScheduler` —
  ``switch_freq`` full-attention iterations per epoch, spread evenly, plus any
  iteration whose structure search fails an enforced condition; the rest sparse;
- ``"dense"``: full attention every step.

A *full* step runs dense attention when its estimate
(:func:`graphpipe.train.sequence_attention.dense_attention_bytes`) fits
``dense_budget`` bytes (default: half the free GPU memory on CUDA, 2 GiB on the CPU),
otherwise sparse attention with a logged notice. Every iteration's mode is logged at
INFO (logger ``graphpipe.train.sequence_trainer``) and the epoch's record carries the
counts and the trace (``attention.trace``: one letter per iteration, ``s`` sparse,
``c`` cluster-sparse, ``D`` dense, ``f`` full wanted but fell back to sparse).

**Evaluation** (every ``eval_every`` epochs and after the last): the model runs on
sequences of the ``valid`` and ``test`` nodes (graphs) alone, unshuffled, with the
exact sparse pattern (dense for ``attention="dense"`` when it fits) — TorchGT's
protocol — and accuracy is OGB's Evaluator
(:func:`graphpipe.train.trainer.accuracy`) over the labelled positions. Early stopping
with ``patience``; the reported test accuracy is the one at the best valid epoch.

Metrics log (JSON lines), checkpoints (atomic; exact resume: model, optimizer, RNG
states, loader epoch, Auto Tuner state) and the progress bar are the
:class:`graphpipe.train.Trainer`'s: both run the one epoch loop
:func:`graphpipe.train.loop.fit`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.loaders.cluster import ClusterLoader
from graphpipe.ops._core.checks import check_int as _check_int
from graphpipe.ops.attention.cluster_sparse import ThresholdTuner, TunerDecision
from graphpipe.train.interleave import (
    CONDITIONS,
    HAMILTONIAN_TESTS,
    InterleaveScheduler,
    StructureSearch,
)
from graphpipe.train.loop import EpochSums, Trainable, fmt_acc, make_optimizer
from graphpipe.train.sequence_attention import dense_attention_bytes
from graphpipe.train.trainer import accuracy, check_eval_splits, open_training_store

__all__ = ["SEQUENCE_ATTENTIONS", "SequenceTrainer", "format_sequence_epoch"]

log = logging.getLogger(__name__)

SEQUENCE_ATTENTIONS = ("sparse", "cluster-sparse", "interleaved", "dense")
_SPLITS = ("valid", "test")
_LETTER = {"sparse": "s", "cluster-sparse": "c", "dense": "D", "fallback": "f"}
_CPU_DENSE_BUDGET = 2 << 30


class SequenceTrainer(Trainable):
    """Train a graph transformer (:class:`GraphormerSlim`, :class:`GT`) on ``store``.

    Args:
        model: a model with ``sequence_model = True`` (``build_model("graphormer"|"gt")``).
        store: a GraphStore or its path: node-level (labels, features, ``train``
            split) or graph-level (``graph/ptr``, ``graph/label``, graph splits).
        seq_len: positions per sequence, token included (node level; graph level:
            None pads to the longest graph of a batch).
        attention: ``"sparse"``, ``"cluster-sparse"``, ``"interleaved"`` or ``"dense"``.
        epochs: total epochs (a resumed run continues up to this number).
        batch_size: graphs per batch (graph level; node level is one sequence).
        optimizer, lr, weight_decay: ``"adamw"`` (default), ``"adam"`` or ``"sgd"``.
        global_token: a global token per sequence (default: the model's
            ``uses_global_token``: Graphormer yes, GT no).
        reorder, parts, block, placement: the loader's (``"metis"``/``"none"``...).
        threshold: cluster-sparse threshold: ``"auto"`` (Auto Tuner) or a multiplier
            of β_G.
        switch_freq: full iterations per epoch (``"interleaved"``).
        hamiltonian: the structure search's Dirac-type test (``"dirac"``,
            ``"random-graph"``, ``"none"``).
        enforce: structure-search conditions whose failure forces full attention
            (``"self_loops"``, ``"reachable"``, ``"hamiltonian"``; all three is the
            paper's rule, none is the artifact's schedule-only ``hybrid`` mode).
        dense_budget: bytes a dense step may take (None: the default above).
        patience, eval_every, evaluation (``"sequences"`` or ``"none"``), seed,
        max_steps, device, checkpoint, metrics_log, quiet, on_epoch: as
            :class:`graphpipe.train.Trainer`.
        loader_options: extra :class:`ClusterLoader` keyword arguments.
    """

    kind = "sequence"

    def __init__(self, model: nn.Module, store: Any, *, seq_len: int | None = 4096,
                 attention: str = "sparse", epochs: int = 5, batch_size: int | None = None,
                 optimizer: str = "adamw", lr: float = 1e-3, weight_decay: float = 0.01,
                 global_token: bool | None = None, reorder: str = "metis", parts: int = 8,
                 block: int = 16, placement: str = "random", threshold: float | str = "auto",
                 switch_freq: int = 5, hamiltonian: str = "dirac",
                 enforce: tuple[str, ...] = ("self_loops", "reachable"),
                 dense_budget: int | None = None, patience: int | None = None,
                 evaluation: str = "sequences", eval_every: int = 1, seed: int = 0,
                 max_steps: int | None = None, device: str | torch.device = "cpu",
                 checkpoint: str | os.PathLike | None = None,
                 metrics_log: str | os.PathLike | None = None, quiet: bool = False,
                 loader_options: dict[str, Any] | None = None,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None):
        if not getattr(model, "sequence_model", False):
            raise ValueError(f"'model' must be a graph transformer (graphormer, gt); got "
                             f"{type(model).__name__}: train GNNs with graphpipe.train.Trainer")
        if attention not in SEQUENCE_ATTENTIONS:
            raise ValueError(f"'attention' must be one of {', '.join(SEQUENCE_ATTENTIONS)} "
                             f"(got {attention!r})")
        if evaluation not in ("sequences", "none"):
            raise ValueError(f"'evaluation' must be 'sequences' or 'none' (got {evaluation!r})")
        if hamiltonian not in HAMILTONIAN_TESTS:
            raise ValueError(f"'hamiltonian' must be one of {', '.join(HAMILTONIAN_TESTS)} "
                             f"(got {hamiltonian!r})")
        enforce = tuple(enforce)
        bad = [c for c in enforce if c not in CONDITIONS]
        if bad:
            raise ValueError(f"'enforce' entries must be in {', '.join(CONDITIONS)} (got {bad})")
        self.configure(epochs=epochs, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
                       patience=patience, evaluation=evaluation, eval_every=eval_every, seed=seed,
                       max_steps=max_steps, checkpoint=checkpoint, metrics_log=metrics_log,
                       quiet=quiet, on_epoch=on_epoch)
        _check_int("switch_freq", switch_freq, 0)
        _check_int("dense_budget", dense_budget, 1, allow_none=True)
        if threshold != "auto" and (isinstance(threshold, bool)
                                    or not isinstance(threshold, (int, float)) or threshold < 0):
            raise ValueError(f"'threshold' must be 'auto' or a non-negative multiplier of β_G "
                             f"(got {threshold!r})")
        if global_token is None:
            global_token = bool(getattr(model, "uses_global_token", False))
        if global_token and not getattr(model, "uses_global_token", False):
            raise ValueError(f"'global_token': {type(model).__name__} has no global token "
                             "(pass global_token=False)")

        self.store = self._open_store(store)
        self.graph_level = self.store.has_array("graph/ptr")
        if evaluation != "none":
            check_eval_splits(self.store)
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.attention, self.seq_len = attention, seq_len
        self.dense_budget = dense_budget
        self.settings = {"seq_len": seq_len, "attention": attention, "batch_size": batch_size,
                         "global_token": bool(global_token), "reorder": reorder, "parts": int(parts),
                         "block": int(block), "placement": placement, "switch_freq": int(switch_freq),
                         "seed": self.seed}
        self.tuner = ThresholdTuner() if (attention == "cluster-sparse" and threshold == "auto") else None
        self._loader_args = {
            "batch_size": batch_size, "global_token": bool(global_token), "reorder": reorder,
            "parts": parts, "block": block, "placement": placement, "seed": self.seed,
            "max_dist": int(getattr(model, "max_dist", 16)), "device": self.device,
            **(loader_options or {})}
        threshold_value = self.tuner if self.tuner is not None else (
            5.0 if threshold == "auto" else float(threshold))
        self.loader = ClusterLoader(
            self.store, seq_len, input_nodes="train",
            pattern="cluster-sparse" if attention == "cluster-sparse" else "sparse",
            threshold=threshold_value, **self._loader_args)
        if self.loader.feature_dim != getattr(model, "in_dim", self.loader.feature_dim):
            raise ValueError(f"the model has in_dim={model.in_dim} but the store has "
                             f"{self.loader.feature_dim} features")
        self.num_classes = self._num_classes()
        if getattr(model, "out_dim", self.num_classes) != self.num_classes:
            raise ValueError(f"the model has out_dim={model.out_dim} but the store has "
                             f"{self.num_classes} classes")
        if getattr(model, "level", "node") != ("graph" if self.graph_level else "node"):
            raise ValueError(f"the model has level={model.level!r} but the store is "
                             f"{'graph' if self.graph_level else 'node'}-level")
        self.scheduler = None
        if attention == "interleaved":
            search = StructureSearch(int(model.num_layers), hamiltonian=hamiltonian, seed=self.seed)
            self.scheduler = InterleaveScheduler(int(switch_freq), search=search, enforce=enforce)
        self.optimizer = make_optimizer(self.model, optimizer, self.lr, self.weight_decay)
        self._eval_loaders: dict[str, ClusterLoader] = {}
        self._fallback_noted = False
        self._trace: list[str] = []

    # ---------------------------------------------------------------------------- setup
    @staticmethod
    def _open_store(store: Any) -> Any:
        from graphpipe.store import GraphStore, open_store

        if isinstance(store, (str, os.PathLike)) and Path(store).is_dir():
            opened = open_store(store)
            if not opened.has_array("graph/ptr"):
                return open_training_store(opened)
            store = opened
        if isinstance(store, GraphStore) and store.has_array("graph/ptr"):
            if not store.has_array("graph/label"):
                raise ValueError(f"store {str(store.path)!r} is graph-level but has no 'graph/label'")
            if "train" not in store.split_names:
                raise ValueError(f"store {str(store.path)!r} has no 'train' split "
                                 f"(splits: {store.split_names})")
            if not store.has_features:
                raise ValueError(f"store {str(store.path)!r} has no node features ('node/feat')")
            return store
        return open_training_store(store)

    def _num_classes(self) -> int:
        if self.graph_level:
            labels = np.asarray(self.store.array("graph/label")).reshape(-1)
            return int(labels.max()) + 1 if labels.size else 1
        meta = self.store.manifest.get("labels") or {}
        return int(meta.get("num_classes") or int(np.asarray(self.store.labels).max()) + 1)

    def _budget(self) -> int:
        if self.dense_budget is not None:
            return int(self.dense_budget)
        if self.device.type == "cuda":
            free, _total = torch.cuda.mem_get_info(self.device)
            return int(free // 2)
        return _CPU_DENSE_BUDGET

    def dense_fits(self, batch: Any) -> tuple[bool, int]:
        """Whether a dense step of ``batch`` fits the budget, and its estimated bytes."""
        need = dense_attention_bytes(batch.batch_size, batch.seq_len, self.model.heads,
                                     self.model.num_layers, device_type=self.device.type,
                                     with_bias=bool(getattr(self.model, "has_bias", False)))
        return need <= self._budget(), need

    def _full_mode(self, batch: Any, epoch: int, iteration: int, reason: str) -> tuple[str, str]:
        fits, need = self.dense_fits(batch)
        if fits:
            return "dense", reason
        notice = (f"dense attention needs ~{need / 2**20:.0f} MiB at S={batch.seq_len} "
                  f"(B={batch.batch_size}), over the {self._budget() / 2**20:.0f} MiB budget: "
                  "sparse attention instead")
        if not self._fallback_noted:
            log.warning("epoch %d iteration %d: %s", epoch, iteration, notice)
            self._fallback_noted = True
        return "fallback", f"{reason}; {notice}"

    def _step_mode(self, batch: Any, epoch: int, iteration: int) -> tuple[str, str]:
        """``(mode, reason)``: mode ``sparse``, ``cluster-sparse``, ``dense`` or ``fallback``
        (full wanted, sparse run)."""
        if self.attention in ("sparse", "cluster-sparse"):
            return self.attention, "configured"
        if self.attention == "dense":
            return self._full_mode(batch, epoch, iteration, "configured")
        decision = self.scheduler.decide(iteration, batch)
        reason = decision.reason + (f"; {decision.search.detail}" if decision.search else "")
        if decision.mode == "full":
            return self._full_mode(batch, epoch, iteration, reason)
        return "sparse", reason

    # ---------------------------------------------------------------------------- checkpoints
    def _tuner_state(self) -> dict[str, Any] | None:
        t = self.tuner
        if t is None:
            return None
        return {"index": t.index, "smoothed": t.smoothed, "rates": list(t.rates),
                "history": [asdict(d) for d in t.history]}

    def _set_tuner_state(self, state: dict[str, Any] | None) -> None:
        if self.tuner is None or state is None:
            return
        self.tuner.index = int(state["index"])
        self.tuner.smoothed = state["smoothed"]
        self.tuner.rates = [float(r) for r in state["rates"]]
        self.tuner.history = [TunerDecision(**d) for d in state["history"]]
        self.loader.set_threshold(self.tuner)

    def checkpoint_extra(self) -> dict[str, Any]:
        """The SequenceTrainer's own checkpoint keys: ``tuner`` (Auto Tuner state or None)
        and ``train`` (``kind: "sequence"`` and the settings checked on resume)."""
        return {"tuner": self._tuner_state(),
                "train": {"kind": "sequence", **self.settings, "store": self.store.name,
                          "num_nodes": self.store.num_nodes}}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """Restore the Auto Tuner (and hand it to the loader)."""
        self._set_tuner_state(state.get("tuner"))

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with: the store's node count and the
        sequence settings."""
        return {"num_nodes": self.store.num_nodes, **self.settings}

    # ---------------------------------------------------------------------------- training
    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line (:func:`format_sequence_epoch`)."""
        return format_sequence_epoch(record)

    def start_epoch(self, epoch: int, total: int) -> None:
        """Plan the interleaved schedule of ``total`` iterations; start a new trace."""
        if self.scheduler is not None:
            self.scheduler.start_epoch(total)
        self._trace = []

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """Pick the iteration's attention (logged, traced), then one optimizer step
        (:meth:`_train_step`)."""
        mode, reason = self._step_mode(batch, epoch, iteration)
        log.info("epoch %d iteration %d: %s attention (%s)", epoch, iteration,
                 "sparse (full fell back)" if mode == "fallback" else mode, reason)
        self._trace.append(_LETTER[mode])
        return self._train_step(batch, "sparse" if mode == "fallback" else mode, epoch, iteration)

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The epoch's record (attention trace and counts), after (``threshold="auto"``)
        one Auto Tuner step on its mean loss and time (``tuner``: its index, action)."""
        trace = "".join(self._trace)
        counts = {name: trace.count(letter) for name, letter in _LETTER.items()}
        record = {**super().epoch_record(epoch, sums), "labelled": sums.seen,
                  "attention": {"mode": self.attention, "trace": trace, **counts}}
        if self.tuner is not None:
            self.tuner.step(record["loss"], max(record["seconds"], 1e-9))
            self.loader.set_threshold(self.tuner)
            record["tuner"] = {"index": self.tuner.index, "action": self.tuner.history[-1].action}
        return record

    def _loss(self, out: torch.Tensor, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss, targets, predictions)`` over the labelled positions (graphs)."""
        if self.graph_level:
            target = batch.graph_y.to(out.device)
            logits = out
        else:
            target = batch.y.reshape(-1).to(out.device)
            logits = out.reshape(-1, out.shape[-1])
        keep = target != -100
        loss = F.cross_entropy(logits, target, ignore_index=-100)
        return loss, target[keep], logits.detach()[keep].argmax(-1)

    def _train_step(self, batch: Any, mode: str, epoch: int, iteration: int
                    ) -> tuple[float, int, int]:
        """One optimizer step on ``batch`` with attention ``mode``: ``(mean loss, labelled
        positions, correct predictions)``; no step (and ``(0.0, 0, 0)``) when nothing in
        the batch is labelled. ``epoch``/``iteration`` serve subclasses (sequence
        parallelism seeds its per-rank dropout from them)."""
        out = self.model(batch, attention=mode)
        loss, target, pred = self._loss(out, batch)
        if target.numel() == 0:
            return 0.0, 0, 0
        self.optimize(loss)
        return float(loss.detach()), int(target.numel()), int((pred == target).sum())

    # ---------------------------------------------------------------------------- evaluation
    def _eval_loader(self, split: str) -> ClusterLoader:
        if split not in self._eval_loaders:
            self._eval_loaders[split] = ClusterLoader(self.store, self.seq_len, input_nodes=split,
                                                      pattern="sparse", shuffle=False,
                                                      **self._loader_args)
        return self._eval_loaders[split]

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy on the ``valid`` and ``test`` sequences (OGB Evaluator)."""
        was_training = self.model.training
        self.model.eval()
        try:
            return {split: self._evaluate_split(split) for split in _SPLITS}
        finally:
            self.model.train(was_training)

    def _eval_mode(self, batch: Any) -> str:
        """Evaluation attention: sparse, or dense for ``attention="dense"`` when it fits."""
        return "dense" if self.attention == "dense" and self.dense_fits(batch)[0] else "sparse"

    def _evaluate_split(self, split: str) -> float:
        targets, preds = [], []
        for batch in self._eval_loader(split):
            out = self.model(batch, attention=self._eval_mode(batch))
            _loss, target, pred = self._loss(out, batch)
            targets.append(target.cpu())
            preds.append(pred.cpu())
        y = torch.cat(targets) if targets else torch.zeros(0, dtype=torch.int64)
        p = torch.cat(preds) if preds else torch.zeros(0, dtype=torch.int64)
        return accuracy(y, p)


def format_sequence_epoch(record: dict[str, Any]) -> str:
    """One human-readable line for a graph-transformer epoch's metrics record."""
    a = record["attention"]
    modes = "  ".join(f"{name} {a[name]}" for name in ("sparse", "cluster-sparse", "dense", "fallback")
                      if a.get(name))
    tuner = f"  tuner index {record['tuner']['index']}" if record.get("tuner") else ""
    return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  batch {record['batch_acc']:.4f}  "
            f"valid {fmt_acc(record['valid_acc'])}  test {fmt_acc(record['test_acc'])}  "
            f"time {record['seconds']:.2f}s (+{record['eval_seconds']:.2f}s eval)  "
            f"sequences {record['steps']}  attention {modes or '-'}{tuner}")
