"""Graph transformers on :class:`graphpipe.loaders.cluster.SequenceBatch`: Graphormer-slim
and GT (TorchGT digest §6).

Both take a batch of ``B`` sequences of ``S`` positions and run every layer on the
flattened ``(B·S, hidden)`` rows; attention follows the batch's pattern in the mode of
the step (:mod:`graphpipe.train.sequence_attention`: ``"sparse"``, ``"cluster-sparse"``,
``"dense"``). ``forward(batch, attention=None, context=None)`` returns

- ``level="node"``: logits ``(B, S, out_dim)`` for every position (token and padding
  included: the loss ignores them through ``y == -100``);
- ``level="graph"``: logits ``(B, out_dim)`` per sequence.

:class:`GraphormerSlim` (Ying et al. 2021; TorchGT's GPH_Slim: 4 layers, hidden 64,
8 heads, FFN 64): pre-LN layers ``h + drop(MHA(LN h))``, ``h + drop(FFN(LN h))`` with
FFN Linear-GELU-Linear, a final LN; input ``Linear(x) + z_in[deg_in] + z_out[deg_out]``
(degree index ``deg + 1`` at real nodes, 0 at token/padding), a learned global-token
embedding at position 0, and the spatial bias: one learned scalar per head and bias
bucket (self / edge / far / token virtual distance; SPD buckets in dense mode when the
loader provides them), shared by all layers. Node head: ``Linear(hidden, C)`` per
position; graph head: ``Linear(hidden, C)`` on the global token (masked mean without
one). Init as the artifact: Linear ``N(0, 0.02/sqrt(num_layers))``, biases 0,
embeddings ``N(0, 0.02)``.

:class:`GT` (Dwivedi & Bresson 2021): input ``Linear(x)``; post-LN layers
``LN(h + drop(O(MHA h)))``, ``LN(h + drop(FFN h))`` with FFN ``hidden → 2·hidden``
ReLU ``→ hidden``; readout MLP ``hidden → hidden/2 → hidden/4 → C`` (ReLU) per position
(node level) or on the masked mean (graph level). No global token, no bias.

Attention dropout is not applied (the sparse kernels have none).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.train.sequence_attention import (
    ATTENTION_MODES,
    AttentionContext,
    attend,
    make_context,
    score_bias,
)

__all__ = ["GT", "GraphormerSlim", "SequenceModel"]

LEVELS = ("node", "graph")


def _positive(model: str, name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{model}: '{name}' must be a positive integer (got {value!r})")
    return int(value)


class SelfAttention(nn.Module):
    """Multi-head self-attention on flattened rows: ``(N, d) → (N, d)``."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def forward(self, h: torch.Tensor, ctx: AttentionContext,
                bias: torch.Tensor | None = None) -> torch.Tensor:
        """``bias``: the step's :func:`score_bias` (shared by all layers)."""
        n = h.shape[0]
        q, k, v = self.qkv(h).view(n, 3, self.heads, self.head_dim).unbind(1)
        o = attend(q.contiguous(), k.contiguous(), v.contiguous(), ctx, bias)
        return self.out(o.reshape(n, -1))


class SequenceModel(nn.Module):
    """Common part of the graph transformers: argument checks, context building, heads."""

    name = "sequence"
    uses_graph = True
    sequence_model = True
    has_bias = False
    uses_global_token = False

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, heads: int,
                 dropout: float, attention: str, level: str, max_dist: int):
        super().__init__()
        cls = type(self).__name__
        self.in_dim = _positive(cls, "in_dim", in_dim)
        self.hidden = _positive(cls, "hidden", hidden)
        self.out_dim = _positive(cls, "out_dim", out_dim)
        self.num_layers = _positive(cls, "num_layers", num_layers)
        self.heads = _positive(cls, "heads", heads)
        if hidden % heads:
            raise ValueError(f"{cls}: 'hidden' must be a multiple of heads={heads} (got {hidden})")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"{cls}: 'dropout' must be in [0, 1) (got {dropout!r})")
        if attention not in ATTENTION_MODES:
            raise ValueError(f"{cls}: 'attention' must be one of {', '.join(ATTENTION_MODES)} "
                             f"(got {attention!r})")
        if level not in LEVELS:
            raise ValueError(f"{cls}: 'level' must be 'node' or 'graph' (got {level!r})")
        if isinstance(max_dist, bool) or not isinstance(max_dist, int) or max_dist < 2:
            raise ValueError(f"{cls}: 'max_dist' must be an integer >= 2 (got {max_dist!r})")
        self.dropout, self.attention, self.level = float(dropout), attention, level
        self.max_dist = max_dist
        self.config: dict[str, Any] = {}

    def context(self, batch: Any, attention: str | None = None) -> AttentionContext:
        """The attention context of ``batch`` in mode ``attention`` (default: the model's)."""
        return make_context(batch, attention or self.attention, max_dist=self.max_dist,
                            with_bias=self.has_bias)

    def _check_batch(self, batch: Any) -> None:
        x = batch.x
        if x.dim() != 3 or x.shape[2] != self.in_dim:
            raise ValueError(f"{type(self).__name__}: batch.x must be (B, S, {self.in_dim}) "
                             f"(got {tuple(x.shape)})")

    def _pool(self, h: torch.Tensor, batch: Any) -> torch.Tensor:
        """Masked mean of ``h (B, S, d)`` over real positions: ``(B, d)``."""
        m = batch.mask.to(h.dtype)[..., None]
        return (h * m).sum(1) / m.sum(1).clamp_min(1.0)


class GraphormerSlim(SequenceModel):
    """Graphormer with degree encodings, a global token and edge-kind spatial bias
    (module docstring). Defaults: GPH_Slim (4 layers, 8 heads, FFN width 64)."""

    name = "graphormer"
    has_bias = True
    uses_global_token = True

    def __init__(self, in_dim: int, hidden: int = 64, out_dim: int = 2, num_layers: int = 4, *,
                 heads: int = 8, ffn_dim: int | None = 64, dropout: float = 0.1,
                 input_dropout: float = 0.1, max_degree: int = 512, max_dist: int = 8,
                 attention: str = "sparse", level: str = "node", spatial_bias: bool = True):
        super().__init__(in_dim, hidden, out_dim, num_layers, heads, dropout, attention, level,
                         max_dist)
        self.max_degree = _positive("GraphormerSlim", "max_degree", max_degree)
        ffn = hidden if ffn_dim is None else _positive("GraphormerSlim", "ffn_dim", ffn_dim)
        if not 0.0 <= float(input_dropout) < 1.0:
            raise ValueError(f"GraphormerSlim: 'input_dropout' must be in [0, 1) (got {input_dropout!r})")
        self.input_dropout = float(input_dropout)
        self.has_bias = bool(spatial_bias)
        self.input = nn.Linear(in_dim, hidden)
        self.in_degree = nn.Embedding(max_degree + 2, hidden)
        self.out_degree = nn.Embedding(max_degree + 2, hidden)
        self.token = nn.Parameter(torch.zeros(hidden))
        self.spatial = nn.Embedding(max_dist + 2, heads) if self.has_bias else None
        self.attn_norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.attns = nn.ModuleList(SelfAttention(hidden, heads) for _ in range(num_layers))
        self.ffn_norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.ffns = nn.ModuleList(nn.Sequential(nn.Linear(hidden, ffn), nn.GELU(),
                                                nn.Linear(ffn, hidden)) for _ in range(num_layers))
        self.final_norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, out_dim)
        self._init_weights()

    def _init_weights(self) -> None:
        std = 0.02 / math.sqrt(self.num_layers)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, std)
                nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                nn.init.normal_(module.weight, 0.0, 0.02)
        nn.init.normal_(self.token, 0.0, 0.02)

    def _degree_index(self, degree: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.where(mask, degree.clamp(0, self.max_degree) + 1, torch.zeros_like(degree))

    def forward(self, batch: Any, attention: str | None = None,
                context: AttentionContext | None = None) -> torch.Tensor:
        """Logits ``(B, S, C)`` (node level) or ``(B, C)`` (graph level)."""
        self._check_batch(batch)
        ctx = context if context is not None else self.context(batch, attention)
        b, s = batch.x.shape[:2]
        dtype = self.input.weight.dtype
        h = self.input(batch.x.to(dtype))
        h = h + self.in_degree(self._degree_index(batch.in_degree, batch.mask))
        h = h + self.out_degree(self._degree_index(batch.out_degree, batch.mask))
        if batch.global_token:
            h = torch.cat([self.token.expand(b, 1, -1), h[:, 1:]], 1)
        h = F.dropout(h, self.input_dropout, self.training).reshape(b * s, -1)
        table = self.spatial.weight if self.spatial is not None else None
        bias = score_bias(ctx, table, h.dtype)
        for norm1, attn, norm2, ffn in zip(self.attn_norms, self.attns, self.ffn_norms, self.ffns):
            h = h + F.dropout(attn(norm1(h), ctx, bias), self.dropout, self.training)
            h = h + F.dropout(ffn(norm2(h)), self.dropout, self.training)
        h = self.final_norm(h).view(b, s, -1)
        if self.level == "node":
            return self.head(h)
        pooled = h[:, 0] if batch.global_token else self._pool(h, batch)
        return self.head(pooled)


class GT(SequenceModel):
    """Dwivedi–Bresson graph transformer (module docstring). Defaults: TorchGT's GT
    (4 layers, hidden 128, 8 heads)."""

    name = "gt"

    def __init__(self, in_dim: int, hidden: int = 128, out_dim: int = 2, num_layers: int = 4, *,
                 heads: int = 8, dropout: float = 0.1, attention: str = "sparse",
                 level: str = "node", max_dist: int = 8):
        super().__init__(in_dim, hidden, out_dim, num_layers, heads, dropout, attention, level,
                         max_dist)
        if hidden < 4:
            raise ValueError(f"GT: 'hidden' must be >= 4 for the readout (got {hidden})")
        self.input = nn.Linear(in_dim, hidden)
        self.attns = nn.ModuleList(SelfAttention(hidden, heads) for _ in range(num_layers))
        self.attn_norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.ffns = nn.ModuleList(nn.Sequential(nn.Linear(hidden, 2 * hidden), nn.ReLU(),
                                                nn.Linear(2 * hidden, hidden))
                                  for _ in range(num_layers))
        self.ffn_norms = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(num_layers))
        self.readout = nn.Sequential(nn.Linear(hidden, hidden // 2), nn.ReLU(),
                                     nn.Linear(hidden // 2, hidden // 4), nn.ReLU(),
                                     nn.Linear(hidden // 4, out_dim))

    def forward(self, batch: Any, attention: str | None = None,
                context: AttentionContext | None = None) -> torch.Tensor:
        """Logits ``(B, S, C)`` (node level) or ``(B, C)`` (graph level)."""
        self._check_batch(batch)
        ctx = context if context is not None else self.context(batch, attention)
        b, s = batch.x.shape[:2]
        h = self.input(batch.x.to(self.input.weight.dtype)).reshape(b * s, -1)
        bias = score_bias(ctx, None, h.dtype)
        for attn, norm1, ffn, norm2 in zip(self.attns, self.attn_norms, self.ffns, self.ffn_norms):
            h = norm1(h + F.dropout(attn(h, ctx, bias), self.dropout, self.training))
            h = norm2(h + F.dropout(ffn(h), self.dropout, self.training))
        h = h.view(b, s, -1)
        if self.level == "node":
            return self.readout(h)
        return self.readout(self._pool(h, batch))
