"""`graphpipe train STORE --partition-parallel P [--halo-bits B] [--staleness S]`: full-graph
training with one rank per METIS part (Sylvie), halo rows exchanged per layer at ``B``
bits (32 = float32, ``auto`` = degree-ranked 1/2/4/8), reused for at most ``S`` epochs.

Spawns ``P`` local gloo processes, or runs as one rank under ``torchrun`` (rank 0
prints). Parts come from ``graphpipe partition STORE --parts P`` when stored, else METIS
runs first. One line per epoch, then ``test acc <value>`` (at the best valid epoch).
The epochs run on the one training loop, so ``--checkpoint``, ``--resume``,
``--patience`` and ``--metrics-log`` work as for the other modes.
"""

from __future__ import annotations

import os
from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail, human_bytes, rank_failures_reported


def _check_resume(resume: str, parts: int) -> None:
    """The checkpoint must load and come from a partition-parallel run of ``parts`` ranks
    (the rest is checked by every rank)."""
    from graphpipe.train.checkpoint import CheckpointError, load_checkpoint

    train = load_checkpoint(resume).get("train", {})
    if train.get("kind") != "partition":
        raise CheckpointError(f"checkpoint {resume!r} was not written by a partition-parallel run")
    if train.get("num_parts") != parts:
        raise CheckpointError(f"checkpoint {resume!r} was trained with num_parts="
                              f"{train.get('num_parts')}; this run has num_parts={parts}")


def run(params: dict[str, Any]) -> None:
    """The ``--partition-parallel`` mode of ``graphpipe train`` (see the module docstring)."""
    from graphpipe.train.loop import TrainResult
    from graphpipe.train.partition_parallel import PartitionConfig, run_partition_parallel
    from graphpipe.train.partition_parallel.trainer import format_partition_epoch

    name, store, world = params["model_name"] or "sage", params["store"], params["partition_parallel"]
    if name not in ("sage", "gcn"):
        fail(f"--partition-parallel trains --model sage or gcn (got {name!r})")
    if params["device"] != "cpu":
        fail(f"--partition-parallel runs on the CPU over gloo (got --device {params['device']})")
    picked = opts.pick(params, opts.PARTITION_DEFAULTS)
    if picked["evaluation"] not in ("full", "none", "auto"):
        fail(f"'--eval' must be full or none for --partition-parallel (got {picked['evaluation']!r})")
    if not 0.0 <= picked["dropout"] < 1.0:
        fail(f"'--dropout' must be in [0, 1) (got {picked['dropout']})")
    from graphpipe.store import open_store

    opts.store_shape(store)  # features, labels and a train split, or one line
    opened = open_store(store)
    num_nodes = opened.num_nodes
    if world > num_nodes:
        fail(f"--partition-parallel {world} exceeds the {num_nodes} nodes of {store!r}")
    if params["resume"] is not None:
        _check_resume(params["resume"], world)
    halo_bits, quiet = params["halo_bits"], params["quiet"]
    config = PartitionConfig(model=name, epochs=params["epochs"],
                             bits="auto" if halo_bits == "auto" else int(halo_bits),
                             staleness=params["staleness"], seed=params["seed"],
                             **{k: picked[k] for k in ("hidden", "layers", "dropout", "lr",
                                                       "weight_decay")})
    talk = int(os.environ.get("RANK", "0")) == 0
    if talk and not quiet:
        click.echo(f"{store}: {num_nodes} nodes, {opened.num_edges} edges; model {name}, "
                   f"{world} partitions, halo bits {halo_bits}, staleness {params['staleness']}")
    with rank_failures_reported():
        result = run_partition_parallel(
            store, world, config, resume=params["resume"], checkpoint=params["checkpoint"],
            metrics_log=params["metrics_log"], patience=params["patience"],
            evaluation="none" if picked["evaluation"] == "none" else "full")
    if not talk:
        return
    if not quiet:
        for record in result["records"]:
            click.echo(format_partition_epoch(record))
        click.echo(f"halo rows {result['halo_rows']}, {human_bytes(int(result['bytes_per_epoch']))}"
                   f" exchanged per epoch, staleness at most {result['max_staleness']}")
    done = TrainResult(history=result["records"], **{k: result[k] for k in (
        "best_epoch", "best_valid_acc", "test_acc", "stopped_early", "epochs_completed")})
    opts.report(done, quiet=quiet, checkpoint=params["checkpoint"])
