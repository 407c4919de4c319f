"""The one training loop every trainer runs (node, typed, link, sequence, data-,
sequence- and partition-parallel).

A trainer (a :class:`Trainable`, which gives the defaults) supplies what differs — one optimizer step on a batch
(:meth:`Trainable.step`), the epoch's record from its sums
(:meth:`Trainable.epoch_record`), evaluation (:meth:`Trainable.evaluate`), its own
checkpoint keys and resume checks, its epoch line — and :func:`fit` does what they
share, in this order per epoch:

1. **the batch loop** (:func:`train_epoch`): ``task.loader.set_epoch(epoch)``,
   ``task.start_epoch(epoch, total)``, then
   ``task.step(batch, epoch, iteration) -> (mean loss, n, correct)`` for each batch of
   ``task.loader`` (at most ``task.max_steps``), with a progress bar unless ``quiet``;
   the sums (:class:`EpochSums`: a step with ``n == 0`` counts as a step and adds
   nothing) become ``record = task.epoch_record(epoch, sums)`` (a dict with ``epoch,
   loss, batch_acc, train_acc, valid_acc, test_acc, steps, seconds, eval_seconds`` and
   the trainer's own keys);
2. **evaluation** every ``eval_every`` epochs and after the last (never with
   ``evaluation="none"``): ``task.evaluate()`` gives ``{split: accuracy}`` (at least
   ``valid`` and ``test``), stored as ``<split>_acc``, and may add figures under keys
   that are not split names (stored as given, e.g. a link trainer's ``test_hits@10``);
   ``eval_seconds`` is its time;
3. **early stopping**: a valid accuracy that is not better than the best so far
   (the first one, or any after a NaN best, always is) counts a bad epoch; after
   ``patience`` bad evaluated epochs the run stops. The reported test accuracy is the
   one at the best valid epoch. ``record["best_valid_acc"]`` is the best so far;
4. the record is appended to the history, written as one JSON line to
   ``metrics_log`` (truncated by a fresh run, appended to by a resumed one), then a
   **checkpoint** (:mod:`graphpipe.train.checkpoint`) is written atomically, the
   epoch line printed (unless ``quiet``) and ``on_epoch(record)`` called. The log, the
   checkpoint and the printed line come from the main process only (``task.is_main``:
   rank 0 of a data-parallel run, :mod:`graphpipe.train.distributed`; always True in one
   process); ``on_epoch`` runs in every process (a callback that changes the optimizer
   must change it on every rank).

A checkpoint holds ``model_config, model_class, model_state, optimizer (name, lr,
weight_decay), optimizer_state, epoch`` (epochs completed)``, history, best, rng,
loader (seed, next epoch)`` and the trainer's :meth:`Trainable.checkpoint_extra`
keys. A fresh run seeds torch, numpy and ``random`` with ``seed`` and starts the
loader at epoch 0; a resumed run restores model, optimizer, history, best, the
trainer's extra state (:meth:`Trainable.resume_extra`), the loader's epoch and, last,
the RNG states, so ``k`` epochs + resume + ``m`` epochs gives the same weights as
``k + m`` straight epochs.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import torch
from torch import nn

from graphpipe.ops._core.checks import check_int
from graphpipe.train.checkpoint import (
    CheckpointError,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)

__all__ = ["OPTIMIZERS", "EpochSteps", "EpochSums", "ProgressBar", "TrainResult", "Trainable",
           "check_checkpoint_model", "check_checkpoint_optimizer", "check_output_paths",
           "check_settings", "checkpoint_state", "fit", "fmt_acc", "json_default",
           "make_optimizer", "restore_model_optimizer", "seed_everything", "train_epoch"]


@dataclass
class TrainResult:
    """What :meth:`Trainer.fit` and :meth:`SequenceTrainer.fit` return.

    Attributes:
        history: one metrics record per epoch run (also the JSON-lines log's lines).
        best_epoch: epoch (0-based) of the best valid accuracy, or -1 without evaluation.
        best_valid_acc: that accuracy (nan without evaluation).
        test_acc: test accuracy at ``best_epoch`` (nan without evaluation).
        stopped_early: early stopping ended the run.
        epochs_completed: epochs finished (including those before a resume).
    """

    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = -1
    best_valid_acc: float = float("nan")
    test_acc: float = float("nan")
    stopped_early: bool = False
    epochs_completed: int = 0


@dataclass
class EpochSums:
    """What one epoch's batch loop adds up (:func:`train_epoch`).

    Attributes:
        loss_sum: each step's mean loss times its ``n``.
        correct: correct predictions among ``seen`` counted items (seeds, positions, edges).
        seen: items counted (steps with ``n == 0`` add none).
        steps: optimizer steps (batches) run.
        seconds: wall time of the loop.
    """

    loss_sum: float = 0.0
    correct: int = 0
    seen: int = 0
    steps: int = 0
    seconds: float = 0.0

    @property
    def loss(self) -> float:
        """Mean loss per counted item (0 when nothing was counted)."""
        return self.loss_sum / max(self.seen, 1)

    @property
    def accuracy(self) -> float:
        """Correct predictions per counted item."""
        return self.correct / max(self.seen, 1)


class EpochSteps:
    """The loader of full-graph training: ``steps`` batches (their index) per epoch."""

    def __init__(self, seed: int, steps: int = 1):
        self.seed, self.steps, self.epoch = seed, steps, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self.steps

    def __iter__(self) -> Any:
        return iter(range(self.steps))


# ------------------------------------------------------------------------------- the loop
def fit(task: Trainable, resume: str | Path | None = None) -> TrainResult:
    """Train ``task`` for its remaining epochs (all, or those after ``resume``'s).

    Raises :class:`CheckpointError` (nothing written) if ``resume`` is unreadable or
    belongs to another model or setting."""
    epoch, history, best = _start(task, resume)
    with contextlib.ExitStack() as stack:
        log = _open_log(stack, task.metrics_log if task.is_main else None, append=resume is not None)
        while epoch < task.epochs and not best["stopped"]:
            record = train_epoch(task, epoch)
            if _evaluates(task, epoch):
                _evaluate_into(task, record, best, epoch)
            record["best_valid_acc"] = best["valid_acc"]
            history.append(record)
            epoch += 1
            _publish(task, record, log, epoch, history, best)
    return TrainResult(history=history, best_epoch=int(best["epoch"]),
                       best_valid_acc=float(best["valid_acc"]), test_acc=float(best["test_acc"]),
                       stopped_early=bool(best["stopped"]), epochs_completed=epoch)


def train_epoch(task: Trainable, epoch: int) -> dict[str, Any]:
    """The batch loop of one epoch (step 1 of the module docstring); its record."""
    task.model.train()
    task.loader.set_epoch(epoch)
    total = len(task.loader) if task.max_steps is None else min(task.max_steps, len(task.loader))
    task.start_epoch(epoch, total)
    bar = ProgressBar(total, f"epoch {epoch}", enabled=not task.quiet)
    sums = EpochSums()
    t0 = time.perf_counter()
    it = iter(task.loader)
    try:
        for iteration, batch in enumerate(it):
            loss, n, correct = task.step(batch, epoch, iteration)
            sums.steps += 1
            if n:
                sums.loss_sum += loss * n
                sums.correct += correct
                sums.seen += n
                bar.advance(sums.loss)
            if task.max_steps is not None and sums.steps >= task.max_steps:
                break
    finally:
        if hasattr(it, "close"):
            it.close()
        bar.close()
    sums.seconds = time.perf_counter() - t0
    return task.epoch_record(epoch, sums)


def _start(task: Trainable, resume: str | Path | None
           ) -> tuple[int, list[dict[str, Any]], dict[str, Any]]:
    """``(first epoch, history, best)`` of a fresh or resumed run, with the model,
    optimizer, loader and RNGs put where that epoch begins."""
    best: dict[str, Any] = {"valid_acc": float("nan"), "epoch": -1, "test_acc": float("nan"),
                            "bad_epochs": 0, "stopped": False}
    if resume is None:
        seed_everything(task.seed)
        task.loader.set_epoch(0)
        return 0, [], best
    path = Path(resume)
    state = task.check_resume(path)
    restore_model_optimizer(state, task.model, task.optimizer, path)
    best.update(state.get("best", {}))
    task.resume_extra(state)
    task.loader.set_epoch(int(state["loader"]["epoch"]))
    set_rng_state(state["rng"])
    return int(state["epoch"]), list(state.get("history", [])), best


def _evaluates(task: Trainable, epoch: int) -> bool:
    return task.evaluation != "none" and (
        (epoch + 1) % task.eval_every == 0 or epoch + 1 == task.epochs)


_EVAL_SPLITS = ("train", "valid", "test")


def _evaluate_into(task: Trainable, record: dict[str, Any], best: dict[str, Any], epoch: int) -> None:
    """Evaluate, store ``<split>_acc`` (other keys as given) and ``eval_seconds`` in
    ``record``, update ``best``."""
    t0 = time.perf_counter()
    accs = task.evaluate()
    record.update({(f"{k}_acc" if k in _EVAL_SPLITS else k): v for k, v in accs.items()})
    record["eval_seconds"] = time.perf_counter() - t0
    if not best["valid_acc"] >= accs["valid"]:  # also when best is nan
        best.update(valid_acc=accs["valid"], epoch=epoch, test_acc=accs["test"], bad_epochs=0)
    else:
        best["bad_epochs"] += 1
        if task.patience is not None and best["bad_epochs"] >= task.patience:
            best["stopped"] = True


def _open_log(stack: contextlib.ExitStack, path: Path | None, append: bool) -> IO[str] | None:
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    return stack.enter_context(open(path, "a" if append else "w", encoding="utf-8"))


def _publish(task: Trainable, record: dict[str, Any], log: IO[str] | None, epoch: int,
             history: list[dict[str, Any]], best: dict[str, Any]) -> None:
    """Log line, checkpoint (after ``epoch`` epochs), printed line, callback — in that order."""
    if log is not None:
        log.write(json.dumps(record, default=json_default) + "\n")
        log.flush()
    if task.checkpoint is not None and task.is_main:
        save_checkpoint(task.checkpoint, checkpoint_state(task, epoch, history, best))
    if not task.quiet and task.is_main:
        print(task.describe_epoch(record), flush=True)
    if task.on_epoch is not None:
        task.on_epoch(record)


# ------------------------------------------------------------------------------- trainers
class Trainable:
    """What :func:`fit` runs: the base of every trainer, with the defaults (``fit``, no-op
    ``start_epoch`` and ``resume_extra``, ``epoch_record``, ``check_resume`` from
    :meth:`resume_settings`, main process).

    A trainer keeps the settings :func:`fit` reads (:meth:`configure`: ``epochs,
    max_steps, evaluation`` (``"none"``: no evaluation, no early stopping), ``eval_every,
    patience, seed, checkpoint, metrics_log, quiet, on_epoch``, the optimizer's ``name,
    lr, weight_decay``), its ``model``, ``optimizer`` and ``loader`` (``seed``,
    ``set_epoch``, ``len`` and iteration), and defines:

    - ``step(batch, epoch, iteration) -> (mean loss, n counted, n correct)``: one
      optimizer step (:meth:`optimize` does the optimizer's part);
    - ``evaluate() -> {split: accuracy}`` with at least ``valid`` and ``test``;
    - ``describe_epoch(record) -> str``: the printed line;
    - ``checkpoint_extra() -> dict``: its own checkpoint keys, written last (``train``
      holds at least the :meth:`resume_settings` keys);

    and may extend ``start_epoch``, ``epoch_record`` and ``resume_extra`` (state of its
    own, restored before the loader's epoch).
    """

    is_main = True
    """This process writes the log and checkpoint and prints (:func:`fit`); a parallel
    trainer is main on rank 0 only."""
    kind: str | None = None
    """``train["kind"]`` of its checkpoints (checked on resume; None: the node trainer's,
    which wrote none)."""

    def fit(self, resume: str | os.PathLike | None = None) -> TrainResult:
        """Train for the remaining epochs (all of them, or those after ``resume``'s).

        Raises :class:`CheckpointError` (nothing written) if ``resume`` is unreadable or
        belongs to another model or setting."""
        return fit(self, resume)

    def configure(self, *, epochs: int, optimizer: str, lr: float, weight_decay: float,
                  patience: int | None, evaluation: str, eval_every: int, seed: int,
                  max_steps: int | None, checkpoint: Any, metrics_log: Any, quiet: bool,
                  on_epoch: Callable[[dict[str, Any]], None] | None) -> None:
        """Check the loop's settings (``ValueError`` naming the first bad one) and keep
        them as the attributes :func:`fit` reads."""
        check_settings(epochs=epochs, eval_every=eval_every, patience=patience,
                       max_steps=max_steps, seed=seed, optimizer=optimizer, lr=lr,
                       weight_decay=weight_decay)
        self.epochs, self.max_steps, self.seed = int(epochs), max_steps, int(seed)
        self.optimizer_name, self.lr, self.weight_decay = optimizer, float(lr), float(weight_decay)
        self.patience, self.evaluation, self.eval_every = patience, evaluation, int(eval_every)
        self.checkpoint, self.metrics_log = check_output_paths(checkpoint, metrics_log)
        self.quiet, self.on_epoch = bool(quiet), on_epoch

    def start_epoch(self, epoch: int, total: int) -> None:
        """Nothing to prepare before an epoch."""

    def optimize(self, loss: torch.Tensor) -> None:
        """One optimizer step on ``loss``: zero the gradients, backward, step."""
        self.optimizer.zero_grad(set_to_none=True)  # type: ignore[attr-defined]
        loss.backward()
        self.optimizer.step()  # type: ignore[attr-defined]

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The epoch's metrics record from its sums (accuracies filled by evaluation)."""
        return {"epoch": epoch, "loss": sums.loss, "batch_acc": sums.accuracy, "train_acc": None,
                "valid_acc": None, "test_acc": None, "steps": sums.steps,
                "seconds": sums.seconds, "eval_seconds": 0.0}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """No state of its own to restore."""

    def resume_settings(self) -> dict[str, Any]:
        """Settings a checkpoint must have been written with (``train`` keys)."""
        return {}

    def check_resume(self, path: str | os.PathLike) -> dict[str, Any]:
        """Load the checkpoint at ``path`` and check that it belongs to this model, kind
        of run and settings; returns its state. Raises :class:`CheckpointError` otherwise."""
        path = Path(path)
        state = load_checkpoint(path)
        check_checkpoint_model(state, self.model, path)  # type: ignore[attr-defined]
        train = state.get("train", {})
        if train.get("kind") != self.kind:
            raise CheckpointError(f"checkpoint {str(path)!r} was written by a "
                                  f"{train.get('kind') or 'node-classification'} run; this run "
                                  f"is {self.kind or 'node classification'}")
        for key, value in self.resume_settings().items():
            if key in train and train[key] != value:
                raise CheckpointError(f"checkpoint {str(path)!r} was trained with {key}="
                                      f"{train[key]!r}; this run has {key}={value!r}")
        check_checkpoint_optimizer(state, self.optimizer_name, path)  # type: ignore[attr-defined]
        return state


OPTIMIZERS = ("adam", "adamw", "sgd")


def check_settings(*, epochs: int, eval_every: int, patience: int | None, max_steps: int | None,
                   seed: int, optimizer: str, lr: float, weight_decay: float) -> None:
    """Raise ``ValueError`` naming the first setting of a trainer that is out of range."""
    check_int("epochs", epochs, 0)
    check_int("eval_every", eval_every, 1)
    check_int("patience", patience, 1, allow_none=True)
    check_int("max_steps", max_steps, 1, allow_none=True)
    check_int("seed", seed, 0)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; known: {', '.join(OPTIMIZERS)}")
    if not (isinstance(lr, (int, float)) and lr > 0 and math.isfinite(lr)):
        raise ValueError(f"'lr' must be a positive number (got {lr!r})")
    if not (isinstance(weight_decay, (int, float)) and weight_decay >= 0):
        raise ValueError(f"'weight_decay' must be >= 0 (got {weight_decay!r})")


def make_optimizer(model: nn.Module, name: str, lr: float, weight_decay: float
                   ) -> torch.optim.Optimizer:
    """``"adam"``, ``"adamw"`` or ``"sgd"`` (momentum 0.9) over ``model``'s parameters."""
    params = model.parameters()
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {name!r}; known: {', '.join(OPTIMIZERS)}")


def check_output_paths(checkpoint: Any, metrics_log: Any) -> tuple[Path | None, Path | None]:
    """``(checkpoint, metrics_log)`` as paths; ``ValueError`` if one is a directory."""
    for arg, target in (("checkpoint", checkpoint), ("metrics_log", metrics_log)):
        if target is not None and Path(target).is_dir():
            raise ValueError(f"'{arg}' must be a file path, not a directory (got {str(target)!r})")
    return (None if checkpoint is None else Path(checkpoint),
            None if metrics_log is None else Path(metrics_log))


# ------------------------------------------------------------------------------- checkpoints
def checkpoint_state(task: Trainable, epoch: int, history: list[dict[str, Any]],
                     best: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint dict after ``epoch`` epochs (see the module docstring)."""
    model = task.model
    return {
        "model_config": getattr(model, "config", None) or None,
        "model_class": type(model).__name__,
        "model_state": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": {"name": task.optimizer_name, "lr": task.lr, "weight_decay": task.weight_decay},
        "optimizer_state": task.optimizer.state_dict(),
        "epoch": epoch,
        "history": history,
        "best": dict(best),
        "rng": rng_state(),
        "loader": {"seed": task.loader.seed, "epoch": epoch},
        **task.checkpoint_extra(),
    }


def check_checkpoint_model(state: dict[str, Any], model: nn.Module, path: Path) -> None:
    """Raise :class:`CheckpointError` unless the checkpoint ``state`` holds weights of
    ``model``'s class, config, parameter names and shapes."""
    ours = getattr(model, "config", None) or None
    theirs = state.get("model_config")
    if state.get("model_class") != type(model).__name__ or (ours and theirs and ours != theirs):
        raise CheckpointError(f"checkpoint {str(path)!r} was written for model "
                              f"{theirs or state.get('model_class')}; this run builds "
                              f"{ours or type(model).__name__}")
    own = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    saved = state["model_state"]
    if not isinstance(saved, dict) or {k: tuple(v.shape) for k, v in saved.items()} != own:
        raise CheckpointError(f"checkpoint {str(path)!r} holds weights of another model "
                              "(parameter names or shapes differ)")


def check_checkpoint_optimizer(state: dict[str, Any], name: str, path: Path) -> None:
    """Raise :class:`CheckpointError` if the checkpoint used another optimizer."""
    opt = state.get("optimizer", {})
    if opt.get("name") not in (None, name):
        raise CheckpointError(f"checkpoint {str(path)!r} used optimizer {opt.get('name')!r}; "
                              f"this run uses {name!r}")


def restore_model_optimizer(state: dict[str, Any], model: nn.Module,
                            optimizer: torch.optim.Optimizer, path: Path) -> None:
    """Load the checkpoint's model and optimizer states."""
    model.load_state_dict(state["model_state"])
    try:
        optimizer.load_state_dict(state["optimizer_state"])
    except (ValueError, KeyError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: optimizer state does not fit "
                              f"this model ({exc})") from None


def seed_everything(seed: int) -> None:
    """Seed torch, numpy and Python ``random`` (the start of a fresh run)."""
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


# ------------------------------------------------------------------------------- output
def json_default(value: Any) -> Any:
    """JSON for numpy scalars and tensors in a metrics record (anything else: ``str``)."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, torch.Tensor):
        return value.tolist()
    return str(value)


def fmt_acc(value: Any) -> str:
    """An accuracy for the epoch line: 4 decimals, ``-`` when not evaluated."""
    return "-" if value is None else f"{value:.4f}"


class ProgressBar:
    """A rich progress bar on stderr, only on a terminal and when enabled."""

    def __init__(self, total: int, label: str, enabled: bool):
        self._progress = None
        if not enabled or not sys.stderr.isatty():
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        self._progress = Progress(TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("loss {task.fields[loss]}"), TimeRemainingColumn(),
                                  console=Console(stderr=True), transient=True)
        self._task = self._progress.add_task(label, total=total, loss="-")
        self._progress.start()

    def advance(self, loss: float) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1, loss=f"{loss:.4f}")

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
