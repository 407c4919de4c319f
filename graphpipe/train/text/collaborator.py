"""The Modality Collaborator (UniTG, thesis §5.7): the GNN's input features are replaced
by LM embeddings every Δt GNN epochs.

- :class:`SyncSchedule`: ``F_j = 0.8 F_{j-1} + 0.2 L_j`` (``F_1 = L_1``) over the GNN's
  training loss; a counter of consecutive epochs with ``F_j < F_{j-1}`` (reset to 0
  otherwise, and after a step [R]); when it reaches ``patience`` (20), Δt steps down
  through ``{0.3, 0.2, 0.1, 0.02}·J`` (``max(1, round(f·J))``), never up. Epoch ``j``
  (1-based) syncs when ``j - last_sync >= Δt`` [R], so with ``J = 1000`` and a loss that
  never falls the syncs are at 300, 600 and 900.
- :class:`GnnInputs`: the GNN's ``(N, d)`` input. It starts as the raw features through
  a fixed projection to ``d`` (identity when they are ``d`` wide; else a seeded random
  orthonormal map) [R: the thesis needs equal widths and does not say how]; a sync
  replaces the rows of the nodes the LM encoded, the others keep their projected raw
  features (a node without text is never encoded).

>>> s = SyncSchedule(1000)
>>> [j for j in range(1, 1001) if s.record(j, 1.0)]  # a flat loss: F never decreases
[300, 600, 900]
>>> s = SyncSchedule(1000)
>>> deltas = [(s.record(j, 1.0 / j), s.delta)[1] for j in range(1, 70)]
>>> deltas[19], deltas[20], deltas[40], deltas[60]
(300, 200, 100, 20)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["FRACTIONS", "GnnInputs", "SyncSchedule"]

FRACTIONS = (0.3, 0.2, 0.1, 0.02)


class SyncSchedule:
    """When the GNN's inputs are refreshed from the LM (module docstring)."""

    def __init__(self, total_epochs: int, *, fractions: tuple[float, ...] = FRACTIONS,
                 patience: int = 20, decay: float = 0.8):
        if total_epochs < 1 or patience < 1 or not fractions:
            raise ValueError("need total_epochs >= 1, patience >= 1 and at least one fraction")
        self.deltas = [max(1, round(f * total_epochs)) for f in fractions]
        self.patience, self.decay = patience, decay
        self.level, self.count, self.last_sync = 0, 0, 0
        self.smoothed: float | None = None
        self.steps: list[int] = []   # epochs at which Δt stepped down

    @property
    def delta(self) -> int:
        return self.deltas[self.level]

    def record(self, epoch: int, loss: float) -> bool:
        """Record epoch ``epoch``'s (1-based) GNN loss; whether this epoch syncs."""
        previous = self.smoothed
        self.smoothed = loss if previous is None else self.decay * previous + (1 - self.decay) * loss
        if previous is not None and self.smoothed < previous:
            self.count += 1
            if self.count >= self.patience and self.level < len(self.deltas) - 1:
                self.level, self.count = self.level + 1, 0
                self.steps.append(epoch)
        else:
            self.count = 0
        if epoch - self.last_sync >= self.delta:
            self.last_sync = epoch
            return True
        return False

    def state(self) -> dict[str, Any]:
        return {"level": self.level, "count": self.count, "last_sync": self.last_sync,
                "smoothed": self.smoothed, "steps": list(self.steps)}

    def load(self, state: dict[str, Any]) -> None:
        self.level, self.count = int(state["level"]), int(state["count"])
        self.last_sync, self.smoothed = int(state["last_sync"]), state["smoothed"]
        self.steps = list(state["steps"])


class GnnInputs:
    """The GNN's input rows: projected raw features, LM embeddings where encoded."""

    def __init__(self, raw: np.ndarray, dim: int, *, seed: int = 0,
                 device: str | torch.device = "cpu"):
        raw = torch.tensor(np.asarray(raw, dtype=np.float32))
        self.projection = self._projection(raw.shape[1], dim, seed)
        self.base = raw @ self.projection if self.projection is not None else raw.clone()
        self.base = self.base.to(device)
        self.x = self.base.clone()
        self.encoded = torch.zeros(raw.shape[0], dtype=torch.bool, device=device)

    @staticmethod
    def _projection(width: int, dim: int, seed: int) -> torch.Tensor | None:
        if width == dim:
            return None
        gen = torch.Generator().manual_seed(int(seed) + 0x70726F6A)
        q, _ = torch.linalg.qr(torch.randn(max(width, dim), min(width, dim), generator=gen))
        return q if width >= dim else q.T.contiguous()

    def replace(self, nodes: torch.Tensor, embeddings: torch.Tensor) -> None:
        """Rows ``nodes`` become ``embeddings`` (``(len(nodes), dim)``)."""
        nodes = nodes.to(self.x.device)
        self.x[nodes] = embeddings.to(self.x.device, self.x.dtype)
        self.encoded[nodes] = True
