"""`graphpipe train STORE --model sage ...`: train a bundled GNN on a store's labelled nodes
with the NeighborLoader; prints one line per epoch and, last, ``test acc <value>``."""

from __future__ import annotations

import click
from graphpipe.cli._common import fail, friendly_errors

_DEFAULT_FANOUTS = {1: [10], 2: [15, 10], 3: [15, 10, 5]}


def _parse_fanouts(text: str | None, layers: int) -> list[int]:
    if text is None:
        return _DEFAULT_FANOUTS.get(layers, [10] * layers)
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        fail(f"'--fanouts' must be comma-separated integers like 15,10,5 (got {text!r})")
    if any(v < -1 for v in values):
        fail(f"'--fanouts' entries must be >= -1 (-1: all neighbours) (got {text!r})")
    return values


@click.command(name="train")
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--model", "model_name", default="sage", show_default=True,
              help="sage, gcn, gin, gat or mlp.")
@click.option("--hidden", type=click.IntRange(1), default=256, show_default=True, help="Hidden size.")
@click.option("--layers", type=click.IntRange(1), default=3, show_default=True, help="Number of layers.")
@click.option("--fanouts", default=None,
              help="Neighbours per hop, seed hop first, one per layer (default 15,10,5 for 3 layers; "
                   "-1 = all). Ignored by mlp.")
@click.option("--batch-size", type=click.IntRange(1), default=1024, show_default=True)
@click.option("--epochs", type=click.IntRange(0), default=5, show_default=True)
@click.option("--lr", type=float, default=0.003, show_default=True)
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option("--optimizer", default="adam", show_default=True, help="adam, adamw or sgd.")
@click.option("--dropout", type=float, default=0.5, show_default=True)
@click.option("--heads", type=click.IntRange(1), default=4, show_default=True, help="GAT attention heads.")
@click.option("--feature-bits", type=int, default=None,
              help="Low-bit feature transfer in the loader (8, 4, 2 or 1).")
@click.option("--eval", "evaluation", default="full", show_default=True,
              help="full (layer-wise, all neighbours) or sampled (training fanouts).")
@click.option("--eval-batch-size", type=click.IntRange(1), default=4096, show_default=True)
@click.option("--patience", type=click.IntRange(1), default=None,
              help="Early stopping: epochs without a better valid accuracy.")
@click.option("--checkpoint", type=click.Path(dir_okay=False), default=None,
              help="Write a checkpoint here after every epoch (atomically).")
@click.option("--resume", type=click.Path(dir_okay=False), default=None,
              help="Continue the run saved in this checkpoint.")
@click.option("--metrics-log", type=click.Path(dir_okay=False), default=None,
              help="JSON lines, one per epoch.")
@click.option("--seed", type=click.IntRange(0), default=0, show_default=True)
@click.option("--max-steps", type=click.IntRange(1), default=None,
              help="Train only this many batches per epoch (demos).")
@click.option("--device", default="cpu", show_default=True)
@click.option("--quiet", is_flag=True, help="Only the final 'test acc' line; no progress bars.")
@friendly_errors
def command(store: str, model_name: str, hidden: int, layers: int, fanouts: str | None,
            batch_size: int, epochs: int, lr: float, weight_decay: float, optimizer: str,
            dropout: float, heads: int, feature_bits: int | None, evaluation: str,
            eval_batch_size: int, patience: int | None, checkpoint: str | None, resume: str | None,
            metrics_log: str | None, seed: int, max_steps: int | None, device: str, quiet: bool) -> None:
    """Train a GNN (or the MLP baseline) on the labelled nodes of STORE: sampled mini-batches
    from the NeighborLoader, evaluation on the valid and test splits after every epoch, and
    a final line ``test acc <value>`` (test accuracy at the best valid epoch)."""
    import torch

    from graphpipe.store import GraphStore
    from graphpipe.train import MODELS, Trainer, build_model

    if model_name not in MODELS:
        fail(f"unknown model {model_name!r}; known models: {', '.join(sorted(MODELS))}")
    fanout_list = _parse_fanouts(fanouts, layers)
    if model_name != "mlp" and len(fanout_list) != layers:
        fail(f"'--fanouts' must have one entry per layer: --layers {layers} but --fanouts "
             f"{','.join(map(str, fanout_list))} has {len(fanout_list)}")
    opened = GraphStore.open(store)
    if not opened.has_labels:
        fail(f"store {store!r} has no labels ('node/label'): nothing to train on")
    if "train" not in opened.split_names:
        fail(f"store {store!r} has no 'train' split (splits: {opened.split_names})")
    if not opened.has_features:
        fail(f"store {store!r} has no node features ('node/feat')")
    label_meta = opened.manifest.get("labels") or {}
    num_classes = int(label_meta.get("num_classes") or int(opened.labels.max()) + 1)

    kwargs: dict = {"dropout": dropout}
    if model_name == "gat":
        kwargs["heads"] = heads
    torch.manual_seed(seed)
    model = build_model(model_name, opened.feature_dim, hidden, num_classes, layers, **kwargs)
    trainer = Trainer(model, opened, fanouts=fanout_list, batch_size=batch_size, epochs=epochs,
                      optimizer=optimizer, lr=lr, weight_decay=weight_decay, patience=patience,
                      evaluation=evaluation, eval_batch_size=eval_batch_size, seed=seed,
                      max_steps=max_steps, feature_bits=feature_bits, device=device,
                      checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet)
    if resume is not None:
        trainer.check_resume(resume)  # fail before printing anything
    if not quiet:
        click.echo(f"{store}: {opened.num_nodes} nodes, {opened.num_edges} edges, "
                   f"{opened.feature_dim} features, {num_classes} classes; model {model_name} "
                   f"({sum(p.numel() for p in model.parameters())} parameters), fanouts {fanout_list}, "
                   f"batch {batch_size}, {len(trainer.loader)} batches/epoch")
    result = trainer.fit(resume=resume)
    if not quiet:
        if result.best_epoch >= 0:
            click.echo(f"best valid acc {result.best_valid_acc:.4f} at epoch {result.best_epoch}"
                       + (" (stopped early)" if result.stopped_early else ""))
        if checkpoint:
            click.echo(f"checkpoint {checkpoint} (epoch {result.epochs_completed})")
    click.echo(f"test acc {result.test_acc:.4f}")
