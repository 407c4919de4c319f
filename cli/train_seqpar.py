"""`graphpipe train STORE --model graphormer|gt --seq-parallel P`: sequence parallelism
(:mod:`graphpipe.train.sequence_parallel`) over P ranks, gloo on the CPU.

Without torchrun's environment the command spawns P local ranks on a free loopback port;
under ``torchrun --nproc-per-node P graphpipe ... --seq-parallel P`` (``RANK``,
``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` set, ``WORLD_SIZE == P``) this process is
one rank. ``P = 1`` trains in this process. Rank 0 prints the header, the epoch lines, the
all-to-all volume and, last, ``test acc <value>``; metrics log and checkpoint are rank 0's.
Arguments are checked here, before any rank starts; a rank that meets bad input prints
``error: ...`` and the command exits 2.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import EXPECTED_ERRORS, _message, fail, rank_failures_reported

__all__ = ["run"]

_TORCHRUN = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def run(params: dict[str, Any]) -> None:
    """The ``--seq-parallel`` mode of ``graphpipe train`` (``params``: the command's)."""
    world = int(params["seq_parallel"])
    model, trainer = opts.transformer_settings(params)
    if trainer["batch_size"] not in (None, 1):
        fail("--seq-parallel splits one sequence per step: --batch-size does not apply")
    trainer.pop("batch_size")
    trainer.pop("device")
    job = {"store": params["store"], "model_name": params["model_name"], "model": model,
           "trainer": trainer, "resume": params["resume"], "seed": params["seed"],
           "quiet": params["quiet"], "world": world}
    probe = opts.store_shape(params["store"])
    if probe["level"] != "node":
        fail(f"--seq-parallel splits node-level sequences; store {params['store']!r} is graph-level")
    if model["heads"] % world:
        fail(f"--seq-parallel {world} needs --heads to be a multiple of {world} "
             f"(got {model['heads']})")
    if str(params["device"]) != "cpu":
        fail(f"--seq-parallel runs on the CPU over gloo (got --device {params['device']})")
    job["probe"] = probe
    if params["resume"] is not None:
        _check_resume(job)            # one line, before any rank starts
    if all(k in os.environ for k in _TORCHRUN):
        if int(os.environ["WORLD_SIZE"]) != world:
            fail(f"--seq-parallel {world} but torchrun started WORLD_SIZE="
                 f"{os.environ['WORLD_SIZE']} ranks")
        _rank_main(job)
    elif world == 1:
        _rank_main(job, distributed=False)
    else:
        _spawn(job, world)


def _check_resume(job: dict[str, Any]) -> None:
    """The checkpoint must load and hold weights of this model (the rest is checked by
    every rank's trainer)."""
    from pathlib import Path

    from graphpipe.train.checkpoint import CheckpointError, load_checkpoint
    from graphpipe.train.loop import check_checkpoint_model

    path = Path(job["resume"])
    state = load_checkpoint(path)
    check_checkpoint_model(state, _build_model(job), path)
    if state.get("train", {}).get("kind") != "sequence":
        raise CheckpointError(f"checkpoint {str(path)!r} was not written by a graph-transformer run")


def _build_model(job: dict[str, Any]) -> Any:
    return opts.make_model(job["model_name"], job["model"], job["probe"], job["seed"])


def _spawn(job: dict[str, Any], world: int) -> None:
    from graphpipe.train.sequence_parallel import spawn_local

    with rank_failures_reported():
        spawn_local(_rank_main, world, (job,))


def _rank_main(job: dict[str, Any], distributed: bool = True) -> None:
    """One rank: process group, model, :class:`SequenceParallelTrainer`, fit; rank 0 prints."""
    from graphpipe.train.sequence_parallel import init_from_env

    rank = 0
    try:
        if distributed:
            rank, _world = init_from_env()
        _train(job, rank)
        if distributed:  # nobody leaves while another rank still talks to it (as train_ddp)
            import torch.distributed as dist

            dist.barrier()
    except EXPECTED_ERRORS as exc:
        if os.environ.get("GRAPHPIPE_DEBUG", "") not in ("", "0"):
            raise
        prefix = "" if rank == 0 else f"rank {rank}: "
        click.echo(f"error: {prefix}{_message(exc)}", err=True)
        sys.exit(getattr(exc, "exit_code", 2))
    finally:
        if distributed:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def _train(job: dict[str, Any], rank: int) -> None:
    from graphpipe.train.sequence_parallel import HeadExchange
    from graphpipe.train.sequence_parallel_trainer import SequenceParallelTrainer

    m = job["model"]
    model = _build_model(job)
    trainer = SequenceParallelTrainer(model, job["store"], exchange=HeadExchange(),
                                      **job["trainer"])
    if trainer.exchange.world > 1:
        from graphpipe.train.ranks import check_same_run

        check_same_run(trainer.store.manifest, job)
    if job["resume"] is not None:
        trainer.check_resume(job["resume"])
    talk = rank == 0 and not job["quiet"]
    if talk:
        s, t = trainer.store, job["trainer"]
        click.echo(f"{job['store']}: {s.num_nodes} nodes, {s.num_edges} edges, "
                   f"{s.feature_dim} features, {trainer.num_classes} classes (node-level); "
                   f"model {job['model_name']} ({sum(p.numel() for p in model.parameters())} "
                   f"parameters), seq-len {t['seq_len']}, attention {t['attention']}, "
                   f"{len(trainer.loader)} sequences/epoch, sequence-parallel over "
                   f"{trainer.exchange.world} rank(s) ({m['heads'] // trainer.exchange.world} "
                   f"heads and 1/{trainer.exchange.world} of every sequence per rank)")
    result = trainer.fit(resume=job["resume"])
    if talk:
        _comm_line(result)
    if rank == 0:
        opts.report(result, quiet=job["quiet"], checkpoint=job["trainer"]["checkpoint"])


def _comm_line(result: Any) -> None:
    from graphpipe.cli._common import human_bytes

    if result.history and "comm" in result.history[-1]:
        c = result.history[-1]["comm"]
        click.echo(f"all-to-all per rank, last epoch: {human_bytes(c['forward_bytes'])} forward + "
                   f"{human_bytes(c['backward_bytes'])} backward "
                   f"({human_bytes(c['forward_bytes_per_layer_step'])} per layer and step each "
                   f"way on average; {human_bytes(c['remote_bytes'])} of it to other ranks)")
