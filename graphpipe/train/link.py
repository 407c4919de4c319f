"""Link prediction: a GNN encoder (:mod:`graphpipe.train.models`) with a dot or MLP
decoder, trained on a store's link split with the :class:`~graphpipe.loaders.LinkNeighborLoader`
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
import math
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import torch
from torch import nn

from graphpipe.train.models import build_model

__all__ = ["DECODERS", "DotDecoder", "LinkPredictor", "LinkResult", "MLPDecoder",
           "common_neighbours", "evaluate_link", "link_metric", "train_link"]

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


def link_metric(split: Any, k: int = 50) -> str:
    """``"mrr"`` for a split with per-edge negatives (``neg_dst2d``), else ``"hits@K"``."""
    return "mrr" if split.neg_dst2d is not None else f"hits@{k}"


def evaluate_link(score: Any, split: Any, metric: str) -> float:
    """``metric`` (``"hits@K"`` or ``"mrr"``) of a split by OGB's Evaluator; ``score(src, dst)``
    returns ``(n,)`` scores of int64 node ID arrays."""
    from ogb.linkproppred import Evaluator

    pos = torch.as_tensor(score(split.src, split.dst), dtype=torch.float32)
    if metric == "mrr":
        if split.neg_dst2d is None:
            raise ValueError("MRR needs per-edge negatives (neg_dst2d, ogbl-citation2's layout)")
        k = split.neg_dst2d.shape[1]
        neg = torch.as_tensor(score(np.repeat(split.src, k), split.neg_dst2d.reshape(-1)),
                              dtype=torch.float32).view(-1, k)
        result = Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})
        return float(result["mrr_list"].mean())
    if split.neg_src is None:
        raise ValueError("Hits@K needs negative pairs (neg_src / neg_dst, ogbl-collab's layout)")
    neg = torch.as_tensor(score(split.neg_src, split.neg_dst), dtype=torch.float32)
    evaluator = Evaluator("ogbl-collab")
    evaluator.K = int(metric.split("@", 1)[1])
    return float(evaluator.eval({"y_pred_pos": pos, "y_pred_neg": neg})[metric])


@dataclass
class LinkResult:
    """What :func:`train_link` returns.

    Attributes:
        metric: ``"hits@K"`` or ``"mrr"``.
        history: per epoch ``{"epoch", "loss", "metric", "valid", "test"}``.
        best_epoch: the epoch of the best valid metric (-1 without epochs).
        best_valid: that valid metric; test: the test metric at that epoch.
        heuristic: common neighbours' ``{"valid": ..., "test": ...}`` on the same splits.
    """

    metric: str
    history: list[dict[str, Any]] = field(default_factory=list)
    best_epoch: int = -1
    best_valid: float = float("nan")
    test: float = float("nan")
    heuristic: dict[str, float] = field(default_factory=dict)


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


def _scorer(model: LinkPredictor, h: torch.Tensor):
    @torch.no_grad()
    def score(src: np.ndarray, dst: np.ndarray) -> torch.Tensor:
        parts = []
        for start in range(0, len(src), 65536):
            s = torch.as_tensor(np.array(src[start:start + 65536], dtype=np.int64))
            d = torch.as_tensor(np.array(dst[start:start + 65536], dtype=np.int64))
            parts.append(model.decoder(h[s], h[d]))
        return torch.cat(parts) if parts else torch.empty(0)

    return score


def _epoch(model: LinkPredictor, loader: Any, optimizer: Any, max_steps: int | None) -> float:
    model.train()
    total, count = 0.0, 0
    for step, batch in enumerate(loader):
        if max_steps is not None and step >= max_steps:
            break
        optimizer.zero_grad()
        logits = model(batch)
        loss = nn.functional.binary_cross_entropy_with_logits(logits, batch.edge_label.float())
        loss.backward()
        optimizer.step()
        total, count = total + float(loss.detach()) * logits.shape[0], count + logits.shape[0]
    return total / max(count, 1)


def train_link(store: Any, *, encoder: str = "sage", decoder: str = "mlp", hidden: int = 64,
               num_layers: int = 2, fanouts: list[int] | None = None, batch_size: int = 512,
               epochs: int = 5, lr: float = 0.005, dropout: float = 0.0, seed: int = 0,
               device: str = "cpu", eval_batch_size: int = 4096, hits_k: int = 50,
               max_steps: int | None = None, log: Any = None) -> LinkResult:
    """Train a :class:`LinkPredictor` on ``store``'s link split ``train`` (binary negatives,
    one per positive; seed edges excluded from the sampled graph), evaluate ``valid`` and
    ``test`` after every epoch (Hits@``hits_k`` or MRR, :func:`link_metric`) and the
    common-neighbours heuristic once. ``log(record)`` is called after every epoch.

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic.link import link_dataset, write_ogb_link
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = write_ogb_link(tmp.name + "/f", link_dataset(200, pool=20), num_neg=100)
    >>> result = train_link(ingest(folder, tmp.name + "/s"), hidden=8, epochs=2, fanouts=[5, 5])
    >>> result.metric, len(result.history), sorted(result.heuristic)
    ('hits@50', 2, ['test', 'valid'])
    >>> tmp.cleanup()
    """
    from graphpipe.loaders import LinkNeighborLoader
    from graphpipe.store import GraphStore, open_store
    from graphpipe.store.link import link_split_names, read_link_split

    store = store if isinstance(store, GraphStore) else open_store(store, in_memory="auto")
    missing = [s for s in ("train", "valid", "test") if s not in link_split_names(store)]
    if missing:
        raise ValueError(f"store {str(store.path)!r} has no link split(s) {missing} (ingest an OGB "
                         f"link-property folder, e.g. from `graphpipe generate link`)")
    if not store.has_features:
        raise ValueError(f"store {str(store.path)!r} has no node features ('node/feat')")
    fanouts = list(fanouts or [10] * num_layers)
    if encoder != "mlp" and len(fanouts) != num_layers:
        raise ValueError(f"'fanouts' needs one entry per layer ({num_layers}), got {fanouts}")
    splits = {name: read_link_split(store, name) for name in ("valid", "test")}
    result = LinkResult(metric=link_metric(splits["valid"], hits_k))
    indptr, indices = store.topology()
    for name, split in splits.items():
        result.heuristic[name] = evaluate_link(
            lambda s, d: common_neighbours(indptr, indices, s, d), split, result.metric)
    torch.manual_seed(seed)
    dev = torch.device(device)
    model = LinkPredictor(encoder, store.feature_dim, hidden, num_layers, decoder=decoder,
                          dropout=dropout).to(dev)
    loader = LinkNeighborLoader(store, fanouts, edge_label_index="train", neg_sampling="binary",
                                batch_size=batch_size, shuffle=True, seed=seed, device=dev,
                                exclude_seed_edges=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for epoch in range(epochs):
        loss = _epoch(model, loader, optimizer, max_steps)
        h = node_embeddings(model, store, fanouts, eval_batch_size, seed, dev)
        score = _scorer(model.cpu(), h)
        record = {"epoch": epoch, "loss": loss, "metric": result.metric,
                  **{name: evaluate_link(score, split, result.metric) for name, split in splits.items()}}
        model.to(dev)
        result.history.append(record)
        if math.isnan(result.best_valid) or record["valid"] > result.best_valid:
            result.best_epoch, result.best_valid, result.test = epoch, record["valid"], record["test"]
        if log is not None:
            log(record)
    return result
