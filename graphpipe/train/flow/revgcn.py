"""Deep reversible GCN (RevGCN, Li et al. 2021 "Training Graph Neural Networks with 1000
Layers"), built to be cut into pipeline stages (UniTG's Flow Parallelism, thesis §5.4).

The model is ``input Linear (in → hidden)``, ``num_layers`` reversible blocks, and a head
``LayerNorm → ReLU → Linear (hidden → out)``. A block splits its rows' channels into two
halves ``x1, x2`` and computes ``y1 = x1 + F1(x2)``, ``y2 = x2 + F2(y1)`` (RevGNN's
grouped reversible residual with 2 groups), ``F(h) = GCNConv(dropout(relu(LayerNorm(h))))``
on the graph with one self loop per node. [R: autograd keeps the activations; the paper's
recomputation from the outputs saves memory, not arithmetic, and is left out.]

- Stages: :meth:`RevGCN.stage` returns stage ``s`` of ``P`` (:func:`.schedule.stage_layers`
  of the blocks; stage 0 also holds the input Linear, the last stage the head). Every
  rank builds the whole model from the same seed, so a stage's weights are the
  one-process model's.
- Dropout is keyed: the mask of block ``l`` on microbatch ``m`` in epoch ``e`` depends on
  ``(seed, e, m, l)`` only, so one process and ``P`` stages draw the same masks.
- LayerNorm, not BatchNorm: a node's output never depends on which microbatch it is in.

>>> import torch
>>> from graphpipe.train.layers import LocalGraph
>>> g = LocalGraph(torch.tensor([0, 2, 4, 6]), torch.tensor([0, 1, 1, 2, 2, 0]), 3, 3)
>>> _ = torch.manual_seed(0)
>>> model = RevGCN(4, 8, 2, 4, dropout=0.2)
>>> x = torch.randn(3, 4)
>>> whole = model.stage(0, 1)(x, g, key=(0, 0))
>>> halves = model.stage(1, 2)(model.stage(0, 2)(x, g, key=(0, 0)), g, key=(0, 0))
>>> whole.shape, torch.equal(whole, halves)
(torch.Size([3, 2]), True)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from graphpipe.ops.dropout import relu_dropout
from graphpipe.train.flow.schedule import stage_layers
from graphpipe.train.layers import GCNConv

__all__ = ["RevBlock", "RevGCN", "Stage"]


def _keyed_seed(*key: int) -> int:
    """A 63-bit seed from integers (SplitMix-style mixing; the same on every rank)."""
    h = 0x9E3779B97F4A7C15
    for k in key:
        h = (h ^ (int(k) + 0x632BE59BD9B4E019 + (h << 6) + (h >> 2))) & 0xFFFFFFFFFFFFFFFF
        h = (h * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    return h >> 1


class _Branch(nn.Module):
    """``GCNConv(dropout(relu(LayerNorm(h))))`` on a graph that has its self loops."""

    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.conv = GCNConv(width, width, add_self_loops=False)

    def forward(self, h: torch.Tensor, graph: Any, p: float, training: bool) -> torch.Tensor:
        return self.conv(relu_dropout(self.norm(h), p, training), graph)


class RevBlock(nn.Module):
    """One grouped reversible residual block (2 groups) of width ``hidden`` (even)."""

    def __init__(self, hidden: int):
        super().__init__()
        if hidden % 2:
            raise ValueError(f"RevGCN: 'hidden' must be even (got {hidden})")
        self.f1, self.f2 = _Branch(hidden // 2), _Branch(hidden // 2)

    def forward(self, x: torch.Tensor, graph: Any, p: float, training: bool, seed: int
                ) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=1)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            y1 = x1 + self.f1(x2, graph, p, training)
            y2 = x2 + self.f2(y1, graph, p, training)
        return torch.cat([y1, y2], dim=1)


class RevGCN(nn.Module):
    """The whole model (module docstring); ``forward`` runs every stage in one process."""

    name = "revgcn"
    uses_graph = True

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, *,
                 dropout: float = 0.2, seed: int = 0):
        super().__init__()
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"RevGCN: 'dropout' must be in [0, 1) (got {dropout!r})")
        self.in_dim, self.hidden, self.out_dim = in_dim, hidden, out_dim
        self.num_layers, self.dropout, self.seed = num_layers, float(dropout), int(seed)
        self.inp = nn.Linear(in_dim, hidden)
        self.blocks = nn.ModuleList(RevBlock(hidden) for _ in range(num_layers))
        self.head = nn.Sequential(nn.LayerNorm(hidden), nn.ReLU(), nn.Linear(hidden, out_dim))
        self.config = {"name": "revgcn", "in_dim": in_dim, "hidden": hidden, "out_dim": out_dim,
                       "num_layers": num_layers, "dropout": self.dropout}

    def stage(self, index: int, stages: int) -> Stage:
        """Stage ``index`` of ``stages`` (shares this model's parameters)."""
        layers = stage_layers(self.num_layers, stages)[index]
        return Stage(self, layers, first=index == 0, last=index == stages - 1)

    def forward(self, x: torch.Tensor, graph: Any, key: tuple[int, int] = (0, 0)) -> torch.Tensor:
        """Logits ``(n, out_dim)`` of the ``n`` nodes of ``graph`` (rows ``x``)."""
        return self.stage(0, 1)(x, graph, key=key)


class Stage(nn.Module):
    """Consecutive blocks of a :class:`RevGCN` (with its input Linear when ``first``,
    its head when ``last``): ``(n, in)`` → ``(n, out)``."""

    def __init__(self, model: RevGCN, layers: range, *, first: bool, last: bool):
        super().__init__()
        self.layers, self.first, self.last = layers, first, last
        self.seed, self.dropout = model.seed, model.dropout
        self.inp = model.inp if first else None
        self.blocks = nn.ModuleList(model.blocks[i] for i in layers)
        self.head = model.head if last else None
        self.in_dim = model.in_dim if first else model.hidden
        self.out_dim = model.out_dim if last else model.hidden

    def forward(self, h: torch.Tensor, graph: Any, *, key: tuple[int, int]) -> torch.Tensor:
        """``key = (epoch, microbatch)`` picks the dropout masks."""
        if self.inp is not None:
            h = self.inp(h)
        for layer, block in zip(self.layers, self.blocks):
            h = block(h, graph, self.dropout, self.training,
                      _keyed_seed(self.seed, key[0], key[1], layer))
        return self.head(h) if self.head is not None else h
