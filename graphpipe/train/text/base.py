"""What the text trainers share as :class:`~graphpipe.train.loop.Trainable`: settings,
checkpoints (model, optimizer, the trainer's own state) and the epoch line; the epoch is
the loop's (:func:`graphpipe.train.loop.train_epoch`: one :meth:`step` per batch).

A subclass sets ``model``, ``optimizer``, ``loader`` (``seed``, ``set_epoch``, iterable)
and implements :meth:`step`, :meth:`evaluate` and, for state beyond the model,
:meth:`extra_state` / :meth:`load_extra_state`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch

from graphpipe.train import loop
from graphpipe.train.checkpoint import CheckpointError, load_checkpoint
from graphpipe.train.loop import check_checkpoint_model, check_checkpoint_optimizer, fmt_acc

__all__ = ["TextTrainable", "pseudo_label_weights"]


class TextTrainable(loop.Trainable, ABC):
    """Defaults of a text trainer (module docstring)."""

    optimizer_name = "adamw"
    evaluation = "full"
    eval_every = 1
    on_epoch = None
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

    def epoch_record(self, epoch: int, sums: loop.EpochSums) -> dict[str, Any]:
        """The loop's record of the epoch with the trainer's own keys (:meth:`epoch_extra`)."""
        return {**super().epoch_record(epoch, sums), **self.epoch_extra(epoch)}

    def epoch_extra(self, epoch: int) -> dict[str, Any]:
        """The trainer's own keys of the epoch's record."""
        return {}

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


def adamw(groups: list[dict[str, Any]], weight_decay: float) -> torch.optim.Optimizer:
    """AdamW over parameter groups (each with its own ``lr``)."""
    return torch.optim.AdamW(groups, weight_decay=weight_decay)


def pseudo_label_weights(gold: int, pseudo: int, share: float) -> tuple[float, float]:
    """Per-node loss weights ``(gold, pseudo)`` that make a weighted mean over all nodes
    GLEM's ``compute_loss``: ``share · mean(CE on pseudo-labels) + (1 - share) · mean(CE
    on gold labels)`` (GLEM's ``pl_weight``); the weights sum to ``gold + pseudo``.

    >>> pseudo_label_weights(300, 100, 0.25)
    (1.0, 1.0)
    >>> pseudo_label_weights(2400, 1600, 0.05)
    (1.5833333333333333, 0.125)
    """
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the pseudo-label share must be in [0, 1] (got {share})")
    if pseudo == 0:
        return 1.0, 0.0
    total = gold + pseudo
    return ((1.0 - share) * total / gold if gold else 0.0), share * total / pseudo
