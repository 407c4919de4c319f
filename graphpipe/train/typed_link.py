"""Link prediction on one relation ``(src, rel, dst)`` of a typed graph: a typed encoder
(:mod:`graphpipe.train.hetero_models`: R-GCN, hetero SAGE, R-GAT, output width
``hidden`` for every type) with a dot or MLP decoder (:class:`TypedLinkPredictor`),
trained by :class:`TypedLinkTrainer` on a random link split of the relation
(:func:`graphpipe.loaders.relation_split.random_relation_split`, PyG's
``RandomLinkSplit``): batches of the train edges with binary negatives from the
:class:`~graphpipe.loaders.TypedLinkNeighborLoader` over the train message-passing
graph; ``valid`` / ``test`` scored as the homogeneous task does
(:func:`graphpipe.train.link.evaluate_link`, OGB's Evaluator), with embeddings of every
source- and destination-type node computed over that split's message-passing graph
(valid: train edges; test: train and valid edges).

The metric: MRR by default, each held-out edge ``(s, d)`` ranked against ``K``
negatives ``(s, d')`` of its own (``eval_negatives``, 100 by default; OGB's
``ogbl-citation2`` protocol, as OGB's typed link datasets ``ogbl-biokg`` and
``ogbl-wikikg2`` score with it: per-edge ranking does not saturate on small graphs and
is comparable across split sizes), or ``"hits@K"`` against negatives shared by the
split's edges (``ogbl-collab``'s).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from graphpipe.loaders import NeighborLoader, TypedLinkNeighborLoader
from graphpipe.loaders.relation_split import random_relation_split
from graphpipe.ops.sampling.types import as_etype, etype_str
from graphpipe.train.hetero_models import build_hetero_model
from graphpipe.train.link import (
    DotDecoder,
    LinkTrainer,
    MLPDecoder,
    evaluate_splits,
    pair_scorer,
    parse_link_metric,
)
from graphpipe.train.loop import make_optimizer

__all__ = ["TypedLinkPredictor", "TypedLinkTrainer"]


class TypedLinkPredictor(nn.Module):
    """A typed encoder (``rgcn``, ``hetero-sage``, ``rgat``; every type embedded to
    ``hidden``) and a decoder scoring pairs of ``relation``'s end types.

    ``forward(batch)`` returns the logits ``(P + M,)`` of ``batch[relation].edge_label_index``;
    ``embed_nodes(batch)`` the embeddings ``{type: (n_t, hidden)}`` of all the batch's nodes.

    Args:
        encoder: a typed model name of :func:`build_hetero_model`.
        in_dims, num_nodes, edge_types: the graph's (as for :func:`build_hetero_model`).
        relation: ``(src, rel, dst)``, the relation whose edges are predicted.
        hidden, num_layers, dropout: the encoder's; decoder: ``"mlp"`` or ``"dot"``.
        **encoder_kwargs: layer options (``heads`` for ``rgat``).
    """

    def __init__(self, encoder: str, in_dims: dict[str, int | None], num_nodes: dict[str, int],
                 edge_types: list, relation: Any, hidden: int, num_layers: int = 2, *,
                 decoder: str = "mlp", dropout: float = 0.0, **encoder_kwargs: Any):
        super().__init__()
        self.relation = as_etype(relation)
        self.encoder = build_hetero_model(encoder, in_dims, num_nodes, hidden, hidden, num_layers,
                                          edge_types, self.relation[2], dropout=dropout,
                                          **encoder_kwargs)
        if decoder not in ("dot", "mlp"):
            raise ValueError(f"'decoder' must be 'dot' or 'mlp' (got {decoder!r})")
        self.decoder = DotDecoder() if decoder == "dot" else MLPDecoder(hidden, hidden, 2, dropout)
        self.config = {"encoder": self.encoder.config, "relation": list(self.relation),
                       "decoder": decoder, "hidden": hidden}

    def embed_nodes(self, batch: Any) -> dict[str, torch.Tensor]:
        return self.encoder.embed_nodes(batch)

    def forward(self, batch: Any) -> torch.Tensor:
        s, _, d = self.relation
        h = self.embed_nodes(batch)
        index = batch[self.relation].edge_label_index
        return self.decoder(h[s][index[0]], h[d][index[1]])


class TypedLinkTrainer(LinkTrainer):
    """Train a :class:`TypedLinkPredictor` on a random link split of its relation (module
    docstring) with the one loop :func:`graphpipe.train.loop.fit` (checkpoints, resume,
    early stopping on the valid metric, metrics log), as :class:`LinkTrainer` does.

    Args:
        model: a :class:`TypedLinkPredictor` (seed torch before building it).
        data: a typed store, its path or a typed :class:`~graphpipe.loaders.GraphData`,
            without added reverse relations (the split adds them to each graph).
        fanouts: neighbours per hop for every relation (one per encoder layer).
        valid, test: fractions of the relation's edges held out (PyG's 0.1 / 0.2); the split
            is drawn from ``seed``.
        batch_size: positive edges per batch (one binary negative each).
        metric: ``"mrr"`` (default: each held-out edge against ``eval_negatives`` negatives
            of its own) or ``"hits@K"`` (against negatives shared by the split's edges, as
            many as its edges); module docstring.
        eval_negatives: ``K`` of ``"mrr"``, drawn from ``seed`` (OGB's datasets use 1000).
        epochs, optimizer, lr, weight_decay, patience, evaluation, eval_batch_size,
        eval_every, seed, max_steps, checkpoint, metrics_log, quiet, on_epoch: as
            :class:`LinkTrainer`.

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> from graphpipe.train.trainer import typed_model_dims, typed_training_data
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = mag_dataset(papers=60, authors=70, institutions=5, fields=8, num_classes=3,
    ...                    feature_dim=4, seed=0)
    >>> store = ingest(write_ogb_mag(tmp.name + "/src", data), tmp.name + "/s")
    >>> graph = typed_training_data(store)                 # the relations and their reverses
    >>> rel = ("author", "writes", "paper")
    >>> _ = torch.manual_seed(0)
    >>> model = TypedLinkPredictor("rgcn", typed_model_dims(graph), graph.num_nodes_dict,
    ...                            graph.edge_types, rel, hidden=8)
    >>> trainer = TypedLinkTrainer(model, store, fanouts=[3, 3], batch_size=64, epochs=1, quiet=True)
    >>> result = trainer.fit()
    >>> trainer.metric, result.epochs_completed, 0.0 <= result.test_acc <= 1.0
    ('mrr', 1, True)
    >>> tmp.cleanup()
    """

    kind = "typed-link"
    shard: Any = None
    """The training loader's :class:`~graphpipe.loaders.shard.SeedShard` over the positive
    edges (data parallel: :class:`graphpipe.train.distributed.DistributedTypedLinkTrainer`);
    None: every edge."""

    def __init__(self, model: TypedLinkPredictor, data: Any, *, fanouts: Any,
                 valid: float = 0.1, test: float = 0.2, batch_size: int = 512, epochs: int = 5,
                 optimizer: str = "adam", lr: float = 0.005, weight_decay: float = 0.0,
                 patience: int | None = None, evaluation: str = "link", eval_batch_size: int = 4096,
                 eval_every: int = 1, seed: int = 0, max_steps: int | None = None,
                 metric: str = "mrr", eval_negatives: int = 100,
                 checkpoint: str | os.PathLike | None = None,
                 metrics_log: str | os.PathLike | None = None, quiet: bool = False,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None):
        from graphpipe.train.trainer import typed_training_data

        base = typed_training_data(data, reverse=False)
        self.relation, self.fanouts = model.relation, fanouts
        self.configure(epochs=epochs, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
                       patience=patience, evaluation="none" if evaluation == "none" else "link",
                       eval_every=eval_every, seed=seed, max_steps=max_steps,
                       checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet,
                       on_epoch=on_epoch)
        self.metric = parse_link_metric(metric)
        if isinstance(eval_negatives, bool) or int(eval_negatives) < 1:
            raise ValueError(f"'eval_negatives' must be a positive integer (got {eval_negatives!r})")
        self.eval_negatives = int(eval_negatives) if self.metric == "mrr" else None
        self.split = random_relation_split(base, self.relation, valid=valid, test=test,
                                           neg_per_edge=self.eval_negatives, seed=self.seed)
        self.fractions = [float(valid), float(test)]
        self.device = torch.device("cpu")
        self.model = model
        self.forward_model: nn.Module = model  # what training steps call (DDP wraps model)
        self.batch_size, self.eval_batch_size = int(batch_size), int(eval_batch_size)
        self.splits = {name: self.split.edges[name] for name in ("valid", "test")}
        self.optimizer = make_optimizer(model, optimizer, self.lr, self.weight_decay)
        train = self.split.edges["train"]
        self.loader = TypedLinkNeighborLoader(self.split.graphs["train"], fanouts,
                                              edge_label_index=(self.relation, (train.src, train.dst)),
                                              neg_sampling="binary", batch_size=self.batch_size,
                                              shuffle=True, seed=self.seed, exclude_seed_edges=True,
                                              shard=self.shard)
        self.store = self.split.graphs["train"]

    def labels(self, batch: Any) -> torch.Tensor:
        """``batch[relation].edge_label``."""
        return batch[self.relation].edge_label

    @torch.no_grad()
    def embeddings(self, split: str, ntype: str) -> torch.Tensor:
        """``(N_t, hidden)`` embeddings of every ``ntype`` node over ``split``'s
        message-passing graph (the training fanouts, fixed seed)."""
        graph = self.split.graphs[split]
        out = torch.empty(graph.num_nodes_dict[ntype], self.model.config["hidden"])
        loader = NeighborLoader(graph, self.fanouts, input_nodes=(ntype, None),
                                batch_size=self.eval_batch_size, seed=self.seed)
        for batch in loader:
            out[batch.n_id[ntype][: batch.batch_size]] = self.model.embed_nodes(batch)[ntype][: batch.batch_size]
        return out

    def evaluate(self) -> dict[str, float]:
        """``{"valid", "test"}``: the metric of each split (OGB's Evaluator; with MRR also
        ``<split>_hits@1/3/10`` of the same ranks), every end-type node embedded over the
        split's message-passing graph, pairs decoded in chunks."""
        s, _, d = self.relation
        was = self.model.training
        self.model.eval()
        try:
            scorers = {name: pair_scorer(self.model.decoder, self.embeddings(name, s),
                                         self.embeddings(name, d)) for name in self.splits}
            return evaluate_splits(scorers, self.splits, self.metric)
        finally:
            self.model.train(was)

    def heuristic(self) -> dict[str, float]:
        """Not offered on typed graphs (common neighbours of two types are not defined)."""
        raise ValueError("the common-neighbours heuristic needs one node type")

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with (the split's relation, fractions
        and seed among them)."""
        return {"relation": etype_str(self.relation), "split": self.fractions,
                "split_seed": self.seed, "num_nodes": dict(self.split.graphs["train"].num_nodes_dict),
                "batch_size": self.batch_size, "metric": self.metric,
                "eval_negatives": self.eval_negatives}
