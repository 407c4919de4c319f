"""Node-classification models on typed graphs: R-GCN, heterogeneous GraphSAGE and R-GAT.

A model takes a typed mini-batch (:class:`graphpipe.loaders.HeteroNeighborLoader`'s
batches, or anything with ``x`` / ``n_id`` / ``edge_index`` dicts and ``batch_size``)
and returns logits ``(batch_size, out_dim)`` for the seeds: the first ``batch_size``
nodes of ``target_type``. Node types without features get a learnable embedding per
node (``num_nodes[t]`` rows of width ``embed_dim``) looked up by the batch's global
IDs ``n_id[t]``, as PyG's ogbn-mag R-GCN example does. Between layers: ReLU, dropout.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from graphpipe.train.disk_embedding import DiskEmbedding
from graphpipe.train.hetero_layers import (
    EdgeType,
    HeteroGATConv,
    HeteroSAGEConv,
    RelGraphConv,
    TypedGraph,
)

__all__ = ["HETERO_MODELS", "RGAT", "RGCN", "HeteroModel", "HeteroSAGE", "build_hetero_model",
           "layer_graphs"]


class HeteroModel(nn.Module):
    """Base of the typed models: input embeddings for featureless types, then ``convs``.

    Args:
        in_dims: node type -> feature width, or ``None`` for a type without features.
        num_nodes: node type -> node count (sizes the embedding of featureless types).
        hidden, out_dim, num_layers: widths and depth; the last layer outputs ``out_dim``.
        edge_types: the relations ``(src, rel, dst)``.
        target_type: the type whose seeds are classified.
        dropout: dropout between layers.
        embed_dim: width of the featureless types' embeddings.
        embeddings: ``"memory"`` (``nn.Embedding``, trained by the optimizer) or ``"disk"``
            (:class:`graphpipe.train.disk_embedding.DiskEmbedding`: rows in memory-mapped
            files, SparseAdam on the batch's rows, stepped by the trainer; beyond RAM).
        layer_options: options of the layer class (see :meth:`make_layer`).
    """

    layer_class: type[nn.Module] = RelGraphConv
    name = "hetero"

    def __init__(self, in_dims: dict[str, int | None], num_nodes: dict[str, int], hidden: int,
                 out_dim: int, num_layers: int, edge_types: list[EdgeType], target_type: str, *,
                 dropout: float = 0.5, embed_dim: int = 64, embeddings: str = "memory",
                 **layer_options: Any):
        super().__init__()
        if target_type not in in_dims:
            raise ValueError(f"target type {target_type!r} is not a node type "
                             f"({', '.join(sorted(in_dims))})")
        if num_layers < 1 or hidden < 1 or out_dim < 1:
            raise ValueError("num_layers, hidden and out_dim must be positive")
        self.target_type, self.num_layers, self.dropout = target_type, num_layers, float(dropout)
        self.edge_types = [tuple(e) for e in edge_types]
        if embeddings not in ("memory", "disk"):
            raise ValueError(f"'embeddings' must be 'memory' or 'disk' (got {embeddings!r})")
        def table(rows: int, dim: int) -> nn.Module:   # disk: seeded from torch's generator, as nn.Embedding
            if embeddings == "memory":
                return nn.Embedding(rows, dim)
            return DiskEmbedding(rows, dim, seed=int(torch.randint(0, 2**62, ()).item()))

        self.embed = nn.ModuleDict({t: table(int(num_nodes[t]), embed_dim)
                                    for t, d in in_dims.items() if d is None})
        dims = {t: (embed_dim if d is None else int(d)) for t, d in in_dims.items()}
        self.convs = nn.ModuleList()
        for layer in range(num_layers):
            width = out_dim if layer == num_layers - 1 else hidden
            self.convs.append(self.make_layer(dims, width, layer == num_layers - 1,
                                              layer_options))
            dims = {t: width for t in dims}
        self.config: dict[str, Any] = {}

    def make_layer(self, dims: dict[str, int], width: int, last: bool,
                   options: dict[str, Any]) -> nn.Module:
        """One layer ``dims`` -> ``width`` (``last``: the output layer); R-GCN and hetero
        SAGE take no options."""
        if options:
            raise ValueError(f"{self.name}: unknown option(s) {', '.join(sorted(options))}")
        return self.layer_class(dims, width, self.edge_types)

    def inputs(self, x: dict[str, torch.Tensor], n_id: dict[str, torch.Tensor]
               ) -> dict[str, torch.Tensor]:
        """The first layer's input of every type: features, or embeddings of ``n_id``."""
        dtype = next(self.convs.parameters()).dtype
        h = {t: v.to(dtype) for t, v in x.items() if v is not None and t not in self.embed}
        for t, emb in self.embed.items():
            if t in n_id:
                h[t] = emb(n_id[t].long())
        return h

    def forward_graph(self, h: dict[str, torch.Tensor], graph: TypedGraph,
                      layer_graphs: list[TypedGraph] | None = None) -> dict[str, torch.Tensor]:
        """All layers over ``graph``: ``h[t]`` ``(N_t, F_t)`` -> ``(N_t, out_dim)``; or
        layer ``l`` over ``layer_graphs[l]`` (trimmed: the rows it writes are a prefix of
        those it reads, see :func:`layer_graphs`)."""
        for layer, conv in enumerate(self.convs):
            out = conv(h, graph if layer_graphs is None else layer_graphs[layer])
            if layer < self.num_layers - 1:
                out = {t: F.dropout(F.relu(v), self.dropout, self.training) for t, v in out.items()}
            h = out  # a type no relation reaches drops out, as in PyG's HeteroConv
        return h

    def embed_nodes(self, batch: Any) -> dict[str, torch.Tensor]:
        """The last layer's output ``(n_t, out_dim)`` of every type the layers reach, for
        all of the batch's nodes (link prediction decodes pairs of them)."""
        return self.forward_graph(self.inputs(batch.x, batch.n_id), self._graph(batch))

    def _graph(self, batch: Any) -> TypedGraph:
        counts = {t: int(v.shape[0]) for t, v in batch.n_id.items()}
        return TypedGraph.from_edge_index(
            {tuple(e): ei for e, ei in batch.edge_index.items() if tuple(e) in self.edge_types},
            counts)

    def forward(self, batch: Any) -> torch.Tensor:
        """Logits ``(batch_size, out_dim)`` of the batch's seeds (target-type nodes); each
        layer computes only the rows the next one reads (:func:`layer_graphs`)."""
        graph = self._graph(batch)
        h = self.forward_graph(self.inputs(batch.x, batch.n_id), graph,
                               layer_graphs(graph, getattr(batch, "num_sampled_nodes", None),
                                            self.num_layers))
        if self.target_type not in h:
            raise ValueError(f"no relation reaches the target type {self.target_type!r}")
        return h[self.target_type][: int(batch.batch_size)]


def layer_graphs(graph: TypedGraph, num_sampled_nodes: dict[str, list[int]] | None,
                 num_layers: int) -> list[TypedGraph] | None:
    """Each layer's graph trimmed to the rows it must compute (PyG's ``trim_to_layer``;
    DGL's blocks): layer ``l`` of ``L`` reads the nodes of hops ``<= L - l`` and writes
    those of hops ``< L - l``, so the last one writes the seeds alone. The seeds' outputs
    are those of the untrimmed graph; ``None`` (no trimming) when the batch has no hop
    counts for ``L`` hops or a layer's needed rows are not a prefix (see
    :meth:`TypedGraph.trimmed`).

    >>> import torch
    >>> g = TypedGraph.from_edge_index({("p", "cites", "p"): torch.tensor([[1, 2], [0, 1]])},
    ...                                {"p": 3})
    >>> [lg.num_dst for lg in layer_graphs(g, {"p": [1, 1, 1]}, 2)]
    [{'p': 2}, {'p': 1}]
    """
    if not num_sampled_nodes or any(len(v) != num_layers + 1 for v in num_sampled_nodes.values()):
        return None
    if any(t not in num_sampled_nodes for t in graph.num_nodes):
        return None
    known = {t: [int(c) for c in itertools.accumulate(v)] for t, v in num_sampled_nodes.items()}
    if any(known[t][-1] != n for t, n in graph.num_nodes.items()):
        return None
    out = []
    for layer in range(num_layers):
        hops = num_layers - layer
        g = graph.trimmed({t: c[hops] for t, c in known.items()},
                          {t: c[hops - 1] for t, c in known.items()})
        if g is None:
            return None
        out.append(g)
    return out


class RGCN(HeteroModel):
    """``num_layers`` :class:`RelGraphConv` (R-GCN).

    >>> import torch
    >>> from types import SimpleNamespace
    >>> et = [("author", "writes", "paper"), ("paper", "rev_writes", "author")]
    >>> model = RGCN({"paper": 4, "author": None}, {"paper": 3, "author": 5}, 8, 2, 2, et, "paper")
    >>> batch = SimpleNamespace(
    ...     x={"paper": torch.ones(2, 4)}, batch_size=1,
    ...     n_id={"paper": torch.tensor([0, 2]), "author": torch.tensor([4, 1])},
    ...     edge_index={et[0]: torch.tensor([[0, 1], [0, 1]]), et[1]: torch.tensor([[1], [0]])})
    >>> model(batch).shape
    torch.Size([1, 2])
    """

    layer_class = RelGraphConv
    name = "rgcn"


class HeteroSAGE(HeteroModel):
    """``num_layers`` :class:`HeteroSAGEConv` (per-relation SAGE, summed per type)."""

    layer_class = HeteroSAGEConv
    name = "hetero-sage"


class RGAT(HeteroModel):
    """``num_layers`` :class:`HeteroGATConv` (R-GAT, the OGB-LSC MAG240M baseline): hidden
    layers concatenate ``heads`` heads of ``hidden // heads``, the last averages ``heads``
    heads of ``out_dim``; every relation has a residual map (a skip connection per type,
    as the baseline's), no self loops.

    Layer options: ``heads`` (default 4), ``attn_dropout`` (default 0).

    >>> import torch
    >>> from types import SimpleNamespace
    >>> et = [("author", "writes", "paper"), ("paper", "rev_writes", "author")]
    >>> model = RGAT({"paper": 4, "author": None}, {"paper": 3, "author": 5}, 8, 2, 2, et, "paper",
    ...              heads=2)
    >>> batch = SimpleNamespace(
    ...     x={"paper": torch.ones(2, 4)}, batch_size=1,
    ...     n_id={"paper": torch.tensor([0, 2]), "author": torch.tensor([4, 1])},
    ...     edge_index={et[0]: torch.tensor([[0, 1], [0, 1]]), et[1]: torch.tensor([[1], [0]])})
    >>> model(batch).shape
    torch.Size([1, 2])
    """

    layer_class = HeteroGATConv
    name = "rgat"

    def make_layer(self, dims: dict[str, int], width: int, last: bool,
                   options: dict[str, Any]) -> nn.Module:
        options = dict(options)
        heads = options.pop("heads", 4)
        attn_dropout = options.pop("attn_dropout", 0.0)
        if options:
            raise ValueError(f"rgat: unknown option(s) {', '.join(sorted(options))}")
        if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:
            raise ValueError(f"rgat: 'heads' must be a positive integer (got {heads!r})")
        if not last and width % heads:
            raise ValueError(f"rgat: 'hidden' must be a multiple of heads={heads} (got {width})")
        return HeteroGATConv(dims, width if last else width // heads, self.edge_types,
                             heads=heads, concat=not last, dropout=attn_dropout, residual=True)


HETERO_MODELS: dict[str, type[HeteroModel]] = {"rgcn": RGCN, "hetero-sage": HeteroSAGE,
                                               "rgat": RGAT}


def build_hetero_model(name: str, in_dims: dict[str, int | None], num_nodes: dict[str, int],
                       hidden: int, out_dim: int, num_layers: int, edge_types: list[EdgeType],
                       target_type: str, **kwargs: Any) -> HeteroModel:
    """A typed model from :data:`HETERO_MODELS` (``rgcn``, ``hetero-sage``, ``rgat``); its
    ``config`` holds every argument (checkpoints compare it on resume)."""
    if name not in HETERO_MODELS:
        raise ValueError(f"unknown typed model {name!r}; known: {', '.join(sorted(HETERO_MODELS))}")
    model = HETERO_MODELS[name](in_dims, num_nodes, hidden, out_dim, num_layers, edge_types,
                                target_type, **kwargs)
    model.config = {"name": name, "in_dims": dict(in_dims), "num_nodes": dict(num_nodes),
                    "hidden": hidden, "out_dim": out_dim, "num_layers": num_layers,
                    "edge_types": [list(e) for e in edge_types], "target_type": target_type,
                    **kwargs}
    return model
