"""`graphpipe train STORE --model sage ...`: train a bundled GNN on a store's labelled nodes
with the NeighborLoader, or a graph transformer (``--model graphormer|gt``) on
ClusterLoader sequences; prints one line per epoch and, last, ``test acc <value>``."""

from __future__ import annotations

from typing import Any

import click
from click.core import ParameterSource
from graphpipe.cli._common import fail, friendly_errors
from graphpipe.cli.train_text import TEXT_MODEL_NAMES, pop_text_options, text_train_options

_DEFAULT_FANOUTS = {1: [10], 2: [15, 10], 3: [15, 10, 5]}

#: defaults of the shared options, per model family (None in the click options below)
_GNN_DEFAULTS = {"hidden": 256, "layers": 3, "heads": 4, "dropout": 0.5, "lr": 0.003,
                 "weight_decay": 0.0, "optimizer": "adam", "batch_size": 1024, "evaluation": "auto"}
_TRANSFORMER_DEFAULTS = {
    "graphormer": {"hidden": 64, "layers": 4, "heads": 8, "dropout": 0.1},
    "gt": {"hidden": 128, "layers": 4, "heads": 8, "dropout": 0.1},
}
_TRANSFORMER_COMMON = {"lr": 0.001, "weight_decay": 0.01, "optimizer": "adamw", "batch_size": None,
                       "evaluation": "sequences"}
_TRANSFORMER_ONLY = ("seq_len", "attention", "parts", "block", "switch_freq", "reorder",
                     "global_token", "placement", "threshold", "hamiltonian_test",
                     "enforce", "dense_budget_mb", "seq_parallel")
_GNN_ONLY = ("fanouts", "feature_bits", "eval_batch_size")
_LINK_UNUSED = ("feature_bits", "patience", "checkpoint", "resume", "metrics_log", "optimizer",
                "weight_decay", "heads", "evaluation", "seq_parallel", "partition_parallel",
                "halo_bits", "staleness", "nproc", "shard_parts")


def _given(name: str) -> bool:
    """Whether option ``name`` was set on the command line (or by the environment)."""
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, ParameterSource.DEFAULT)


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


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
              help="sage, gcn, gin, gat or mlp (GNNs); graphormer or gt (graph transformers); "
                   "rgcn, hetero-sage, rgat or mlp on a typed store.")
@click.option("--target-type", default=None,
              help="Typed store: the node type to classify [the store's target type].")
@click.option("--hidden", type=click.IntRange(1), default=None,
              help="Hidden size [GNNs 256, graphormer 64, gt 128].")
@click.option("--layers", type=click.IntRange(1), default=None,
              help="Number of layers [GNNs 3, transformers 4].")
@click.option("--fanouts", default=None,
              help="Neighbours per hop, seed hop first, one per layer (default 15,10,5 for 3 layers; "
                   "-1 = all). Ignored by mlp.")
@click.option("--batch-size", type=click.IntRange(1), default=None,
              help="Seeds per batch [1024]; transformers on graph-level stores: graphs per batch [32].")
@click.option("--epochs", type=click.IntRange(0), default=5, show_default=True)
@click.option("--lr", type=float, default=None, help="Learning rate [GNNs 0.003, transformers 0.001].")
@click.option("--weight-decay", type=float, default=None, help="[GNNs 0, transformers 0.01].")
@click.option("--optimizer", default=None, help="adam, adamw or sgd [GNNs adam, transformers adamw].")
@click.option("--dropout", type=float, default=None, help="[GNNs 0.5, transformers 0.1].")
@click.option("--heads", type=click.IntRange(1), default=None,
              help="Attention heads [GAT 4, transformers 8].")
@click.option("--feature-bits", type=int, default=None,
              help="Low-bit feature transfer in the loader (8, 4, 2 or 1).")
@click.option("--eval", "evaluation", default=None,
              help="GNNs: full (layer-wise, all neighbours), sampled (training fanouts), none, or "
                   "auto (default: full when its (N, hidden) matrices fit in the memory this process "
                   "may use, else sampled). Transformers: sequences (valid/test sequences; "
                   "default) or none.")
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
@click.option("--seq-len", type=click.IntRange(1), default=4096, show_default=True,
              help="Transformers: positions per sequence, global token included.")
@click.option("--attention", type=click.Choice(["sparse", "cluster-sparse", "interleaved", "dense"]),
              default="sparse", show_default=True, help="Transformers: attention of the training steps.")
@click.option("--parts", type=click.IntRange(1), default=8, show_default=True,
              help="Transformers: METIS clusters per sequence.")
@click.option("--block", type=click.IntRange(1), default=16, show_default=True,
              help="Transformers: cluster-sparse sub-block size d_b.")
@click.option("--placement", type=click.Choice(["random", "cover"]), default="random",
              show_default=True, help="Transformers: cluster-sparse sub-block placement.")
@click.option("--threshold", default="auto", show_default=True,
              help="Transformers, cluster-sparse: 'auto' (Auto Tuner) or a multiplier of beta_G.")
@click.option("--switch-freq", type=click.IntRange(0), default=5, show_default=True,
              help="Transformers, interleaved: full-attention iterations per epoch.")
@click.option("--hamiltonian-test", type=click.Choice(["dirac", "random-graph", "none"]),
              default="dirac", show_default=True,
              help="Transformers, interleaved: the structure search's Dirac-type test.")
@click.option("--enforce", default="self_loops,reachable", show_default=True,
              help="Transformers, interleaved: structure-search conditions whose failure forces "
                   "full attention (comma-separated from self_loops, reachable, hamiltonian; "
                   "'none': the schedule only).")
@click.option("--dense-budget-mb", type=click.IntRange(1), default=None,
              help="Transformers: memory a dense step may take (default: half the free GPU "
                   "memory, 2048 on the CPU); over it, sparse with a notice.")
@click.option("--reorder", type=click.Choice(["metis", "none"]), default="metis", show_default=True,
              help="Transformers: cluster reordering of each sequence.")
@click.option("--global-token/--no-global-token", default=None,
              help="Transformers: a global token per sequence [graphormer yes, gt no].")
@click.option("--nproc", type=click.IntRange(1), default=None,
              help="Data-parallel training on N local processes (gloo, a free loopback port); under "
                   "torchrun leave it out (cli/train_ddp.py).")
@click.option("--shard-parts", is_flag=True,
              help="Data parallel: each rank trains on the seeds of its METIS parts (needs "
                   "'graphpipe partition STORE --parts K', K >= ranks).")
@click.option("--seq-parallel", type=click.IntRange(1), default=None,
              help="Transformers: split every sequence over P ranks (sequence parallelism, "
                   "gloo on the CPU): spawns P local ranks, or is one rank under torchrun.")
@click.option("--partition-parallel", type=click.IntRange(1), default=None,
              help="Full-graph training on P METIS partitions, one gloo rank each (Sylvie; "
                   "sage or gcn; cli/train_sylvie.py).")
@click.option("--halo-bits", type=click.Choice(["1", "2", "4", "8", "32", "auto"]), default="32",
              show_default=True, help="--partition-parallel: bits per exchanged halo value "
                                      "(32 = float32; auto = per row by degree rank).")
@click.option("--task", type=click.Choice(["node", "link"]), default="node", show_default=True,
              help="node classification, or link prediction on the store's link splits "
                   "(cli/train_link.py).")
@click.option("--decoder", type=click.Choice(["dot", "mlp"]), default=None,
              help="--task link: edge decoder on the encoder's embeddings [mlp].")
@click.option("--staleness", type=click.IntRange(0), default=0, show_default=True,
              help="--partition-parallel: epochs a halo may be reused (0 = exchange every epoch).")
@text_train_options
@friendly_errors
def command(store: str, model_name: str, hidden: int | None, layers: int | None, fanouts: str | None,
            batch_size: int | None, epochs: int, lr: float | None, weight_decay: float | None,
            optimizer: str | None, dropout: float | None, heads: int | None,
            feature_bits: int | None, evaluation: str | None, eval_batch_size: int,
            patience: int | None, checkpoint: str | None, resume: str | None,
            metrics_log: str | None, seed: int, max_steps: int | None, device: str, quiet: bool,
            target_type: str | None, **transformer: Any) -> None:
    """Train a GNN (or the MLP baseline) on the labelled nodes of STORE: sampled mini-batches
    from the NeighborLoader, evaluation on the valid and test splits after every epoch, and
    a final line ``test acc <value>`` (test accuracy at the best valid epoch).

    With --model graphormer or gt, a graph transformer trains on ClusterLoader sequences
    of --seq-len positions with --attention sparse, cluster-sparse, interleaved or dense."""
    import torch
    from graphpipe.cli import train_ddp
    from graphpipe.cli.train_typed import is_typed_store, train_typed

    from graphpipe.store import open_store
    from graphpipe.train import MODELS, SEQUENCE_MODELS, Trainer, build_model
    from graphpipe.train.memory_plan import plan_training

    text = pop_text_options(transformer)
    if model_name in TEXT_MODEL_NAMES:  # language models on node text: cli/train_text.py
        from graphpipe.cli.train_text import train_text

        return train_text(store, model_name, text, {"hidden": hidden, "layers": layers,
                          "lr": lr, "dropout": dropout}, epochs=epochs, seed=seed,
                          patience=patience, checkpoint=checkpoint, resume=resume,
                          metrics_log=metrics_log, device=device, quiet=quiet)
    task, decoder = transformer.pop("task"), transformer.pop("decoder")
    if task == "link":  # link prediction: cli/train_link.py
        from graphpipe.cli.train_link import train_link_command

        return train_link_command(
            store, model_name=model_name, epochs=epochs, seed=seed, max_steps=max_steps,
            device=device, quiet=quiet, eval_batch_size=eval_batch_size,
            options={"hidden": hidden, "layers": layers, "dropout": dropout, "lr": lr,
                     "batch_size": batch_size, "decoder": decoder,
                     "fanouts": None if fanouts is None else _parse_fanouts(fanouts, 0)},
            given=[_flag(n) for n in (*_LINK_UNUSED, *_TRANSFORMER_ONLY) if _given(n)])
    if decoder is not None:
        fail("--decoder applies to --task link only")
    if transformer.get("partition_parallel") is not None:  # Sylvie: cli/train_sylvie.py
        from graphpipe.cli.train_sylvie import train_partition_parallel
        return train_partition_parallel(store, model_name=model_name, epochs=epochs, seed=seed,
                                        quiet=quiet, device=device, hidden=hidden, layers=layers,
                                        lr=lr, weight_decay=weight_decay, dropout=dropout,
                                        **transformer)
    if _given("halo_bits") or _given("staleness"):
        fail("--halo-bits and --staleness apply to --partition-parallel only")
    shared = {"hidden": hidden, "layers": layers, "heads": heads, "dropout": dropout, "lr": lr,
              "weight_decay": weight_decay, "optimizer": optimizer, "batch_size": batch_size,
              "evaluation": evaluation}
    if is_typed_store(store):
        given = [_flag(n) for n in (*_TRANSFORMER_ONLY, "feature_bits", "nproc",
                                    "shard_parts") if _given(n)]  # --heads: rgat's (train_typed)
        layer_count = layers or 2
        train_typed(store, model_name if _given("model_name") else "rgcn", target_type, shared,
                    _parse_fanouts(fanouts, layer_count), given, epochs=epochs,
                    patience=patience, checkpoint=checkpoint, resume=resume,
                    metrics_log=metrics_log, seed=seed, max_steps=max_steps, quiet=quiet)
        return
    if train_ddp.wanted(click.get_current_context().params):  # --nproc N, or under torchrun
        train_ddp.run(click.get_current_context().params)
        return
    if target_type is not None:
        fail(f"--target-type applies to a typed store; {store!r} has one node type")
    if model_name not in MODELS:
        fail(f"unknown model {model_name!r}; known models: {', '.join(sorted(MODELS))}")
    if model_name in SEQUENCE_MODELS:
        given = [_flag(n) for n in _GNN_ONLY if _given(n)]
        if given:
            fail(f"{', '.join(given)}: GNN option(s), not used by --model {model_name}")
        defaults = {**_TRANSFORMER_COMMON, **_TRANSFORMER_DEFAULTS[model_name]}
        options = {k: defaults[k] if v is None else v for k, v in shared.items()}
        if transformer["seq_parallel"] is not None:
            from graphpipe.cli.train_seqpar import train_seq_parallel

            train_seq_parallel(store, model_name, options, transformer, epochs=epochs,
                               patience=patience, checkpoint=checkpoint, resume=resume,
                               metrics_log=metrics_log, seed=seed, max_steps=max_steps,
                               device=device, quiet=quiet)
            return
        _train_transformer(store, model_name, options, transformer, epochs=epochs,
                           patience=patience, checkpoint=checkpoint, resume=resume,
                           metrics_log=metrics_log, seed=seed, max_steps=max_steps, device=device,
                           quiet=quiet)
        return
    given = [_flag(n) for n in _TRANSFORMER_ONLY if _given(n)]
    if given:
        fail(f"{', '.join(given)}: graph-transformer option(s); --model {model_name} is a GNN "
             f"(use --model {' or '.join(SEQUENCE_MODELS)})")
    hidden, layers, heads, dropout, lr, weight_decay, optimizer, batch_size, evaluation = (
        _GNN_DEFAULTS[k] if v is None else v for k, v in shared.items())
    fanout_list = _parse_fanouts(fanouts, layers)
    if model_name != "mlp" and len(fanout_list) != layers:
        fail(f"'--fanouts' must have one entry per layer: --layers {layers} but --fanouts "
             f"{','.join(map(str, fanout_list))} has {len(fanout_list)}")
    opened = open_store(store)  # arrays read in once the memory plan says they fit
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
    plan = plan_training(opened, model, evaluation=evaluation, batch_size=batch_size,
                         eval_batch_size=eval_batch_size)
    opened = open_store(store, in_memory=plan.in_memory)
    plan.apply(opened)
    trainer = Trainer(model, opened, fanouts=fanout_list, batch_size=batch_size, epochs=epochs,
                      optimizer=optimizer, lr=lr, weight_decay=weight_decay, patience=patience,
                      evaluation=plan.evaluation, eval_batch_size=plan.eval_batch_size, seed=seed,
                      max_steps=max_steps, feature_bits=feature_bits, device=device,
                      checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet,
                      loader_options=plan.loader_options())
    if resume is not None:
        trainer.check_resume(resume)  # fail before printing anything
    if not quiet:
        click.echo(f"{store}: {opened.num_nodes} nodes, {opened.num_edges} edges, "
                   f"{opened.feature_dim} features, {num_classes} classes; model {model_name} "
                   f"({sum(p.numel() for p in model.parameters())} parameters), fanouts {fanout_list}, "
                   f"batch {batch_size}, {len(trainer.loader)} batches/epoch")
        click.echo(plan.describe())
    result = trainer.fit(resume=resume)
    if not quiet:
        if result.best_epoch >= 0:
            click.echo(f"best valid acc {result.best_valid_acc:.4f} at epoch {result.best_epoch}"
                       + (" (stopped early)" if result.stopped_early else ""))
        if checkpoint:
            click.echo(f"checkpoint {checkpoint} (epoch {result.epochs_completed})")
    click.echo(f"test acc {result.test_acc:.4f}")


def _train_transformer(store: str, model_name: str, options: dict[str, Any],
                       transformer: dict[str, Any], *, epochs: int, patience: int | None,
                       checkpoint: str | None, resume: str | None, metrics_log: str | None,
                       seed: int, max_steps: int | None, device: str, quiet: bool) -> None:
    """The graph-transformer path of ``graphpipe train``."""
    import torch

    from graphpipe.train import SequenceTrainer, build_model

    if options["evaluation"] not in ("sequences", "none"):
        fail(f"'--eval' must be 'sequences' or 'none' for --model {model_name} "
             f"(got {options['evaluation']!r})")
    threshold = _parse_threshold(transformer)
    budget = transformer["dense_budget_mb"]
    trainer_args = {
        "seq_len": transformer["seq_len"], "attention": transformer["attention"],
        "epochs": epochs, "batch_size": options["batch_size"], "optimizer": options["optimizer"],
        "lr": options["lr"], "weight_decay": options["weight_decay"],
        "global_token": transformer["global_token"], "reorder": transformer["reorder"],
        "parts": transformer["parts"], "block": transformer["block"],
        "placement": transformer["placement"], "threshold": threshold,
        "switch_freq": transformer["switch_freq"], "hamiltonian": transformer["hamiltonian_test"],
        "enforce": _parse_enforce(transformer["enforce"]),
        "dense_budget": None if budget is None else int(budget) << 20, "patience": patience,
        "evaluation": options["evaluation"], "seed": seed, "max_steps": max_steps,
        "device": device, "checkpoint": checkpoint, "metrics_log": metrics_log, "quiet": quiet,
    }
    probe = _store_shape(store)
    torch.manual_seed(seed)
    model = build_model(model_name, probe["feature_dim"], options["hidden"], probe["num_classes"],
                        options["layers"], heads=options["heads"], dropout=options["dropout"],
                        level=probe["level"])
    trainer = SequenceTrainer(model, store, **trainer_args)
    if resume is not None:
        trainer.check_resume(resume)  # fail before printing anything
    if not quiet:
        opened = trainer.store
        click.echo(f"{store}: {opened.num_nodes} nodes, {opened.num_edges} edges, "
                   f"{opened.feature_dim} features, {trainer.num_classes} classes "
                   f"({probe['level']}-level); model {model_name} "
                   f"({sum(p.numel() for p in model.parameters())} parameters), "
                   f"seq-len {transformer['seq_len']}, attention {transformer['attention']}, "
                   f"{len(trainer.loader)} sequences/epoch")
    result = trainer.fit(resume=resume)
    if not quiet:
        if result.best_epoch >= 0:
            click.echo(f"best valid acc {result.best_valid_acc:.4f} at epoch {result.best_epoch}"
                       + (" (stopped early)" if result.stopped_early else ""))
        if checkpoint:
            click.echo(f"checkpoint {checkpoint} (epoch {result.epochs_completed})")
    click.echo(f"test acc {result.test_acc:.4f}")


def _parse_threshold(transformer: dict[str, Any]) -> Any:
    """``--threshold``: ``"auto"`` or a number >= 0, with --attention cluster-sparse only."""
    threshold: Any = transformer["threshold"]
    if threshold == "auto":
        return threshold
    if transformer["attention"] != "cluster-sparse":
        fail("'--threshold' applies to --attention cluster-sparse only")
    try:
        threshold = float(threshold)
    except ValueError:
        fail(f"'--threshold' must be 'auto' or a number (got {threshold!r})")
    if not threshold >= 0:
        fail(f"'--threshold' must be >= 0 (got {threshold})")
    return threshold


def _parse_enforce(text: str) -> tuple[str, ...]:
    from graphpipe.train.interleave import CONDITIONS

    if text.strip() == "none":
        return ()
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in CONDITIONS]
    if bad:
        fail(f"'--enforce' entries must be from {', '.join(CONDITIONS)} or 'none' (got {text!r})")
    return names


def _store_shape(store: str) -> dict[str, Any]:
    """Feature dim, class count and level (node/graph) of a store, with CLI errors."""
    import numpy as np

    from graphpipe.store import open_store

    opened = open_store(store)
    if not opened.has_features:
        fail(f"store {store!r} has no node features ('node/feat')")
    if opened.has_array("graph/ptr"):
        if not opened.has_array("graph/label"):
            fail(f"store {store!r} is graph-level but has no 'graph/label'")
        labels = np.asarray(opened.array("graph/label")).reshape(-1)
        return {"feature_dim": opened.feature_dim, "num_classes": int(labels.max()) + 1,
                "level": "graph"}
    if not opened.has_labels:
        fail(f"store {store!r} has no labels ('node/label'): nothing to train on")
    label_meta = opened.manifest.get("labels") or {}
    num_classes = int(label_meta.get("num_classes") or int(opened.labels.max()) + 1)
    return {"feature_dim": opened.feature_dim, "num_classes": num_classes, "level": "node"}
