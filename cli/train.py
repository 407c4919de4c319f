"""`graphpipe train STORE`: one command for every way to train — node classification with
the NeighborLoader, typed stores (R-GCN), graph transformers on ClusterLoader sequences,
link prediction, language models on node text, and the data-, sequence- and
partition-parallel strategies. The mode
comes from the options and the store (:func:`graphpipe.cli.train_options.choose`); an
option the mode does not accept is refused in one line. Prints one line per epoch and,
last, ``test acc <value>``.

The single-process modes run here; the others are ``train_typed.py``, ``train_link.py``,
``train_text.py``, ``train_ddp.py``, ``train_seqpar.py`` and ``train_sylvie.py``."""

from __future__ import annotations

from typing import Any

import click
from graphpipe.cli import train_options as opts
from graphpipe.cli._common import fail, friendly_errors
from graphpipe.cli.train_flow import flow_options
from graphpipe.cli.train_text import text_train_options


@click.command(name="train")
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--model", "model_name", default=None,
              help="sage, gcn, gin, gat or mlp (GNNs); graphormer or gt (graph transformers); "
                   "lm, unitg, tape or glem (language models on node text); revgcn (deep "
                   "reversible GCN, --pipeline); rgcn, hetero-sage, "
                   "rgat or mlp on a typed store. [default: sage; rgcn for typed stores]")
@click.option("--target-type", default=None,
              help="Typed store: the node type to classify [the store's target type].")
@click.option("--hidden", type=click.IntRange(1), default=None,
              help="Hidden size [GNNs 256, graphormer 64, gt 128].")
@click.option("--layers", type=click.IntRange(1), default=None,
              help="Number of layers [GNNs 3, typed and link 2, transformers 4; with --fanouts: "
                   "one per fanout].")
@click.option("--fanouts", default=None,
              help="Neighbours per hop, seed hop first, one per layer (-1 = all) [15,10,5 for 3 "
                   "layers, 15,10 for 2; link: 10 per layer]. Ignored by mlp.")
@click.option("--batch-size", type=click.IntRange(1), default=None,
              help="Seeds per batch [1024]; transformers on graph-level stores: graphs per batch [32].")
@click.option("--epochs", type=click.IntRange(0), default=5, show_default=True)
@click.option("--lr", type=float, default=None, help="Learning rate [GNNs 0.003, transformers 0.001].")
@click.option("--weight-decay", type=float, default=None, help="[GNNs 0, transformers 0.01].")
@click.option("--optimizer", default=None, help="adam, adamw or sgd [GNNs adam, transformers adamw].")
@click.option("--dropout", type=float, default=None, help="[GNNs 0.5, transformers 0.1].")
@click.option("--heads", type=click.IntRange(1), default=None,
              help="Attention heads [GAT 4, transformers 8].")
@click.option("--embedding-dim", type=click.IntRange(1), default=None,
              help="Typed stores: width of the learnable embeddings of featureless types [64]; "
                   "kept on disk (sparse updates) when they do not fit the memory plan.")
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
@click.option("-q", "--quiet", is_flag=True, help="Only the final 'test acc' line; no progress bars.")
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
                   "torchrun leave it out.")
@click.option("--shard-parts", is_flag=True,
              help="Data parallel: each rank trains on the seeds of its METIS parts (needs "
                   "'graphpipe partition STORE --parts K', K >= ranks).")
@click.option("--seq-parallel", type=click.IntRange(1), default=None,
              help="Transformers: split every sequence over P ranks (sequence parallelism, "
                   "gloo on the CPU): spawns P local ranks, or is one rank under torchrun.")
@click.option("--partition-parallel", type=click.IntRange(1), default=None,
              help="Full-graph training on P METIS partitions, one gloo rank each (Sylvie; "
                   "sage or gcn).")
@click.option("--halo-bits", type=click.Choice(["1", "2", "4", "8", "32", "auto"]), default="32",
              show_default=True, help="--partition-parallel: bits per exchanged halo value "
                                      "(32 = float32; auto = per row by degree rank).")
@click.option("--task", type=click.Choice(["node", "link"]), default="node", show_default=True,
              help="node classification, or link prediction on the store's link splits (typed "
                   "stores: on a random link split of --relation).")
@click.option("--relation", default=None,
              help="Typed store, --task link: the relation whose edges are predicted, "
                   "SRC___REL___DST (e.g. author___writes___paper).")
@click.option("--decoder", type=click.Choice(["dot", "mlp"]), default=None,
              help="--task link: edge decoder on the encoder's embeddings [mlp].")
@click.option("--link-metric", default=None,
              help="--task link: mrr (each held-out edge against negatives of its own, "
                   "ogbl-citation2's) or hits@K (against negatives shared by the split, "
                   "ogbl-collab's) [the store's link split: the one its negatives allow; typed "
                   "stores: mrr].")
@click.option("--link-negatives", type=click.IntRange(1), default=None,
              help="Typed store, --task link --link-metric mrr: negatives drawn per held-out "
                   "edge (from --seed) [100; OGB uses 1000].")
@click.option("--staleness", type=click.IntRange(0), default=0, show_default=True,
              help="--partition-parallel: epochs a halo may be reused (0 = exchange every epoch).")
@flow_options
@text_train_options
@friendly_errors
def command(**params: Any) -> None:
    """Train a GNN (or the MLP baseline) on the labelled nodes of STORE: sampled mini-batches
    from the NeighborLoader, evaluation on the valid and test splits after every epoch, and
    a final line ``test acc <value>`` (test accuracy at the best valid epoch).

    On a store with several node types, R-GCN (default), heterogeneous SAGE or an MLP
    classify the target type. With --model graphormer or gt, a graph transformer trains on
    ClusterLoader sequences of --seq-len positions with --attention sparse, cluster-sparse,
    interleaved or dense. --task link trains a link predictor; --model lm, unitg, tape or
    glem trains language models on node text; --nproc, --seq-parallel and
    --partition-parallel train over several processes."""
    check_device(params["device"])
    mode = opts.choose(params, is_typed_store(params["store"]))
    opts.refuse_unaccepted(mode)
    try:
        mode.run(params)
    except KeyboardInterrupt:
        opts.interrupted(params["checkpoint"])


def check_device(name: str) -> None:
    """``--device`` names a device this torch can use, else one line (exit 2): a CUDA
    device needs a CUDA build of torch and a visible GPU."""
    import torch

    try:
        device = torch.device(name)
    except (RuntimeError, ValueError) as exc:
        fail(f"--device {name!r}: {str(exc).splitlines()[0]}")
    if device.type == "cuda" and not torch.cuda.is_available():
        fail(f"--device {name}: CUDA is not available to this torch {torch.__version__} "
             "(a CPU build, or no GPU visible); use --device cpu")


def is_typed_store(path: str) -> bool:
    """Whether ``path`` opens as a typed store (False for anything else: the mode then
    reports its own errors)."""
    from graphpipe.store import open_store

    try:
        return bool(open_store(path).is_typed)
    except Exception:  # noqa: BLE001 - the caller's own open reports the error
        return False


def _check_resume(trainer: Any, resume: str | None) -> None:
    if resume is not None:
        trainer.check_resume(resume)  # fail before printing anything


def _parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------------------- node classification
def run_node(params: dict[str, Any]) -> None:
    """Node classification on a store with one node type (:class:`graphpipe.train.Trainer`)."""
    from graphpipe.store import open_store
    from graphpipe.train import MODELS, Trainer
    from graphpipe.train.memory_plan import plan_training

    name, store = params["model_name"] or "sage", params["store"]
    if name not in MODELS:
        fail(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    o = opts.pick(params, opts.GNN_DEFAULTS)
    o["layers"], fanouts = opts.layers_and_fanouts(params, opts.GNN_DEFAULTS["layers"],
                                                   uses_fanouts=name != "mlp")
    shape = opts.store_shape(store)
    opened = open_store(store)  # arrays read in once the memory plan says they fit
    model = opts.make_model(name, o, shape, params["seed"])
    plan = plan_training(opened, model, evaluation=o["evaluation"], batch_size=o["batch_size"],
                         eval_batch_size=params["eval_batch_size"])
    plan.require()
    opened = open_store(store, in_memory=plan.in_memory)
    plan.apply(opened)
    _check_eval_splits(opened, plan.evaluation)
    trainer = Trainer(model, opened, fanouts=fanouts, batch_size=o["batch_size"],
                      epochs=params["epochs"], optimizer=o["optimizer"], lr=o["lr"],
                      weight_decay=o["weight_decay"], patience=params["patience"],
                      evaluation=plan.evaluation, eval_batch_size=plan.eval_batch_size,
                      seed=params["seed"], max_steps=params["max_steps"],
                      feature_bits=params["feature_bits"], device=params["device"],
                      checkpoint=params["checkpoint"], metrics_log=params["metrics_log"],
                      quiet=params["quiet"], loader_options=plan.loader_options())
    _check_resume(trainer, params["resume"])
    if not params["quiet"]:
        click.echo(f"{store}: {opened.num_nodes} nodes, {opened.num_edges} edges, "
                   f"{opened.feature_dim} features, {shape['num_classes']} classes; model {name} "
                   f"({_parameters(model)} parameters), fanouts {fanouts}, "
                   f"batch {o['batch_size']}, {len(trainer.loader)} batches/epoch")
        click.echo(plan.describe())
    result = trainer.fit(resume=params["resume"])
    opts.report(result, quiet=params["quiet"], checkpoint=params["checkpoint"])


def _check_eval_splits(store: Any, evaluation: str) -> None:
    missing = [s for s in ("valid", "test") if s not in store.split_names]
    if evaluation != "none" and missing:
        fail(f"store {str(store.path)!r} has no {' or '.join(map(repr, missing))} split: make "
             f"splits with `{opts.split_hint(str(store.path))}`, or train without evaluation "
             "(--eval none)")


# ------------------------------------------------------------------------------- graph transformers
def run_transformer(params: dict[str, Any]) -> None:
    """A graph transformer on ClusterLoader sequences (:class:`graphpipe.train.SequenceTrainer`)."""
    from graphpipe.train import MODELS, SequenceTrainer

    name, store = params["model_name"], params["store"]
    if name not in MODELS:
        fail(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    model_args, trainer_args = opts.transformer_settings(params)
    shape = opts.store_shape(store)
    model = opts.make_model(name, model_args, shape, params["seed"])
    trainer = SequenceTrainer(model, store, **trainer_args)
    _check_resume(trainer, params["resume"])
    if not params["quiet"]:
        opened = trainer.store
        click.echo(f"{store}: {opened.num_nodes} nodes, {opened.num_edges} edges, "
                   f"{opened.feature_dim} features, {trainer.num_classes} classes "
                   f"({shape['level']}-level); model {name} ({_parameters(model)} parameters), "
                   f"seq-len {params['seq_len']}, attention {params['attention']}, "
                   f"{len(trainer.loader)} sequences/epoch")
    result = trainer.fit(resume=params["resume"])
    opts.report(result, quiet=params["quiet"], checkpoint=params["checkpoint"])
