"""`graphpipe train STORE --task link`: a GNN link predictor on a store's link splits
(:func:`graphpipe.train.link.train_link`): one line per epoch, the common-neighbours
heuristic on the same splits, and last ``test hits@50 <value>`` (or ``test mrr <value>``
for per-edge negatives), the test metric at the best valid epoch."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli._common import fail

#: defaults of ``--task link`` for the options ``graphpipe train`` leaves unset
LINK_DEFAULTS = {"hidden": 64, "layers": 2, "dropout": 0.0, "lr": 0.005, "batch_size": 512,
                 "decoder": "mlp"}


def train_link_command(store: str, *, model_name: str, options: dict[str, Any], epochs: int,
                       seed: int, max_steps: int | None, device: str, quiet: bool,
                       eval_batch_size: int, given: list[str]) -> None:
    """Run ``--task link`` with the ``graphpipe train`` options in ``options`` (None: unset);
    ``given``: node-task options set on the command line (refused here)."""
    from graphpipe.train import MODELS, SEQUENCE_MODELS
    from graphpipe.train.link import train_link

    if given:
        fail(f"{', '.join(given)}: not used by --task link")
    if model_name not in MODELS or model_name in SEQUENCE_MODELS:
        encoders = sorted(set(MODELS) - set(SEQUENCE_MODELS))
        fail(f"--task link needs a GNN encoder --model {' / '.join(encoders)} (got {model_name!r})")
    opts = {k: LINK_DEFAULTS[k] if options.get(k) is None else options[k] for k in LINK_DEFAULTS}
    fanouts = options.get("fanouts")
    fanout_list = [10] * opts["layers"] if fanouts is None else fanouts

    def log(record: dict[str, Any]) -> None:
        if not quiet:
            name = record["metric"]
            click.echo(f"epoch {record['epoch']} loss {record['loss']:.4f} valid {name} "
                       f"{record['valid']:.4f} test {name} {record['test']:.4f}")

    if not quiet:
        click.echo(f"{store}: link prediction, encoder {model_name}, decoder {opts['decoder']}, "
                   f"fanouts {fanout_list}, batch {opts['batch_size']} positive edges")
    try:
        result = train_link(store, encoder=model_name, decoder=opts["decoder"],
                            hidden=opts["hidden"], num_layers=opts["layers"], fanouts=fanout_list,
                            batch_size=opts["batch_size"], epochs=epochs, lr=opts["lr"],
                            dropout=opts["dropout"], seed=seed, device=device,
                            eval_batch_size=eval_batch_size, max_steps=max_steps, log=log)
    except ValueError as exc:
        fail(str(exc))
    name = result.metric
    if not quiet:
        click.echo(f"common neighbours: valid {name} {result.heuristic['valid']:.4f} "
                   f"test {name} {result.heuristic['test']:.4f}")
        if result.best_epoch >= 0:
            click.echo(f"best valid {name} {result.best_valid:.4f} at epoch {result.best_epoch}")
    click.echo(f"test {name} {result.test:.4f}")
