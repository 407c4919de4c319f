"""The Centrality-guided Lazy Tuner (UniTG, thesis §5.6): early-exit LM fine-tuning.

- Nodes are put into ``G = 4`` degree-centrality groups C1..C4 (lowest first) by
  :func:`graphpipe.ops.features.degree.degree_groups`: ``"quartile"`` (equal-frequency
  on the strict-less CDF, the default) or ``"equal-width"`` (on the degree).
- The LM gets an exit after ``ceil(i * L / G)`` of its ``L`` layers for ``i = 1..G``
  (:func:`exit_layers`; 3, 6, 9, 12 for 12 layers); exit ``i`` is a linear layer φ_i
  to the embedding size, and one classifier on the embedding is shared by the exits
  [R: the thesis names φ_i only; a shared head keeps the embeddings of all exits in one
  space, which the GNN consumes side by side].
- A node of group C_i is trained and encoded at exit ``i`` only, so its deeper layers
  are never run (the LM's layer list is cut, :class:`~graphpipe.train.text.lm.LMEncoder`).
- **Batches** [R: the thesis does not say]: a batch holds nodes of one group, so it runs
  exactly that group's depth. Per epoch the batches run from C4 down to C1
  (``order="descending"``, what "near the end of an epoch only a few layers are
  exploited" implies) or shuffled (``order="shuffled"``).
- **Loss** (Eq. 5.1): ``L = (1/|G|) Σ_i L_i^exit``, the plain mean over the groups
  present of each exit's mean loss. With one group per batch this is reached by
  weighting a batch of group ``i`` by ``n / (|G| · |C_i|)`` (``n`` train nodes,
  ``|C_i|`` of them in group ``i``): summed over an epoch the gradients are those of
  ``(n / B) · L`` (``B`` the batch size), whatever the group sizes.

>>> exit_layers(12), exit_layers(4), exit_layers(6)
([3, 6, 9, 12], [1, 2, 3, 4], [2, 3, 5, 6])
>>> eq51_weights(np.array([0, 0, 0, 1, 3, 3]), 4).tolist()  # groups C1 x3, C2 x1, C4 x2
[0.6666666666666666, 2.0, 0.0, 1.0]
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import torch
from torch import nn

from graphpipe.train.text.lm import LMEncoder

__all__ = ["GROUPINGS", "ORDERS", "EarlyExitLM", "GroupBatches", "eq51_weights", "exit_layers",
           "node_groups"]

GROUPINGS = ("quartile", "equal-width")
ORDERS = ("descending", "shuffled")


def exit_layers(num_layers: int, groups: int = 4) -> list[int]:
    """Encoder depth of each exit: ``ceil(i * L / G)``, ``i = 1..G``."""
    if num_layers < 1 or groups < 1:
        raise ValueError(f"need num_layers >= 1 and groups >= 1 (got {num_layers}, {groups})")
    return [math.ceil(i * num_layers / groups) for i in range(1, groups + 1)]


def node_groups(degrees: np.ndarray, grouping: str = "quartile", groups: int = 4) -> np.ndarray:
    """int8 ``(N,)`` centrality group 0..G-1 of every node (0 = C1, the least central)."""
    from graphpipe.ops.features.degree import degree_groups

    if grouping not in GROUPINGS:
        raise ValueError(f"'grouping' must be one of {', '.join(GROUPINGS)} (got {grouping!r})")
    return degree_groups(np.asarray(degrees), method=grouping, bins=groups)


def eq51_weights(train_groups: np.ndarray, groups: int) -> np.ndarray:
    """float64 ``(G,)`` batch-loss weight of each group (module docstring; 0 when empty)."""
    counts = np.bincount(np.asarray(train_groups, dtype=np.int64), minlength=groups)[:groups]
    present = int((counts > 0).sum())
    out = np.zeros(groups, dtype=np.float64)
    nz = counts > 0
    out[nz] = counts.sum() / (present * counts[nz])
    return out


class EarlyExitLM(nn.Module):
    """An :class:`LMEncoder` with ``groups`` exits (φ_i: hidden -> ``emb_dim``) and one
    shared classifier (``emb_dim`` -> ``num_classes``). ``groups=1``: plain fine-tuning
    (one exit after all layers)."""

    def __init__(self, encoder: LMEncoder, emb_dim: int, num_classes: int, *, groups: int = 4,
                 dropout: float = 0.1):
        super().__init__()
        self.encoder = encoder
        self.depths = exit_layers(encoder.num_layers, groups)
        self.exits = nn.ModuleList(nn.Linear(encoder.hidden, emb_dim) for _ in range(groups))
        self.head = nn.Linear(emb_dim, num_classes)
        self.dropout = nn.Dropout(dropout)
        self.emb_dim, self.num_classes, self.groups = emb_dim, num_classes, groups

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                exit: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(embedding (B, emb_dim), logits (B, C))`` of a batch leaving at ``exit``
        (0-based), after ``self.depths[exit]`` encoder layers."""
        hidden = self.encoder(input_ids, attention_mask, depth=self.depths[exit])
        emb = self.exits[exit](hidden)
        return emb, self.head(self.dropout(emb))


class GroupBatches:
    """The LM's epoch plan: ``(group, node IDs)`` batches of one group each, in the
    order ``order`` (module docstring), shuffled by ``seed`` and the epoch."""

    def __init__(self, nodes: np.ndarray, groups: np.ndarray, batch_size: int, *,
                 order: str = "descending", seed: int = 0, num_groups: int = 4):
        if order not in ORDERS:
            raise ValueError(f"'order' must be one of {', '.join(ORDERS)} (got {order!r})")
        self.nodes = np.asarray(nodes, dtype=np.int64)
        self.groups = np.asarray(groups, dtype=np.int64)[self.nodes]
        self.batch_size, self.order, self.seed, self.epoch = int(batch_size), order, seed, 0
        self.num_groups = num_groups
        self.weights = eq51_weights(self.groups, num_groups)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def plan(self) -> list[tuple[int, np.ndarray]]:
        rng = np.random.default_rng([self.seed, self.epoch, 0x6C617A79])
        out: list[tuple[int, np.ndarray]] = []
        for g in range(self.num_groups - 1, -1, -1):
            members = rng.permutation(self.nodes[self.groups == g])
            out += [(g, members[s:s + self.batch_size])
                    for s in range(0, members.size, self.batch_size)]
        if self.order == "shuffled":
            out = [out[i] for i in rng.permutation(len(out))]
        return out

    def __len__(self) -> int:
        counts = np.bincount(self.groups, minlength=self.num_groups)
        return int(sum(math.ceil(c / self.batch_size) for c in counts))

    def __iter__(self) -> Iterator[tuple[int, np.ndarray]]:
        return iter(self.plan())

    def compute_fraction(self, depths: list[int], num_layers: int) -> float:
        """Expected LM compute against full depth, by depth: ``Σ |C_i| d_i / (n L)``."""
        counts = np.bincount(self.groups, minlength=self.num_groups)
        return float(sum(c * d for c, d in zip(counts, depths)) / max(1, counts.sum() * num_layers))

