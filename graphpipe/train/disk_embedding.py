"""Learnable embeddings beyond RAM: :class:`DiskEmbedding` keeps a ``(num_rows, dim)``
float32 table (and its Adam moments) in files, memory-mapped, and updates only the rows
a batch used, in place, with PyTorch's ``SparseAdam`` rule. What MAG240M's featureless
types need (122M authors x 64 = 31 GB as a dense ``nn.Embedding``, four times that with
its gradient and Adam's two moments).

Per batch, :meth:`DiskEmbedding.forward` copies the rows of ``ids`` out of the table into
a leaf tensor (the only rows in process memory) that the model differentiates; after
``loss.backward()``, :meth:`DiskEmbedding.step` applies SparseAdam to those rows (the
moments of the rows in the batch only; bias correction by this table's step count) and
writes them back. A row the batch did not use is never read or written, so memory is
the page cache the kernel keeps of the maps (reclaimable, and charged to a cgroup cap
like any file page) plus the batch's rows.

The rule equals ``torch.optim.SparseAdam`` on an ``nn.Embedding(sparse=True)`` given the
same initial table (tested). Rows are initialised ``N(0, 1)`` as ``nn.Embedding`` does,
from ``seed``, a block at a time (never the whole table in memory).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import numpy as np
import torch
from torch import nn

__all__ = ["DiskEmbedding", "step_disk_embeddings"]

INIT_BLOCK_ROWS = 1 << 16


class DiskEmbedding(nn.Module):
    """``(num_rows, dim)`` embedding rows in files under ``directory``, trained sparsely.

    Args:
        num_rows, dim: the table's shape.
        directory: where ``weight.f32``, ``exp_avg.f32``, ``exp_avg_sq.f32`` go (created);
            None: a temporary directory removed with this object.
        lr, betas, eps: SparseAdam's settings.
        seed: the initial rows' random seed.

    >>> emb = DiskEmbedding(1000, 4, lr=0.1, seed=0)
    >>> ids = torch.tensor([3, 7])
    >>> before = emb(ids).detach().clone()
    >>> emb(ids).sum().backward(); emb.step()          # one SparseAdam step on rows 3 and 7
    >>> torch.allclose(emb.rows(ids), before - 0.1), emb.rows(torch.tensor([5])).shape
    (True, torch.Size([1, 4]))
    """

    def __init__(self, num_rows: int, dim: int, directory: str | Path | None = None, *, lr: float = 0.01,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8, seed: int = 0):
        super().__init__()
        if num_rows < 1 or dim < 1:
            raise ValueError(f"'num_rows' and 'dim' must be positive (got {num_rows}, {dim})")
        self.num_rows, self.dim = int(num_rows), int(dim)
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self._tmp = tempfile.TemporaryDirectory(prefix="graphpipe-embed-") if directory is None else None
        self.directory = Path(self._tmp.name if directory is None else directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        shape = (self.num_rows, self.dim)
        self.weight = np.lib.format.open_memmap(self.directory / "weight.npy", "w+", np.float32, shape)
        self.exp_avg = np.lib.format.open_memmap(self.directory / "exp_avg.npy", "w+", np.float32, shape)
        self.exp_avg_sq = np.lib.format.open_memmap(self.directory / "exp_avg_sq.npy", "w+", np.float32, shape)
        for start in range(0, self.num_rows, INIT_BLOCK_ROWS):  # the moments start at 0 (sparse file)
            count = min(INIT_BLOCK_ROWS, self.num_rows - start)
            rng = np.random.default_rng([seed, start])
            self.weight[start:start + count] = rng.standard_normal((count, self.dim), dtype=np.float32)
        self.steps = 0
        self._pending: list[tuple[np.ndarray, torch.Tensor]] = []

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        """A copy of the rows of ``ids`` (no gradient)."""
        return torch.from_numpy(self.weight[ids.cpu().numpy().astype(np.int64)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """float32 ``(len(ids), dim)`` rows of ``ids``; with gradients enabled (training)
        they are a leaf whose gradient :meth:`step` applies."""
        idx = ids.cpu().numpy().astype(np.int64)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= self.num_rows):
            raise IndexError(f"embedding ids outside [0, {self.num_rows})")
        rows = torch.from_numpy(self.weight[idx])
        if torch.is_grad_enabled():
            rows.requires_grad_(True)
            self._pending.append((idx, rows))
        return rows.to(ids.device)

    @torch.no_grad()
    def step(self) -> None:
        """SparseAdam on the rows used since the last step (their gradients summed per
        row), written back to the table; then forget them."""
        pending, self._pending = self._pending, []
        used = [(idx, rows.grad) for idx, rows in pending if rows.grad is not None]
        if not used:
            return
        idx = np.concatenate([i for i, _ in used])
        grad = torch.cat([g.detach().cpu() for _, g in used]).numpy()
        uniq, inverse = np.unique(idx, return_inverse=True)
        g = np.zeros((uniq.shape[0], self.dim), dtype=np.float32)
        np.add.at(g, inverse.reshape(-1), grad)
        self.steps += 1
        b1, b2 = self.betas
        m = self.exp_avg[uniq] * b1 + (1 - b1) * g
        v = self.exp_avg_sq[uniq] * b2 + (1 - b2) * g * g
        self.exp_avg[uniq], self.exp_avg_sq[uniq] = m, v
        step_size = self.lr * math.sqrt(1 - b2 ** self.steps) / (1 - b1 ** self.steps)
        self.weight[uniq] = self.weight[uniq] - step_size * m / (np.sqrt(v) + self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_rows}, {self.dim}, directory={str(self.directory)!r}"


def step_disk_embeddings(model: nn.Module) -> int:
    """:meth:`DiskEmbedding.step` of every disk embedding in ``model``; how many there were."""
    tables = [m for m in model.modules() if isinstance(m, DiskEmbedding)]
    for table in tables:
        table.step()
    return len(tables)
