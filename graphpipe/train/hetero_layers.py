"""Message passing over typed graphs, on :func:`graphpipe.ops.aggregate.aggregate`.

A typed layer takes ``x_dict`` (node type -> float ``(N_t, F_t)``) and a
:class:`TypedGraph` (relation ``(src, rel, dst)`` -> local CSC by destination) and returns
``out_dict`` (node type -> ``(N_t, out_dim)``) for every type that receives at least one
relation. This is the layout PyG's heterogeneous ``NeighborLoader`` gives (one subgraph,
``edge_index_dict`` over all sampled nodes of each type; the seeds are the first
``batch_size`` nodes of the target type), and the one
:class:`graphpipe.loaders.HeteroNeighborLoader` yields.

Definitions (tests/train/test_hetero_layers.py checks them against PyG with copied
weights):

- :class:`RelGraphConv` (R-GCN, Schlichtkrull et al.; PyG ``RGCNConv(aggr="mean")``
  without bases): ``out_u = W_root[t] x_u + b + sum_r mean_{v -r-> u} W_r x_v``; the root
  weight is per destination type (PyG shares one because its input is homogeneous;
  they agree when every type has the same root weight).
- :class:`HeteroSAGEConv`: one :class:`graphpipe.train.layers.SAGEConv`-style pair
  ``(lin_l, lin_r)`` per relation, summed over the relations into a type: PyG
  ``HeteroConv({r: SAGEConv((F_src, F_dst), out)}, aggr="sum")``.
- :class:`HeteroGATConv` (R-GAT, the OGB-LSC MAG240M baseline's layer): one GAT
  attention per relation, ``z_v = W_src x_v``, ``z_u = W_dst x_u`` split into ``H``
  heads, ``alpha_e = softmax_u(leaky_relu(<a_src, z_v> + <a_dst, z_u>, 0.2))`` over the
  relation's in-edges of ``u``, ``concat_h`` or ``mean_h`` of ``sum_e alpha_e z_v``, plus
  the bias (and ``res(x_u)`` with ``residual``), summed over the relations into a type:
  PyG ``HeteroConv({r: GATConv((F_src, F_dst), out, heads, add_self_loops=...,
  residual=...)}, aggr="sum")``. Self loops (``add_self_loops``) only on relations whose
  source and destination types agree.

Destinations with no in-edge of a relation get zero from it (the mean over nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.ops.aggregate import aggregate, aggregate_heads, edge_softmax, sddmm_scores
from graphpipe.train.layers import LocalGraph, add_self_loops, csc_from_edge_index, transform_first

__all__ = ["EdgeType", "HeteroGATConv", "HeteroSAGEConv", "RelGraphConv", "TypedGraph", "etype_key",
           "transform_first"]

EdgeType = tuple[str, str, str]


def etype_key(etype: EdgeType) -> str:
    """The module-dict key of a relation: ``"src___rel___dst"`` (OGB's folder name)."""
    return "___".join(etype)


@dataclass
class TypedGraph:
    """A sampled typed subgraph in the form the typed layers use.

    Attributes:
        num_nodes: node type -> number of nodes of that type (rows of ``x_dict[t]``).
        graphs: relation -> :class:`LocalGraph` whose destinations are all
            ``num_nodes[dst]`` nodes of the destination type and whose ``indices`` are
            local IDs of the source type.
    """

    num_nodes: dict[str, int]
    graphs: dict[EdgeType, LocalGraph]
    num_dst: dict[str, int] | None = None

    def dst_rows(self, ntype: str) -> int:
        """Output rows of ``ntype``: a prefix of its ``num_nodes`` (all of them unless
        trimmed)."""
        return self.num_nodes[ntype] if self.num_dst is None else self.num_dst.get(ntype, 0)

    def trimmed(self, src_rows: dict[str, int], dst_rows: dict[str, int]) -> TypedGraph | None:
        """The graph of one layer that reads the first ``src_rows[t]`` rows of every type
        and writes the first ``dst_rows[t]`` (PyG's ``trim_to_layer``, DGL's blocks): each
        relation's CSC cut to those destinations, without a copy. ``None`` when a kept
        edge's source lies beyond ``src_rows`` (the rows needed are not a prefix: e.g.
        DGL's ``frontier="all"`` re-samples the seeds at every hop).

        >>> import torch
        >>> g = TypedGraph.from_edge_index({("a", "to", "a"): torch.tensor([[1, 2], [0, 1]])},
        ...                                {"a": 3})
        >>> g.trimmed({"a": 2}, {"a": 1}).graphs[("a", "to", "a")].indices
        tensor([1])
        >>> g.trimmed({"a": 1}, {"a": 1}) is None
        True
        """
        graphs = {}
        for etype, g in self.graphs.items():
            n = min(int(dst_rows.get(etype[2], 0)), g.num_dst)
            end = int(g.indptr[n])
            indices = g.indices[:end]
            if end and int(indices.max()) >= src_rows[etype[0]]:
                return None
            graphs[etype] = LocalGraph(g.indptr[: n + 1], indices, n, int(src_rows[etype[0]]))
        return TypedGraph(dict(src_rows), graphs, dict(dst_rows))

    @classmethod
    def from_edge_index(cls, edge_index_dict: dict[EdgeType, torch.Tensor],
                        num_nodes: dict[str, int]) -> TypedGraph:
        """From PyG's ``edge_index_dict`` (relation -> int64 ``(2, E)``, row 0 local source
        IDs, row 1 local destination IDs) and the node count of every type.

        >>> import torch
        >>> g = TypedGraph.from_edge_index(
        ...     {("author", "writes", "paper"): torch.tensor([[0, 1, 1], [0, 0, 1]])},
        ...     {"author": 2, "paper": 2})
        >>> g.graphs[("author", "writes", "paper")].indptr
        tensor([0, 2, 3])
        """
        graphs = {}
        for etype, edge_index in edge_index_dict.items():
            src, _, dst = etype
            for t in (src, dst):
                if t not in num_nodes:
                    raise ValueError(f"relation {etype}: no node count for type {t!r}")
            # a CSC over (num_src rows, num_dst destinations): csc_from_edge_index wants
            # num_dst <= num_src, so check against the larger of the two and keep num_src
            big = max(num_nodes[src], num_nodes[dst])
            g = csc_from_edge_index(edge_index, big, num_nodes[dst])
            if edge_index.shape[1] and int(edge_index[0].max()) >= num_nodes[src]:
                raise ValueError(f"relation {etype}: source IDs must lie in "
                                 f"[0, {num_nodes[src]})")
            graphs[tuple(etype)] = LocalGraph(g.indptr, g.indices, g.num_dst, num_nodes[src])
        return cls(dict(num_nodes), graphs)


def _mean_from(x_src: torch.Tensor, g: LocalGraph) -> torch.Tensor:
    """``(num_dst, F)``: the mean of each destination's in-neighbours' rows of ``x_src``."""
    if x_src.shape[0] != g.num_src:
        raise ValueError(f"source features have {x_src.shape[0]} rows, the relation "
                         f"{g.num_src} sources")
    if g.num_dst > x_src.shape[0]:  # the kernel's destinations are a prefix of its sources
        x_src = F.pad(x_src, (0, 0, 0, g.num_dst - x_src.shape[0]))
    return aggregate(g.indptr, g.indices, x_src, num_dst=g.num_dst, reduce="mean")


def _check_inputs(layer: str, x_dict: dict[str, torch.Tensor], in_dims: dict[str, int],
                  graph: TypedGraph) -> None:
    for t, dim in in_dims.items():
        x = x_dict.get(t)
        if x is None:
            continue
        if x.dim() != 2 or x.shape[1] != dim:
            raise ValueError(f"{layer}: x_dict[{t!r}] must be (N, {dim}) (got "
                             f"{tuple(x.shape)})")
        if t in graph.num_nodes and x.shape[0] != graph.num_nodes[t]:
            raise ValueError(f"{layer}: x_dict[{t!r}] has {x.shape[0]} rows, the graph "
                             f"{graph.num_nodes[t]} nodes of that type")


class RelGraphConv(nn.Module):
    """R-GCN layer: one weight per relation, mean over each relation's in-neighbours,
    plus a root weight per destination type and one bias.

    Args:
        in_dims: node type -> input width (types may differ).
        out_dim: output width (the same for every type).
        edge_types: the relations ``(src, rel, dst)``.

    Shapes: ``x_dict[t]`` ``(N_t, in_dims[t])`` -> ``out[t]`` ``(N_t, out_dim)`` for every
    destination type of ``edge_types``.

    >>> import torch
    >>> conv = RelGraphConv({"author": 3, "paper": 2}, 4,
    ...                     [("author", "writes", "paper"), ("paper", "cites", "paper")])
    >>> g = TypedGraph.from_edge_index(
    ...     {("author", "writes", "paper"): torch.tensor([[0, 1], [0, 1]]),
    ...      ("paper", "cites", "paper"): torch.tensor([[1], [0]])}, {"author": 2, "paper": 2})
    >>> conv({"author": torch.ones(2, 3), "paper": torch.ones(2, 2)}, g)["paper"].shape
    torch.Size([2, 4])
    """

    def __init__(self, in_dims: dict[str, int], out_dim: int, edge_types: list[EdgeType], *,
                 bias: bool = True):
        super().__init__()
        self.in_dims, self.out_dim = dict(in_dims), int(out_dim)
        self.edge_types = [tuple(e) for e in edge_types]
        self.dst_types = sorted({e[2] for e in self.edge_types})
        self.rel = nn.ModuleDict({etype_key(e): nn.Linear(self.in_dims[e[0]], out_dim, bias=False)
                                  for e in self.edge_types})
        self.root = nn.ModuleDict({t: nn.Linear(self.in_dims[t], out_dim, bias=False)
                                   for t in self.dst_types})
        self.bias = nn.Parameter(torch.zeros(out_dim)) if bias else None
        for lin in [*self.rel.values(), *self.root.values()]:
            bound = math.sqrt(6.0 / (lin.in_features + lin.out_features))
            nn.init.uniform_(lin.weight, -bound, bound)

    def forward(self, x_dict: dict[str, torch.Tensor], graph: TypedGraph) -> dict[str, torch.Tensor]:
        _check_inputs("RelGraphConv", x_dict, self.in_dims, graph)
        out = {t: self.root[t](x_dict[t][: graph.dst_rows(t)]) for t in self.dst_types
               if t in x_dict and graph.dst_rows(t)}
        first: dict[str, list[EdgeType]] = {}  # source type -> relations transformed first
        for etype in self.edge_types:
            g = graph.graphs.get(etype)
            if g is None or etype[0] not in x_dict or etype[2] not in out or not g.num_dst:
                continue
            lin = self.rel[etype_key(etype)]
            if transform_first(lin.in_features, lin.out_features, g):
                first.setdefault(etype[0], []).append(etype)
            else:  # gather the narrower input rows, then one GEMM into the output
                out[etype[2]].addmm_(_mean_from(x_dict[etype[0]], g), lin.weight.t())
        for src, etypes in first.items():
            self._transformed_first(x_dict[src], etypes, graph, out)
        if self.bias is not None:
            out = {t: h + self.bias for t, h in out.items()}
        return out

    def _transformed_first(self, x_src: torch.Tensor, etypes: list[EdgeType], graph: TypedGraph,
                           out: dict[str, torch.Tensor]) -> None:
        """The relations of one source type that transform before the gather: one GEMM
        ``x_src @ [W_r1 | W_r2 | ...]`` (WiseGraph's batched per-relation matmul), read
        as a ``(N_src * k, out_dim)`` table whose row ``v * k + j`` is ``W_rj x_v``; each
        relation gathers its own rows of it (per-relation edge groups)."""
        k = len(etypes)
        weight = torch.cat([self.rel[etype_key(e)].weight for e in etypes]) if k > 1 \
            else self.rel[etype_key(etypes[0])].weight
        table = (x_src @ weight.t()).view(x_src.shape[0] * k, self.out_dim)
        for j, etype in enumerate(etypes):
            g = graph.graphs[etype]
            if k > 1:
                g = LocalGraph(g.indptr, g.indices * k + j, g.num_dst, g.num_src * k)
            out[etype[2]].add_(_mean_from(table, g))


class HeteroSAGEConv(nn.Module):
    """Heterogeneous GraphSAGE: per relation ``lin_l(mean_{v -r-> u} x_v) + lin_r(x_u)``
    (``lin_l`` with the bias), summed over the relations into each type.

    Args:
        in_dims: node type -> input width.
        out_dim: output width.
        edge_types: the relations ``(src, rel, dst)``.

    >>> import torch
    >>> conv = HeteroSAGEConv({"author": 3, "paper": 2}, 4, [("author", "writes", "paper")])
    >>> g = TypedGraph.from_edge_index(
    ...     {("author", "writes", "paper"): torch.tensor([[0, 1], [0, 0]])},
    ...     {"author": 2, "paper": 1})
    >>> conv({"author": torch.ones(2, 3), "paper": torch.ones(1, 2)}, g)["paper"].shape
    torch.Size([1, 4])
    """

    def __init__(self, in_dims: dict[str, int], out_dim: int, edge_types: list[EdgeType]):
        super().__init__()
        self.in_dims, self.out_dim = dict(in_dims), int(out_dim)
        self.edge_types = [tuple(e) for e in edge_types]
        self.lin_l = nn.ModuleDict({etype_key(e): nn.Linear(self.in_dims[e[0]], out_dim)
                                    for e in self.edge_types})
        self.lin_r = nn.ModuleDict({etype_key(e): nn.Linear(self.in_dims[e[2]], out_dim, bias=False)
                                    for e in self.edge_types})

    def forward(self, x_dict: dict[str, torch.Tensor], graph: TypedGraph) -> dict[str, torch.Tensor]:
        _check_inputs("HeteroSAGEConv", x_dict, self.in_dims, graph)
        out: dict[str, torch.Tensor] = {}
        for etype in self.edge_types:
            g = graph.graphs.get(etype)
            src, _, dst = etype
            if g is None or src not in x_dict or dst not in x_dict:
                continue
            key, lin = etype_key(etype), self.lin_l[etype_key(etype)]
            if transform_first(lin.in_features, lin.out_features, g):
                h = _mean_from(x_dict[src] @ lin.weight.t(), g) + lin.bias
            else:
                h = lin(_mean_from(x_dict[src], g))
            h = h.addmm_(x_dict[dst][: g.num_dst], self.lin_r[key].weight.t())
            out[dst] = h if dst not in out else out[dst] + h
        return out


def _glorot(t: torch.Tensor) -> None:
    """PyG's glorot: uniform in ``+-sqrt(6 / (fan_in + fan_out))`` of the last two dims."""
    bound = math.sqrt(6.0 / (t.shape[-2] + t.shape[-1]))
    nn.init.uniform_(t, -bound, bound)


class HeteroGATConv(nn.Module):
    """R-GAT layer: a multi-head GAT attention per relation, summed over the relations
    into each destination type.

    Args:
        in_dims: node type -> input width.
        out_dim: width per head.
        edge_types: the relations ``(src, rel, dst)``.
        heads: attention heads ``H``.
        concat: concatenate the heads (``H * out_dim`` outputs) or average them
            (``out_dim``).
        negative_slope: leaky ReLU slope of the attention logits.
        dropout: dropout on the attention coefficients (training only).
        add_self_loops: one self loop per node (existing ones dropped) on the relations
            whose source and destination types agree; cross-type relations get none.
        residual: add ``res(x_u)`` (a bias-free linear map per relation, PyG's
            ``residual=True``); summed over the relations it is a skip connection per
            destination type, as the OGB-LSC R-GAT's.
        bias: a learnable bias per relation.

    Shapes: ``x_dict[t]`` ``(N_t, in_dims[t])`` -> ``out[t]`` ``(N_t, H * out_dim)`` (or
    ``(N_t, out_dim)`` without ``concat``) for every destination type of ``edge_types``.

    >>> import torch
    >>> conv = HeteroGATConv({"author": 3, "paper": 2}, 4,
    ...                      [("author", "writes", "paper"), ("paper", "cites", "paper")], heads=2)
    >>> g = TypedGraph.from_edge_index(
    ...     {("author", "writes", "paper"): torch.tensor([[0, 1], [0, 1]]),
    ...      ("paper", "cites", "paper"): torch.tensor([[1], [0]])}, {"author": 2, "paper": 2})
    >>> conv({"author": torch.ones(2, 3), "paper": torch.ones(2, 2)}, g)["paper"].shape
    torch.Size([2, 8])
    """

    def __init__(self, in_dims: dict[str, int], out_dim: int, edge_types: list[EdgeType], *,
                 heads: int = 1, concat: bool = True, negative_slope: float = 0.2,
                 dropout: float = 0.0, add_self_loops: bool = False, residual: bool = False,
                 bias: bool = True):
        super().__init__()
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"HeteroGATConv: 'heads' must be a positive integer (got {heads!r})")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"HeteroGATConv: 'dropout' must be in [0, 1) (got {dropout!r})")
        self.in_dims, self.out_dim, self.heads = dict(in_dims), int(out_dim), heads
        self.concat, self.negative_slope = bool(concat), float(negative_slope)
        self.dropout, self.add_self_loops = float(dropout), bool(add_self_loops)
        self.edge_types = [tuple(e) for e in edge_types]
        width, total = heads * self.out_dim, (heads * self.out_dim if concat else self.out_dim)
        keys = {etype_key(e): e for e in self.edge_types}
        self.lin_src = nn.ModuleDict({k: nn.Linear(self.in_dims[e[0]], width, bias=False)
                                      for k, e in keys.items()})
        self.lin_dst = nn.ModuleDict({k: nn.Linear(self.in_dims[e[2]], width, bias=False)
                                      for k, e in keys.items()})
        self.att_src = nn.ParameterDict({k: nn.Parameter(torch.empty(1, heads, self.out_dim))
                                         for k in keys})
        self.att_dst = nn.ParameterDict({k: nn.Parameter(torch.empty(1, heads, self.out_dim))
                                         for k in keys})
        self.res = nn.ModuleDict({k: nn.Linear(self.in_dims[e[2]], total, bias=False)
                                  for k, e in keys.items()}) if residual else None
        self.bias = nn.ParameterDict({k: nn.Parameter(torch.zeros(total))
                                      for k in keys}) if bias else None
        for k in keys:
            for t in (self.lin_src[k].weight, self.lin_dst[k].weight, self.att_src[k],
                      self.att_dst[k], *([self.res[k].weight] if residual else [])):
                _glorot(t)

    def _relation(self, etype: EdgeType, x_src: torch.Tensor, x_dst: torch.Tensor,
                  g: LocalGraph) -> torch.Tensor:
        """``(N_dst, total)``: one relation's GAT output for every destination."""
        key, heads, width = etype_key(etype), self.heads, self.out_dim
        if x_src.shape[0] != g.num_src:
            raise ValueError(f"source features have {x_src.shape[0]} rows, the relation "
                             f"{g.num_src} sources")
        if self.add_self_loops and etype[0] == etype[2]:
            g = add_self_loops(g)
        z_src = self.lin_src[key](x_src).view(-1, heads, width)
        z_dst = self.lin_dst[key](x_dst).view(-1, heads, width)
        a_src = (z_src * self.att_src[key]).sum(-1)
        a_dst = (z_dst * self.att_dst[key]).sum(-1)
        if g.num_dst > z_src.shape[0]:  # the kernels' destinations are a prefix of the sources
            pad = g.num_dst - z_src.shape[0]
            z_src, a_src = F.pad(z_src, (0, 0, 0, 0, 0, pad)), F.pad(a_src, (0, 0, 0, pad))
        scores = sddmm_scores(g.indptr, g.indices, a_src, a_dst,
                              negative_slope=self.negative_slope)
        alpha = F.dropout(edge_softmax(g.indptr, scores), self.dropout, self.training)
        out = aggregate_heads(g.indptr, g.indices, z_src, alpha)
        out = out.reshape(g.num_dst, heads * width) if self.concat else out.mean(1)
        if self.res is not None:
            out = out + self.res[key](x_dst)
        return out + self.bias[key] if self.bias is not None else out

    def forward(self, x_dict: dict[str, torch.Tensor], graph: TypedGraph) -> dict[str, torch.Tensor]:
        _check_inputs("HeteroGATConv", x_dict, self.in_dims, graph)
        out: dict[str, torch.Tensor] = {}
        for etype in self.edge_types:
            g = graph.graphs.get(etype)
            src, _, dst = etype
            if g is None or src not in x_dict or dst not in x_dict:
                continue
            h = self._relation(etype, x_dict[src], x_dict[dst][: g.num_dst], g)
            out[dst] = h if dst not in out else out[dst] + h
        return out

    def extra_repr(self) -> str:
        return (f"{self.out_dim}, heads={self.heads}, concat={self.concat}, "
                f"relations={len(self.edge_types)}")
