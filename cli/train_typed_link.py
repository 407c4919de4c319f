"""`graphpipe train TYPED_STORE --task link --relation SRC___REL___DST`: link prediction on
one relation of a typed store (:class:`graphpipe.train.typed_link.TypedLinkTrainer`): a
random link split of the relation (PyG's ``RandomLinkSplit``: 10% valid, 20% test, the
held-out edges and their reverses out of message passing), R-GCN (default), hetero
SAGE or R-GAT embeddings with a dot or MLP decoder, one line per epoch and last
``test mrr <value>`` (OGB's Evaluator: each held-out edge ranked against
``--link-negatives`` negatives of its own, 100 by default) or, with
``--link-metric hits@K``, ``test hits@K <value>`` (against negatives shared by the
split), at the best valid epoch. Checkpoints, ``--resume``, ``--patience`` and
``--metrics-log`` work as for node classification.

In one process, or data parallel (``--nproc N`` or torchrun:
:class:`graphpipe.train.distributed.DistributedTypedLinkTrainer`, started by
``train_ddp.py``: each rank trains on its shard of the training edges).
:func:`link_spec` checks the options and the store once (one line, exit 2) into a plain
dict every rank rebuilds the same split, model and trainer from."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail
from graphpipe.cli.train_typed import describe_ranks

ENCODERS = ("rgcn", "hetero-sage", "rgat")
DEFAULT_LINK_NEGATIVES = 100
"""Negatives per held-out edge of ``--link-metric mrr`` (OGB's datasets use 1000)."""

_RUN_KEYS = ("store", "epochs", "eval_batch_size", "patience", "checkpoint", "resume",
             "metrics_log", "seed", "max_steps", "quiet", "nproc")


def _relation(params: dict[str, Any], store: Any) -> list[str]:
    from graphpipe.ops.sampling.types import etype_str

    names = ", ".join(etype_str(e) for e in store.edge_types)
    if params["relation"] is None:
        fail(f"--task link on a typed store needs --relation SRC___REL___DST (relations: {names})")
    parts = tuple(params["relation"].split("___"))
    if parts not in {tuple(e) for e in store.edge_types}:
        fail(f"--relation must be one of {names} (got {params['relation']!r})")
    return list(parts)


def _metric(params: dict[str, Any]) -> tuple[str, int]:
    """``(metric, negatives per held-out edge)`` of ``--link-metric`` / ``--link-negatives``."""
    from graphpipe.train.link import parse_link_metric

    try:
        metric = parse_link_metric(params.get("link_metric") or "mrr")
    except ValueError as exc:
        fail(f"--link-metric: {exc}")
    if metric != "mrr" and params.get("link_negatives") is not None:
        fail(f"--link-negatives: negatives per held-out edge are drawn for --link-metric mrr "
             f"(got --link-metric {metric}, whose negatives are shared)")
    return metric, int(params.get("link_negatives") or DEFAULT_LINK_NEGATIVES)


def link_spec(params: dict[str, Any]) -> dict[str, Any]:
    """The run's settings (defaults filled in, the relation checked), or a one-line error."""
    from graphpipe.store import open_store
    from graphpipe.train.trainer import typed_training_data

    name, path = params["model_name"] or "rgcn", params["store"]
    if name not in ENCODERS:
        fail(f"--task link on a typed store needs --model {' / '.join(ENCODERS)} (got {name!r})")
    if params["heads"] is not None and name != "rgat":
        fail(f"--heads: not used by typed link prediction with --model {name} (R-GAT's)")
    relation = _relation(params, typed_training_data(open_store(path), reverse=False))
    spec = opts.pick(params, {**opts.LINK_DEFAULTS, "heads": opts.TYPED_DEFAULTS["heads"]})
    spec["layers"], spec["fanouts"] = opts.layers_and_fanouts(
        params, opts.LINK_DEFAULTS["layers"], default_fanouts=lambda n: [10] * n)
    if name == "rgat" and spec["hidden"] % spec["heads"]:
        fail(f"--hidden must be a multiple of --heads={spec['heads']} for --model rgat "
             f"(got {spec['hidden']})")
    spec["metric"], spec["eval_negatives"] = _metric(params)
    spec.update({k: params.get(k) for k in _RUN_KEYS})
    spec.update(model_name=name, relation=relation)
    return spec


def build(spec: dict[str, Any]) -> tuple[Any, Any]:
    """``(store, model)``: the opened store and the predictor, built after seeding torch
    with ``spec["seed"]`` (the same weights in every process)."""
    import torch

    from graphpipe.store import open_store
    from graphpipe.train.trainer import typed_model_dims, typed_training_data
    from graphpipe.train.typed_link import TypedLinkPredictor

    store = open_store(spec["store"])
    graph = typed_training_data(store)
    name = spec["model_name"]
    torch.manual_seed(spec["seed"])
    model = TypedLinkPredictor(name, typed_model_dims(graph), graph.num_nodes_dict, graph.edge_types,
                               tuple(spec["relation"]), spec["hidden"], spec["layers"],
                               decoder=spec["decoder"], dropout=spec["dropout"],
                               **({"heads": spec["heads"]} if name == "rgat" else {}))
    return store, model


def trainer_options(spec: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~graphpipe.train.typed_link.TypedLinkTrainer` keyword arguments of ``spec``."""
    return {**opts.loop_options(spec, spec), "fanouts": spec["fanouts"], "metric": spec["metric"],
            "eval_negatives": spec["eval_negatives"]}


def run(params: dict[str, Any]) -> None:
    """Run typed ``--task link`` in this process with the ``graphpipe train`` parameters."""
    from graphpipe.train.typed_link import TypedLinkTrainer

    _fit(link_spec(params), TypedLinkTrainer)


def train_rank(spec: dict[str, Any]) -> None:
    """One rank of typed data-parallel link prediction (the process group is joined);
    rank 0 prints."""
    from graphpipe.train.distributed import DistributedTypedLinkTrainer

    _fit(spec, DistributedTypedLinkTrainer, ranks=True)


def _fit(spec: dict[str, Any], trainer_class: type, ranks: bool = False) -> None:
    """Build the run of ``spec`` with ``trainer_class``, check a ``--resume`` before
    printing anything (``ranks``: first that every rank runs the same), train, report."""
    store, model = build(spec)
    if ranks:
        from graphpipe.train.ranks import check_same_run

        check_same_run(store.manifest, spec)
    trainer = trainer_class(model, store, **trainer_options(spec))
    if spec["resume"] is not None:
        trainer.check_resume(spec["resume"])
    _train(spec, trainer)


def check_resume(spec: dict[str, Any]) -> None:
    """Refuse (one line, exit 2) a ``--resume`` checkpoint of another model or run, before
    any rank starts."""
    from graphpipe.train.typed_link import TypedLinkTrainer

    if spec["resume"] is not None:
        store, model = build(spec)
        TypedLinkTrainer(model, store, **trainer_options(spec)).check_resume(spec["resume"])


def _train(spec: dict[str, Any], trainer: Any) -> None:
    if trainer.is_main and not spec["quiet"]:
        _describe(spec, trainer)
    result = trainer.fit(resume=spec["resume"])
    if trainer.is_main:
        opts.report(result, quiet=spec["quiet"], checkpoint=spec["checkpoint"], metric=trainer.metric)


def _describe(spec: dict[str, Any], trainer: Any) -> None:
    sizes = " / ".join(str(trainer.split.edges[s].num_pos) for s in ("train", "valid", "test"))
    negatives = (f"{spec['eval_negatives']} negatives per held-out edge" if spec["metric"] == "mrr"
                 else "shared negatives")
    click.echo(f"{spec['store']}: link prediction on {'___'.join(spec['relation'])} (random split "
               f"train / valid / test {sizes} edges), encoder {spec['model_name']}, decoder "
               f"{spec['decoder']}, fanouts {spec['fanouts']}, batch {spec['batch_size']} positive "
               f"edges, {len(trainer.loader)} batches/epoch, {spec['metric']} against {negatives}")
    describe_ranks(trainer, spec["batch_size"], "positive edges")
