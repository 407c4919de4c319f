"""`graphpipe train STORE --partition-parallel P [--halo-bits B] [--staleness S]`: full-graph
training with one rank per METIS part (Sylvie), halo rows exchanged per layer at ``B``
bits (32 = float32, ``auto`` = degree-ranked 1/2/4/8), reused for at most ``S`` epochs.

Spawns ``P`` local gloo processes, or runs as one rank under ``torchrun`` (rank 0
prints). Parts come from ``graphpipe partition STORE --parts P`` when stored, else METIS
runs first. One line per epoch, then ``test acc <value>`` (at the best valid epoch).
"""

from __future__ import annotations

import os
from typing import Any

import click
from click.core import ParameterSource
from graphpipe.cli._common import fail, human_bytes

#: options of `graphpipe train` that partition-parallel training uses
_USED = {"store", "model_name", "hidden", "layers", "epochs", "lr", "weight_decay", "dropout",
         "seed", "quiet", "partition_parallel", "halo_bits", "staleness", "device"}
_DEFAULTS = {"hidden": 256, "layers": 3, "dropout": 0.5, "lr": 0.01, "weight_decay": 0.0}


def _refuse_unused() -> None:
    ctx = click.get_current_context()
    given = [p for p in ctx.command.params if p.name not in _USED
             and ctx.get_parameter_source(p.name) not in (None, ParameterSource.DEFAULT)]
    if given:
        names = ", ".join(p.opts[0] for p in given)
        fail(f"{names}: not used by --partition-parallel (full-graph training: no sampling, "
             "batches, checkpoints or evaluation options)")


def _check_store(store: str) -> tuple[Any, int]:
    from graphpipe.store import open_store

    opened = open_store(store)
    if not opened.has_features:
        fail(f"store {store!r} has no node features ('node/feat')")
    if not opened.has_labels:
        fail(f"store {store!r} has no labels ('node/label'): nothing to train on")
    if "train" not in opened.split_names:
        fail(f"store {store!r} has no 'train' split (splits: {opened.split_names})")
    return opened, opened.num_nodes


def _bits(text: str) -> int | str:
    return "auto" if text == "auto" else int(text)


def train_partition_parallel(store: str, *, model_name: str, partition_parallel: int,
                             halo_bits: str, staleness: int, epochs: int, seed: int,
                             quiet: bool, device: str, **options: Any) -> None:
    """The ``--partition-parallel`` path of ``graphpipe train`` (see the module docstring)."""
    from graphpipe.train.partition_parallel import PartitionConfig, run_partition_parallel

    _refuse_unused()
    if model_name not in ("sage", "gcn"):
        fail(f"--partition-parallel trains --model sage or gcn (got {model_name!r})")
    if device != "cpu":
        fail(f"--partition-parallel runs on the CPU over gloo (got --device {device})")
    picked = {k: _DEFAULTS[k] if options.get(k) is None else options[k] for k in _DEFAULTS}
    if not 0.0 <= picked["dropout"] < 1.0:
        fail(f"'--dropout' must be in [0, 1) (got {picked['dropout']})")
    opened, num_nodes = _check_store(store)
    if partition_parallel > num_nodes:
        fail(f"--partition-parallel {partition_parallel} exceeds the {num_nodes} nodes of {store!r}")
    config = PartitionConfig(model=model_name, epochs=epochs, bits=_bits(halo_bits),
                             staleness=staleness, seed=seed, **picked)
    talk = int(os.environ.get("RANK", "0")) == 0
    if talk and not quiet:
        click.echo(f"{store}: {num_nodes} nodes, {opened.num_edges} edges; model {model_name}, "
                   f"{partition_parallel} partitions, halo bits {halo_bits}, staleness {staleness}")
    result = run_partition_parallel(store, partition_parallel, config)
    if not talk:
        return
    if not quiet:
        for r in result["records"]:
            click.echo(f"epoch {r['epoch']:3d}  loss {r['loss']:.4f}  train {r['train_acc']:.4f}  "
                       f"valid {r['valid_acc']:.4f}  test {r['test_acc']:.4f}  "
                       f"exchanged {human_bytes(r['bytes_sent'])}  {r['seconds']:.2f}s")
        click.echo(f"halo rows {result['halo_rows']}, {human_bytes(int(result['bytes_per_epoch']))}"
                   f" exchanged per epoch, staleness at most {result['max_staleness']}")
        if result["best_epoch"] >= 0:
            click.echo(f"best valid acc {result['best_valid_acc']:.4f} at epoch {result['best_epoch']}")
    click.echo(f"test acc {result['test_acc']:.4f}")
