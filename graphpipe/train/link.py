"""Link prediction: a GNN encoder (:mod:`graphpipe.train.models`) with a dot or MLP
decoder, trained (:class:`LinkTrainer`, on :func:`graphpipe.train.loop.fit`) on a store's
link split with the :class:`~graphpipe.loaders.LinkNeighborLoader`
(binary negatives, seed edges excluded from message passing), evaluated with OGB's
``ogb.linkproppred.Evaluator`` (Hits@K against shared negative pairs, ogbl-collab's
protocol, or MRR against per-edge negatives, ogbl-citation2's), beside the
common-neighbours heuristic on the same edges.

Scores for evaluation come from node embeddings of every node, computed batch by batch by
a :class:`~graphpipe.loaders.NeighborLoader` over the message-passing graph (the training
edges of an OGB link dataset), then decoded per pair.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numba
import numpy as np
import torch
from torch import nn

from graphpipe.train.loop import EpochSums, Trainable, fmt_acc, make_optimizer
from graphpipe.train.models import build_model

__all__ = [
    "DECODERS",
    "RANK_FIGURES",
    "DotDecoder",
    "LinkPredictor",
    "LinkTrainer",
    "MLPDecoder",
    "common_neighbours",
    "evaluate_link",
    "evaluate_splits",
    "link_eval_keys",
    "link_metric",
    "link_scores",
    "open_link_store",
    "pair_scorer",
    "parse_link_metric",
    "ranking_metrics",
]

DECODERS = ("dot", "mlp")


class DotDecoder(nn.Module):
    """Score ``<h_src, h_dst>``: ``(n, d), (n, d) -> (n,)``."""

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        return (h_src * h_dst).sum(-1)


class MLPDecoder(nn.Module):
    """Score ``MLP(h_src * h_dst)`` (OGB's ``LinkPredictor``): ``(n, d), (n, d) -> (n,)``."""

    def __init__(self, dim: int, hidden: int, num_layers: int = 2, dropout: float = 0.0):
        super().__init__()
        dims = [dim] + [hidden] * (num_layers - 1) + [1]
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.dropout = float(dropout)

    def forward(self, h_src: torch.Tensor, h_dst: torch.Tensor) -> torch.Tensor:
        h = h_src * h_dst
        for lin in self.lins[:-1]:
            h = nn.functional.dropout(torch.relu(lin(h)), self.dropout, self.training)
        return self.lins[-1](h).squeeze(-1)


class LinkPredictor(nn.Module):
    """A GNN encoder (``sage``, ``gcn``, ``gin``, ``gat``, ``mlp`` from
    :func:`~graphpipe.train.models.build_model`, output width ``hidden``) and a decoder.

    ``encode(batch) -> (batch_size, hidden)`` embeds a batch's seed nodes;
    ``forward(batch)`` scores its ``edge_label_index`` (logits, ``(P + M,)``).

    >>> import numpy as np, torch
    >>> from graphpipe.loaders import LinkNeighborLoader
    >>> indptr, indices = np.array([0, 2, 4, 6, 8]), np.array([1, 3, 0, 2, 1, 3, 0, 2])
    >>> loader = LinkNeighborLoader((indptr, indices, np.eye(4, dtype=np.float32)), [2, 2],
    ...     edge_label_index=(np.array([0, 1]), np.array([1, 2])), neg_sampling="binary",
    ...     batch_size=2, seed=0)
    >>> _ = torch.manual_seed(0)
    >>> model = LinkPredictor("sage", in_dim=4, hidden=8, num_layers=2, decoder="dot")
    >>> model(next(iter(loader))).shape
    torch.Size([4])
    """

    def __init__(self, encoder: str, in_dim: int, hidden: int, num_layers: int = 2, *,
                 decoder: str = "mlp", dropout: float = 0.0, **encoder_kwargs: Any):
        super().__init__()
        if decoder not in DECODERS:
            raise ValueError(f"'decoder' must be one of {DECODERS} (got {decoder!r})")
        self.encoder = build_model(encoder, in_dim, hidden, hidden, num_layers, dropout=dropout,
                                   **encoder_kwargs)
        self.decoder = DotDecoder() if decoder == "dot" else MLPDecoder(hidden, hidden, 2, dropout)
        self.config = {"encoder": encoder, "in_dim": in_dim, "hidden": hidden,
                       "num_layers": num_layers, "decoder": decoder, "dropout": dropout}

    def encode(self, batch: Any) -> torch.Tensor:
        return self.encoder(batch)[: batch.batch_size]

    def forward(self, batch: Any) -> torch.Tensor:
        h = self.encode(batch)
        return self.decoder(h[batch.edge_label_index[0]], h[batch.edge_label_index[1]])


@numba.njit(cache=True, nogil=True, parallel=True)
def _count_common(indptr, indices, src, dst, out):
    for i in numba.prange(src.shape[0]):
        a, a_end = indptr[src[i]], indptr[src[i] + 1]
        b, b_end = indptr[dst[i]], indptr[dst[i] + 1]
        count = 0
        while a < a_end and b < b_end:
            if indices[a] == indices[b]:
                count += 1
                a += 1
                b += 1
            elif indices[a] < indices[b]:
                a += 1
            else:
                b += 1
        out[i] = count


def common_neighbours(indptr: np.ndarray, indices: np.ndarray, src: np.ndarray,
                      dst: np.ndarray) -> np.ndarray:
    """float64 ``(n,)``: common in-neighbours of ``src[i]`` and ``dst[i]`` in a CSC whose
    neighbour lists are sorted (a store's default; with inverse edges, the neighbours).

    A four-node ring, both directions (node ``i`` hears from ``i - 1`` and ``i + 1``):

    >>> indptr, indices = np.array([0, 2, 4, 6, 8]), np.array([1, 3, 0, 2, 1, 3, 0, 2])
    >>> common_neighbours(indptr, indices, np.array([0, 0]), np.array([2, 1])).tolist()
    [2.0, 0.0]
    >>> common_neighbours(indptr, indices, np.array([1]), np.array([3])).tolist()
    [2.0]
    """
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
    for name, ids in (("src", src), ("dst", dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"common_neighbours: {name} must be node IDs in [0, {n})")
    out = np.zeros(src.shape[0], dtype=np.int64)
    _count_common(indptr, np.asarray(indices), src, dst, out)
    return out.astype(np.float64)


def parse_link_metric(text: str) -> str:
    """``text`` as a link metric name: ``"mrr"`` or ``"hits@K"`` (``K >= 1``); ``ValueError``
    otherwise.

    >>> parse_link_metric("Hits@20"), parse_link_metric("mrr")
    ('hits@20', 'mrr')
    """
    name = str(text).strip().lower()
    if name == "mrr":
        return name
    head, _, k = name.partition("@")
    if head == "hits" and k.isdigit() and int(k) >= 1:
        return f"hits@{int(k)}"
    raise ValueError(f"the link metric must be 'mrr' or 'hits@K' with K >= 1 (got {text!r})")


def link_metric(split: Any, metric: str | None = None) -> str:
    """The metric a split is scored with: ``metric`` (:func:`parse_link_metric`), which
    the split's negatives must allow (``mrr``: per-edge ``neg_dst2d``; ``hits@K``: shared
    ``neg_src`` / ``neg_dst``), or, None, the split's own: ``"mrr"`` with per-edge
    negatives (ogbl-citation2's protocol), else ``"hits@50"`` (ogbl-collab's).
    ``ValueError`` when the split cannot be scored so.

    >>> from graphpipe.store.link import LinkSplit
    >>> shared = LinkSplit(np.array([0]), np.array([1]), neg_src=np.array([1]), neg_dst=np.array([0]))
    >>> link_metric(shared), link_metric(shared, "hits@20")
    ('hits@50', 'hits@20')
    >>> link_metric(LinkSplit(np.array([0]), np.array([1]), neg_dst2d=np.array([[0, 1]])))
    'mrr'
    """
    if metric is None:
        return "mrr" if split.neg_dst2d is not None else "hits@50"
    metric = parse_link_metric(metric)
    if metric == "mrr" and split.neg_dst2d is None:
        raise ValueError("MRR needs per-edge negatives (ogbl-citation2's layout); this link split "
                         "has shared negatives: score it with hits@K")
    if metric != "mrr" and split.neg_src is None:
        raise ValueError(f"{metric} needs shared negatives (ogbl-collab's layout); this link split "
                         "has per-edge negatives: score it with mrr")
    return metric


SCORE_CHUNK = 65536
"""Pairs scored per decoder call in evaluation (bounds the ``(pairs, hidden)`` gathers)."""


def ranking_metrics(pos: torch.Tensor, neg: torch.Tensor) -> dict[str, float]:
    """``{"mrr", "hits@1", "hits@3", "hits@10"}`` of positives ``pos`` ``(E,)`` each ranked
    against its own negatives ``neg`` ``(E, K)``: the means of OGB's
    ``Evaluator("ogbl-citation2")`` lists (a tie counts against the positive).

    >>> ranking_metrics(torch.tensor([0.9, 0.2]), torch.tensor([[0.1, 0.5], [0.3, 0.4]]))
    {'mrr': 0.6666666865348816, 'hits@1': 0.5, 'hits@3': 1.0, 'hits@10': 1.0}
    """
    from ogb.linkproppred import Evaluator

    result = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})
    return {name: float(result[f"{name}_list"].float().mean())
            for name in ("mrr", "hits@1", "hits@3", "hits@10")}


def _per_edge_scores(score: Any, src: np.ndarray, neg_dst2d: np.ndarray) -> torch.Tensor:
    """``(E, K)`` scores of ``(src[i], neg_dst2d[i, j])``, ``score`` called on at most
    :data:`SCORE_CHUNK` pairs (whole rows) at a time."""
    k = neg_dst2d.shape[1]
    rows = max(1, SCORE_CHUNK // max(k, 1))
    parts = [torch.as_tensor(score(np.repeat(src[i:i + rows], k), neg_dst2d[i:i + rows].reshape(-1)),
                             dtype=torch.float32).view(-1, k) for i in range(0, src.shape[0], rows)]
    return torch.cat(parts) if parts else torch.empty(0, k)


RANK_FIGURES = ("hits@1", "hits@3", "hits@10")
"""What :func:`link_scores` adds to ``"mrr"`` (the same ranks, OGB's ``ogbl-citation2`` lists)."""


def link_scores(score: Any, split: Any, metric: str) -> dict[str, float]:
    """``{metric: value}`` of a split by OGB's Evaluator: ``"hits@K"`` against the split's
    shared negatives (``neg_src`` / ``neg_dst``, ogbl-collab's), or ``"mrr"`` of each
    positive against its own negatives (``neg_dst2d``, ogbl-citation2's), then with
    :data:`RANK_FIGURES` of the same ranks (:func:`ranking_metrics`). ``score(src, dst)``
    returns ``(n,)`` scores of int64 node ID arrays."""
    from ogb.linkproppred import Evaluator

    pos = torch.as_tensor(score(split.src, split.dst), dtype=torch.float32)
    if metric == "mrr":
        if split.neg_dst2d is None:
            raise ValueError("MRR needs per-edge negatives (neg_dst2d, ogbl-citation2's layout)")
        neg = _per_edge_scores(score, np.asarray(split.src), np.asarray(split.neg_dst2d))
        return ranking_metrics(pos, neg)
    if split.neg_src is None:
        raise ValueError("Hits@K needs negative pairs (neg_src / neg_dst, ogbl-collab's layout)")
    neg = torch.as_tensor(score(split.neg_src, split.neg_dst), dtype=torch.float32)
    evaluator = Evaluator("ogbl-collab")
    evaluator.K = int(metric.split("@", 1)[1])
    return {metric: float(evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})[metric])}


def evaluate_link(score: Any, split: Any, metric: str) -> float:
    """``metric`` of a split (:func:`link_scores`)."""
    return link_scores(score, split, metric)[metric]


def link_eval_keys(metric: str) -> tuple[str, ...]:
    """The keys of a link trainer's ``evaluate()``: ``valid``, ``test`` (``metric``) and, for
    ``"mrr"``, ``<split>_<figure>`` of :data:`RANK_FIGURES`.

    >>> link_eval_keys("hits@50"), len(link_eval_keys("mrr"))
    (('valid', 'test'), 8)
    """
    extra = RANK_FIGURES if metric == "mrr" else ()
    return ("valid", "test") + tuple(f"{s}_{f}" for s in ("valid", "test") for f in extra)


def evaluate_splits(scorers: dict[str, Any], splits: dict[str, Any], metric: str) -> dict[str, float]:
    """A link trainer's ``evaluate()`` (:func:`link_eval_keys`): ``metric`` of each of
    ``splits`` (``{"valid", "test"}``) scored by ``scorers[name]``, and the other figures of
    the same ranks as ``<split>_<figure>``."""
    out: dict[str, float] = {}
    for name, split in splits.items():
        scores = link_scores(scorers[name], split, metric)
        out[name] = scores.pop(metric)
        out.update({f"{name}_{k}": v for k, v in scores.items()})
    return out


@torch.no_grad()
def node_embeddings(model: LinkPredictor, store: Any, fanouts: list[int], batch_size: int,
                    seed: int, device: torch.device) -> torch.Tensor:
    """``(N, hidden)`` embeddings of every node (sampled neighbourhoods, fixed ``seed``)."""
    from graphpipe.loaders import NeighborLoader

    model.eval()
    out = torch.empty(store.num_nodes, model.config["hidden"])
    for batch in NeighborLoader(store, fanouts, batch_size=batch_size, seed=seed, device=device):
        out[batch.seeds.cpu()] = model.encode(batch).float().cpu()
    return out


def pair_scorer(decoder: nn.Module, h_src: torch.Tensor, h_dst: torch.Tensor | None = None
                ) -> Callable[[np.ndarray, np.ndarray], torch.Tensor]:
    """``score(src, dst) -> (n,)``: ``decoder(h_src[src], h_dst[dst])`` (``h_dst`` None:
    ``h_src``), :data:`SCORE_CHUNK` pairs per call, without gradients.

    >>> score = pair_scorer(DotDecoder(), torch.eye(3), 2 * torch.eye(3))
    >>> score(np.array([0, 1]), np.array([0, 2])).tolist()
    [2.0, 0.0]
    """
    h_dst = h_src if h_dst is None else h_dst

    @torch.no_grad()
    def score(src: np.ndarray, dst: np.ndarray) -> torch.Tensor:
        parts = []
        for start in range(0, len(src), SCORE_CHUNK):
            s = torch.as_tensor(np.array(src[start:start + SCORE_CHUNK], dtype=np.int64))
            d = torch.as_tensor(np.array(dst[start:start + SCORE_CHUNK], dtype=np.int64))
            parts.append(decoder(h_src[s], h_dst[d]))
        return torch.cat(parts) if parts else torch.empty(0)

    return score


def open_link_store(store: Any) -> Any:
    """``store`` (a GraphStore or its path) opened and checked for link prediction: link
    splits ``train``, ``valid``, ``test`` and node features; ``ValueError`` otherwise."""
    from graphpipe.store import GraphStore, open_store
    from graphpipe.store.link import link_split_names

    store = store if isinstance(store, GraphStore) else open_store(store, in_memory="auto")
    missing = [s for s in ("train", "valid", "test") if s not in link_split_names(store)]
    if missing:
        raise ValueError(f"store {str(store.path)!r} has no link split(s) {missing} (ingest an OGB "
                         f"link-property folder, e.g. from `graphpipe generate link`)")
    if not store.has_features:
        raise ValueError(f"store {str(store.path)!r} has no node features ('node/feat')")
    return store


class LinkTrainer(Trainable):
    """Train a :class:`LinkPredictor` on ``store``'s link split ``train`` (binary
    negatives, one per positive; seed edges excluded from the sampled graph) with the
    one epoch loop :func:`graphpipe.train.loop.fit`, so checkpoints, ``resume``, early
    stopping (on the valid metric) and the metrics log work as for node classification.
    Evaluation scores ``valid`` and ``test`` with ``metric`` (:func:`link_metric`: by
    default the split's own, MRR for per-edge negatives, Hits@50 for shared ones): the records' ``valid_acc`` / ``test_acc`` and the
    :class:`~graphpipe.train.loop.TrainResult`'s accuracies hold that metric
    (``self.metric``). :meth:`heuristic` scores common neighbours on the same splits.

    Args:
        model: a :class:`LinkPredictor` (seed torch before building it).
        store: a GraphStore or its path with link splits and node features.
        fanouts: neighbours per hop (one per encoder layer; default 10 each).
        batch_size: positive edges per batch.
        epochs, optimizer, lr, weight_decay, patience, eval_every, seed, max_steps,
        device, checkpoint, metrics_log, quiet, on_epoch: as
            :class:`graphpipe.train.Trainer`.
        evaluation: ``"none"`` skips evaluation; anything else evaluates.
        eval_batch_size: nodes per embedding batch of evaluation.
        metric: ``"mrr"`` or ``"hits@K"`` (the store's negatives must allow it), or None.

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.link import link_dataset, write_ogb_link
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = write_ogb_link(tmp.name + "/f", link_dataset(200, pool=20), num_neg=100)
    >>> store = ingest(folder, tmp.name + "/s")
    >>> _ = torch.manual_seed(0)
    >>> model = LinkPredictor("sage", store.feature_dim, 8, 2)
    >>> trainer = LinkTrainer(model, store, fanouts=[5, 5], epochs=2, quiet=True)
    >>> result = trainer.fit()
    >>> trainer.metric, result.epochs_completed, sorted(trainer.heuristic())
    ('hits@50', 2, ['test', 'valid'])
    >>> tmp.cleanup()
    """

    kind = "link"

    def __init__(self, model: LinkPredictor, store: Any, *, fanouts: list[int] | None = None,
                 batch_size: int = 512, epochs: int = 5, optimizer: str = "adam",
                 lr: float = 0.005, weight_decay: float = 0.0, patience: int | None = None,
                 evaluation: str = "link", eval_batch_size: int = 4096, eval_every: int = 1,
                 seed: int = 0, max_steps: int | None = None, device: str | torch.device = "cpu",
                 metric: str | None = None, checkpoint: Any = None, metrics_log: Any = None,
                 quiet: bool = False, on_epoch: Callable[[dict[str, Any]], None] | None = None):
        from graphpipe.loaders import LinkNeighborLoader
        from graphpipe.store.link import read_link_split

        self.store = open_link_store(store)
        num_layers = int(model.config["num_layers"])
        self.fanouts = [int(f) for f in (fanouts or [10] * num_layers)]
        if model.config["encoder"] != "mlp" and len(self.fanouts) != num_layers:
            raise ValueError(f"'fanouts' needs one entry per layer ({num_layers}), got {self.fanouts}")
        self.configure(epochs=epochs, optimizer=optimizer, lr=lr, weight_decay=weight_decay,
                       patience=patience, evaluation="none" if evaluation == "none" else "link",
                       eval_every=eval_every, seed=seed, max_steps=max_steps,
                       checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet,
                       on_epoch=on_epoch)
        self.device = torch.device(device)
        self.model = model.to(self.device)
        self.forward_model: nn.Module = self.model  # what training steps call (DDP wraps model)
        self.batch_size, self.eval_batch_size = int(batch_size), int(eval_batch_size)
        self.splits = {name: read_link_split(self.store, name) for name in ("valid", "test")}
        self.metric = link_metric(self.splits["valid"], metric)
        self.optimizer = make_optimizer(self.model, optimizer, self.lr, self.weight_decay)
        self.loader = LinkNeighborLoader(self.store, self.fanouts, edge_label_index="train",
                                         neg_sampling="binary", batch_size=self.batch_size,
                                         shuffle=True, seed=self.seed, device=self.device,
                                         exclude_seed_edges=True)

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """One optimizer step of binary cross-entropy on the batch's labelled pairs:
        ``(mean loss, pairs, pairs on the right side of 0)``."""
        logits = self.forward_model(batch)
        label = self.labels(batch).float()
        loss = nn.functional.binary_cross_entropy_with_logits(logits, label)
        self.optimize(loss)
        hits = int(((logits.detach() > 0) == (label > 0.5)).sum())
        return float(loss.detach()), int(logits.shape[0]), hits

    def labels(self, batch: Any) -> torch.Tensor:
        """The batch's ``edge_label`` (1 positive, 0 negative), the order of the logits."""
        return batch.edge_label

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The epoch's metrics record (``metric``: what ``valid_acc``/``test_acc`` hold)."""
        return {**super().epoch_record(epoch, sums), "metric": self.metric}

    def evaluate(self) -> dict[str, float]:
        """``{"valid", "test"}``: the link metric of each split, with the other figures of
        MRR's ranks (:func:`evaluate_splits`; embeddings of every node, then the decoder per
        pair, on the CPU)."""
        was = self.model.training
        h = node_embeddings(self.model, self.store, self.fanouts, self.eval_batch_size, self.seed,
                            self.device)
        try:
            score = pair_scorer(self.model.cpu().decoder, h)
            return evaluate_splits(dict.fromkeys(self.splits, score), self.splits, self.metric)
        finally:
            self.model.to(self.device).train(was)

    def heuristic(self) -> dict[str, float]:
        """Common neighbours' ``{"valid", "test"}`` metric on the same splits."""
        indptr, indices = self.store.topology()
        return {name: evaluate_link(lambda s, d: common_neighbours(indptr, indices, s, d),
                                    split, self.metric) for name, split in self.splits.items()}

    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line."""
        m = record["metric"]
        ranks = ""
        if record.get("test_hits@10") is not None:  # MRR's ranks, the same evaluation
            ranks = "  test hits@1/3/10 " + "/".join(f"{record[f'test_{f}']:.3f}" for f in RANK_FIGURES)
        return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  "
                f"valid {m} {fmt_acc(record['valid_acc'])}  test {m} {fmt_acc(record['test_acc'])}"
                f"{ranks}  time {record['seconds']:.2f}s (+{record['eval_seconds']:.2f}s eval)  "
                f"batches {record['steps']}")

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with."""
        return {"num_nodes": self.store.num_nodes, "batch_size": self.batch_size,
                "fanouts": self.fanouts, "metric": self.metric}

    def checkpoint_extra(self) -> dict[str, Any]:
        """The trainer's checkpoint key ``train`` (checked on resume)."""
        return {"train": {"kind": self.kind, **self.resume_settings(), "seed": self.seed}}
