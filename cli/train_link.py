"""`graphpipe train STORE --task link`: a GNN link predictor on a store's link splits
(:class:`graphpipe.train.link.LinkTrainer`): one line per epoch, the common-neighbours
heuristic on the same splits, and last ``test hits@50 <value>`` (or ``test mrr <value>``
for per-edge negatives; ``--link-metric hits@K`` picks K, and names the metric the
store's negatives must allow), the test metric at the best valid epoch. Checkpoints,
``--resume``, ``--patience`` and ``--metrics-log`` work as for node classification."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail


def run(params: dict[str, Any]) -> None:
    """Run ``--task link`` with the ``graphpipe train`` parameters ``params``."""
    import torch

    from graphpipe.train import MODELS, SEQUENCE_MODELS
    from graphpipe.train.link import LinkPredictor, LinkTrainer, open_link_store

    name = params["model_name"] or "sage"
    if name not in MODELS or name in SEQUENCE_MODELS:
        encoders = sorted(set(MODELS) - set(SEQUENCE_MODELS))
        fail(f"--task link needs a GNN encoder --model {' / '.join(encoders)} (got {name!r})")
    o = opts.pick(params, opts.LINK_DEFAULTS)
    o["layers"], fanouts = opts.layers_and_fanouts(params, opts.LINK_DEFAULTS["layers"],
                                                   uses_fanouts=name != "mlp",
                                                   default_fanouts=lambda n: [10] * n)
    store = open_link_store(params["store"])
    torch.manual_seed(params["seed"])
    model = LinkPredictor(name, store.feature_dim, o["hidden"], o["layers"], decoder=o["decoder"],
                          dropout=o["dropout"])
    trainer = LinkTrainer(model, store, fanouts=fanouts, device=params["device"],
                          metric=params["link_metric"], **opts.loop_options(params, o))
    if params["resume"] is not None:
        trainer.check_resume(params["resume"])
    quiet = params["quiet"]
    if not quiet:
        click.echo(f"{params['store']}: link prediction, encoder {name}, decoder {o['decoder']}, "
                   f"fanouts {fanouts}, batch {o['batch_size']} positive edges")
        heuristic = trainer.heuristic()
        click.echo(f"common neighbours: valid {trainer.metric} {heuristic['valid']:.4f} "
                   f"test {trainer.metric} {heuristic['test']:.4f}")
    result = trainer.fit(resume=params["resume"])
    opts.report(result, quiet=quiet, checkpoint=params["checkpoint"], metric=trainer.metric)
