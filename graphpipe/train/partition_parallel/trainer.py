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

Evaluation runs a fresh exchange (no gradient) and sums correct counts over ranks. The
epochs run on :func:`graphpipe.train.loop.fit`: evaluation cadence, early stopping,
metrics log and checkpoints (rank 0 writes) as for every trainer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from graphpipe.train.loop import EpochSteps, EpochSums, Trainable, TrainResult, fmt_acc
from graphpipe.train.models import build_model

from .exchange import HaloExchange
from .model import PartitionModel
from .partition import local_partition
from .quantized import HALO_BITS
from .staleness import StaleHalo

__all__ = ["PartitionConfig", "PartitionTrainer", "format_partition_epoch"]

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


class PartitionTrainer(Trainable):
    """One rank of partition-parallel training, on the one epoch loop
    :func:`graphpipe.train.loop.fit` (one full-graph step per epoch), so checkpoints,
    ``resume``, early stopping and the metrics log work as for the other trainers
    (written by rank 0, the same on every rank).

    Args:
        store: an open :class:`graphpipe.store.GraphStore` with features, labels and a
            ``train`` split.
        parts: int ``(N,)`` METIS part of every node (``P`` = the group's size); rank 0's
            copy is broadcast so every rank uses the same.
        config: :class:`PartitionConfig` (``epochs``, ``seed``: the loop's).
        group: the process group (default: the world, already initialised).
        patience, eval_every, checkpoint, metrics_log, quiet, on_epoch: as
            :class:`graphpipe.train.Trainer` (``on_epoch`` runs on every rank).
        evaluation: ``"full"`` (default: every split on the whole graph) or ``"none"``.

    Dropout masks come from ``(seed, epoch, rank)`` and the rounding noise from the
    exchange's call count (checkpointed), so a resumed run repeats the straight run's
    steps; with ``staleness > 0`` the first epoch after a resume exchanges afresh (each
    rank's stale halo is not in rank 0's checkpoint).

    >>> import tempfile, torch.distributed as dist
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic import community_graph, write_ogb_raw
    >>> from graphpipe.train.partition_parallel.launch import free_port
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_ogb_raw(tmp.name + "/raw", community_graph(90, 3, feature_dim=8, seed=1))
    >>> store = ingest(tmp.name + "/raw", tmp.name + "/store")
    >>> dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
    ...                         rank=0, world_size=1)
    >>> trainer = PartitionTrainer(store, np.zeros(90, dtype=np.int64),
    ...                            PartitionConfig(hidden=8, epochs=2, dropout=0.0), quiet=True)
    >>> result = trainer.fit()
    >>> losses = [r["loss"] for r in result.history]
    >>> losses[1] < losses[0], sorted(trainer.evaluate())
    (True, ['test', 'train', 'valid'])
    >>> summary = trainer.summary(result)
    >>> summary["num_parts"], summary["halo_rows"], len(summary["records"])
    (1, 0, 2)
    >>> dist.destroy_process_group(); tmp.cleanup()
    """

    kind = "partition"

    def __init__(self, store: Any, parts: np.ndarray, config: PartitionConfig,
                 group: dist.ProcessGroup | None = None, *, patience: int | None = None,
                 evaluation: str = "full", eval_every: int = 1, checkpoint: Any = None,
                 metrics_log: Any = None, quiet: bool = False,
                 on_epoch: Callable[[dict[str, Any]], None] | None = None):
        config.check()
        self.config, self.group = config, group
        self.rank, self.world = dist.get_rank(group), dist.get_world_size(group)
        self.is_main = self.rank == 0
        self.configure(epochs=config.epochs, optimizer="adam", lr=config.lr,
                       weight_decay=config.weight_decay, patience=patience,
                       evaluation="none" if evaluation == "none" else "full",
                       eval_every=eval_every, seed=config.seed, max_steps=None,
                       checkpoint=checkpoint, metrics_log=metrics_log, quiet=quiet,
                       on_epoch=on_epoch)
        self.loader = EpochSteps(self.seed)
        parts = self._agree(np.asarray(parts, dtype=np.int64))
        self.part = local_partition(*store.topology(), parts, self.rank, self.world)
        self.num_nodes = int(store.num_nodes)
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
        self._sent_before = 0

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

    def _step_seed(self, epoch: int) -> int:
        return ((self.seed * 1_000_003 + epoch) * 1_009 + self.rank + 1) % (2 ** 63)

    # ---------------------------------------------------------------------------- the loop's hooks
    def start_epoch(self, epoch: int, total: int) -> None:
        """Note the bytes sent so far (the epoch's record counts its own)."""
        self._sent_before = self.exchange.stats.total_sent()

    def step(self, batch: Any, epoch: int, iteration: int) -> tuple[float, int, int]:
        """One full-graph step: ``(global training loss before the step, training nodes,
        correct among them)``, the same on every rank."""
        self.optimizer.zero_grad(set_to_none=False)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._step_seed(epoch))  # dropout masks differ per rank
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
        correct = float((logits.detach()[mask].argmax(1) == self.y[mask]).sum())
        total_loss, total_correct = self._sum([float(loss.detach()), correct])
        return total_loss, self.counts["train"], int(total_correct)

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The epoch's record: global loss, ``bytes_sent`` by all ranks (forward and
        backward), the slowest rank's ``seconds``."""
        sent = self.exchange.stats.total_sent() - self._sent_before
        sent, seconds = self._sum([sent, 0.0])[0], self._max(sums.seconds)
        return {**super().epoch_record(epoch, sums), "seconds": seconds, "bytes_sent": int(sent)}

    def _max(self, value: float) -> float:
        t = torch.tensor([value], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.group)
        return float(t[0])

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Accuracy of every split over the whole graph (fresh halo exchange)."""
        was = self.model.training
        self.model.eval()
        try:
            pred = self.model(self.x, lambda h, layer: self.halo.halo(h, layer, -1)).argmax(1)
        finally:
            self.model.train(was)
        correct = self._sum([float((pred[m] == self.y[m]).sum()) for m in self.masks.values()])
        return {name: c / max(self.counts[name], 1) for name, c in zip(self.masks, correct)}

    def describe_epoch(self, record: dict[str, Any]) -> str:
        """The epoch's printed line (:func:`format_partition_epoch`)."""
        return format_partition_epoch(record)

    def resume_settings(self) -> dict[str, Any]:
        """What a checkpoint must have been trained with."""
        return {"num_nodes": self.num_nodes, "num_parts": self.world, "bits": self.config.bits,
                "staleness": self.config.staleness}

    def checkpoint_extra(self) -> dict[str, Any]:
        """``train`` (checked on resume) and the exchange's call count."""
        return {"train": {"kind": self.kind, **self.resume_settings(), "seed": self.seed},
                "exchange_calls": int(self.exchange._calls)}

    def resume_extra(self, state: dict[str, Any]) -> None:
        """Continue the exchange's rounding noise where the checkpoint left it."""
        self.exchange._calls = int(state.get("exchange_calls", 0))

    def summary(self, result: TrainResult) -> dict[str, Any]:
        """``result`` as a plain dict (the same on every rank): ``records`` (the history),
        ``best_epoch``, ``best_valid_acc``, ``test_acc``, ``epochs_completed``,
        ``stopped_early``, ``bytes_per_epoch`` (mean over the epochs run), ``max_staleness``,
        ``halo_rows`` (all ranks) and ``num_parts``."""
        sent = [r["bytes_sent"] for r in result.history]
        done = {k: v for k, v in asdict(result).items() if k != "history"}
        return {**done, "records": result.history,
                "bytes_per_epoch": float(np.mean(sent)) if sent else 0.0,
                "max_staleness": int(max(self.halo.ages, default=0)),
                "halo_rows": int(self._sum([self.part.num_halo])[0]), "num_parts": self.world}


def format_partition_epoch(record: dict[str, Any]) -> str:
    """One human-readable line for a partition-parallel epoch's record (bytes exchanged)."""
    return (f"epoch {record['epoch']:>3}  loss {record['loss']:.4f}  "
            f"train {fmt_acc(record['train_acc'])}  valid {fmt_acc(record['valid_acc'])}  "
            f"test {fmt_acc(record['test_acc'])}  exchanged {record['bytes_sent']:,} B  "
            f"time {record['seconds']:.2f}s (+{record['eval_seconds']:.2f}s eval)")
