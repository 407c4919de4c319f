"""Checkpoints of a Flow Parallelism run: **one file, written by stage 0**, holding the whole
model (every stage's parameters under their names in the whole :class:`~.revgcn.RevGCN`)
and every stage's Adam state by the same names, after each epoch.

Why one file by names, not one file per stage: every rank builds the whole model and
takes its stage's layers (:meth:`~.revgcn.RevGCN.stage`), so a checkpoint keyed by
whole-model names resumes on **any** number of stages ``P`` (each rank loads the names
its stage holds), and a single file is written atomically in one rename
(:func:`graphpipe.train.checkpoint.save_checkpoint`), where ``P`` files could be left
from different epochs by a crash between two renames.

How it gets there: at the end of an epoch every stage but the first packs its
parameters and Adam state (``exp_avg``, ``exp_avg_sq``, ``step``) into one float32
vector, in its parameters' order, and sends it to stage 0 (point-to-point, tag
:data:`TAG`); stage 0 knows every stage's names and shapes (it holds the whole model),
unpacks and writes. Only tensors and plain values: the file loads with
``torch.load(weights_only=True)``.

The file is a :mod:`graphpipe.train.checkpoint` file (format, version 2, digest) with
``model_config``/``model_class``/``model_state`` (whole model), ``optimizer`` (adam, lr,
weight_decay), ``optimizer_state`` (``param_groups``: the hyper-parameters;
``state``: ``{name: {"step", "exp_avg", "exp_avg_sq"}}``), ``epoch``, ``history`` (the
epoch records), ``best``, ``rng`` (stage 0's: the only stage that draws from torch's
global generator, for the LM's dropout; the GNN's dropout is keyed), ``loader``, and
``train``: ``kind`` (:data:`KIND`, or :data:`UNITG_KIND` with the LM's state in
``unitg``) and ``settings`` (what a resume must share: :func:`resume_settings`).

>>> import tempfile
>>> from pathlib import Path
>>> from graphpipe.synthetic.tag import tag_graph
>>> from graphpipe.train.checkpoint import load_checkpoint
>>> from graphpipe.train.flow.trainer import FlowConfig, FlowData, FlowTrainer
>>> tmp = tempfile.TemporaryDirectory()
>>> path = Path(tmp.name) / "flow.pt"
>>> data = FlowData.from_graph(tag_graph(120, 2, seed=0)[0])
>>> config = FlowConfig(hidden=8, layers=2, epochs=2, microbatches=2)
>>> straight = FlowTrainer(data, config, checkpoint=path)
>>> a = straight.fit()
>>> state = load_checkpoint(path)
>>> state["epoch"], state["train"]["kind"], sorted(state["optimizer_state"]["state"])[:2]
(2, 'flow', ['blocks.0.f1.conv.bias', 'blocks.0.f1.conv.lin.weight'])
>>> _ = FlowTrainer(data, FlowConfig(**{**config.as_dict(), "epochs": 1}), checkpoint=path).fit()
>>> resumed = FlowTrainer(data, config)
>>> b = resumed.fit(resume=path)
>>> b["test_acc"] == a["test_acc"], b["resumed_from"], len(b["records"])
(True, 1, 2)
>>> all(torch.equal(x, y) for x, y in zip(straight.model.parameters(), resumed.model.parameters()))
True
>>> tmp.cleanup()
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from graphpipe.train.checkpoint import CheckpointError, load_checkpoint, rng_state
from graphpipe.train.loop import check_checkpoint_model

__all__ = ["ADAM_KEYS", "KIND", "TAG", "UNITG_KIND", "check_settings", "gather_state",
           "payload", "read_resume", "restore_state", "resume_settings", "stage_names"]

KIND = "flow"
UNITG_KIND = "flow-unitg"
TAG = 1 << 24
"""The tag of the checkpoint's messages (microbatch messages use tags ``0 .. M-1``)."""
ADAM_KEYS = ("step", "exp_avg", "exp_avg_sq")
_HINTS = {"sync_deltas": " (the Δt values follow from --epochs)",
          "lm_carrying_epochs": " (the LM's steps are spread over --lm-share of --epochs)"}
_SETTINGS = ("hidden", "layers", "dropout", "lr", "weight_decay", "microbatches", "seed")


def resume_settings(config: Any) -> dict[str, Any]:
    """What a run resuming a checkpoint must share with the run that wrote it (``config``:
    a resolved :class:`~.trainer.FlowConfig`): the model, the optimizer, the microbatches
    (``M`` and the METIS seed) and the seed; not ``epochs`` (a resume may run longer)
    nor the number of stages."""
    return {k: getattr(config, k) for k in _SETTINGS}


def check_settings(state: dict[str, Any], kind: str, settings: dict[str, Any],
                   path: str | os.PathLike) -> None:
    """:class:`CheckpointError` unless ``state`` was written by a run of ``kind`` with
    ``settings`` (one line naming the first difference)."""
    train = state.get("train") if isinstance(state.get("train"), dict) else {}
    if train.get("kind") != kind:
        wrote = train.get("kind") or "non-pipeline"
        raise CheckpointError(f"checkpoint {str(path)!r} was written by a {wrote} run; this is "
                              f"a {kind} run (--pipeline{' --model unitg' if kind == UNITG_KIND else ''})")
    saved = train.get("settings") or {}
    for key, value in settings.items():
        if saved.get(key) != value:
            raise CheckpointError(f"checkpoint {str(path)!r} was trained with {key}="
                                  f"{saved.get(key)!r}; this run has {key}={value!r}"
                                  f"{_HINTS.get(key, '')}")


def read_resume(path: str | os.PathLike, model: nn.Module, kind: str,
                settings: dict[str, Any]) -> dict[str, Any]:
    """Load the checkpoint at ``path`` and check it fits ``model`` (the whole model),
    ``kind`` and ``settings``; its state."""
    state = load_checkpoint(path)
    check_settings(state, kind, settings, path)
    check_checkpoint_model(state, model, Path(path))
    return state


def stage_names(model: nn.Module, stage: nn.Module) -> list[tuple[str, torch.Tensor]]:
    """``(name in the whole model, parameter)`` of ``stage``'s parameters, in the stage's order."""
    names = {id(p): name for name, p in model.named_parameters()}
    return [(names[id(p)], p) for p in stage.parameters()]


def _pack(params: list[tuple[str, torch.Tensor]], optimizer: torch.optim.Optimizer) -> torch.Tensor:
    parts = []
    for _, p in params:
        st = optimizer.state.get(p, {})
        parts.append(p.detach().reshape(-1))
        for key in ADAM_KEYS:
            value = st.get(key)
            size = 1 if key == "step" else p.numel()
            parts.append(torch.zeros(size) if value is None else
                         torch.as_tensor(value, dtype=torch.float32).reshape(-1))
    return torch.cat(parts).to(torch.float32)


def _unpack(flat: torch.Tensor, shapes: list[tuple[str, torch.Size]]
            ) -> tuple[dict[str, torch.Tensor], dict[str, dict[str, torch.Tensor]]]:
    params, adam, at = {}, {}, 0
    for name, shape in shapes:
        n = shape.numel()
        params[name], at = flat[at:at + n].reshape(shape).clone(), at + n
        entry = {}
        for key in ADAM_KEYS:
            size = 1 if key == "step" else n
            chunk, at = flat[at:at + size], at + size
            entry[key] = chunk.reshape(()).clone() if key == "step" else chunk.reshape(shape).clone()
        if float(entry["step"]) > 0:   # a parameter the optimizer has not stepped has no state
            adam[name] = entry
    return params, adam


def gather_state(model: nn.Module, stage: nn.Module, optimizer: torch.optim.Optimizer, *,
                 rank: int, stages: int) -> dict[str, Any] | None:
    """Collective over the ``stages`` ranks: stage 0 returns ``{"model_state",
    "optimizer_state"}`` of the whole model (module docstring), the others None."""
    own = stage_names(model, stage)
    if rank != 0:
        dist.send(_pack(own, optimizer), dst=0, tag=TAG)
        return None
    params, adam = _unpack(_pack(own, optimizer), [(n, p.shape) for n, p in own])
    for s in range(1, stages):
        shapes = [(n, p.shape) for n, p in stage_names(model, model.stage(s, stages))]
        size = sum(shape.numel() * 2 + shape.numel() + 1 for _, shape in shapes)
        flat = torch.empty(size, dtype=torch.float32)
        dist.recv(flat, src=s, tag=TAG)
        more_params, more_adam = _unpack(flat, shapes)
        params.update(more_params)
        adam.update(more_adam)
    groups = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.state_dict()["param_groups"]]
    order = [name for name, _ in model.named_parameters()]
    return {"model_state": {name: params[name] for name in order},
            "optimizer_state": {"param_groups": groups,
                                "state": {name: adam[name] for name in order if name in adam}}}


def restore_state(state: dict[str, Any], model: nn.Module, stage: nn.Module,
                  optimizer: torch.optim.Optimizer, path: str | os.PathLike = "checkpoint") -> None:
    """Load the whole model's weights and this stage's Adam state from ``state``
    (any number of stages wrote it)."""
    try:
        model.load_state_dict(state["model_state"])
        saved = state["optimizer_state"]
        own = stage_names(model, stage)
        optimizer.load_state_dict({
            "state": {i: dict(saved["state"][name]) for i, (name, _) in enumerate(own)
                      if name in saved["state"]},
            "param_groups": [{**saved["param_groups"][0], "params": list(range(len(own)))}]})
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
        raise CheckpointError(f"checkpoint {str(path)!r}: its weights or optimizer state do "
                              f"not fit this model ({type(exc).__name__})") from None


def payload(gathered: dict[str, Any], model: nn.Module, config: Any, *, epoch: int,
                   history: list[dict[str, Any]], best: dict[str, Any], kind: str,
                   settings: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint dict stage 0 writes after ``epoch`` epochs (module docstring)."""
    return {"model_config": dict(model.config), "model_class": type(model).__name__,
            **gathered,
            "optimizer": {"name": "adam", "lr": config.lr, "weight_decay": config.weight_decay},
            "epoch": epoch, "history": history, "best": dict(best), "rng": rng_state(),
            "loader": {"seed": config.seed, "epoch": epoch},
            "train": {"kind": kind, "settings": dict(settings)}}

