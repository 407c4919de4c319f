"""Training checkpoints: written atomically, read back with clear errors.

A checkpoint is a ``torch.save`` of a dict holding only tensors and plain Python values
(so it loads with ``torch.load(weights_only=True)``, which never runs pickled code):

- ``format`` (``"graphpipe-train-checkpoint"``), ``version`` (2);
- ``digest``: ``xxh3_128:<hex>`` over every other entry, in order (:func:`state_digest`:
  each tensor's dtype, shape and bytes, each plain value with its type), checked on
  load, so a flipped byte anywhere in the file is a one-line :class:`CheckpointError`
  instead of a run resumed from damaged weights (version 1 files carry no digest and
  are refused);
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
import xxhash

__all__ = ["CheckpointError", "load_checkpoint", "rng_state", "save_checkpoint", "set_rng_state",
           "state_digest"]

FORMAT = "graphpipe-train-checkpoint"
VERSION = 2
DIGEST_KEY = "digest"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the run resuming from it
    (the CLI exits with :attr:`exit_code`, 2: bad input)."""

    exit_code = 2


def state_digest(state: dict[str, Any]) -> str:
    """``xxh3_128:<hex>`` of ``state``: its entries in order, each tensor as dtype, shape
    and raw bytes, each plain value (None, bool, int, float, str, list, tuple, dict) with
    its type. Raises :class:`CheckpointError` on any other type."""
    hasher = xxhash.xxh3_128()
    _feed(hasher, state)
    return "xxh3_128:" + hasher.hexdigest()


def _feed(hasher: Any, value: Any) -> None:
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        hasher.update(f"T{t.dtype}{tuple(t.shape)};".encode())
        hasher.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, dict):
        hasher.update(b"D%d;" % len(value))
        for key, item in value.items():
            _feed(hasher, key)
            _feed(hasher, item)
    elif isinstance(value, (list, tuple)):
        hasher.update(b"%s%d;" % (b"L" if isinstance(value, list) else b"U", len(value)))
        for item in value:
            _feed(hasher, item)
    elif value is None or isinstance(value, bool):
        hasher.update(b"N;" if value is None else b"B%d;" % value)
    elif isinstance(value, int):
        hasher.update(b"I%d;" % value)
    elif isinstance(value, float):
        hasher.update(b"F" + float.hex(value).encode() + b";")
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        hasher.update(b"S%d;" % len(data) + data)
    else:
        raise CheckpointError(f"a checkpoint holds tensors and plain values only, not "
                              f"{type(value).__name__}")


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` (plus ``format``/``version``) to ``path`` atomically; returns the path."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"'checkpoint' must be a file path, not a directory (got {str(path)!r})")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    payload = {"format": FORMAT, "version": VERSION, **state}
    payload[DIGEST_KEY] = state_digest(payload)
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

    Loads with ``torch.load(weights_only=True)`` (no pickled code runs) and checks the
    digest. Raises :class:`CheckpointError` naming the file when it is missing, unreadable,
    truncated, damaged (digest mismatch) or not a graphpipe training checkpoint of a
    version this code reads."""
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
                              f"this graphpipe reads version {VERSION} (version 1 carries no "
                              f"integrity digest)")
    _check_digest(state, path)
    missing = [k for k in ("model_state", "optimizer_state", "epoch", "rng", "loader") if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {str(path)!r} is incomplete (missing {', '.join(missing)})")
    return state


def _check_digest(state: dict[str, Any], path: Path) -> None:
    """Pop the recorded digest and compare it with the digest of what was loaded."""
    recorded = state.pop(DIGEST_KEY, None)
    try:
        actual = state_digest(state)
    except CheckpointError as exc:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt ({exc})") from None
    if recorded != actual:
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt: its contents do not match "
                              f"the digest saved with them")


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
