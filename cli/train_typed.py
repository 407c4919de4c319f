"""`graphpipe train TYPED_STORE`: node classification of a typed store's target type with
R-GCN (default), heterogeneous SAGE, R-GAT (``--heads``) or the MLP baseline
(:class:`graphpipe.train.TypedTrainer`), in one process or data parallel (``--nproc N``
or torchrun: :class:`graphpipe.train.distributed.DistributedTypedTrainer`, started by
``train_ddp.py``). :func:`typed_spec` checks the options and the store once (one line,
exit 2) into a plain dict every rank rebuilds the same store, model and trainer from."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail

TYPED_MODELS = ("rgcn", "hetero-sage", "rgat", "mlp")

_RUN_KEYS = ("store", "epochs", "eval_batch_size", "patience", "checkpoint", "resume",
             "metrics_log", "seed", "max_steps", "quiet", "nproc", "feature_bits")


def typed_spec(params: dict[str, Any]) -> dict[str, Any]:
    """The run's settings (defaults filled in, the store's target type and class count),
    or a one-line error."""
    import numpy as np

    from graphpipe.store import open_store
    from graphpipe.train.trainer import typed_training_data

    name, path = params["model_name"] or "rgcn", params["store"]
    if name not in TYPED_MODELS:
        fail(f"store {path!r} is typed: --model must be one of {', '.join(TYPED_MODELS)} "
             f"(got {name!r})")
    if params["heads"] is not None and name != "rgat":
        fail(f"--heads: not used by typed node classification with --model {name} (R-GAT's: "
             "--model rgat)")
    store = typed_training_data(open_store(path))
    target = params["target_type"] or store.target_type
    if target not in store.node_types:
        fail(f"--target-type must be one of {', '.join(store.node_types)} (got {target!r})")
    labels = store.typed_labels(target)
    if labels is None:
        fail(f"store {path!r}: type {target!r} has no labels: nothing to train on")
    spec = opts.pick(params, opts.TYPED_DEFAULTS)
    spec["layers"], spec["fanouts"] = opts.layers_and_fanouts(
        params, opts.TYPED_DEFAULTS["layers"], uses_fanouts=name != "mlp")
    if name == "rgat" and spec["hidden"] % spec["heads"]:
        fail(f"--hidden must be a multiple of --heads={spec['heads']} for --model rgat "
             f"(got {spec['hidden']})")
    if name == "mlp" and store.typed_features(target) is None:
        fail(f"--model mlp: target type {target!r} has no features")
    spec.update({k: params.get(k) for k in _RUN_KEYS})
    spec.update(model_name=name, target=target, num_classes=int(np.asarray(labels).max()) + 1)
    return spec


def build_typed(spec: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(store, model, plan)``: the store with its reverse relations and the memory plan
    (:func:`graphpipe.train.memory_plan.plan_typed_training`, applied to it) and the model,
    built after seeding torch with ``spec["seed"]`` (the same weights in every process)."""
    import torch

    from graphpipe.store import open_store
    from graphpipe.train import build_model
    from graphpipe.train.hetero_models import build_hetero_model
    from graphpipe.train.memory_plan import plan_typed_training
    from graphpipe.train.trainer import typed_model_dims, typed_training_data

    store = typed_training_data(open_store(spec["store"]))
    plan = plan_typed_training(store, batch_size=spec["batch_size"],
                               eval_batch_size=spec["eval_batch_size"],
                               embed_dim=0 if spec["model_name"] == "mlp" else spec["embedding_dim"])
    plan.require()
    plan.apply(store)
    dims = typed_model_dims(store)
    torch.manual_seed(spec["seed"])
    if spec["model_name"] == "mlp":
        return store, build_model("mlp", dims[spec["target"]], spec["hidden"], spec["num_classes"],
                                  spec["layers"], dropout=spec["dropout"]), plan
    layer_options = {"heads": spec["heads"]} if spec["model_name"] == "rgat" else {}
    return store, build_hetero_model(spec["model_name"], dims, store.num_nodes_dict, spec["hidden"],
                                     spec["num_classes"], spec["layers"], store.edge_types,
                                     spec["target"], dropout=spec["dropout"],
                                     embed_dim=spec["embedding_dim"], embeddings=plan.embeddings,
                                     **layer_options), plan


def trainer_options(spec: dict[str, Any], plan: Any) -> dict[str, Any]:
    """The :class:`~graphpipe.train.TypedTrainer` keyword arguments of ``spec`` and the
    memory ``plan``."""
    return {**opts.loop_options(spec, spec), "eval_batch_size": plan.eval_batch_size,
            "loader_options": {**plan.loader_options(), "feature_bits": spec["feature_bits"]},
            "fanouts": spec["fanouts"], "target_type": spec["target"]}


def run(params: dict[str, Any]) -> None:
    """Typed node classification in this process."""
    from graphpipe.train.trainer import TypedTrainer

    spec = typed_spec(params)
    store, model, plan = build_typed(spec)
    trainer = TypedTrainer(model, store, **trainer_options(spec, plan))
    if spec["resume"] is not None:
        trainer.check_resume(spec["resume"])  # fail before printing anything
    _train(spec, trainer, plan)


def train_rank(spec: dict[str, Any]) -> None:
    """One rank of typed data-parallel training (the process group is joined); rank 0 prints."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import DistributedTypedTrainer, in_turn
    from graphpipe.train.ranks import check_same_run

    store, model, plan = in_turn(lambda: build_typed(spec))  # each plan sees the ranks before it
    check_same_run(open_store(spec["store"]).manifest, spec)
    trainer = DistributedTypedTrainer(model, store, **trainer_options(spec, plan))
    if spec["resume"] is not None:
        trainer.check_resume(spec["resume"])
    _train(spec, trainer, plan)


def check_resume(spec: dict[str, Any]) -> None:
    """Refuse (one line, exit 2) a ``--resume`` checkpoint of another model or run, before
    any rank starts."""
    from graphpipe.train.trainer import TypedTrainer

    if spec["resume"] is not None:
        store, model, plan = build_typed(spec)
        TypedTrainer(model, store, **trainer_options(spec, plan)).check_resume(spec["resume"])


def _train(spec: dict[str, Any], trainer: Any, plan: Any) -> None:
    if trainer.is_main and not spec["quiet"]:
        _describe(spec, trainer)
        click.echo(plan.describe())
    result = trainer.fit(resume=spec["resume"])
    if trainer.is_main:
        opts.report(result, quiet=spec["quiet"], checkpoint=spec["checkpoint"])


def _describe(spec: dict[str, Any], trainer: Any) -> None:
    store, model = trainer.store, trainer.model
    counts = ", ".join(f"{n} {t}" for t, n in store.num_nodes_dict.items())
    params = sum(p.numel() for p in model.parameters())
    click.echo(f"{spec['store']}: {counts}; {len(store.edge_types)} relations; target "
               f"{spec['target']} ({spec['num_classes']} classes); model {spec['model_name']} "
               f"({params} parameters), fanouts {spec['fanouts']}, "
               f"{len(trainer.loader)} batches/epoch")
    describe_ranks(trainer, spec["batch_size"], "seeds")


def describe_ranks(trainer: Any, batch_size: int, unit: str) -> None:
    """The line of a data-parallel ``trainer`` (none in one process): ranks, backend, what
    a step trains on (``batch_size`` ``unit`` per rank) and the shard."""
    world = getattr(trainer, "world_size", None)
    if world is not None:
        import torch.distributed as dist

        click.echo(f"data parallel: {world} ranks ({dist.get_backend(trainer.group)}), "
                   f"{world * batch_size} {unit} per step, shard {trainer.shard!r}")
