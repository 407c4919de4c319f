"""The :class:`Trainer`: sampled mini-batch training of node classifiers from a store.

One epoch = one pass of a :class:`graphpipe.loaders.NeighborLoader` over the ``train``
split (or ``max_steps`` batches of it), cross-entropy on the seeds, one optimizer step
per batch. After each epoch (every ``eval_every`` epochs and the last):

- **evaluation** on ``train``/``valid``/``test``. ``evaluation="full"`` (default) is
  layer-wise full-neighbour inference, as PyG's and DGL's examples do: layer ``l`` is
  computed for *all* nodes, in batches of ``eval_batch_size`` destinations with every
  in-neighbour (fanout -1, one hop), from the previous layer's outputs for all nodes;
  exact (no sampling noise) and ``O(num_layers · E)``. It keeps one ``(N, hidden)``
  float32 matrix per layer in memory. ``evaluation="sampled"`` runs the model on
  batches of each split sampled with the training fanouts (fixed seed, no shuffle);
  ``"none"`` skips evaluation (no early stopping, no accuracies).
- **metric**: accuracy through ``ogb.nodeproppred.Evaluator("ogbn-arxiv")`` — OGB's
  Evaluator only takes the name of a dataset listed in its ``master.csv``;
  ``ogbn-arxiv`` is single-task multi-class with metric ``acc``, which is what a
  store with ``task_type="multiclass"`` is, with labels and predictions passed as
  ``(n, 1)`` columns. Other task types are refused.
- **early stopping** when ``valid`` accuracy has not improved for ``patience``
  evaluated epochs; the reported test accuracy is the one at the best valid epoch.
- a **metrics log** (JSON lines, one per epoch: ``epoch, loss, train_acc, valid_acc,
  test_acc, batch_acc, steps, seconds, eval_seconds, loader`` (the loader's
  :class:`LoaderStats` as a dict));
- a **checkpoint** (:mod:`graphpipe.train.checkpoint`), written atomically. Resuming
  from it restores the model, the optimizer, the epoch, the RNG states (torch, numpy,
  Python) and the loader's seed and epoch, so ``k`` epochs + resume + ``m`` epochs
  gives the same weights as ``k + m`` straight epochs.

The epoch loop (batches, evaluation schedule, early stopping, log, checkpoint, resume)
is :func:`graphpipe.train.loop.fit`, shared by every trainer; this module holds what is
the Trainer's own: the NeighborLoader step and full-neighbour inference.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.allocator import release_free_memory
from graphpipe.loaders import NeighborLoader
from graphpipe.ops._core.checks import check_int as _check_int
from graphpipe.train.disk_embedding import DiskEmbedding, step_disk_embeddings
from graphpipe.train.loop import (
    OPTIMIZERS,
    EpochSums,
    Trainable,
    TrainResult,
    fmt_acc,
    make_optimizer,
)

__all__ = ["EVALUATIONS", "FEATURE_BITS", "OPTIMIZERS", "TrainResult", "Trainer", "TypedTrainer",
           "accuracy", "typed_model_dims", "typed_training_data"]

EVALUATIONS = ("full", "sampled", "none", "auto")
FEATURE_BITS = (None, 8, 4, 2, 1)
_SPLITS = ("train", "valid", "test")
TRIM_EVERY = 4
"""Under a memory cgroup limit, free heap memory is returned to the OS every this many batches."""


def accuracy(y_true: torch.Tensor | np.ndarray, y_pred: torch.Tensor | np.ndarray) -> float:
    """Accuracy by ``ogb.nodeproppred.Evaluator("ogbn-arxiv")`` (single-task ``acc``);
    ``y_true``/``y_pred``: class IDs ``(n,)`` or ``(n, 1)``."""
    from ogb.nodeproppred import Evaluator

    y_true = torch.as_tensor(y_true).reshape(-1, 1)
    y_pred = torch.as_tensor(y_pred).reshape(-1, 1)
    if y_true.shape[0] == 0:
        return float("nan")
    return float(_evaluator(Evaluator).eval({"y_true": y_true, "y_pred": y_pred})["acc"])


_EVALUATOR: list[Any] = []


def _evaluator(cls: Any) -> Any:
    if not _EVALUATOR:
        _EVALUATOR.append(cls("ogbn-arxiv"))
    return _EVALUATOR[0]




def open_training_store(store: Any) -> Any:
    """``store`` (a GraphStore or its path) opened and checked for node classification:
    labels (``task_type`` multiclass), a ``train`` split and node features. Raises
    ``ValueError`` saying what is missing."""
    from graphpipe.store import GraphStore, open_store

    if isinstance(store, (str, os.PathLike)):
        if not Path(store).is_dir():
            raise ValueError(f"'store' is not a store directory (got {str(store)!r})")
        store = open_store(store, in_memory="auto")
    if not isinstance(store, GraphStore):
        raise ValueError(  # noqa: TRY004 - the project reports bad arguments as ValueError
            f"'store' must be a GraphStore or a store path (got {type(store).__name__})")
    if not store.has_labels:
        raise ValueError(f"store {str(store.path)!r} has no labels ('node/label'): nothing to train on")
    if "train" not in store.split_names:
        raise ValueError(f"store {str(store.path)!r} has no 'train' split (splits: "
                         f"{', '.join(store.split_names) or 'none'}): make splits with "
                         f"`graphpipe split {store.path} --random 0.8,0.1,0.1`")
    if not store.has_features:
        raise ValueError(f"store {str(store.path)!r} has no node features ('node/feat')")
    label_meta = store.manifest.get("labels") or {}
    task = label_meta.get("task_type", "multiclass")
    if task is not None and "multiclass" not in str(task):
        raise ValueError(f"store {str(store.path)!r} has task_type {task!r}; the trainer handles "
                         "'multiclass' node classification only")
    return store


def check_eval_splits(store: Any) -> None:
    """Raise ``ValueError`` unless ``store`` has ``valid`` and ``test`` splits."""
    missing = [s for s in ("valid", "test") if s not in store.split_names]
    if missing:
        raise ValueError(f"store {str(store.path)!r} has no {' or '.join(map(repr, missing))} "
                         f"split: make splits with `graphpipe split {store.path} --random "
                         "0.8,0.1,0.1`, or pass evaluation='none' to train without evaluation")


class Trainer(Trainable):
    """Train ``model`` on the labelled nodes of ``store``.

    Args:
        model: a model from :func:`graphpipe.train.build_model` (or any module taking a
            MiniBatch and returning ``(batch_size, num_classes)`` logits; layer-wise
            inference needs ``apply_layer``/``num_layers`` like :class:`BlockModel`).
        store: a :class:`graphpipe.store.GraphStore` or its path; needs node features,
            labels (``task_type`` multiclass) and a ``train`` split (``valid``/``test``
            for evaluation).
        fanouts: neighbours per hop, seed hop first (one per layer; ignored by MLP).
        batch_size: seeds per training batch.
        epochs: total epochs of the run (a resumed run continues up to this number).
        optimizer: ``"adam"``, ``"adamw"`` or ``"sgd"`` (momentum 0.9).
        lr, weight_decay: optimizer settings.
        patience: stop after this many evaluated epochs without a better valid accuracy
            (None: never).
        evaluation: ``"full"``, ``"sampled"`` or ``"none"`` (see the module docstring);
            ``"auto"``: full when its ``(N, hidden)`` matrices fit in the memory this
            process may use, else sampled (:func:`graphpipe.train.memory_plan.plan_training`).
        eval_batch_size: destinations per inference batch.
        eval_every: evaluate every this many epochs (and after the last).
        seed: seeds torch/numpy/random at the start of a fresh run and the loader.
        max_steps: train only this many batches per epoch (demos); None: all.
        feature_bits: low-bit feature transfer (8, 4, 2, 1) handed to the loader; None:
            full precision.
        device: ``"cpu"`` or ``"cuda"``...
        checkpoint: write a checkpoint here after every epoch.
        metrics_log: append one JSON line per epoch here (a fresh run truncates it).
        quiet: no progress bar and no per-epoch line (bars are off on non-tty anyway).
        loader_options: extra :class:`NeighborLoader` keyword arguments for training
            (``match_reorder``, ``window``, ``cache``, ``prefetch``...).
        on_epoch: called with every epoch's metrics record.

    Two epochs of GraphSAGE on a 40-node ring whose labels come in runs of ten (seed
    torch before building the model: its initial weights come from torch's RNG):

    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.train import build_model
    >>> tmp = tempfile.TemporaryDirectory()
    >>> ids, nxt = np.arange(40), (np.arange(40) + 1) % 40
    >>> y = (ids // 10) % 2
    >>> np.savez(os.path.join(tmp.name, "ring.npz"), src=np.concatenate([ids, nxt]),
    ...          dst=np.concatenate([nxt, ids]), x=np.eye(2, dtype=np.float32)[y], y=y,
    ...          train_idx=ids[::2], valid_idx=ids[1::4], test_idx=ids[3::4])
    >>> store = ingest(os.path.join(tmp.name, "ring.npz"), os.path.join(tmp.name, "ring"))
    >>> _ = torch.manual_seed(0)
    >>> model = build_model("sage", in_dim=2, hidden=8, out_dim=2, num_layers=2)
    >>> result = Trainer(model, store, fanouts=[2, 2], batch_size=8, epochs=2, lr=0.05,
    ...                  quiet=True).fit()
    >>> result.epochs_completed, [record["steps"] for record in result.history]
    (2, [3, 3])
    >>> 0.0 <= result.test_acc <= 1.0
    True
    >>> tmp.cleanup()
    """

    def __init__(self, model: nn.Module, store: Any, *, fanouts: list[int] | tuple[int, ...],
                 batch_size: int = 1024, epochs: int = 5, optimizer: str = "adam",
                 lr: float = 0.003, weight_decay: float = 0.0, patience: int | None = None,
                 evaluation: str = "full", eval_batch_size: int = 4096, eval_every: int = 1,
                 seed: int = 0, max_steps: int | None = None, feature_bits: int | None = None,
                 device: str | torch.device = "cpu", checkpoint: str | os.PathLike | None = None,
                 metrics_log: str | os.PathLike | None = None, quiet: bool = False,
                 loader_options: dict[str, Any] | None = None,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None):
        if getattr(model, "sequence_model", False):
            raise ValueError(f"model {type(model).__name__} is a graph transformer: train it with "
                             "graphpipe.train.SequenceTrainer")
        store = open_training_store(store)
        self.store = store
        label_meta = store.manifest.get("labels") or {}
        _check_int("batch_size", batch_size, 1)
        _check_int("eval_batch_size", eval_batch_size, 1)
        if evaluation not in EVALUATIONS:
            raise ValueError(f"'evaluation' must be one of {', '.join(EVALUATIONS)} (got {evaluation!r})")
        if feature_bits not in FEATURE_BITS:
            raise ValueError(f"'feature_bits' must be None, 8, 4, 2 or 1 (got {feature_bits!r})")
        if evaluation == "auto":
            from graphpipe.train.memory_plan import plan_training

            evaluation = plan_training(store, model).evaluation
        if evaluation != "none":
            check_eval_splits(store)
        self.uses_graph = bool(getattr(model, "uses_graph", True))
        self.fanouts = [int(f) for f in fanouts] if self.uses_graph else [0]
        num_layers = getattr(model, "num_layers", None)
        if self.uses_graph and num_layers is not None and len(self.fanouts) != num_layers:
            raise ValueError(f"'fanouts' must have one entry per layer: the model has {num_layers} "
                             f"layers, fanouts={list(fanouts)} has {len(self.fanouts)}")
        if evaluation == "full" and self.uses_graph and not hasattr(model, "apply_layer"):
            raise ValueError("evaluation='full' needs a model with apply_layer(layer, x, block) "
                             "(the graphpipe models have it); use evaluation='sampled'")
        self.configure(epochs=epochs, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
                       patience=patience, evaluation=evaluation, eval_every=eval_every, seed=seed,
                       max_steps=max_steps, checkpoint=checkpoint, metrics_log=metrics_log,
                       quiet=quiet, on_epoch=on_epoch)
        self.feature_bits = feature_bits
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.forward_model: nn.Module = self.model  # what training steps call (DDP wraps model)
        self.batch_size, self.eval_batch_size = int(batch_size), int(eval_batch_size)
        self.loader_options = dict(loader_options or {})
        self.optimizer = self._make_optimizer()
        labels = np.asarray(store.labels)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
        if labels.ndim != 1:
            raise ValueError(f"store {str(store.path)!r} has labels of shape {labels.shape}; "
                             "multiclass training needs one label per node")
        self.labels = labels  # the store's (memory-mapped) array: no (N,) int64 copy
        self.num_classes = int(label_meta.get("num_classes") or int(labels.max()) + 1)
        out_dim = getattr(model, "out_dim", None)
        if out_dim is not None and out_dim != self.num_classes:
            raise ValueError(f"the model has out_dim={out_dim} but the store has "
                             f"{self.num_classes} classes")
        self._labelled = {split: self._labelled_split(split) for split in _SPLITS}
        from graphpipe.memory import cgroup_limit

        # under a memory cgroup limit, hand glibc's free heap back every few batches: the
        # batches' freed arrays otherwise stay mapped (~150 MB at batch 1024, [15, 10, 5])
        self._trim_every = TRIM_EVERY if cgroup_limit() is not None else 0
        self.loader = self._make_loader(self.seed)
        self._infer_loaders: dict[bool, NeighborLoader] = {}

    # ---------------------------------------------------------------------------- pieces
    def _labelled_split(self, split: str) -> str | np.ndarray:
        """``split`` itself when all its nodes are labelled, else its labelled node IDs
        (label -1 marks an unlabelled node: OGB's NaN, kept out of loss and accuracy)."""
        if split not in self.store.split_names:
            return split
        ids = np.asarray(self.store.split(split), dtype=np.int64)
        keep = self.labels[ids] >= 0
        if keep.all():
            return split
        if split == "train" and not keep.any():
            raise ValueError(f"store {str(self.store.path)!r}: split 'train' has no labelled node "
                             f"(all {ids.size} are unlabelled, label -1)")
        return ids[keep]

    def _split_ids(self, split: str) -> np.ndarray:
        labelled = self._labelled[split]
        return np.array(self.store.split(split), dtype=np.int64) if isinstance(labelled, str) else labelled

    def _make_optimizer(self) -> torch.optim.Optimizer:
        return make_optimizer(self.model, self.optimizer_name, self.lr, self.weight_decay)

    def _make_loader(self, seed: int) -> NeighborLoader:
        options = {"shuffle": True, "seed": seed, "device": self.device, **self.loader_options}
        if self.feature_bits is not None:
            options["feature_bits"] = self.feature_bits
        return NeighborLoader(self.store, self.fanouts, batch_size=self.batch_size,
                              input_nodes=self._labelled["train"], frontier="all", **options)

    def checkpoint_extra(self) -> dict[str, Any]:
        """The Trainer's own checkpoint key: ``train`` (checked on resume)."""
        return {"train": {"batch_size": self.batch_size, "fanouts": self.fanouts, "seed": self.seed,
                          "store": self.store.name, "num_nodes": self.store.num_nodes}}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """Rebuild the training loader if the checkpoint's loader seed differs."""
        if int(state["loader"]["seed"]) != self.loader.seed:
            self.loader = self._make_loader(int(state["loader"]["seed"]))

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with: the store's node count, batch
        size and fanouts."""
        return {"num_nodes": self.store.num_nodes, "batch_size": self.batch_size,
                "fanouts": self.fanouts}

    # ---------------------------------------------------------------------------- training
    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line (:func:`format_epoch`)."""
        return format_epoch(record)

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """One optimizer step: cross-entropy on the batch's seeds; ``(mean loss, seeds,
        correct)``."""
        y = batch.y[: batch.batch_size].reshape(-1).to(self.device)
        out = self.forward_model(batch)
        loss = F.cross_entropy(out, y, ignore_index=-1)
        self.optimize(loss)
        self._maybe_trim(iteration + 1)
        return float(loss.detach()), int(batch.batch_size), int((out.detach().argmax(1) == y).sum())

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The epoch's metrics record from its sums, with the loader's statistics."""
        return {**super().epoch_record(epoch, sums), "loader": self.loader.stats.as_dict()}

    def _maybe_trim(self, step: int) -> None:
        if self._trim_every and step % self._trim_every == 0:
            release_free_memory()

    # ---------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def predict(self) -> torch.Tensor:
        """Predicted class of every node, int64 ``(N,)`` (``evaluation="full"``: layer-wise
        full-neighbour inference; otherwise only the splits' nodes are filled, others -1)."""
        was_training = self.model.training
        self.model.eval()
        try:
            if self.evaluation == "full":
                return self._full_logits().argmax(1)
            pred = torch.full((self.store.num_nodes,), -1, dtype=torch.int64)
            for split in _SPLITS:
                for step, batch in enumerate(self._sampled_loader(split), 1):
                    pred[batch.n_id[: batch.batch_size].cpu()] = self.model(batch).argmax(1).cpu()
                    self._maybe_trim(step)
            return pred
        finally:
            self.model.train(was_training)

    def evaluate(self) -> dict[str, float]:
        """Accuracy on ``train``, ``valid`` and ``test`` (OGB Evaluator), over each split's
        labelled nodes (label -1 = unlabelled is left out)."""
        pred = self.predict()
        out = {}
        for split in _SPLITS:
            ids = self._split_ids(split)
            out[split] = accuracy(self.labels[ids].astype(np.int64), pred[torch.from_numpy(ids)])
        return out

    def _sampled_loader(self, split: str) -> NeighborLoader:
        options = {k: v for k, v in self.loader_options.items()
                   if k in ("match_reorder", "window", "cache", "cache_rows", "num_threads", "features")}
        if self.feature_bits is not None:
            options["feature_bits"] = self.feature_bits
        return NeighborLoader(self.store, self.fanouts, batch_size=self.eval_batch_size,
                              input_nodes=self._labelled[split],
                              shuffle=False, seed=self.seed, device=self.device, prefetch=1, frontier="all", **options)

    def _infer_loader(self, features: bool) -> NeighborLoader:
        if features not in self._infer_loaders:
            self._infer_loaders[features] = NeighborLoader(
                self.store, [-1], batch_size=self.eval_batch_size, input_nodes=None, shuffle=False, seed=0,
                match_reorder=False, prefetch=1, device=self.device, frontier="all",
                features=self.loader_options.get("features", True) if features else False)
        return self._infer_loaders[features]

    def _full_logits(self) -> torch.Tensor:
        """``(N, out_dim)`` logits of every node, layer by layer over the whole graph."""
        n = self.store.num_nodes
        model = self.model
        if not self.uses_graph:
            out = None
            loader = NeighborLoader(self.store, [0], batch_size=self.eval_batch_size, input_nodes=None,
                                    shuffle=False, seed=0, match_reorder=False, prefetch=1,
                                    device=self.device, frontier="all",
                                    features=self.loader_options.get("features", True))
            for batch in loader:
                logits = model(batch)
                if out is None:
                    out = torch.empty(n, logits.shape[1], dtype=logits.dtype)
                out[batch.n_id[: batch.batch_size].cpu()] = logits.cpu()
            return out
        h: torch.Tensor | None = None
        dtype = next(model.parameters()).dtype
        for layer in range(model.num_layers):
            nxt: torch.Tensor | None = None
            for batch in self._infer_loader(features=layer == 0):
                x = batch.x.to(dtype) if layer == 0 else h[batch.n_id.cpu()].to(self.device)
                rows = model.apply_layer(layer, x, batch.blocks[0])
                if nxt is None:
                    nxt = torch.empty(n, rows.shape[1], dtype=rows.dtype)
                nxt[batch.n_id[: batch.batch_size].cpu()] = rows.cpu()
            h = nxt
        return h


def format_epoch(record: dict[str, Any]) -> str:
    """One human-readable line for an epoch's metrics record."""
    s = record["loader"]
    return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  train {fmt_acc(record['train_acc'])}  "
            f"valid {fmt_acc(record['valid_acc'])}  test {fmt_acc(record['test_acc'])}  "
            f"time {record['seconds']:.2f}s (+{record['eval_seconds']:.2f}s eval)  "
            f"batches {s.get('batches', 0)}  sampled edges {s.get('sampled_edges', 0)}  "
            f"rows gathered {s.get('rows_gathered', 0)} reused {s.get('rows_reused', 0)} "
            f"cached {s.get('rows_cached', 0)}  wait {s.get('wait_s', 0.0):.2f}s")


# ------------------------------------------------------------------------------- typed stores
def typed_training_data(store: Any, *, reverse: bool = True) -> Any:
    """The :class:`graphpipe.loaders.GraphData` a typed run trains on: the store's
    relations, plus their reverses (PyG's ``ToUndirected``) when ``reverse`` (OGB ships
    each relation one way; without the reverses no message reaches a paper from its
    fields). ``store``: a typed GraphStore, its path, or a GraphData (as is).

    A store that holds the reverse of every relation already (ingested with
    ``--add-reverse-edges``: ``(d, rev_<r>, s)`` for each ``(s, r, d)``) is trained on as
    stored: its relations stay memory-mapped and nothing is built in memory (what a
    store larger than memory needs; the in-memory build of MAG240M-like reverses takes
    several times the topology's bytes)."""
    from graphpipe.loaders import GraphData
    from graphpipe.store import GraphStore, open_store

    if isinstance(store, GraphData):
        return store
    store = store if isinstance(store, GraphStore) else open_store(store)
    if not store.is_typed:
        raise ValueError(f"store {str(store.path)!r} has one node type: train it with "
                         "graphpipe.train.Trainer")
    data = GraphData.from_store(store)
    return data.with_reverse_relations(merge=True) if reverse and not holds_reverses(data.edge_types) else data


def holds_reverses(edge_types: list[tuple[str, str, str]]) -> bool:
    """Whether every relation's reverse ``(d, rev_<r>, s)`` (or forward, for a ``rev_``
    relation) is among ``edge_types``.

    >>> holds_reverses([("a", "w", "p"), ("p", "rev_w", "a")]), holds_reverses([("p", "c", "p")])
    (True, False)
    """
    names = {tuple(e) for e in edge_types}
    for s, r, d in names:
        if not ((d, "rev_" + r, s) in names or (r.startswith("rev_") and (d, r[4:], s) in names)):
            return False
    return bool(names)


def typed_model_dims(store: Any) -> dict[str, int | None]:
    """Node type -> feature width (None for a type without features) of a typed store
    (or a GraphData)."""
    dims: dict[str, int | None] = {}
    for t in store.node_types:
        x = store.typed_features(t)
        dims[t] = None if x is None else int(x.shape[1])
    return dims


class TypedTrainer(Trainable):
    """Train a typed model on the labelled nodes of a typed store's target type.

    The seeds are the labelled nodes of the target type; batches come from the
    :class:`graphpipe.loaders.NeighborLoader` over the typed graph; evaluation is sampled (the same
    fanouts, no shuffle) over the target type's ``train`` / ``valid`` / ``test`` splits,
    scored with :func:`accuracy`. The epoch loop, checkpoints and early stopping are
    :func:`graphpipe.train.loop.fit`'s, as for :class:`Trainer`.

    Args:
        model: a model from :func:`graphpipe.train.hetero_models.build_hetero_model`, or
            :class:`graphpipe.train.models.MLP` (target-type features only).
        store: a typed :class:`graphpipe.store.GraphStore` or its path (reverse relations
            added, :func:`typed_training_data`), or a
            :class:`graphpipe.loaders.GraphData` (used as it is).
        fanouts: neighbours per hop for every relation (one entry per layer), or a dict
            relation -> list.
        target_type: the classified node type (default: the store's ``target_type``).
        batch_size, epochs, optimizer, lr, weight_decay, patience, eval_batch_size,
        eval_every, seed, max_steps, checkpoint, metrics_log, quiet, on_epoch: as for
            :class:`Trainer`.
        evaluation: ``"none"``, or anything else for sampled evaluation.
        loader_options: extra :class:`NeighborLoader` keyword arguments of the training
            and evaluation loaders (a memory plan's
            :meth:`graphpipe.train.memory_plan.TypedTrainingPlan.loader_options`: the
            feature tier per type, prefetch).

    Two epochs of R-GCN on a small generated ogbn-mag-like graph:

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> from graphpipe.train.hetero_models import build_hetero_model
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = mag_dataset(papers=60, authors=70, institutions=5, fields=8, num_classes=3,
    ...                    feature_dim=4, seed=0)
    >>> store = typed_training_data(ingest(write_ogb_mag(tmp.name + "/src", data), tmp.name + "/s"))
    >>> _ = torch.manual_seed(0)
    >>> model = build_hetero_model("rgcn", typed_model_dims(store), store.num_nodes_dict, 8, 3, 2,
    ...                            store.edge_types, "paper")
    >>> result = TypedTrainer(model, store, fanouts=[3, 3], batch_size=16, epochs=2,
    ...                       quiet=True).fit()
    >>> result.epochs_completed, 0.0 <= result.test_acc <= 1.0
    (2, True)
    >>> tmp.cleanup()
    """

    kind = "typed"
    shard: Any = None
    """The training loader's :class:`~graphpipe.loaders.shard.SeedShard` (data parallel,
    :class:`graphpipe.train.distributed.DistributedTypedTrainer`); None: every seed."""

    def __init__(self, model: nn.Module, store: Any, *, fanouts: Any, target_type: str | None = None,
                 batch_size: int = 1024, epochs: int = 5, optimizer: str = "adam",
                 lr: float = 0.003, weight_decay: float = 0.0, patience: int | None = None,
                 evaluation: str = "sampled", eval_batch_size: int = 4096, eval_every: int = 1,
                 seed: int = 0, max_steps: int | None = None,
                 checkpoint: str | os.PathLike | None = None,
                 metrics_log: str | os.PathLike | None = None, quiet: bool = False,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None,
                 loader_options: dict[str, Any] | None = None):
        self.loader_options = dict(loader_options or {})
        self.store = typed_training_data(store)
        self.target = target_type or self.store.target_type
        if self.target not in self.store.node_types:
            raise ValueError(f"target type {self.target!r} is not a node type of the store "
                             f"({', '.join(self.store.node_types)})")
        if evaluation not in EVALUATIONS:
            raise ValueError(f"'evaluation' must be one of {', '.join(EVALUATIONS)} (got {evaluation!r})")
        _check_int("batch_size", batch_size, 1)
        _check_int("eval_batch_size", eval_batch_size, 1)
        self.configure(epochs=epochs, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
                       patience=patience, evaluation="none" if evaluation == "none" else "sampled",
                       eval_every=eval_every, seed=seed, max_steps=max_steps,
                       checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet,
                       on_epoch=on_epoch)
        self.model, self.fanouts = model, fanouts
        self.forward_model: nn.Module = model  # what training steps call (DDP wraps model)
        self.batch_size, self.eval_batch_size = int(batch_size), int(eval_batch_size)
        y = self.store.typed_labels(self.target)
        if y is None:
            raise ValueError(f"target type {self.target!r} has no labels")
        y = np.asarray(y)
        self.labels = y[:, 0] if y.ndim == 2 else y
        self.optimizer = make_optimizer(model, optimizer, self.lr, self.weight_decay)
        for table in model.modules():   # disk embeddings: SparseAdam at the trainer's rate
            if isinstance(table, DiskEmbedding):
                table.lr = self.lr
        self.loader = self._train_loader(self.seed)

    def _split_ids(self, split: str) -> np.ndarray:
        if split not in self.store.typed_split_names(self.target):
            raise ValueError(f"type {self.target!r} has no {split!r} split")
        ids = np.asarray(self.store.typed_split(self.target, split), dtype=np.int64)
        return ids[self.labels[ids] >= 0]

    def _loader(self, ids: np.ndarray, batch_size: int, shuffle: bool, seed: int,
                shard: Any = None) -> Any:
        return NeighborLoader(self.store, self.fanouts, input_nodes=(self.target, ids),
                              batch_size=batch_size, shuffle=shuffle, seed=seed, shard=shard,
                              **self.loader_options)

    def _train_loader(self, seed: int) -> Any:
        return self._loader(self._split_ids("train"), self.batch_size, True, seed, self.shard)

    def _logits(self, batch: Any, model: nn.Module | None = None) -> torch.Tensor:
        """Logits of the batch's seeds by ``model`` (default: ``self.model``)."""
        model = self.model if model is None else model
        if getattr(self.model, "uses_graph", True):
            return model(batch)
        x = batch.x[self.target][: batch.batch_size]
        return model(x.to(next(self.model.parameters()).dtype))

    def _targets(self, batch: Any) -> torch.Tensor:
        seeds = batch.n_id[self.target][: batch.batch_size].cpu().numpy()
        return torch.from_numpy(self.labels[seeds].astype(np.int64))

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """One optimizer step on the target type's seeds: ``(mean loss, seeds, correct)``."""
        y = self._targets(batch)
        out = self._logits(batch, self.forward_model)
        loss = F.cross_entropy(out, y, ignore_index=-1)
        self.optimize(loss)
        step_disk_embeddings(self.model)   # the batch's rows of disk embeddings (none: no-op)
        return float(loss.detach()), int(batch.batch_size), int((out.detach().argmax(1) == y).sum())

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy of the target type's ``train``, ``valid`` and ``test`` nodes."""
        was = self.model.training
        self.model.eval()
        try:
            out = {}
            for split in _SPLITS:
                ys, preds = [], []
                for batch in self._loader(self._split_ids(split), self.eval_batch_size, False, self.seed):
                    ys.append(self._targets(batch))
                    preds.append(self._logits(batch).argmax(1).cpu())
                out[split] = accuracy(torch.cat(ys), torch.cat(preds)) if ys else 0.0
            return out
        finally:
            self.model.train(was)

    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line."""
        return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  "
                f"train {fmt_acc(record['train_acc'])}  valid {fmt_acc(record['valid_acc'])}  "
                f"test {fmt_acc(record['test_acc'])}  time {record['seconds']:.2f}s "
                f"(+{record['eval_seconds']:.2f}s eval)  batches {record['steps']}")

    def checkpoint_extra(self) -> dict[str, Any]:
        """The trainer's checkpoint key ``train`` (checked on resume)."""
        return {"train": {"kind": self.kind, **self.resume_settings(), "fanouts": self.fanouts,
                          "seed": self.seed}}

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with."""
        return {"batch_size": self.batch_size, "target_type": self.target,
                "num_nodes": dict(self.store.num_nodes_dict)}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """Rebuild the training loader if the checkpoint's loader seed differs."""
        seed = int(state["loader"]["seed"])
        if seed != self.loader.seed:
            self.loader = self._train_loader(seed)
