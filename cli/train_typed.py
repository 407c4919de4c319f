"""The typed-store path of ``graphpipe train``: R-GCN (``--model rgcn``), heterogeneous SAGE
(``--model hetero-sage``), R-GAT (``--model rgat``, ``--heads``) or the MLP baseline
(``--model mlp``, target-type features only) on the labelled nodes of the target type
(``--target-type``, default the store's)."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli._common import fail

TYPED_MODELS = ("rgcn", "hetero-sage", "rgat", "mlp")
_DEFAULTS = {"heads": 4, "hidden": 64, "layers": 2, "dropout": 0.5, "lr": 0.01,
             "weight_decay": 0.0, "optimizer": "adam", "batch_size": 1024}


def is_typed_store(path: str) -> bool:
    """Whether ``path`` opens as a typed store (False for anything else: the homogeneous
    path then reports its own errors)."""
    from graphpipe.store import open_store

    try:
        return bool(open_store(path).is_typed)
    except Exception:  # noqa: BLE001 - the caller's own open reports the error
        return False


def _model(name: str, store: Any, target: str, options: dict[str, Any], num_classes: int) -> Any:
    from graphpipe.train import build_model
    from graphpipe.train.hetero_models import build_hetero_model
    from graphpipe.train.typed_trainer import typed_model_dims

    dims = typed_model_dims(store)
    if name == "mlp":
        if dims[target] is None:
            fail(f"--model mlp: target type {target!r} has no features")
        return build_model("mlp", dims[target], options["hidden"], num_classes, options["layers"],
                           dropout=options["dropout"])
    layer_options = {"heads": options["heads"]} if name == "rgat" else {}
    return build_hetero_model(name, dims, store.num_nodes_dict, options["hidden"], num_classes,
                              options["layers"], store.edge_types, target,
                              dropout=options["dropout"], **layer_options)


def train_typed(store_path: str, model_name: str, target_type: str | None, shared: dict[str, Any],
                fanouts: list[int], given: list[str], *, epochs: int, patience: int | None,
                checkpoint: str | None, resume: str | None, metrics_log: str | None, seed: int,
                max_steps: int | None, quiet: bool) -> None:
    """Train on a typed store and print ``test acc <value>`` last."""
    import numpy as np
    import torch

    from graphpipe.store import open_store
    from graphpipe.train.typed_trainer import TypedTrainer, typed_training_data

    if model_name not in TYPED_MODELS:
        fail(f"store {store_path!r} is typed: --model must be one of {', '.join(TYPED_MODELS)} "
             f"(got {model_name!r})")
    if shared.get("heads") is not None and model_name != "rgat":
        given = [*given, "--heads"]
    if given:  # options of the homogeneous / transformer paths (see cli/train.py)
        fail(f"{', '.join(given)}: not supported on a typed store")
    store = typed_training_data(open_store(store_path))
    target = target_type or store.target_type
    if target not in store.node_types:
        fail(f"--target-type must be one of {', '.join(store.node_types)} (got {target!r})")
    labels = store.typed_labels(target)
    if labels is None:
        fail(f"store {store_path!r}: type {target!r} has no labels: nothing to train on")
    options = {k: _DEFAULTS[k] if v is None else v for k, v in shared.items() if k in _DEFAULTS}
    if model_name == "rgat" and options["hidden"] % options["heads"]:
        fail(f"--hidden must be a multiple of --heads={options['heads']} for --model rgat "
             f"(got {options['hidden']})")
    num_classes = int(np.asarray(labels).max()) + 1
    torch.manual_seed(seed)
    model = _model(model_name, store, target, options, num_classes)
    trainer = TypedTrainer(model, store, fanouts=fanouts, target_type=target,
                           batch_size=options["batch_size"], epochs=epochs,
                           optimizer=options["optimizer"], lr=options["lr"],
                           weight_decay=options["weight_decay"], patience=patience,
                           evaluation="none" if shared.get("evaluation") == "none" else "sampled",
                           seed=seed, max_steps=max_steps, checkpoint=checkpoint,
                           metrics_log=metrics_log, quiet=quiet)
    if resume is not None:
        trainer.check_resume(resume)
    if not quiet:
        counts = ", ".join(f"{n} {t}" for t, n in store.num_nodes_dict.items())
        click.echo(f"{store_path}: {counts}; {len(store.edge_types)} relations; target {target} "
                   f"({num_classes} classes); model {model_name} "
                   f"({sum(p.numel() for p in model.parameters())} parameters), fanouts {fanouts}, "
                   f"{len(trainer.loader)} batches/epoch")
    result = trainer.fit(resume=resume)
    if not quiet and result.best_epoch >= 0:
        click.echo(f"best valid acc {result.best_valid_acc:.4f} at epoch {result.best_epoch}")
    click.echo(f"test acc {result.test_acc:.4f}")
