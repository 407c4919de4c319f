"""`graphpipe train STORE --model revgcn --pipeline P [--microbatches M]`: Flow
Parallelism (UniTG, thesis §5.4): a deep reversible GCN cut into ``P`` stages of
consecutive layers, one local gloo rank each, GPipe forward-then-backward over ``M``
METIS graph microbatches per epoch (default: the Auto Scheduler's rule, ``M = 16 / 8 / 4``
by node count and ``M <= P``). One line per epoch (loss, accuracies, epoch time, bubble
fraction), then ``test acc <value>`` (at the best valid epoch). ``--pipeline 1``: one
process, no process group.

``--model unitg --pipeline P``: UniTG with that GNN, the LM (Lazy Tuner) on stage 0, in
line before each GNN epoch (the default: the same steps on every run), or with
``--interleave`` in the pipeline's bubbles (Bubble Interleaver: the LM takes the steps the
bubbles have time for, so the result depends on timing), the Modality Collaborator's
syncs into stage 0's inputs (:mod:`graphpipe.train.flow.unitg`).

``--checkpoint PATH``: stage 0 writes the whole run (every stage's weights and Adam state;
unitg: the LM and the Modality Collaborator too) to PATH after every epoch, atomically;
``--resume PATH`` continues it, on the same or another number of stages. The checkpoint
is checked here before any rank starts (one line, exit 2: not a checkpoint, damaged,
another kind of run, other settings or model).
"""

from __future__ import annotations

import json
from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail, rank_failures_reported

FLOW_DEFAULTS = {"hidden": 64, "layers": 8, "dropout": 0.2, "lr": 0.01, "weight_decay": 0.0}


def flow_options(fn):
    """``--pipeline``, ``--microbatches`` and ``--interleave`` of `graphpipe train`."""
    fn = click.option("--interleave/--no-interleave", default=False, show_default=True,
                      help="unitg --pipeline: the LM's steps run in the pipeline's bubbles, as "
                           "many as they have time for (timing-dependent; default: every step "
                           "in line, before each GNN epoch).")(fn)
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


def flow_config(params: dict[str, Any], stages: int) -> Any:
    """The :class:`~graphpipe.train.flow.trainer.FlowConfig` of the command's options
    (one line and exit 2 on a bad combination)."""
    from graphpipe.store import open_store
    from graphpipe.train.flow.trainer import FlowConfig

    picked = opts.pick(params, FLOW_DEFAULTS)
    if picked["hidden"] % 2:
        fail(f"'--hidden' must be even for revgcn (got {picked['hidden']})")
    if not 0.0 <= picked["dropout"] < 1.0:
        fail(f"'--dropout' must be in [0, 1) (got {picked['dropout']})")
    if params["device"] != "cpu":
        fail(f"--pipeline runs on the CPU over gloo (got --device {params['device']})")
    if stages > picked["layers"]:
        fail(f"--pipeline {stages} needs at least {stages} --layers (got {picked['layers']})")
    num_nodes = open_store(params["store"]).num_nodes
    if params["microbatches"] is not None and params["microbatches"] > num_nodes:
        fail(f"--microbatches {params['microbatches']} exceeds the {num_nodes} nodes of "
             f"{params['store']!r}")
    return FlowConfig(epochs=params["epochs"], microbatches=params["microbatches"],
                      seed=params["seed"], **picked)


def resumed(params: dict[str, Any], stages: int, config: Any, text: Any = None) -> Any:
    """Check ``--checkpoint`` and ``--resume`` before any rank starts (one line, exit 2);
    the config, with the checkpoint's microbatch count when the run names none."""
    from graphpipe.train.flow.launch import check_resume
    from graphpipe.train.loop import check_output_paths

    check_output_paths(params["checkpoint"], None)
    if params["resume"] is None:
        return config
    return check_resume(params["store"], stages, config, params["resume"], text=text,
                        interleave=bool(params.get("interleave")))


def report(result: dict[str, Any], stages: int, params: dict[str, Any]) -> None:
    """The metrics log (every epoch, a resumed run's earlier ones too), this run's epoch
    lines, the pipeline's figures, the checkpoint and ``test acc``."""
    quiet, metrics_log = params["quiet"], params["metrics_log"]
    if metrics_log:
        with open(metrics_log, "w") as log:
            log.writelines(json.dumps(record) + "\n" for record in result["records"])
    if not quiet:
        if result.get("resumed_from"):
            click.echo(f"resumed from {params['resume']} after {result['resumed_from']} epoch(s)")
        ran = result["records"][result.get("resumed_from", 0):]
        for record in ran:
            click.echo(describe(record))
        if ran:  # a resume past --epochs trains nothing: no figures
            click.echo(f"{stages} stage(s), {result['microbatches']} microbatches: epoch "
                       f"{result['epoch_seconds']:.3f} s (median), bubble fraction "
                       f"{result['bubble']:.3f} (GPipe formula {result['gpipe_bubble']:.3f})")
        if "lm_steps" in result:
            click.echo(f"LM: {result['lm_steps']} of {result['lm_planned']} steps, "
                       f"{result['lm_cpu_seconds']:.1f} s CPU, {result['syncs']} syncs")
        click.echo(f"best valid acc {result['best_valid_acc']:.4f} at epoch {result['best_epoch']}")
        if params["checkpoint"]:
            click.echo(f"checkpoint {params['checkpoint']} (epoch {len(result['records'])})")
    click.echo(f"test acc {result['test_acc']:.4f}")


def run(params: dict[str, Any]) -> None:
    """The Flow Parallelism mode of `graphpipe train` (module docstring)."""
    from graphpipe.train.flow.launch import run_flow

    name, store = params["model_name"] or "revgcn", params["store"]
    if name not in opts.FLOW_MODELS:
        fail(f"--pipeline trains --model {' or '.join(opts.FLOW_MODELS)} (or unitg) (got {name!r})")
    stages = params["pipeline"] or 1
    shape = opts.store_shape(store)
    config = resumed(params, stages, flow_config(params, stages))
    if not params["quiet"]:
        click.echo(f"{store}: {shape['feature_dim']} features, {shape['num_classes']} classes; "
                   f"model {name} {config.layers}x{config.hidden}, {stages} stage(s)")
    with rank_failures_reported():
        result = run_flow(store, stages, config, checkpoint=params["checkpoint"],
                          resume=params["resume"])
    report(result, stages, params)


def run_unitg(params: dict[str, Any]) -> None:
    """`graphpipe train STORE --model unitg --pipeline P`: UniTG with its GNN (revgcn) on
    P stages and the LM in the bubbles (``--no-interleave``: in line)."""
    from graphpipe.cli.train_text import text_config

    from graphpipe.train.flow.launch import run_unitg_flow

    store, stages = params["store"], params["pipeline"]
    opts.store_shape(store)
    text = text_config(params)
    config = resumed(params, stages, flow_config(params, stages), text)
    if not params["quiet"]:
        click.echo(f"{store}: model unitg (LM {text.lm_kind} {text.lm_layers}x{text.lm_hidden}, "
                   f"GNN revgcn {config.layers}x{config.hidden}), {stages} stage(s), LM "
                   f"{'in the bubbles' if params['interleave'] and stages > 1 else 'in line'}")
    with rank_failures_reported():
        result = run_unitg_flow(store, stages, text, config, interleave=params["interleave"],
                                checkpoint=params["checkpoint"], resume=params["resume"])
    report(result, stages, params)
