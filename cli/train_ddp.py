"""`graphpipe train STORE --nproc N` and `torchrun ... -m graphpipe.cli.main train STORE`:
data-parallel GNN training (:class:`graphpipe.train.distributed.DistributedTrainer`).

``--nproc N`` checks the options and the store here, then starts N local ranks
(:func:`graphpipe.train.distributed.launch`: torch.multiprocessing, the rendezvous on
a loopback port the OS picks, gloo) that each run :func:`rank_main`. Under ``torchrun`` (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set) this process is one rank already
and runs :func:`rank_main` itself. Rank 0 prints the lines a one-process run prints,
ending with ``test acc <value>``; the other ranks print nothing but errors.

Each rank opens the store and makes its memory plan; local ranks plan one after another,
so a rank sees the memory the ranks before it took (features held in memory are held
once per rank; the memory-mapped topology is shared through the page cache).
"""

from __future__ import annotations

import sys
from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail, friendly_errors, rank_failures_reported


def run(params: dict[str, Any]) -> None:
    """The data-parallel path of ``graphpipe train`` (``params``: the command's parameters)."""
    from graphpipe.train.distributed import launched_by_torchrun

    if not launched_by_torchrun() and params.get("nproc") is None:
        fail("--shard-parts: data parallel needs --nproc N (or torchrun)")
    spec = _resolve(params)
    _start(spec, _preflight)


def run_typed(params: dict[str, Any]) -> None:
    """Typed data parallel (:mod:`graphpipe.cli.train_typed`): the same ranks, each a
    :class:`~graphpipe.train.distributed.DistributedTypedTrainer`."""
    from graphpipe.cli.train_typed import check_resume, typed_spec

    spec = typed_spec(params)
    spec["typed"] = True
    _start(spec, check_resume)


def run_typed_link(params: dict[str, Any]) -> None:
    """Typed data-parallel link prediction (:mod:`graphpipe.cli.train_typed_link`): the
    same ranks, each a :class:`~graphpipe.train.distributed.DistributedTypedLinkTrainer`."""
    from graphpipe.cli.train_typed_link import check_resume, link_spec

    spec = link_spec(params)
    spec["typed"] = "link"
    _start(spec, check_resume)


def _start(spec: dict[str, Any], preflight: Any) -> None:
    """Be one rank (torchrun), or check ``spec`` (``preflight``) and start ``--nproc`` ranks."""
    from graphpipe.train.distributed import launch, launched_by_torchrun

    if launched_by_torchrun():
        if spec.get("nproc") is not None:
            fail("'--nproc' starts local ranks itself; under torchrun (RANK and WORLD_SIZE are "
                 "set) leave it out and give torchrun --nproc-per-node")
        rank_main(spec)
        return
    preflight(spec)
    with rank_failures_reported():
        launch(rank_main, int(spec["nproc"]), (spec,))


def _resolve(params: dict[str, Any]) -> dict[str, Any]:
    """The run's settings with the GNN defaults filled in, or a one-line error."""
    from graphpipe.train import MODELS, SEQUENCE_MODELS

    name = params["model_name"] or "sage"
    if name not in MODELS:
        fail(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    if name in SEQUENCE_MODELS:
        fail(f"--model {name} is a graph transformer: data-parallel training (--nproc, torchrun) "
             "trains GNNs; transformers split sequences with --seq-parallel")
    spec = opts.pick(params, opts.GNN_DEFAULTS)
    spec["layers"], spec["fanouts"] = opts.layers_and_fanouts(
        params, opts.GNN_DEFAULTS["layers"], uses_fanouts=name != "mlp")
    for key in ("store", "epochs", "feature_bits", "eval_batch_size", "patience",
                "checkpoint", "resume", "metrics_log", "seed", "max_steps", "device", "quiet"):
        spec[key] = params[key]
    spec["model_name"] = name
    spec["shard"] = "parts" if params.get("shard_parts") else "seeds"
    spec["nproc"] = params.get("nproc")
    return spec


def _preflight(spec: dict[str, Any]) -> None:
    """Refuse in this process what every rank would refuse: a store without labels,
    ``train`` split or features; ``--shard-parts`` without a partition; a checkpoint
    that is unreadable or of another model."""
    from pathlib import Path

    from graphpipe.store import open_store
    from graphpipe.train.checkpoint import load_checkpoint
    from graphpipe.train.distributed import stored_partition
    from graphpipe.train.loop import check_checkpoint_model
    from graphpipe.train.trainer import open_training_store

    store = open_training_store(open_store(spec["store"]))
    if spec["shard"] == "parts":
        stored_partition(store, int(spec["nproc"]))
    if spec["resume"] is not None:
        check_checkpoint_model(load_checkpoint(spec["resume"]), _build_model(spec, store),
                               Path(spec["resume"]))


def _build_model(spec: dict[str, Any], store: Any) -> Any:
    label_meta = store.manifest.get("labels") or {}
    num_classes = int(label_meta.get("num_classes") or int(store.labels.max()) + 1)
    shape = {"feature_dim": store.feature_dim, "num_classes": num_classes}
    return opts.make_model(spec["model_name"], spec, shape, spec["seed"])


@friendly_errors
def rank_main(spec: dict[str, Any]) -> None:
    """One rank: join the group, build the model and the trainer, train; rank 0 prints."""
    import torch.distributed as dist

    from graphpipe.train.distributed import init_process_group
    from graphpipe.train.ranks import EXIT_PEER_LOST, collective_failed

    try:
        init_process_group(spec.get("device", "cpu"))
        if spec.get("typed") == "link":
            from graphpipe.cli.train_typed_link import train_rank as train_link_rank

            train_link_rank(spec)
        elif spec.get("typed"):
            from graphpipe.cli.train_typed import train_rank

            train_rank(spec)
        else:
            _train(spec)
    except RuntimeError as exc:
        if collective_failed(exc):  # another rank failed first: the launcher names it
            sys.exit(EXIT_PEER_LOST)
        raise
    # nobody leaves while another rank still talks to it; after an error, no barrier: the
    # others may wait in another collective, and the launcher ends them when this one exits
    dist.barrier()
    dist.destroy_process_group()


def _open_planned(spec: dict[str, Any]) -> tuple[Any, Any, Any]:
    """``(store, model, plan)``: local ranks make their memory plan one after another
    (:func:`graphpipe.train.distributed.in_turn`)."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import in_turn, local_rank
    from graphpipe.train.memory_plan import plan_training

    def build() -> tuple[Any, Any, Any]:
        opened = open_store(spec["store"])
        model = _build_model(spec, opened)
        plan = plan_training(opened, model, evaluation=spec["evaluation"],
                             batch_size=spec["batch_size"], eval_batch_size=spec["eval_batch_size"])
        plan.require(f"rank {local_rank()} of graphpipe train")
        opened = open_store(spec["store"], in_memory=plan.in_memory)
        plan.apply(opened)
        return opened, model, plan

    return in_turn(build)


def _train(spec: dict[str, Any]) -> None:
    from graphpipe.train.distributed import DistributedTrainer
    from graphpipe.train.ranks import check_same_run

    store, model, plan = _open_planned(spec)
    check_same_run(store.manifest, spec)
    trainer = DistributedTrainer(
        model, store, shard=spec["shard"], fanouts=spec["fanouts"], batch_size=spec["batch_size"],
        epochs=spec["epochs"], optimizer=spec["optimizer"], lr=spec["lr"],
        weight_decay=spec["weight_decay"], patience=spec["patience"], evaluation=plan.evaluation,
        eval_batch_size=plan.eval_batch_size, seed=spec["seed"], max_steps=spec["max_steps"],
        feature_bits=spec["feature_bits"], device=spec["device"], checkpoint=spec["checkpoint"],
        metrics_log=spec["metrics_log"], quiet=spec["quiet"], loader_options=plan.loader_options())
    if spec["resume"] is not None:
        trainer.check_resume(spec["resume"])
    if trainer.is_main and not spec["quiet"]:
        _describe(spec, trainer, plan)
    result = trainer.fit(resume=spec["resume"])
    if trainer.is_main:
        opts.report(result, quiet=spec["quiet"], checkpoint=spec["checkpoint"])


def _describe(spec: dict[str, Any], trainer: Any, plan: Any) -> None:
    from graphpipe.cli._common import human_bytes

    store, model = trainer.store, trainer.model
    params = sum(p.numel() for p in model.parameters())
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    import torch.distributed as dist

    backend = dist.get_backend(trainer.group)
    click.echo(f"{spec['store']}: {store.num_nodes} nodes, {store.num_edges} edges, "
               f"{store.feature_dim} features, {trainer.num_classes} classes; model "
               f"{spec['model_name']} ({params} parameters), fanouts {spec['fanouts']}, "
               f"batch {spec['batch_size']} per rank, {len(trainer.loader)} batches/epoch per rank")
    click.echo(f"data parallel: {trainer.world_size} ranks ({backend}), "
               f"{trainer.world_size * spec['batch_size']} seeds per step, shard {trainer.shard!r}, "
               f"gradient all-reduce {human_bytes(grad_bytes)} per step")
    click.echo(plan.describe())
