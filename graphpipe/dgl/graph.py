"""The graph a :class:`graphpipe.dgl.DataLoader` samples, from a homogeneous ``DGLGraph``
(its CSC built in memory once, features and labels from ``g.ndata`` / ``g.edata``) or a
graphpipe store (a :class:`graphpipe.store.GraphStore` or its path: ``"feat"`` is the
store's node features, ``"label"`` its labels, other names its ``node/<name>`` /
``edge/<name>`` arrays).

:func:`resolve_graph` returns :class:`GraphSource`: what the loader reads and what the
blocks carry (:class:`graphpipe.dgl.block.BlockData`). The first of
``prefetch_node_feats`` that is a 2-D node table is gathered by the loader's pipeline
(``MiniBatch.x``); the others are indexed per batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from graphpipe.dgl.block import BlockData, as_tensor
from graphpipe.dgl.sampler import NeighborSampler

__all__ = ["GraphSource", "resolve_graph"]


@dataclass
class GraphSource:
    """What the loader reads (``data``: a store or a dict of CSC arrays and ``x``), its
    node count and device, and what each batch's blocks carry (``block_data``)."""

    data: Any
    num_nodes: int
    device: torch.device
    block_data: BlockData

    @property
    def gathers(self) -> bool:
        """Whether the loader gathers feature rows (``MiniBatch.x``)."""
        return self.block_data.gathered is not None


def _is_dgl_graph(graph: Any) -> bool:
    return type(graph).__module__.split(".")[0] == "dgl"


def resolve_graph(graph: Any, sampler: NeighborSampler) -> GraphSource:
    """A :class:`GraphSource` of ``graph`` (a ``DGLGraph``, a GraphStore or a store path)
    carrying what ``sampler`` asks to prefetch. Raises ``ValueError`` for anything else,
    for heterogeneous DGL graphs and for names the graph does not have."""
    from graphpipe.store import GraphStore

    if isinstance(graph, (str, os.PathLike)):
        graph = GraphStore.open(graph, in_memory="auto")
    if isinstance(graph, GraphStore):
        return _from_store(graph, sampler)
    if _is_dgl_graph(graph):
        return _from_dgl(graph, sampler)
    raise ValueError(f"'graph' must be a dgl.DGLGraph, a graphpipe GraphStore or a store path "
                     f"(got {type(graph).__name__})")


def _lookup(table: dict[str, Any], name: str, what: str) -> torch.Tensor:
    if name not in table:
        raise ValueError(f"the graph has no {what} {name!r} (it has {sorted(table)})")
    return as_tensor(table[name])


def _split_gathered(names: list[str], node: dict[str, Any]) -> tuple[str | None, list[str]]:
    """The first 2-D name (gathered by the loader) and the rest."""
    for name in names:
        if _lookup(node, name, "node feature").dim() == 2:
            return name, [n for n in names if n != name]
    return None, names


def _from_dgl(g: Any, sampler: NeighborSampler) -> GraphSource:
    if not g.is_homogeneous:
        raise ValueError(f"only homogeneous DGL graphs are supported (got node types {g.ntypes}, "
                         f"edge types {g.canonical_etypes})")
    indptr, indices, eids = (t.cpu() for t in g.adj_tensors("csc"))
    if eids.numel() != indices.numel():  # DGL leaves them out when slot == edge ID
        eids = torch.arange(indices.numel(), dtype=torch.int64)
    node, edge = dict(g.ndata), dict(g.edata)
    gathered, others = _split_gathered(sampler.prefetch_node_feats, node)
    data: dict[str, Any] = {"indptr": indptr.numpy(), "indices": indices.numpy()}
    if gathered is not None:
        data["x"] = as_tensor(node[gathered]).cpu().numpy()
    block_data = BlockData(gathered, {n: _lookup(node, n, "node feature") for n in others},
                           {n: _lookup(node, n, "node label") for n in sampler.prefetch_labels},
                           {n: _lookup(edge, n, "edge feature") for n in sampler.prefetch_edge_feats},
                           edge_id=eids.to(torch.int64))
    return GraphSource(data, int(g.num_nodes()), g.device, block_data)


def _store_table(store: Any, kind: str) -> dict[str, Any]:
    """A store's ``node/*`` or ``edge/*`` arrays by name (``node/feat`` is ``feat``,
    ``node/label`` is ``label``), read when first asked for."""
    keys = list(store.manifest.get("arrays", {}))
    table = {k.split("/", 1)[1]: k for k in keys if k.startswith(kind + "/")}
    return {name: _LazyArray(store, key) for name, key in table.items()}


class _LazyArray:
    """A store array read (as a tensor) on first use."""

    def __init__(self, store: Any, key: str):
        self.store, self.key = store, key

    def tensor(self) -> torch.Tensor:
        return as_tensor(np.asarray(self.store.array(self.key)))


def _from_store(store: Any, sampler: NeighborSampler) -> GraphSource:
    node, edge = _store_table(store, "node"), _store_table(store, "edge")  # feat, label, ...
    names = list(sampler.prefetch_node_feats)
    gathered = "feat" if "feat" in names and store.has_features else None
    others = [n for n in names if n != gathered]

    def lookup(table: dict[str, _LazyArray], name: str, what: str) -> torch.Tensor:
        if name not in table:
            raise ValueError(f"the store {str(store.path)!r} has no {what} {name!r} "
                             f"(it has {sorted(table)})")
        return table[name].tensor()

    block_data = BlockData(gathered, {n: lookup(node, n, "node array") for n in others},
                           {n: lookup(node, n, "node array") for n in sampler.prefetch_labels},
                           {n: lookup(edge, n, "edge array") for n in sampler.prefetch_edge_feats},
                           edge_id=as_tensor(np.asarray(store.edge_id)) if store.has_edge_ids else None)
    return GraphSource(store, store.num_nodes, torch.device("cpu"), block_data)
