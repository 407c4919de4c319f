"""Node-classification models on sampled blocks, and the :func:`build_model` registry.

A graph model with ``num_layers`` layers takes a :class:`graphpipe.loaders.MiniBatch`
whose ``blocks`` has ``num_layers`` entries (``blocks[0]`` the outermost/input layer):
layer ``l`` consumes ``blocks[l]`` and ``batch.x`` (one row per ``n_id``) and the model
returns logits ``(batch_size, out_dim)`` for the seeds. Between layers: activation,
then dropout. :class:`MLP` ignores the graph (the baseline every graph model is
compared with).

Every model has ``config`` (the :func:`build_model` arguments, saved in checkpoints)
and ``apply_layer(l, x, block)`` (one layer with its activation, used by layer-wise
full-neighbour inference).
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.ops.dropout import relu_dropout
from graphpipe.train.graph_transformer import GT, GraphormerSlim
from graphpipe.train.layers import GATConv, GCNConv, GINConv, SAGEConv

__all__ = ["GAT", "GCN", "GIN", "MLP", "MODELS", "SEQUENCE_MODELS", "BlockModel", "GraphSAGE",
           "build_model"]


def _check_dims(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int,
                dropout: float) -> None:
    for arg, value in (("in_dim", in_dim), ("hidden", hidden), ("out_dim", out_dim),
                       ("num_layers", num_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: '{arg}' must be a positive integer (got {value!r})")
    if not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"{name}: 'dropout' must be in [0, 1) (got {dropout!r})")


def _features(batch: Any, dtype: torch.dtype) -> torch.Tensor:
    x = getattr(batch, "x", None)
    if x is None:
        raise ValueError("the batch has no features ('x' is None): build the loader with features=True")
    return x if x.dtype == dtype else x.to(dtype)


class BlockModel(nn.Module):
    """Base of the graph models: a stack of ``convs`` applied block by block.

    Subclasses fill ``self.convs`` (one per layer) and may override
    :meth:`activation_dropout`.
    """

    name = "block"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float):
        super().__init__()
        _check_dims(type(self).__name__, in_dim, hidden, out_dim, num_layers, dropout)
        self.in_dim, self.hidden, self.out_dim = in_dim, hidden, out_dim
        self.num_layers = num_layers
        self.dropout = float(dropout)
        self.convs = nn.ModuleList()
        self.config: dict[str, Any] = {}

    uses_graph = True

    def layer_dims(self) -> list[tuple[int, int]]:
        """``(in, out)`` of every layer."""
        dims = [self.in_dim] + [self.hidden] * (self.num_layers - 1) + [self.out_dim]
        return list(itertools.pairwise(dims))

    def activation_dropout(self, h: torch.Tensor) -> torch.Tensor:
        """What follows every layer but the last: ReLU, then dropout (fused on the CPU)."""
        return relu_dropout(h, self.dropout, self.training, inplace=True)

    def apply_layer(self, layer: int, x: torch.Tensor, block: Any) -> torch.Tensor:
        """Layer ``layer`` on ``block`` (``x``: ``(num_src, in)`` → ``(num_dst, out)``), with
        the activation and dropout that follow it unless it is the last layer."""
        h = self.convs[layer](x, block)
        if layer < self.num_layers - 1:
            h = self.activation_dropout(h)
        return h

    def forward(self, batch: Any) -> torch.Tensor:
        """Logits ``(batch_size, out_dim)`` of the seeds of ``batch`` (a MiniBatch, or any
        object with ``x`` and ``blocks``)."""
        blocks = list(batch.blocks)
        if len(blocks) != self.num_layers:
            raise ValueError(f"{type(self).__name__} has num_layers={self.num_layers} but the batch "
                             f"has {len(blocks)} blocks: use one fanout per layer")
        h = _features(batch, next(self.parameters()).dtype)
        for layer, block in enumerate(blocks):
            h = self.apply_layer(layer, h, block)
        return h


class GraphSAGE(BlockModel):
    """``num_layers`` :class:`SAGEConv` (mean, root weight), ReLU + dropout between."""

    name = "sage"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *,
                 dropout: float = 0.5):
        super().__init__(in_dim, hidden, out_dim, num_layers, dropout)
        self.convs.extend(SAGEConv(i, o) for i, o in self.layer_dims())


class GCN(BlockModel):
    """``num_layers`` :class:`GCNConv` (self loops, symmetric normalisation in the block)."""

    name = "gcn"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *,
                 dropout: float = 0.5, add_self_loops: bool = True):
        super().__init__(in_dim, hidden, out_dim, num_layers, dropout)
        self.convs.extend(GCNConv(i, o, add_self_loops=add_self_loops) for i, o in self.layer_dims())


class GIN(BlockModel):
    """``num_layers`` :class:`GINConv`, each with a 2-layer MLP ``in → hidden → out``."""

    name = "gin"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *,
                 dropout: float = 0.5, train_eps: bool = True):
        super().__init__(in_dim, hidden, out_dim, num_layers, dropout)
        for i, o in self.layer_dims():
            mlp = nn.Sequential(nn.Linear(i, hidden), nn.ReLU(), nn.Linear(hidden, o))
            self.convs.append(GINConv(mlp, train_eps=train_eps))


class GAT(BlockModel):
    """``num_layers`` :class:`GATConv`; hidden layers concatenate ``heads`` heads of
    ``hidden // heads`` each, the last layer averages ``heads`` heads of ``out_dim``.
    ELU between layers (as the GAT paper and PyG's example)."""

    name = "gat"

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *,
                 dropout: float = 0.5, heads: int = 4, attn_dropout: float = 0.0):
        super().__init__(in_dim, hidden, out_dim, num_layers, dropout)
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"GAT: 'heads' must be a positive integer (got {heads!r})")
        if hidden % heads:
            raise ValueError(f"GAT: 'hidden' must be a multiple of heads={heads} (got {hidden})")
        self.heads = heads
        for layer, (i, o) in enumerate(self.layer_dims()):
            last = layer == num_layers - 1
            self.convs.append(GATConv(i, o if last else o // heads, heads, concat=not last,
                                      dropout=attn_dropout))

    def activation_dropout(self, h: torch.Tensor) -> torch.Tensor:
        return relu_dropout(F.elu(h), self.dropout, self.training, relu=False, inplace=True)


class MLP(nn.Module):
    """Features only: ``num_layers`` Linear layers, ReLU + dropout between.

    ``forward`` takes a MiniBatch (uses ``x[:batch_size]``, the seeds' rows) or a tensor
    ``(n, in_dim)``; returns ``(n, out_dim)``."""

    name = "mlp"
    uses_graph = False

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, *,
                 dropout: float = 0.5):
        super().__init__()
        _check_dims("MLP", in_dim, hidden, out_dim, num_layers, dropout)
        self.in_dim, self.hidden, self.out_dim = in_dim, hidden, out_dim
        self.num_layers = num_layers
        self.dropout = float(dropout)
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.lins = nn.ModuleList(nn.Linear(i, o) for i, o in itertools.pairwise(dims))
        self.config: dict[str, Any] = {}

    def forward(self, batch: Any) -> torch.Tensor:
        if isinstance(batch, torch.Tensor):
            h = batch
        else:
            h = _features(batch, self.lins[0].weight.dtype)[: batch.batch_size]
        for i, lin in enumerate(self.lins):
            h = lin(h)
            if i < self.num_layers - 1:
                h = relu_dropout(h, self.dropout, self.training, inplace=True)
        return h


MODELS: dict[str, type[nn.Module]] = {"sage": GraphSAGE, "gcn": GCN, "gin": GIN, "gat": GAT, "mlp": MLP,
                                      "graphormer": GraphormerSlim, "gt": GT}
#: the graph transformers of :data:`MODELS` (trained on ClusterLoader sequences by
#: :class:`graphpipe.train.SequenceTrainer`; the others by :class:`graphpipe.train.Trainer`)
SEQUENCE_MODELS = ("graphormer", "gt")


def build_model(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int,
                **kwargs: Any) -> nn.Module:
    """A model from the registry :data:`MODELS` (``sage``, ``gcn``, ``gin``, ``gat``, ``mlp``;
    graph transformers ``graphormer`` and ``gt``).

    ``kwargs`` go to the model (``dropout``; ``heads``/``attn_dropout`` for GAT,
    ``train_eps`` for GIN, ``add_self_loops`` for GCN; ``heads``, ``attention``,
    ``level``, ``max_dist``... for the transformers, see
    :mod:`graphpipe.train.graph_transformer`). The returned model's ``config``
    holds all arguments (checkpoints compare it on resume)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(sorted(MODELS))}")
    cls = MODELS[name]
    try:
        model = cls(in_dim, hidden, out_dim, num_layers, **kwargs)
    except TypeError as exc:  # an option this model does not take
        raise ValueError(f"model {name!r}: {exc}") from None
    model.config = {"name": name, "in_dim": in_dim, "hidden": hidden, "out_dim": out_dim,
                    "num_layers": num_layers, **kwargs}
    return model
