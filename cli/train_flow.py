"""`graphpipe train STORE --model revgcn --pipeline P [--microbatches M]`: Flow
Parallelism (UniTG, thesis §5.4): a deep reversible GCN cut into ``P`` stages of
consecutive layers, one local gloo rank each, GPipe forward-then-backward over ``M``
METIS graph microbatches per epoch (default: the Auto Scheduler's rule, ``M = 16 / 8 / 4``
by node count and ``M <= P``). One line per epoch (loss, accuracies, epoch time, bubble
fraction), then ``test acc <value>`` (at the best valid epoch). ``--pipeline 1``: one
process, no process group.
"""

from __future__ import annotations

import json
from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail

FLOW_DEFAULTS = {"hidden": 64, "layers": 8, "dropout": 0.2, "lr": 0.01, "weight_decay": 0.0}


def flow_options(fn):
    """``--pipeline`` and ``--microbatches`` of `graphpipe train`."""
    fn = click.option("--microbatches", type=click.IntRange(1), default=None,
                      help="--pipeline: graph microbatches per step [16/8/4 by node count, "
                           "at most P].")(fn)
    return click.option("--pipeline", type=click.IntRange(1), default=None,
                        help="Flow Parallelism: a deep GNN (revgcn; unitg's GNN) in P stages on "
                             "P local gloo ranks, GPipe over METIS microbatches.")(fn)


def describe(record: dict[str, Any]) -> str:
    """One epoch's line."""
    accs = "".join(f"  {k.split('_')[0]} {record[k]:.4f}" for k in ("train_acc", "valid_acc",
                                                                      "test_acc") if k in record)
    return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}{accs}  time "
            f"{record['seconds']:.3f}s  bubble {record['bubble']:.2f}")


def run(params: dict[str, Any]) -> None:
    """The Flow Parallelism mode of `graphpipe train` (module docstring)."""
    from graphpipe.train.flow.launch import run_flow
    from graphpipe.train.flow.trainer import FlowConfig

    name, store = params["model_name"] or "revgcn", params["store"]
    if name not in opts.FLOW_MODELS:
        fail(f"--pipeline trains --model {' or '.join(opts.FLOW_MODELS)} (or unitg) (got {name!r})")
    if params["device"] != "cpu":
        fail(f"--pipeline runs on the CPU over gloo (got --device {params['device']})")
    picked = opts.pick(params, FLOW_DEFAULTS)
    if picked["hidden"] % 2:
        fail(f"'--hidden' must be even for revgcn (got {picked['hidden']})")
    if not 0.0 <= picked["dropout"] < 1.0:
        fail(f"'--dropout' must be in [0, 1) (got {picked['dropout']})")
    shape = opts.store_shape(store)
    from graphpipe.store import open_store

    num_nodes = open_store(store).num_nodes
    stages = params["pipeline"] or 1
    if stages > picked["layers"]:
        fail(f"--pipeline {stages} needs at least {stages} --layers (got {picked['layers']})")
    if params["microbatches"] is not None and params["microbatches"] > num_nodes:
        fail(f"--microbatches {params['microbatches']} exceeds the {num_nodes} nodes of {store!r}")
    config = FlowConfig(epochs=params["epochs"], microbatches=params["microbatches"],
                        seed=params["seed"], **picked)
    if not params["quiet"]:
        click.echo(f"{store}: {num_nodes} nodes, {shape['feature_dim']} features, "
                   f"{shape['num_classes']} classes; model {name} {config.layers}x{config.hidden}, "
                   f"{stages} stage(s)")
    result = run_flow(store, stages, config)
    if params["metrics_log"]:
        with open(params["metrics_log"], "w") as log:
            log.writelines(json.dumps(record) + "\n" for record in result["records"])
    if not params["quiet"]:
        for record in result["records"]:
            click.echo(describe(record))
        click.echo(f"{stages} stage(s), {result['microbatches']} microbatches: epoch "
                   f"{result['epoch_seconds']:.3f} s (median), bubble fraction "
                   f"{result['bubble']:.3f} (GPipe formula {result['gpipe_bubble']:.3f})")
        click.echo(f"best valid acc {result['best_valid_acc']:.4f} at epoch {result['best_epoch']}")
    click.echo(f"test acc {result['test_acc']:.4f}")
