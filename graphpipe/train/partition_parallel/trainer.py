"""Full-graph partition-parallel training (Sylvie): one rank per METIS part.

Every rank (a ``torch.distributed`` process, gloo on CPUs) builds its
:class:`.partition.LocalPartition` from the store's topology and the parts, reads the
input rows of its inner and halo nodes once, and trains the same GCN / GraphSAGE
(same seed, parameters broadcast from rank 0) on the whole graph:

1. forward over all layers, halo rows of every hidden layer exchanged
   (:class:`.exchange.HaloExchange`, float32 or per-row 1/2/4/8 bits), reused for at most
   ``staleness`` epochs (:class:`.staleness.StaleHalo`);
2. loss = sum of the cross entropy of the rank's training nodes divided by the number of
   training nodes of the whole graph, so the ranks' losses add up to the full graph's
   mean loss;
3. backward (halo gradients go back to their owners), weight gradients all-reduced
   (sum), one optimizer step: with float32 exchange and ``staleness=0`` this is one step
   of single-process full-graph training.

Evaluation runs a fresh exchange (no gradient) and sums correct counts over ranks.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from graphpipe.train.models import build_model

from .exchange import HaloExchange
from .model import PartitionModel
from .partition import local_partition
from .quantized import HALO_BITS
from .staleness import StaleHalo

__all__ = ["EpochRecord", "PartitionConfig", "PartitionRunResult", "PartitionTrainer"]

SPLITS = ("train", "valid", "test")


@dataclass
class PartitionConfig:
    """Hyper-parameters of a partition-parallel run (the same on every rank).

    Attributes:
        model: ``"sage"`` or ``"gcn"``.
        hidden, layers, dropout: model shape.
        lr, weight_decay: Adam.
        epochs: full-graph steps (one per epoch).
        bits: halo row width: 32 (float32), 1, 2, 4, 8 or ``"auto"``.
        staleness: S, epochs a halo may be reused (0: exchange every epoch).
        seed: model initialisation, dropout and rounding noise.
    """

    model: str = "sage"
    hidden: int = 256
    layers: int = 2
    dropout: float = 0.5
    lr: float = 0.01
    weight_decay: float = 0.0
    epochs: int = 50
    bits: int | str = 32
    staleness: int = 0
    seed: int = 0

    def check(self) -> None:
        if self.model not in ("sage", "gcn"):
            raise ValueError(f"partition-parallel training runs --model sage or gcn (got {self.model!r})")
        if self.bits not in HALO_BITS or isinstance(self.bits, bool):
            raise ValueError(f"'bits' must be one of {HALO_BITS} (got {self.bits!r})")
        if isinstance(self.staleness, bool) or not isinstance(self.staleness, int) or self.staleness < 0:
            raise ValueError(f"'staleness' must be an integer >= 0 (got {self.staleness!r})")


@dataclass
class EpochRecord:
    """One epoch: global loss, accuracies, bytes sent by all ranks (forward + backward)."""

    epoch: int
    loss: float
    train_acc: float
    valid_acc: float
    test_acc: float
    bytes_sent: int
    seconds: float


@dataclass
class PartitionRunResult:
    """What :meth:`PartitionTrainer.fit` returns (the same on every rank)."""

    records: list[EpochRecord] = field(default_factory=list)
    best_epoch: int = -1
    best_valid_acc: float = 0.0
    test_acc: float = 0.0
    max_staleness: int = 0
    halo_rows: int = 0
    num_parts: int = 1

    @property
    def bytes_per_epoch(self) -> float:
        """Mean bytes sent per training epoch, all ranks together."""
        return float(np.mean([r.bytes_sent for r in self.records])) if self.records else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "bytes_per_epoch": self.bytes_per_epoch}


class PartitionTrainer:
    """One rank of partition-parallel training.

    Args:
        store: an open :class:`graphpipe.store.GraphStore` with features, labels and a
            ``train`` split.
        parts: int ``(N,)`` METIS part of every node (``P`` = the group's size); rank 0's
            copy is broadcast so every rank uses the same.
        config: :class:`PartitionConfig`.
        group: the process group (default: the world, already initialised).

    >>> import tempfile, torch.distributed as dist
    >>> from graphpipe.ingest.pipeline import ingest
    >>> from graphpipe.synthetic import community_graph, write_ogb_raw
    >>> from graphpipe.train.partition_parallel.launch import free_port
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_ogb_raw(tmp.name + "/raw", community_graph(90, 3, feature_dim=8, seed=1))
    >>> store = ingest(tmp.name + "/raw", tmp.name + "/store")
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
    ...                         rank=0, world_size=1)
    >>> trainer = PartitionTrainer(store, np.zeros(90, dtype=np.int64),
    ...                            PartitionConfig(hidden=8, epochs=2, dropout=0.0))
    >>> losses = [trainer.train_epoch(epoch) for epoch in range(2)]
    >>> losses[1] < losses[0], sorted(trainer.evaluate())
    (True, ['test', 'train', 'valid'])
    >>> dist.destroy_process_group(); tmp.cleanup()
    """

    def __init__(self, store: Any, parts: np.ndarray, config: PartitionConfig,
                 group: dist.ProcessGroup | None = None):
        config.check()
        self.config, self.group = config, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        parts = self._agree(np.asarray(parts, dtype=np.int64))
        self.part = local_partition(*store.topology(), parts, self.rank, self.world)
        self.x = torch.from_numpy(np.asarray(store.features(self.part.local_ids),
                                             dtype=np.float32))
        labels = np.asarray(store.labels)
        if labels.ndim != 1:
            raise ValueError(f"{store.path}: partition-parallel training needs one label per node "
                             f"(got labels of shape {labels.shape})")
        self.y = torch.from_numpy(labels[self.part.inner].astype(np.int64))
        self.masks, self.counts = self._split_masks(store)
        num_classes = int((store.manifest.get("labels") or {}).get("num_classes")
                          or int(labels.max()) + 1)
        torch.manual_seed(config.seed)
        base = build_model(config.model, int(self.x.shape[1]), config.hidden, num_classes,
                           config.layers, dropout=config.dropout)
        for p in base.parameters():
            dist.broadcast(p.data, 0, group=group)
        self.model = PartitionModel(base, self.part)
        self.exchange = HaloExchange(self.part, config.bits, seed=config.seed, group=group)
        self.halo = StaleHalo(self.exchange, config.staleness)
        self.optimizer = torch.optim.Adam(base.parameters(), lr=config.lr,
                                          weight_decay=config.weight_decay)
        torch.manual_seed(config.seed * 1000 + self.rank + 1)  # dropout differs per rank

    def _agree(self, parts: np.ndarray) -> np.ndarray:
        t = torch.from_numpy(parts.copy())
        dist.broadcast(t, 0, group=self.group)
        return t.numpy()

    def _split_masks(self, store: Any) -> tuple[dict[str, torch.Tensor], dict[str, int]]:
        masks, counts = {}, {}
        for name in SPLITS:
            ids = store.split(name) if name in store.split_names else np.zeros(0, np.int64)
            masks[name] = torch.from_numpy(np.isin(self.part.inner, ids))
            counts[name] = int(ids.shape[0])
        if counts["train"] == 0:
            raise ValueError(f"{store.path}: the 'train' split is empty")
        return masks, counts

    def _sum(self, values: list[float]) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(t, group=self.group)
        return t.tolist()

    def train_epoch(self, epoch: int) -> float:
        """One full-graph step; returns the global training loss (before the step)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=False)
        logits = self.model(self.x, lambda h, layer: self.halo.halo(h, layer, epoch))
        mask = self.masks["train"]
        loss = F.cross_entropy(logits[mask], self.y[mask], reduction="sum") / self.counts["train"]
        loss.backward()
        params = [p for p in self.model.base.parameters() if p.grad is not None]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        dist.all_reduce(flat, group=self.group)
        at = 0
        for p in params:
            p.grad.copy_(flat[at:at + p.numel()].view_as(p.grad))
            at += p.numel()
        self.optimizer.step()
        return self._sum([float(loss.detach())])[0]

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy of every split over the whole graph (fresh halo exchange)."""
        self.model.eval()
        pred = self.model(self.x, lambda h, layer: self.halo.halo(h, layer, -1)).argmax(1)
        correct = self._sum([float((pred[m] == self.y[m]).sum()) for m in self.masks.values()])
        return {name: c / max(self.counts[name], 1) for name, c in zip(self.masks, correct)}

    def fit(self, on_epoch: Any = None) -> PartitionRunResult:
        """Train ``config.epochs`` epochs, evaluating after each; the test accuracy is the
        one at the best valid epoch. ``on_epoch(record)`` is called on every rank."""
        result = PartitionRunResult(halo_rows=int(self._sum([self.part.num_halo])[0]),
                                    num_parts=self.world)
        for epoch in range(self.config.epochs):
            start = time.perf_counter()
            before = self.exchange.stats.total_sent()
            loss = self.train_epoch(epoch)
            sent = self._sum([self.exchange.stats.total_sent() - before])[0]
            seconds = time.perf_counter() - start
            acc = self.evaluate()
            record = EpochRecord(epoch, loss, acc["train"], acc["valid"], acc["test"], int(sent),
                                 seconds)
            result.records.append(record)
            if result.best_epoch < 0 or acc["valid"] > result.best_valid_acc:
                result.best_epoch, result.best_valid_acc = epoch, acc["valid"]
                result.test_acc = acc["test"]
            if on_epoch is not None:
                on_epoch(record)
        result.max_staleness = int(max(self.halo.ages, default=0))
        return result
