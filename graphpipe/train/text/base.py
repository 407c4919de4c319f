"""What the text trainers share as :class:`~graphpipe.train.loop.Trainable`: settings,
the epoch as a loop over the loader's batches with one :meth:`step` each, checkpoints
(model, optimizer, the trainer's own state) and the epoch line.

A subclass sets ``model``, ``optimizer``, ``loader`` (``seed``, ``set_epoch``, iterable)
and implements :meth:`step`, :meth:`evaluate` and, for state beyond the model,
:meth:`extra_state` / :meth:`load_extra_state`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from graphpipe.train import loop
from graphpipe.train.checkpoint import CheckpointError, load_checkpoint
from graphpipe.train.loop import check_checkpoint_model, check_checkpoint_optimizer, fmt_acc

__all__ = ["TextTrainable"]


class TextTrainable(ABC):
    """Defaults of a text trainer (module docstring)."""

    optimizer_name = "adamw"
    evaluation = "full"
    eval_every = 1
    on_epoch = None
    is_main = True
    max_steps: int | None = None

    def __init__(self, *, epochs: int, lr: float, weight_decay: float, patience: int | None,
                 seed: int, checkpoint: str | None, metrics_log: str | None, quiet: bool):
        self.epochs, self.lr, self.weight_decay, self.patience = epochs, lr, weight_decay, patience
        self.seed, self.quiet = seed, quiet
        self.checkpoint = Path(checkpoint) if checkpoint else None
        self.metrics_log = Path(metrics_log) if metrics_log else None
        self.label = type(self).__name__

    # -- the epoch ---------------------------------------------------------------------------
    @abstractmethod
    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """One optimizer step on ``batch``: ``(mean loss, n counted, n correct)``."""

    @abstractmethod
    def evaluate(self) -> dict[str, float]:
        """``{split: accuracy}`` with at least ``valid`` and ``test``."""

    def start_epoch(self, epoch: int, total: int) -> None:
        """Called before the epoch's first batch (``total``: batches it will run)."""

    def train_epoch(self, epoch: int) -> dict[str, Any]:
        """The loader's batches, one :meth:`step` each; the epoch's metrics record (the
        step-hook batch loop: ``start_epoch``, ``step`` per batch, ``epoch_record``)."""
        self.model.train()
        self.loader.set_epoch(epoch)
        self.start_epoch(epoch, len(self.loader))
        sums = _Sums()
        t0 = time.perf_counter()
        for i, batch in enumerate(self.loader):
            loss, n, right = self.step(batch, epoch, i)
            sums.steps += 1
            if n:
                sums.loss_sum, sums.seen, sums.correct = (sums.loss_sum + loss * n,
                                                          sums.seen + n, sums.correct + right)
        sums.seconds = time.perf_counter() - t0
        return self.epoch_record(epoch, sums)

    def epoch_record(self, epoch: int, sums: Any) -> dict[str, Any]:
        """The epoch's metrics record from its sums (``loss_sum, seen, correct, steps,
        seconds``), with the trainer's own keys (:meth:`epoch_extra`)."""
        seen = max(sums.seen, 1)
        record = {"epoch": epoch, "loss": sums.loss_sum / seen, "batch_acc": sums.correct / seen,
                  "train_acc": None, "valid_acc": None, "test_acc": None, "steps": sums.steps,
                  "seconds": sums.seconds, "eval_seconds": 0.0}
        record.update(self.epoch_extra(epoch))
        return record

    def epoch_extra(self, epoch: int) -> dict[str, Any]:
        """The trainer's own keys of the epoch's record."""
        return {}

    def fit(self, resume: str | None = None) -> loop.TrainResult:
        return loop.fit(self, resume=resume)

    def describe_epoch(self, record: dict[str, Any]) -> str:
        extra = "".join(f"  {k} {v}" for k, v in record.items() if k in self.shown_keys)
        return (f"{self.label} epoch {record['epoch']:>3}  loss {record['loss']:.4f}  "
                f"train {fmt_acc(record['train_acc'])}  valid {fmt_acc(record['valid_acc'])}  "
                f"test {fmt_acc(record['test_acc'])}  time {record['seconds']:.2f}s{extra}")

    shown_keys: tuple[str, ...] = ()

    # -- checkpoints -------------------------------------------------------------------------
    def extra_state(self) -> dict[str, Any]:
        return {}

    def load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`extra_state`."""

    def checkpoint_extra(self) -> dict[str, Any]:
        return {"text_trainer": {"kind": type(self).__name__, **self.extra_state()}}

    def check_resume(self, path: str | Path) -> dict[str, Any]:
        path = Path(path)
        state = load_checkpoint(path)
        check_checkpoint_model(state, self.model, path)
        check_checkpoint_optimizer(state, self.optimizer_name, path)
        kind = (state.get("text_trainer") or {}).get("kind")
        if kind != type(self).__name__:
            raise CheckpointError(f"checkpoint {str(path)!r} was written by {kind}; this run is "
                                  f"{type(self).__name__}")
        return state

    def resume_extra(self, state: dict[str, Any]) -> None:
        self.load_extra_state(state["text_trainer"])


@dataclass
class _Sums:
    loss_sum: float = 0.0
    seen: int = 0
    correct: int = 0
    steps: int = 0
    seconds: float = 0.0


def adamw(groups: list[dict[str, Any]], weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over parameter groups (each with its own ``lr``)."""
    return torch.optim.AdamW(groups, weight_decay=weight_decay)
