"""One rank of a Flow Parallelism run: :class:`FlowTrainer` trains its stage of a
:class:`~.revgcn.RevGCN` for ``epochs`` epochs, one GPipe step (:class:`~.stage.StageDriver`)
over all ``M`` graph microbatches per epoch, and evaluates the whole graph (every edge)
through the pipeline; the last stage's accuracies and loss reach every rank.

One stage (``stages == 1``) needs no process group: the same code, in this process.

``checkpoint``: after every epoch, stage 0 writes the whole run (every stage's weights and
Adam state, the records, the best epoch, its RNG) to one file, atomically
(:mod:`.checkpoint`); ``fit(resume=state)`` continues such a run, on any number of stages.

>>> import numpy as np
>>> from graphpipe.synthetic.tag import tag_graph
>>> g, _, _ = tag_graph(200, 2, seed=0)
>>> data = FlowData.from_graph(g)
>>> result = FlowTrainer(data, FlowConfig(hidden=16, layers=4, epochs=3, microbatches=2)).fit()
>>> len(result["records"]), result["microbatches"], 0.0 <= result["test_acc"] <= 1.0
(3, 2, True)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.checkpoint import save_checkpoint, set_rng_state
from graphpipe.train.flow import checkpoint as ckpt
from graphpipe.train.flow.microbatches import graph_microbatches, metis_parts, whole_graph
from graphpipe.train.flow.revgcn import RevGCN
from graphpipe.train.flow.schedule import gpipe_bubble, microbatch_count
from graphpipe.train.flow.stage import StageDriver, StepStats, split_accuracies

__all__ = ["FlowConfig", "FlowData", "FlowTrainer"]

_SPLITS = ("train", "valid", "test")


@dataclass
class FlowConfig:
    """The settings of a Flow Parallelism run (``microbatches`` None: the Auto Scheduler's
    rule, :func:`~.schedule.microbatch_count`; ``timeout_s`` None: how long a rank waits
    for the others, :func:`graphpipe.train.ranks.rank_timeout_s`)."""

    hidden: int = 64
    layers: int = 8
    dropout: float = 0.2
    lr: float = 0.01
    weight_decay: float = 0.0
    epochs: int = 50
    microbatches: int | None = None
    seed: int = 0
    eval_every: int = 1
    timeout_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class FlowData:
    """What the ranks read: CSC topology, features, labels, splits."""

    indptr: np.ndarray
    indices: np.ndarray
    features: np.ndarray
    labels: np.ndarray
    splits: dict[str, np.ndarray]
    num_classes: int

    @classmethod
    def from_store(cls, store: Any) -> FlowData:
        """A store with features, labels and a ``train`` split."""
        from graphpipe.train.text.task import check_labelled

        check_labelled(store)
        labels = np.asarray(store.labels).reshape(-1).astype(np.int64)
        indptr, indices = (np.asarray(a) for a in store.topology())
        return cls(indptr, indices, np.asarray(store.features(), dtype=np.float32), labels,
                   {s: np.asarray(store.split(s)) for s in store.split_names if s in _SPLITS},
                   cls.classes_of(store, labels))

    @staticmethod
    def classes_of(store: Any, labels: np.ndarray | None = None) -> int:
        """The store's class count: its manifest's, else the largest label + 1."""
        meta = store.manifest.get("labels") or {}
        if meta.get("num_classes"):
            return int(meta["num_classes"])
        labels = np.asarray(store.labels) if labels is None else labels
        return int(labels.max()) + 1

    @classmethod
    def from_graph(cls, g: Any) -> FlowData:
        """A synthetic graph (``src``, ``dst``, ``features``, ``labels``, ``splits``)."""
        n = int(g.labels.shape[0])
        order = np.lexsort((g.src, g.dst))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(g.dst, minlength=n), out=indptr[1:])
        return cls(indptr, np.asarray(g.src)[order].astype(np.int64),
                   np.asarray(g.features, dtype=np.float32), np.asarray(g.labels, dtype=np.int64),
                   {k: np.asarray(v) for k, v in g.splits.items()}, int(g.labels.max()) + 1)

    @property
    def num_nodes(self) -> int:
        return int(self.labels.shape[0])


class FlowTrainer:
    """Rank ``rank`` of ``stages`` (module docstring). ``parts``: the METIS part of every
    node into ``M`` parts (computed here when None); ``gate``: the Bubble Interleaver's;
    ``x``: stage 0's input rows (default: the features; UniTG: the Modality
    Collaborator's, of width ``in_dim``); ``before_epoch(epoch)`` and
    ``on_epoch(epoch, record)`` run on every rank around each epoch; ``checkpoint``: the
    file stage 0 writes after every epoch (module docstring). A run that adds state to the
    checkpoint sets ``kind``, adds to ``settings`` (what a resume must share) and sets
    ``extra_state`` (stage 0: a callable returning its entries, ``rng`` included when
    it has to take it itself)."""

    def __init__(self, data: FlowData, config: FlowConfig, *, rank: int = 0, stages: int = 1,
                 parts: np.ndarray | None = None, gate: Any = None, on_epoch: Any = None,
                 before_epoch: Any = None, x: torch.Tensor | None = None,
                 in_dim: int | None = None, checkpoint: str | os.PathLike | None = None):
        self.data, self.config, self.rank, self.stages = data, config, rank, stages
        self.count = config.microbatches or microbatch_count(data.num_nodes, stages)
        if parts is None:
            parts = metis_parts(data.indptr, data.indices, self.count, seed=config.seed)
        self.mbs = graph_microbatches(data.indptr, data.indices, parts, data.splits, self.count)
        self.whole = whole_graph(data.indptr, data.indices, data.splits)
        torch.manual_seed(config.seed)
        model = RevGCN(in_dim or data.features.shape[1], config.hidden, data.num_classes,
                       config.layers, dropout=config.dropout, seed=config.seed)
        self.model = model
        self.stage = model.stage(rank, stages)
        self.optimizer = torch.optim.Adam(self.stage.parameters(), lr=config.lr,
                                          weight_decay=config.weight_decay)
        self.driver = StageDriver(self.stage, self.optimizer, rank=rank, stages=stages,
                                  hidden=config.hidden, gate=gate)
        if self.stage.first:
            self.x = torch.tensor(data.features) if x is None else x
        else:
            self.x = None
        self.labels = torch.from_numpy(data.labels) if self.stage.last else None
        self.on_epoch, self.before_epoch = on_epoch, before_epoch
        self.checkpoint = checkpoint
        self.kind, self.extra_state = ckpt.KIND, None
        self.settings = ckpt.resume_settings(FlowConfig(**{**config.as_dict(),
                                                           "microbatches": self.count}))

    # -- what the ranks share ------------------------------------------------------------------
    def _gather(self, row: list[float]) -> list[list[float]]:
        if self.stages == 1:
            return [row]
        mine = torch.tensor(row, dtype=torch.float64)
        rows = [torch.empty_like(mine) for _ in range(self.stages)]
        dist.all_gather(rows, mine)
        return [r.tolist() for r in rows]

    def _from_last(self, values: list[float]) -> list[float]:
        if self.stages == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64)
        dist.broadcast(t, src=self.stages - 1)
        return t.tolist()

    # -- the epochs ----------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Accuracy of every split on the whole graph (every rank gets them)."""
        logits = self.driver.forward_only(self.whole, self.x)
        accs = split_accuracies(logits, self.whole, self.data.labels) if logits is not None else {}
        values = self._from_last([accs.get(s, float("nan")) for s in _SPLITS])
        return dict(zip(_SPLITS, values))

    def epoch(self, epoch: int) -> dict[str, Any]:
        """One training step over the microbatches, then (maybe) evaluation."""
        if self.before_epoch is not None:
            self.before_epoch(epoch)
        stats: StepStats = self.driver.train_step(self.mbs, self.x, self.labels, epoch)
        rows = self._gather([stats.loss_sum, stats.correct, stats.seen, stats.seconds, stats.idle])
        last = rows[-1]
        record = {"epoch": epoch, "loss": last[0] / max(last[2], 1),
                  "train_acc": last[1] / max(last[2], 1),
                  "seconds": max(r[3] for r in rows),
                  "stage_seconds": [round(r[3], 4) for r in rows],
                  "stage_idle": [round(r[4], 4) for r in rows],
                  "bubble": sum(r[4] for r in rows) / max(sum(r[3] for r in rows), 1e-12)}
        if (epoch + 1) % self.config.eval_every == 0 or epoch + 1 == self.config.epochs:
            accs = self.evaluate()
            record.update(valid_acc=accs["valid"], test_acc=accs["test"])
        if self.on_epoch is not None:
            self.on_epoch(epoch, record)
        return record

    def fit(self, resume: str | os.PathLike | dict[str, Any] | None = None) -> dict[str, Any]:
        """Train up to ``epochs`` epochs (from a checkpoint, its path or its loaded state,
        ``resume``: after its epochs); the result (every rank the same): records (the checkpoint's first), best
        epoch by valid accuracy, its test accuracy, the mean bubble fraction of this
        run's epochs, ``resumed_from`` (epochs done before it)."""
        records, best = [], {"epoch": -1, "valid": -1.0, "test": float("nan")}
        if resume is not None:
            records, best = self._restore(resume)
        first = len(records)
        start = time.perf_counter()
        for epoch in range(first, self.config.epochs):
            record = self.epoch(epoch)
            records.append(record)
            valid = record.get("valid_acc", float("nan"))
            if not np.isnan(valid) and valid > best["valid"]:
                best = {"epoch": epoch, "valid": valid, "test": record["test_acc"]}
            if self.checkpoint is not None:
                self._save(epoch + 1, records, best)
        mine = records[first:]
        steady = mine[1:] or mine or [{"bubble": float("nan"), "seconds": float("nan")}]
        return {"records": records, "resumed_from": first, "best_epoch": best["epoch"],
                "best_valid_acc": best["valid"],
                "test_acc": best["test"], "stages": self.stages, "microbatches": self.count,
                "gpipe_bubble": gpipe_bubble(self.stages, self.count),
                "bubble": float(np.mean([r["bubble"] for r in steady])),
                "wall_seconds": time.perf_counter() - start,
                "idle_seconds": [float(sum(r["stage_idle"][s] for r in mine))
                                 for s in range(self.stages)],
                "step_seconds": [float(sum(r["stage_seconds"][s] for r in mine))
                                 for s in range(self.stages)],
                "epoch_seconds": float(np.median([r["seconds"] for r in steady]))}

    # -- checkpoints ---------------------------------------------------------------------------
    def _save(self, epoch: int, records: list[dict[str, Any]], best: dict[str, Any]) -> None:
        """Every rank: its stage's state to stage 0, which writes the file."""
        gathered = ckpt.gather_state(self.model, self.stage, self.optimizer, rank=self.rank,
                                     stages=self.stages)
        if gathered is None:
            return
        state = ckpt.payload(gathered, self.model, self.config, epoch=epoch, history=records,
                             best=best, kind=self.kind, settings=self.settings)
        if self.extra_state is not None:
            state.update(self.extra_state())
        save_checkpoint(self.checkpoint, state)

    def read_resume(self, resume: str | os.PathLike | dict[str, Any]) -> dict[str, Any]:
        """The checkpoint ``resume`` (a path, or a state already loaded), checked against
        this run (its model, ``kind`` and ``settings``)."""
        if isinstance(resume, dict):
            ckpt.check_settings(resume, self.kind, self.settings, "checkpoint")
            return resume
        return ckpt.read_resume(resume, self.model, self.kind, self.settings)

    def _restore(self, resume: str | os.PathLike | dict[str, Any]
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """Weights, this stage's Adam state and (stage 0) the RNG of a checkpoint; its
        records and best epoch."""
        state = self.read_resume(resume)
        ckpt.restore_state(state, self.model, self.stage, self.optimizer)
        if self.rank == 0:
            set_rng_state(state["rng"])
        return [dict(r) for r in state["history"]], dict(state["best"])

    def stage_state(self) -> dict[str, np.ndarray]:
        """This stage's parameters by their name in the whole model."""
        own = {id(p) for p in self.stage.parameters()}
        return {k: v.detach().numpy().copy() for k, v in self.model.named_parameters()
                if id(v) in own}
