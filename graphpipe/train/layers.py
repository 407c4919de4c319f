"""Message-passing layers on :mod:`graphpipe.ops.aggregate`.

Every layer takes the features of a graph's *sources* and returns rows for its
*destinations*. The graph comes in one of two forms:

- a **block** (what :class:`graphpipe.loaders.NeighborLoader` yields in
  ``MiniBatch.blocks``): any object with ``indptr`` (int64 ``(num_dst + 1,)``), ``indices``
  (int64 ``(E,)`` local source IDs) and ``num_dst`` (and optionally ``num_src``)
  attributes, a local CSC by destination whose destinations are the first ``num_dst``
  sources (DGL's block convention);
- a PyG-style **edge_index**: int64 ``(2, E)``, row 0 the source, row 1 the destination,
  both indexing ``x``; the output has ``x.shape[0]`` rows unless ``size=(num_src,
  num_dst)`` says otherwise (destinations are then the first ``num_dst`` rows of ``x``).
  The CSC is built from it on every call (a one-layer convenience; models use blocks).

Definitions (each matches the PyG layer of the same name; tests/train/test_layers.py checks
them against ``torch_geometric.nn`` with copied weights):

- :class:`GCNConv`: ``out = A_hat · x · W^T + b`` with ``A_hat[u, v] = 1 / sqrt(deg_dst(u)
  · deg_src(v))`` over the block's edges (plus one self loop per destination when
  ``add_self_loops``; existing self loops are dropped first). On a square, symmetric
  edge set this is PyG's ``GCNConv`` (``gcn_norm``); on a bipartite block PyG has no
  definition, ours is DGL's ``GraphConv(norm="both")`` on the block.
- :class:`SAGEConv`: ``out = W_l · mean_{v -> u} x_v + b_l + W_r · x_u`` (PyG
  ``SAGEConv(aggr="mean", root_weight=True)``).
- :class:`GINConv`: ``out = nn((1 + eps) · x_u + sum_{v -> u} x_v)``.
- :class:`GATConv`: ``z = x W^T`` split into ``H`` heads of ``C``;
  ``alpha_e = softmax_u(leaky_relu(<a_src, z_v> + <a_dst, z_u>, 0.2))`` (dropout on
  alpha while training); ``out_u = concat_h or mean_h sum_e alpha_e z_v + b``; one self
  loop per destination when ``add_self_loops`` (existing ones dropped first), as PyG.

Zero in-degree destinations aggregate to zero (see :mod:`graphpipe.ops.aggregate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.ops.aggregate import (
    aggregate,
    aggregate_heads,
    edge_softmax,
    sage_mean,
    sddmm_scores,
)

__all__ = [
    "GATConv",
    "GCNConv",
    "GINConv",
    "LocalGraph",
    "SAGEConv",
    "add_self_loops",
    "as_local_graph",
    "csc_from_edge_index",
    "transform_first",
]


@dataclass
class LocalGraph:
    """A block in the form the layers use.

    Attributes:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets by destination.
        indices: int64 ``(E,)`` local source IDs in ``[0, num_src)``.
        num_dst: destinations (local IDs ``0 .. num_dst-1``, a prefix of the sources).
        num_src: sources (rows of the layer's input).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    num_dst: int
    num_src: int


def csc_from_edge_index(edge_index: torch.Tensor, num_src: int, num_dst: int) -> LocalGraph:
    """The local CSC of a PyG ``edge_index`` (int64 ``(2, E)``: sources, destinations).

    Edges of a destination keep their order in ``edge_index`` (stable sort)."""
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or \
            edge_index.shape[0] != 2 or edge_index.dtype != torch.int64:
        got = (f"{edge_index.dtype} tensor of shape {tuple(edge_index.shape)}"
               if isinstance(edge_index, torch.Tensor) else type(edge_index).__name__)
        raise ValueError(f"'edge_index' must be an int64 tensor of shape (2, E) (got {got})")
    if num_dst > num_src:
        raise ValueError(f"'size' must have num_dst <= num_src (destinations are the first "
                         f"sources; got num_src={num_src}, num_dst={num_dst})")
    src, dst = edge_index[0], edge_index[1]
    if src.numel():
        if int(src.min()) < 0 or int(src.max()) >= num_src:
            raise ValueError(f"'edge_index' row 0 (sources) must lie in [0, {num_src}) "
                             f"(got {int(src.min())} .. {int(src.max())})")
        if int(dst.min()) < 0 or int(dst.max()) >= num_dst:
            raise ValueError(f"'edge_index' row 1 (destinations) must lie in [0, {num_dst}) "
                             f"(got {int(dst.min())} .. {int(dst.max())})")
    order = torch.argsort(dst, stable=True)
    indices = src[order].contiguous()
    indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=edge_index.device)
    torch.cumsum(torch.bincount(dst, minlength=num_dst), 0, out=indptr[1:])
    return LocalGraph(indptr, indices, int(num_dst), int(num_src))


def as_local_graph(graph: Any, x: torch.Tensor, size: tuple[int, int] | None = None) -> LocalGraph:
    """Normalise a layer's graph argument (a block or an ``edge_index``) for input ``x``."""
    num_src = int(x.shape[0])
    if isinstance(graph, torch.Tensor):
        if size is not None:
            if len(size) != 2 or int(size[0]) != num_src:
                raise ValueError(f"'size' must be (num_src={num_src}, num_dst) (got {size!r})")
            num_dst = int(size[1])
        else:
            num_dst = num_src
        return csc_from_edge_index(graph, num_src, num_dst)
    if not all(hasattr(graph, a) for a in ("indptr", "indices", "num_dst")):
        raise ValueError("the graph argument must be a block (with indptr, indices, num_dst) or "
                         f"an edge_index tensor (got {type(graph).__name__})")
    block_src = getattr(graph, "num_src", None)
    if block_src is not None and int(block_src) != num_src:
        raise ValueError(f"'x' must have one row per source of the block: num_src={int(block_src)} "
                         f"(got {num_src} rows)")
    if size is not None:
        raise ValueError("'size' applies to an edge_index only (a block knows its sizes)")
    return LocalGraph(graph.indptr, graph.indices, int(graph.num_dst), num_src)


def add_self_loops(graph: LocalGraph) -> LocalGraph:
    """The same block with each destination's self loops replaced by exactly one, placed
    first among its in-edges (the other edges keep their order)."""
    indptr, indices, num_dst = graph.indptr, graph.indices, graph.num_dst
    device = indptr.device
    deg = indptr[1:] - indptr[:-1]
    dst = torch.repeat_interleave(torch.arange(num_dst, device=device), deg,
                                  output_size=indices.shape[0])
    keep = indices != dst
    kept = torch.nonzero(keep).squeeze(1)
    kept_dst = dst[kept]
    kept_deg = torch.bincount(kept_dst, minlength=num_dst)
    kept_ptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=device)
    torch.cumsum(kept_deg, 0, out=kept_ptr[1:])
    new_indptr = kept_ptr + torch.arange(num_dst + 1, dtype=torch.int64, device=device)
    new_indices = torch.empty(int(new_indptr[-1]), dtype=torch.int64, device=device)
    new_indices[new_indptr[:-1]] = torch.arange(num_dst, dtype=torch.int64, device=device)
    rank = torch.arange(kept.shape[0], device=device) - kept_ptr[kept_dst]
    new_indices[new_indptr[kept_dst] + 1 + rank] = indices[kept]
    return LocalGraph(new_indptr, new_indices, num_dst, graph.num_src)


_GATHER_COST = 16  # multiply-adds of GEMM work one gathered (random-access) element costs


def transform_first(in_dim: int, out_dim: int, g: LocalGraph) -> bool:
    """Where the linear map of a relation goes (WiseGraph's linear placement): before the
    gather (a GEMM over the ``num_src`` sources, then ``E`` rows of ``out_dim`` gathered)
    or after it (``E`` rows of ``in_dim`` gathered, a GEMM over the ``num_dst``
    destinations), whichever costs fewer multiply-adds plus gathered elements. Both
    give the same value: the mean is linear.

    >>> import torch
    >>> g = LocalGraph(torch.tensor([0, 3]), torch.tensor([0, 1, 2]), 1, 3)
    >>> transform_first(128, 16, g), transform_first(16, 128, g)
    (True, False)
    """
    edges = int(g.indices.shape[0])
    before = g.num_src * in_dim * out_dim + edges * out_dim * _GATHER_COST
    after = g.num_dst * in_dim * out_dim + edges * in_dim * _GATHER_COST
    return before < after


def _check_x(x: torch.Tensor, in_dim: int, layer: str) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        got = (f"shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__)
        raise ValueError(f"{layer}: 'x' must be a 2-D tensor (num_src, {in_dim}) (got {got})")
    if x.shape[1] != in_dim:
        raise ValueError(f"{layer}: 'x' must have in_dim={in_dim} columns (got {x.shape[1]})")


def _glorot(t: torch.Tensor) -> None:
    bound = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    nn.init.uniform_(t, -bound, bound)


class GCNConv(nn.Module):
    """Graph convolution (Kipf & Welling) on a block.

    Args:
        in_dim, out_dim: feature sizes.
        add_self_loops: give every destination one self loop (PyG's default).
        normalize: symmetric ``1/sqrt(deg_dst·deg_src)`` edge weights (else a plain sum).
        bias: learnable additive bias.

    Shapes: ``x`` ``(num_src, in_dim)`` → ``(num_dst, out_dim)``.
    """

    def __init__(self, in_dim: int, out_dim: int, *, add_self_loops: bool = True,
                 normalize: bool = True, bias: bool = True):
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.add_self_loops = bool(add_self_loops)
        self.normalize = bool(normalize)
        self.lin = nn.Linear(self.in_dim, self.out_dim, bias=False)
        self.bias = nn.Parameter(torch.zeros(self.out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _glorot(self.lin.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: Any, size: tuple[int, int] | None = None) -> torch.Tensor:
        _check_x(x, self.in_dim, "GCNConv")
        g = as_local_graph(graph, x, size)
        if self.add_self_loops:
            g = add_self_loops(g)
        norm = "gcn" if self.normalize else None
        if self.out_dim <= self.in_dim:  # transform first: aggregate the narrower rows
            out = aggregate(g.indptr, g.indices, self.lin(x), num_dst=g.num_dst, norm=norm)
        else:
            out = self.lin(aggregate(g.indptr, g.indices, x, num_dst=g.num_dst, norm=norm))
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, add_self_loops={self.add_self_loops}"


class SAGEConv(nn.Module):
    """GraphSAGE with mean aggregation and a root weight (PyG ``SAGEConv``).

    ``out_u = lin_l(mean_{v -> u} x_v) + lin_r(x_u)``; ``lin_l`` has the bias. The
    neighbours are transformed before they are averaged where that costs less
    (:func:`transform_first`: the same value, the mean is linear); DGL does it whenever
    ``out_dim < in_dim``, which on a sampled block (many more sources than
    destinations) is the slower order. Gathering first, the mean and both linear maps
    are one op (:func:`graphpipe.ops.aggregate.sage_mean`: one GEMM over
    ``[mean | x_dst]``, a custom backward).

    Shapes: ``x`` ``(num_src, in_dim)`` → ``(num_dst, out_dim)``.
    """

    def __init__(self, in_dim: int, out_dim: int, *, root_weight: bool = True, bias: bool = True):
        super().__init__()
        self.in_dim, self.out_dim = int(in_dim), int(out_dim)
        self.lin_l = nn.Linear(self.in_dim, self.out_dim, bias=bias)
        self.lin_r = nn.Linear(self.in_dim, self.out_dim, bias=False) if root_weight else None

    def forward(self, x: torch.Tensor, graph: Any, size: tuple[int, int] | None = None) -> torch.Tensor:
        _check_x(x, self.in_dim, "SAGEConv")
        g = as_local_graph(graph, x, size)
        if transform_first(self.in_dim, self.out_dim, g):
            h = x @ self.lin_l.weight.t()
            out = aggregate(g.indptr, g.indices, h, num_dst=g.num_dst, reduce="mean")
            if self.lin_l.bias is not None:
                out = out + self.lin_l.bias
        else:  # the mean and both linear maps in one op (one GEMM, custom backward)
            return sage_mean(x, g.indptr, g.indices, g.num_dst, self.lin_l.weight, self.lin_l.bias,
                             None if self.lin_r is None else self.lin_r.weight)
        if self.lin_r is not None:
            # in place: the GEMM accumulates into ``out`` (no second output and add pass);
            # allowed because neither product's backward needs its output
            out = out.addmm_(x[: g.num_dst], self.lin_r.weight.t())
        return out

    def extra_repr(self) -> str:
        return f"{self.in_dim}, {self.out_dim}, root_weight={self.lin_r is not None}"


class GINConv(nn.Module):
    """Graph isomorphism layer: ``out_u = mlp((1 + eps) · x_u + sum_{v -> u} x_v)``.

    Args:
        mlp: the module applied to the combined rows (``(num_dst, in_dim)`` → anything).
        eps: initial epsilon.
        train_eps: make epsilon a learnable parameter.
    """

    def __init__(self, mlp: nn.Module, *, eps: float = 0.0, train_eps: bool = False):
        super().__init__()
        self.nn = mlp
        self.initial_eps = float(eps)
        if train_eps:
            self.eps = nn.Parameter(torch.tensor([self.initial_eps]))
        else:
            self.register_buffer("eps", torch.tensor([self.initial_eps]))

    def forward(self, x: torch.Tensor, graph: Any, size: tuple[int, int] | None = None) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError(f"GINConv: 'x' must be a 2-D tensor (got {type(x).__name__})")
        g = as_local_graph(graph, x, size)
        out = aggregate(g.indptr, g.indices, x, num_dst=g.num_dst, reduce="sum")
        out = out + (1 + self.eps) * x[: g.num_dst]
        return self.nn(out)


class GATConv(nn.Module):
    """Graph attention (Veličković et al.), multi-head, PyG's ``GATConv`` definition.

    Args:
        in_dim: input size.
        out_dim: size per head.
        heads: attention heads ``H``.
        concat: concatenate heads (``H * out_dim`` outputs) or average them (``out_dim``).
        negative_slope: leaky ReLU slope of the attention logits.
        dropout: dropout probability on the attention coefficients (training only).
        add_self_loops: one self loop per destination (existing self loops dropped).
        bias: learnable additive bias.

    Shapes: ``x`` ``(num_src, in_dim)`` → ``(num_dst, H * out_dim)`` or ``(num_dst, out_dim)``.
    """

    def __init__(self, in_dim: int, out_dim: int, heads: int = 1, *, concat: bool = True,
                 negative_slope: float = 0.2, dropout: float = 0.0, add_self_loops: bool = True,
                 bias: bool = True):
        super().__init__()
        if int(heads) < 1:
            raise ValueError(f"'heads' must be a positive integer (got {heads!r})")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"'dropout' must be in [0, 1) (got {dropout!r})")
        self.in_dim, self.out_dim, self.heads = int(in_dim), int(out_dim), int(heads)
        self.concat = bool(concat)
        self.negative_slope = float(negative_slope)
        self.dropout = float(dropout)
        self.add_self_loops = bool(add_self_loops)
        self.lin = nn.Linear(self.in_dim, self.heads * self.out_dim, bias=False)
        self.att_src = nn.Parameter(torch.empty(1, self.heads, self.out_dim))
        self.att_dst = nn.Parameter(torch.empty(1, self.heads, self.out_dim))
        total = self.heads * self.out_dim if self.concat else self.out_dim
        self.bias = nn.Parameter(torch.zeros(total)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _glorot(self.lin.weight)
        _glorot(self.att_src)
        _glorot(self.att_dst)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, x: torch.Tensor, graph: Any, size: tuple[int, int] | None = None) -> torch.Tensor:
        _check_x(x, self.in_dim, "GATConv")
        g = as_local_graph(graph, x, size)
        if self.add_self_loops:
            g = add_self_loops(g)
        z = self.lin(x).view(-1, self.heads, self.out_dim)
        a_src = (z * self.att_src).sum(-1)
        a_dst = (z[: g.num_dst] * self.att_dst).sum(-1)
        scores = sddmm_scores(g.indptr, g.indices, a_src, a_dst, negative_slope=self.negative_slope)
        alpha = edge_softmax(g.indptr, scores)
        alpha = F.dropout(alpha, p=self.dropout, training=self.training)
        out = aggregate_heads(g.indptr, g.indices, z, alpha)
        out = out.reshape(g.num_dst, self.heads * self.out_dim) if self.concat else out.mean(1)
        return out + self.bias if self.bias is not None else out

    def extra_repr(self) -> str:
        return (f"{self.in_dim}, {self.out_dim}, heads={self.heads}, concat={self.concat}, "
                f"dropout={self.dropout}")
