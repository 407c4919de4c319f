"""What the modes of `graphpipe train` share: the modes themselves (each with the options
it accepts), the choice of mode from the options, the defaults per model family, and the
parsing of option values (one-line errors, exit 2).

A mode is one way to train: node classification, typed node classification, graph
transformer, link prediction, text models, and the four parallel strategies (data parallel, sequence
parallel, partition parallel, flow parallel). :func:`choose` picks it from the options; an option the
mode does not accept, given on the command line, is refused in one line that names the
option and the mode (:func:`refuse_unaccepted`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource
from graphpipe.cli._common import fail
from graphpipe.cli.train_text import TEXT_MODEL_NAMES, TEXT_OPTIONS

FLOW_MODELS = ("revgcn",)
"""The models ``--pipeline`` cuts into stages (``cli/train_flow.py``; unitg's GNN too)."""

DEFAULT_FANOUTS = {1: [10], 2: [15, 10], 3: [15, 10, 5]}
"""Fanouts of node classification per layer count (others: 10 per layer)."""

GNN_DEFAULTS = {"hidden": 256, "layers": 3, "heads": 4, "dropout": 0.5, "lr": 0.003,
                "weight_decay": 0.0, "optimizer": "adam", "batch_size": 1024, "evaluation": "auto"}
TYPED_DEFAULTS = {"heads": 4, "hidden": 64, "embedding_dim": 64, "layers": 2, "dropout": 0.5, "lr": 0.01, "weight_decay": 0.0,
                  "optimizer": "adam", "batch_size": 1024, "evaluation": "sampled"}
LINK_DEFAULTS = {"hidden": 64, "layers": 2, "dropout": 0.0, "lr": 0.005, "weight_decay": 0.0,
                 "optimizer": "adam", "batch_size": 512, "decoder": "mlp", "evaluation": "link"}
PARTITION_DEFAULTS = {"hidden": 256, "layers": 3, "dropout": 0.5, "lr": 0.01, "weight_decay": 0.0,
                      "evaluation": "full"}
TRANSFORMER_DEFAULTS = {
    "graphormer": {"hidden": 64, "layers": 4, "heads": 8, "dropout": 0.1},
    "gt": {"hidden": 128, "layers": 4, "heads": 8, "dropout": 0.1},
}
TRANSFORMER_COMMON = {"lr": 0.001, "weight_decay": 0.01, "optimizer": "adamw", "batch_size": None,
                      "evaluation": "sequences"}

_RUN = frozenset({"store", "model_name", "task", "epochs", "seed", "quiet", "device", "hidden",
                  "layers", "dropout", "lr", "weight_decay", "evaluation", "patience",
                  "checkpoint", "resume", "metrics_log"})
_SAMPLED = frozenset({"fanouts", "batch_size", "max_steps", "optimizer", "eval_batch_size"})
_SEQUENCES = frozenset({"heads", "batch_size", "max_steps", "optimizer", "seq_len", "attention",
                        "parts", "block", "placement", "threshold", "switch_freq",
                        "hamiltonian_test", "enforce", "dense_budget_mb", "reorder",
                        "global_token"})


@dataclass(frozen=True)
class Mode:
    """One way `graphpipe train` trains: its name, the options it accepts, and the
    function (``module:function``, called with the command's parameters) that runs it."""

    name: str
    accepts: frozenset[str]
    runner: str
    planned: bool = False
    """Whether the runner makes a memory plan (which refuses a run short of memory);
    otherwise :meth:`run` refuses one that cannot take the steps' minimum first."""

    def run(self, params: dict[str, Any]) -> None:
        import importlib

        module, function = self.runner.split(":")
        runner = getattr(importlib.import_module(module), function)
        if not self.planned:
            import torch  # noqa: F401 - its memory counts as already held

            from graphpipe.train.memory_plan import require_step_memory

            require_step_memory(f"graphpipe train ({self.name})")
        runner(params)


NODE = Mode("node classification", _RUN | _SAMPLED | {"heads", "feature_bits"},
            "graphpipe.cli.train:run_node", planned=True)
DATA_PARALLEL = Mode("data parallel", NODE.accepts | {"nproc", "shard_parts"},
                     "graphpipe.cli.train_ddp:run", planned=True)
TYPED = Mode("typed node classification",
             (_RUN - {"device"}) | _SAMPLED | {"target_type", "heads", "feature_bits", "embedding_dim"},
             "graphpipe.cli.train_typed:run", planned=True)
TYPED_DATA_PARALLEL = Mode("typed data parallel", TYPED.accepts | {"nproc"},
                           "graphpipe.cli.train_ddp:run_typed", planned=True)
TRANSFORMER = Mode("graph transformer", _RUN | _SEQUENCES, "graphpipe.cli.train:run_transformer")
SEQUENCE_PARALLEL = Mode("sequence parallel", TRANSFORMER.accepts | {"seq_parallel"},
                         "graphpipe.cli.train_seqpar:run")
LINK = Mode("link prediction", _RUN | _SAMPLED | {"decoder", "link_metric"},
            "graphpipe.cli.train_link:run")
TYPED_LINK = Mode("typed link prediction", (_RUN - {"device"}) | _SAMPLED
                  | {"decoder", "relation", "heads", "link_metric", "link_negatives"},
                  "graphpipe.cli.train_typed_link:run")
TYPED_LINK_DATA_PARALLEL = Mode("typed link data parallel", TYPED_LINK.accepts | {"nproc"},
                                "graphpipe.cli.train_ddp:run_typed_link")
TEXT = Mode("text models", frozenset(TEXT_OPTIONS) | (_RUN - {"weight_decay", "evaluation"}),
            "graphpipe.cli.train_text:run")
FLOW = Mode("flow parallel", (_RUN - {"patience", "evaluation"})
            | {"pipeline", "microbatches"}, "graphpipe.cli.train_flow:run")
UNITG_FLOW = Mode("unitg flow parallel", (TEXT.accepts - {"patience"})
                  | {"pipeline", "microbatches", "interleave", "weight_decay"},
                  "graphpipe.cli.train_flow:run_unitg")
PARTITION_PARALLEL = Mode("partition parallel",
                          _RUN | {"partition_parallel", "halo_bits", "staleness"},
                          "graphpipe.cli.train_sylvie:run")
MODES = (NODE, DATA_PARALLEL, TYPED, TYPED_DATA_PARALLEL, TRANSFORMER, SEQUENCE_PARALLEL, LINK,
         TYPED_LINK, TYPED_LINK_DATA_PARALLEL, TEXT, PARTITION_PARALLEL, FLOW, UNITG_FLOW)


def choose(params: dict[str, Any], typed: bool) -> Mode:
    """The mode of a `graphpipe train` run from its parameters (``typed``: the store has
    several node types)."""
    from graphpipe.train import SEQUENCE_MODELS
    from graphpipe.train.distributed import launched_by_torchrun

    parallel = params["nproc"] is not None or launched_by_torchrun()
    if params["task"] == "link":
        if typed:
            return TYPED_LINK_DATA_PARALLEL if parallel else TYPED_LINK
        return LINK
    if params["partition_parallel"] is not None:
        return PARTITION_PARALLEL
    if params["model_name"] == "unitg" and params["pipeline"] is not None:
        return UNITG_FLOW
    if params["model_name"] in TEXT_MODEL_NAMES:
        return TEXT
    if params["pipeline"] is not None or params["model_name"] in FLOW_MODELS:
        return FLOW
    if typed:
        return TYPED_DATA_PARALLEL if parallel else TYPED
    transformer = params["model_name"] in SEQUENCE_MODELS
    if transformer and params["seq_parallel"] is not None:
        return SEQUENCE_PARALLEL
    if parallel or params["shard_parts"]:
        return DATA_PARALLEL
    return TRANSFORMER if transformer else NODE


def given(name: str) -> bool:
    """Whether option ``name`` was set on the command line (or by the environment)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT)


def refuse_unaccepted(mode: Mode) -> None:
    """One line and exit 2 if an option ``mode`` does not accept was given."""
    ctx = click.get_current_context()
    unused = [p for p in ctx.command.params if p.name not in mode.accepts and given(p.name)]
    if not unused:
        return
    flags = ", ".join(p.opts[-1] if p.opts[-1].startswith("--") else p.opts[0] for p in unused)
    owners = [m.name for m in MODES if all(p.name in m.accepts for p in unused)]
    hint = f" (an option of {', '.join(owners)})" if owners else ""
    fail(f"{flags}: not used by {mode.name}{hint}")


def pick(params: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The ``defaults`` keys, each the command's value or, when unset (None), the default."""
    return {k: v if params.get(k) is None else params[k] for k, v in defaults.items()}


def loop_options(params: dict[str, Any], options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments every :class:`~graphpipe.train.loop.Trainable` trainer takes
    for its loop: ``batch_size, optimizer, lr, weight_decay, evaluation`` from ``options``
    (the command's values with the mode's defaults, :func:`pick`), the rest from ``params``."""
    out = {k: options[k] for k in ("batch_size", "optimizer", "lr", "weight_decay", "evaluation")}
    out.update({k: params[k] for k in ("epochs", "patience", "eval_batch_size", "seed",
                                       "max_steps", "checkpoint", "metrics_log", "quiet")})
    return out


def parse_fanouts(text: str) -> list[int]:
    """``--fanouts`` as integers (``-1``: all neighbours)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        fail(f"'--fanouts' must be comma-separated integers like 15,10,5 (got {text!r})")
    if any(v < -1 for v in values):
        fail(f"'--fanouts' entries must be >= -1 (-1: all neighbours) (got {text!r})")
    return values


def layers_and_fanouts(params: dict[str, Any], default_layers: int, *, uses_fanouts: bool = True,
                       default_fanouts: Callable[[int], list[int]] | None = None
                       ) -> tuple[int, list[int]]:
    """``(layers, fanouts)``, one inferred from the other when only one is given: the
    layer count is the number of fanouts, the fanouts are the defaults for the layer
    count. Both given and of different lengths: one line, exit 2. ``uses_fanouts``
    False (an MLP): the fanouts neither count nor are checked."""
    default_fanouts = default_fanouts or (lambda n: DEFAULT_FANOUTS.get(n, [10] * n))
    text, layers = params.get("fanouts"), params.get("layers")
    fanouts = None if text is None else parse_fanouts(text)
    if layers is None:
        layers = len(fanouts) if fanouts is not None and uses_fanouts else default_layers
    if fanouts is None:
        return layers, default_fanouts(layers)
    if uses_fanouts and len(fanouts) != layers:
        fail(f"--fanouts {text} has {len(fanouts)} entries but --layers is {layers}: give one "
             "fanout per layer (or leave out one of the two)")
    return layers, fanouts


def parse_threshold(params: dict[str, Any]) -> Any:
    """``--threshold``: ``"auto"`` or a number >= 0, with --attention cluster-sparse only."""
    threshold: Any = params["threshold"]
    if threshold == "auto":
        return threshold
    if params["attention"] != "cluster-sparse":
        fail("'--threshold' applies to --attention cluster-sparse only")
    try:
        threshold = float(threshold)
    except ValueError:
        fail(f"'--threshold' must be 'auto' or a number (got {threshold!r})")
    if not threshold >= 0:
        fail(f"'--threshold' must be >= 0 (got {threshold})")
    return threshold


def parse_enforce(text: str) -> tuple[str, ...]:
    """``--enforce``: structure-search conditions, or ``none``."""
    from graphpipe.train.interleave import CONDITIONS

    if text.strip() == "none":
        return ()
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in CONDITIONS]
    if bad:
        fail(f"'--enforce' entries must be from {', '.join(CONDITIONS)} or 'none' (got {text!r})")
    return names


def transformer_settings(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model, trainer)`` keyword arguments of a graph-transformer run: the model's
    hidden/layers/heads/dropout and the :class:`~graphpipe.train.SequenceTrainer`'s."""
    name = params["model_name"]
    options = pick(params, {**TRANSFORMER_COMMON, **TRANSFORMER_DEFAULTS[name]})
    if options["evaluation"] not in ("sequences", "none"):
        fail(f"'--eval' must be 'sequences' or 'none' for --model {name} "
             f"(got {options['evaluation']!r})")
    budget = params["dense_budget_mb"]
    trainer = {
        "seq_len": params["seq_len"], "attention": params["attention"], "epochs": params["epochs"],
        "batch_size": options["batch_size"], "optimizer": options["optimizer"],
        "lr": options["lr"], "weight_decay": options["weight_decay"],
        "global_token": params["global_token"], "reorder": params["reorder"],
        "parts": params["parts"], "block": params["block"], "placement": params["placement"],
        "threshold": parse_threshold(params), "switch_freq": params["switch_freq"],
        "hamiltonian": params["hamiltonian_test"], "enforce": parse_enforce(params["enforce"]),
        "dense_budget": None if budget is None else int(budget) << 20,
        "patience": params["patience"], "evaluation": options["evaluation"], "seed": params["seed"],
        "max_steps": params["max_steps"], "device": params["device"],
        "checkpoint": params["checkpoint"], "metrics_log": params["metrics_log"],
        "quiet": params["quiet"],
    }
    model = {k: options[k] for k in ("hidden", "layers", "heads", "dropout")}
    return model, trainer


def split_hint(store: str) -> str:
    """The command that gives a store random splits."""
    return f"graphpipe split {store} --random 0.8,0.1,0.1"


def store_shape(store: str) -> dict[str, Any]:
    """Feature dim, class count and level (node/graph) of a store, with CLI errors."""
    import numpy as np

    from graphpipe.store import open_store

    opened = open_store(store)
    if not opened.has_features:
        fail(f"store {store!r} has no node features ('node/feat')")
    if opened.has_array("graph/ptr"):
        if not opened.has_array("graph/label"):
            fail(f"store {store!r} is graph-level but has no 'graph/label'")
        labels = np.asarray(opened.array("graph/label")).reshape(-1)
        return {"feature_dim": opened.feature_dim, "num_classes": int(labels.max()) + 1,
                "level": "graph"}
    if not opened.has_labels:
        fail(f"store {store!r} has no labels ('node/label'): nothing to train on")
    if "train" not in opened.split_names:
        fail(f"store {store!r} has no 'train' split: make splits with `{split_hint(store)}`")
    label_meta = opened.manifest.get("labels") or {}
    num_classes = int(label_meta.get("num_classes") or int(opened.labels.max()) + 1)
    return {"feature_dim": opened.feature_dim, "num_classes": num_classes, "level": "node"}


def make_model(name: str, settings: dict[str, Any], shape: dict[str, Any], seed: int) -> Any:
    """The model ``name`` (a GNN, the MLP or a graph transformer) for a store of ``shape``
    (:func:`store_shape`), built after seeding torch with ``seed``; ``settings``: hidden,
    layers, dropout, heads (GAT and transformers)."""
    import torch

    from graphpipe.train import SEQUENCE_MODELS, build_model

    kwargs: dict[str, Any] = {"dropout": settings["dropout"]}
    if name == "gat" or name in SEQUENCE_MODELS:
        kwargs["heads"] = settings["heads"]
    if name in SEQUENCE_MODELS:
        kwargs["level"] = shape.get("level", "node")
    torch.manual_seed(seed)
    return build_model(name, shape["feature_dim"], settings["hidden"], shape["num_classes"],
                       settings["layers"], **kwargs)


def report(result: Any, *, quiet: bool, checkpoint: str | None, metric: str = "acc") -> None:
    """The closing lines of a run: best valid epoch, checkpoint (unless ``quiet``) and,
    last, ``test <metric> <value>`` (at the best valid epoch)."""
    if not quiet:
        if result.best_epoch >= 0:
            click.echo(f"best valid {metric} {result.best_valid_acc:.4f} at epoch {result.best_epoch}"
                       + (" (stopped early)" if result.stopped_early else ""))
        if checkpoint:
            click.echo(f"checkpoint {checkpoint} (epoch {result.epochs_completed})")
    click.echo(f"test {metric} {result.test_acc:.4f}")


def interrupted(checkpoint: str | None) -> None:
    """Ctrl-C: say what a rerun can resume from (exit 130)."""
    from pathlib import Path

    if checkpoint and Path(checkpoint).is_file():
        from graphpipe.train.checkpoint import CheckpointError, load_checkpoint

        try:
            epoch = int(load_checkpoint(checkpoint)["epoch"])
        except CheckpointError:
            epoch = None
        if epoch is not None:
            fail(f"interrupted; checkpoint {checkpoint} holds the run after {epoch} epoch(s): "
                 f"rerun the same command with --resume {checkpoint} to continue it", code=130)
    if checkpoint:
        fail(f"interrupted before the first epoch ended; no checkpoint was written to {checkpoint}",
             code=130)
    fail("interrupted; no checkpoint to resume from (--checkpoint PATH writes one every epoch)",
         code=130)
