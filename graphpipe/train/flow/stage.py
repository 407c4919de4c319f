"""The stage driver: one rank's part of a GPipe forward-then-backward step (thesis §5.4).

Rank ``s`` of ``P`` runs stage ``s``. A training step over microbatches ``0 .. M-1``:

1. **forward**, in order: stage 0 reads the microbatch's input rows, the others receive
   the previous stage's activations (point-to-point, tag ``m``); every stage but the last
   sends its output on; the last stage computes the loss
   ``sum of cross-entropies of the microbatch's train nodes / train nodes of all microbatches``;
2. **backward**, in reverse order: the last stage back-propagates its loss, the others
   the gradient received from the next stage; every stage but the first sends the
   gradient of its input back;
3. the gradients, accumulated over the ``M`` microbatches, are those of the mean loss
   over all their train nodes: one optimizer step.

Every wait for a message (a receive, and the sends' completion at the end of the step)
is **idle** time: ``idle / seconds`` is the stage's bubble fraction. While it waits, the
driver opens ``gate`` (the Bubble Interleaver's, :mod:`.interleaver`) and closes it once
the message is in.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.nn import functional as F

from graphpipe.train.flow.microbatches import Microbatch
from graphpipe.train.loop import EpochSums

__all__ = ["StageDriver", "StepStats"]


@dataclass
class StepStats(EpochSums):
    """What one step of one stage measured (:class:`~graphpipe.train.loop.EpochSums`'s loss
    figures: the last stage's), and the stage's idle time and message waits."""

    idle: float = 0.0
    waits: list[float] = field(default_factory=list)


class _NoGate:
    def open(self) -> None:
        pass

    def close(self) -> None:
        pass


class StageDriver:
    """Stage ``rank`` of ``stages`` over the default process group (module docstring).

    Args:
        stage: the rank's :class:`~.revgcn.Stage` (``in_dim``, ``out_dim``, ``first``, ``last``).
        optimizer: over the stage's parameters.
        hidden: width of the activations between stages.
        gate: an object with ``open()`` / ``close()`` (default: none).
    """

    def __init__(self, stage: torch.nn.Module, optimizer: torch.optim.Optimizer, *, rank: int,
                 stages: int, hidden: int, gate: Any = None):
        self.stage, self.optimizer = stage, optimizer
        self.rank, self.stages, self.hidden = rank, stages, hidden
        self.gate = gate if gate is not None else _NoGate()
        self._sends: list[Any] = []
        self.stats = StepStats()

    # -- messages ------------------------------------------------------------------------------
    def _recv(self, rows: int, peer: int, tag: int) -> torch.Tensor:
        buf = torch.empty(rows, self.hidden)
        t0 = time.perf_counter()
        work = dist.irecv(buf, src=peer, tag=tag)
        if not work.is_completed():
            self.gate.open()
            try:
                work.wait()
            finally:
                self.gate.close()
        waited = time.perf_counter() - t0
        self.stats.idle += waited
        self.stats.waits.append(waited)
        return buf

    def _send(self, tensor: torch.Tensor, peer: int, tag: int) -> None:
        self._sends.append(dist.isend(tensor.detach().contiguous(), dst=peer, tag=tag))

    def _finish_sends(self) -> None:
        t0 = time.perf_counter()
        for work in self._sends:
            work.wait()
        self._sends.clear()
        self.stats.idle += time.perf_counter() - t0

    def _input(self, mb: Microbatch, x: torch.Tensor | None, tag: int) -> torch.Tensor:
        if self.stage.first:
            return x[torch.from_numpy(mb.nodes)]
        return self._recv(mb.num_nodes, self.rank - 1, tag)

    # -- a training step -----------------------------------------------------------------------
    def train_step(self, mbs: list[Microbatch], x: torch.Tensor | None, labels: torch.Tensor | None,
                   epoch: int) -> StepStats:
        """One optimizer step over ``mbs`` (``x``: ``(N, in)`` rows, stage 0; ``labels``:
        ``(N,)``, last stage)."""
        self.stats = stats = StepStats()
        t0 = time.perf_counter()
        self.stage.train()
        self.optimizer.zero_grad(set_to_none=True)
        total = sum(int(mb.split["train"].size) for mb in mbs)
        saved = []
        for m, mb in enumerate(mbs):
            h = self._input(mb, x, m)
            if not self.stage.first:
                h.requires_grad_(True)
            out = self.stage(h, mb.graph, key=(epoch, m))
            if self.stage.last:
                out = self._loss(out, mb, labels, total)
            else:
                self._send(out, self.rank + 1, m)
            saved.append((h, out))
        for m in reversed(range(len(mbs))):
            h, out = saved[m]
            if self.stage.last:
                out.backward()
            else:
                out.backward(self._recv(mbs[m].num_nodes, self.rank + 1, m))
            if not self.stage.first:
                self._send(h.grad, self.rank - 1, m)
            saved[m] = None
        self._finish_sends()
        self.optimizer.step()
        stats.seconds = time.perf_counter() - t0
        return stats

    def _loss(self, logits: torch.Tensor, mb: Microbatch, labels: torch.Tensor,
              total: int) -> torch.Tensor:
        train = torch.from_numpy(mb.split["train"])
        out = logits[train]
        target = labels[torch.from_numpy(mb.nodes[mb.split["train"]])]
        loss = F.cross_entropy(out, target, reduction="sum") / max(total, 1)
        self.stats.loss_sum += float(loss.detach()) * max(total, 1)
        self.stats.correct += int((out.argmax(-1) == target).sum())
        self.stats.seen += int(train.numel())
        return loss

    # -- inference -----------------------------------------------------------------------------
    @torch.no_grad()
    def forward_only(self, mb: Microbatch, x: torch.Tensor | None) -> torch.Tensor | None:
        """The pipeline's logits of ``mb`` (last stage; ``None`` elsewhere), no dropout."""
        self.stage.eval()
        out = self.stage(self._input(mb, x, 0), mb.graph, key=(0, 0))
        if self.stage.last:
            return out
        self._send(out, self.rank + 1, 0)
        self._finish_sends()
        return None


def split_accuracies(logits: torch.Tensor, mb: Microbatch, labels: np.ndarray) -> dict[str, float]:
    """``{split: accuracy}`` over ``mb``'s nodes of each split."""
    pred = logits.argmax(-1).numpy()
    truth = labels[mb.nodes]
    return {name: float((pred[pos] == truth[pos]).mean()) if pos.size else float("nan")
            for name, pos in mb.split.items()}
