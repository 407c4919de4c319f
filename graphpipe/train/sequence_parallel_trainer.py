"""The :class:`SequenceParallelTrainer`: a :class:`SequenceTrainer` whose every sequence is
split over the ranks of a process group (:mod:`graphpipe.train.sequence_parallel`).

Every rank builds the same :class:`~graphpipe.loaders.cluster.ClusterLoader` (padded to a
multiple of ``P``), runs its chunk of each sequence, and after the backward pass the
gradients are summed over ranks, so each optimizer step equals the one-process step on
the whole sequence (same weights on every rank; rank 0's are broadcast at the start).
Evaluation runs the same way: each rank scores its chunk, correct and labelled counts
are summed. The metrics log, checkpoints and printed lines are rank 0's (the others run
``quiet``); the epoch record gains ``comm``: this rank's all-to-all bytes in the forward
and backward passes and per layer and step. Dropout masks are drawn per rank and step
from ``(seed, epoch, iteration, rank)``, so ranks do not repeat one another's masks.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from graphpipe.train.loop import EpochSums
from graphpipe.train.sequence_attention import dense_attention_bytes
from graphpipe.train.sequence_parallel import (
    HeadExchange,
    all_reduce_gradients,
    broadcast_parameters,
    check_same_batch,
    parallel_forward,
    parallel_loss,
)
from graphpipe.train.sequence_trainer import SequenceTrainer

__all__ = ["SequenceParallelTrainer"]


class SequenceParallelTrainer(SequenceTrainer):
    """:class:`SequenceTrainer` with sequence parallelism over ``exchange``'s group.

    Args:
        model: ``graphormer`` or ``gt`` at node level, ``heads`` a multiple of ``P``.
        store: a node-level store (graph-level batches hold many sequences: not split).
        exchange: the group's :class:`HeadExchange` (default: the default process group,
            or ``P = 1`` without one).
        **kwargs: as :class:`SequenceTrainer`; ``checkpoint``, ``metrics_log`` and the
            printed lines take effect on rank 0 only.

    With ``P = 1`` (no process group) it trains exactly as :class:`SequenceTrainer`:

    >>> import tempfile, torch
    >>> from pathlib import Path
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic import community_graph, write_ogb_raw
    >>> from graphpipe.train import build_model
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = write_ogb_raw(root / "raw", community_graph(120, 3, avg_degree=4, feature_dim=8, seed=0))
    >>> store = ingest(root / "raw", root / "store").path
    >>> _ = torch.manual_seed(0)
    >>> model = build_model("gt", 8, 16, 3, 1, heads=2)
    >>> trainer = SequenceParallelTrainer(model, store, seq_len=40, parts=2, epochs=1, quiet=True)
    >>> result = trainer.fit()
    >>> trainer.exchange.world, result.epochs_completed, 0.0 <= result.test_acc <= 1.0
    (1, 1, True)
    """

    def __init__(self, model: nn.Module, store: Any, *, exchange: HeadExchange | None = None,
                 **kwargs: Any):
        self.exchange = exchange if exchange is not None else HeadExchange()
        world = self.exchange.world
        self.is_main = self.exchange.rank == 0
        if getattr(model, "level", "node") != "node":
            raise ValueError("sequence parallelism needs a node-level store and model "
                             "(graph-level batches hold many short sequences)")
        self.exchange.head_slice(int(getattr(model, "heads", 1)))
        if kwargs.get("batch_size") not in (None, 1):
            raise ValueError("sequence parallelism splits one sequence per step (batch_size 1)")
        options = dict(kwargs.pop("loader_options", None) or {})
        options["pad_multiple"] = world * int(options.get("pad_multiple", 1))
        if not self.is_main:
            kwargs.update(quiet=True, checkpoint=None, metrics_log=None)
        super().__init__(model, store, loader_options=options, **kwargs)
        if self.graph_level:
            raise ValueError(f"store {str(self.store.path)!r} is graph-level: sequence "
                             "parallelism splits node-level sequences")
        broadcast_parameters(self.model, self.exchange)
        self.comm: dict[str, int] = {"forward_bytes": 0, "backward_bytes": 0, "steps": 0}

    def dense_fits(self, batch: Any) -> tuple[bool, int]:
        """Whether a dense step fits this rank's budget: each rank holds the ``(S, S)``
        score matrices of its ``H/P`` heads only."""
        heads = max(1, int(self.model.heads) // self.exchange.world)
        need = dense_attention_bytes(batch.batch_size, batch.seq_len, heads,
                                     self.model.num_layers, device_type=self.device.type,
                                     with_bias=bool(getattr(self.model, "has_bias", False)))
        return need <= self._budget(), need

    # ---------------------------------------------------------------------------- steps
    def _step_seed(self, epoch: int, iteration: int) -> int:
        return (((self.seed * 1_000_003 + epoch) * 1_000_003 + iteration) * 1_009
                + self.exchange.rank) % (2 ** 63)

    def _train_step(self, batch: Any, mode: str, epoch: int, iteration: int
                    ) -> tuple[float, int, int]:
        """One sequence-parallel optimizer step: the chunk's forward pass, the loss
        normalised by the whole sequence's labelled count, backward, gradient all-reduce,
        step; returns whole-sequence ``(mean loss, labelled, correct)``."""
        check_same_batch(batch, self.exchange)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self._step_seed(epoch, iteration))
            logits = parallel_forward(self.model, batch, self.exchange, mode)
        local_y = batch.y[:, self._chunk(batch)]
        loss, labelled, correct = parallel_loss(logits, local_y, self.exchange)
        if labelled == 0:
            return 0.0, 0, 0
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        all_reduce_gradients(self.model, self.exchange)
        self.optimizer.step()
        total = self.exchange.all_reduce(loss.detach().to(torch.float64).reshape(1))
        self.comm["steps"] += 1
        return float(total), labelled, correct

    def _chunk(self, batch: Any) -> slice:
        n = int(batch.seq_len) // self.exchange.world
        return slice(self.exchange.rank * n, (self.exchange.rank + 1) * n)

    def start_epoch(self, epoch: int, total: int) -> None:
        """Count this epoch's all-to-alls from zero (and plan the schedule)."""
        self.exchange.reset_stats()
        super().start_epoch(epoch, total)

    def epoch_record(self, epoch: int, sums: EpochSums) -> dict[str, Any]:
        """The record (see :meth:`SequenceTrainer.epoch_record`) with the slowest rank's
        time, so the Auto Tuner takes the same decision on every rank, and ``comm``."""
        seconds = torch.tensor([sums.seconds], dtype=torch.float64)
        sums.seconds = float(self.exchange.all_reduce(seconds, dist.ReduceOp.MAX))
        record = super().epoch_record(epoch, sums)
        record["comm"] = self._comm_record(record["steps"])
        return record

    def _comm_record(self, steps: int) -> dict[str, Any]:
        fwd, bwd = self.exchange.forward_stats, self.exchange.backward_stats
        layers = int(getattr(self.model, "num_layers", 1))
        per = max(steps, 1) * layers
        return {"world": self.exchange.world, "forward_bytes": fwd.bytes,
                "backward_bytes": bwd.bytes, "remote_bytes": fwd.remote_bytes + bwd.remote_bytes,
                "forward_bytes_per_layer_step": fwd.bytes // per,
                "all_to_alls": fwd.calls + bwd.calls}

    # ---------------------------------------------------------------------------- evaluation
    def _evaluate_split(self, split: str) -> float:
        """Accuracy over the split's labelled positions: correct and labelled counts of
        every rank's chunks, summed."""
        correct = labelled = 0
        for batch in self._eval_loader(split):
            check_same_batch(batch, self.exchange)
            logits = parallel_forward(self.model, batch, self.exchange, self._eval_mode(batch))
            _loss, n, hits = parallel_loss(logits, batch.y[:, self._chunk(batch)], self.exchange)
            correct += hits
            labelled += n
        return correct / labelled if labelled else float("nan")
