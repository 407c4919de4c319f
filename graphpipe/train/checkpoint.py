"""Training checkpoints: written atomically, read back with clear errors.

A checkpoint is a ``torch.save`` of a dict holding only tensors and plain Python values
(so it loads with ``torch.load(weights_only=True)``, which never runs pickled code):

- ``format`` (``"graphpipe-train-checkpoint"``), ``version`` (1);
- ``model_config`` (the :func:`graphpipe.train.build_model` arguments, or None),
  ``model_class``, ``model_state``;
- ``optimizer`` (name, lr, weight_decay), ``optimizer_state``;
- ``epoch``: epochs completed; ``history``: one metrics record per epoch;
  ``best`` (best valid accuracy, its epoch, test accuracy then, epochs without
  improvement, stopped early);
- ``rng``: torch (CPU and CUDA), numpy and Python ``random`` states;
- ``loader``: the training loader's ``seed`` and the next ``epoch``;
- ``train``: batch size, fanouts, seed (checked on resume).

Writes go to a temporary file in the same directory, are fsynced, then renamed over
the destination (and the directory fsynced): a crash leaves the old checkpoint or the
new one, never a torn file.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CheckpointError", "load_checkpoint", "rng_state", "save_checkpoint", "set_rng_state"]

FORMAT = "graphpipe-train-checkpoint"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the run resuming from it."""


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus ``format``/``version``) to ``path`` atomically; returns the path."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"'checkpoint' must be a file path, not a directory (got {str(path)!r})")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    payload = {"format": FORMAT, "version": VERSION, **state}
    try:
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return path
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint written by :func:`save_checkpoint` (on the CPU).

    Raises :class:`CheckpointError` naming the file when it is missing, unreadable,
    truncated or not a graphpipe training checkpoint of a version this code reads."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any failure to unpickle means a bad file
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        if len(detail) > 100:
            detail = detail[:97] + "..."
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt or not a torch file "
                              f"({type(exc).__name__}: {detail})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint {str(path)!r} is not a graphpipe training checkpoint")
    if state.get("version") != VERSION:
        raise CheckpointError(f"checkpoint {str(path)!r} has version {state.get('version')!r}; "
                              f"this graphpipe reads version {VERSION}")
    missing = [k for k in ("model_state", "optimizer_state", "epoch", "rng", "loader") if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {str(path)!r} is incomplete (missing {', '.join(missing)})")
    return state


def rng_state() -> dict[str, Any]:
    """torch (CPU, and CUDA when present), numpy and Python ``random`` states, as tensors
    and plain values."""
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": (kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(state["torch"])
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    py = state["python"]
    random.setstate((py[0], tuple(py[1]), py[2]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
