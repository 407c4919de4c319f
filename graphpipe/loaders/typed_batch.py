"""What :class:`graphpipe.loaders.HeteroNeighborLoader` yields: :class:`HeteroMiniBatch`, a
sampled typed subgraph with its features, in PyG's layout (``n_id`` / ``x`` /
``edge_index`` dicts, seeds first in the target type) and as DGL-style typed blocks.

For a model: ``batch.x[t]`` are the input rows of the nodes ``batch.n_id[t]``;
``batch.edge_index[(s, r, d)]`` is ``(2, E)`` with row 0 a local ID into ``n_id[s]``
and row 1 a local ID into ``n_id[d]``; the logits to score are those of the first
``batch.batch_size`` nodes of ``batch.target_type`` and ``batch.y[:batch.batch_size]``
their labels. ``batch.to_pyg()`` gives the same as a ``HeteroData``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from graphpipe.loaders.minibatch import Block

__all__ = ["HeteroMiniBatch"]

EdgeType = tuple[str, str, str]


@dataclass
class HeteroMiniBatch:
    """A sampled typed mini-batch (typed local IDs: each node type numbers its own nodes).

    Attributes:
        n_id: ``{ntype: int64 (n_t,)}`` global IDs (in the type's own ID space) of the
            batch's nodes of each type; the seeds first in their type
            (``n_id[target_type][:batch_size]``), then each hop's new nodes. Every node
            type of the graph is present (possibly empty).
        x: ``{ntype: (n_t, D_t)}`` feature rows of ``n_id[t]``, bit for bit the data's
            (``X_t[n_id[t]]``); types without features are absent.
        y: labels of ``n_id[target_type]`` (``y[:batch_size]`` the seeds'), or None.
        batch_size: number of seeds.
        target_type: the seeds' node type (PyG's ``input_type``).
        edge_index: ``{etype: int64 (2, E_r)}`` sampled edges of each relation
            ``(src, rel, dst)``, row 0 local IDs into ``n_id[src]``, row 1 into
            ``n_id[dst]`` (PyG's convention); hop 1's edges first, then hop 2's, ...
            Every relation of the graph is present (possibly with no edges).
        e_id: ``{etype: int64 (E_r,)}`` each edge's position in the relation's input edge
            list (``data[etype].edge_index`` of a HeteroData), or its CSC slot for a store.
        num_sampled_nodes: ``{ntype: [seeds, new in hop 1, ...]}`` (PyG's, for
            ``trim_to_layer``).
        num_sampled_edges: ``{etype: [edges of hop 1, ...]}``.
        input_id: int64 ``(batch_size,)`` position of each seed in the loader's input nodes.
        y_dict: labels of every labelled type, rows of its ``n_id`` (``y`` is the target's).
        edge_attr: ``{etype: (E_r, D)}`` features of the sampled edges (columns of
            ``edge_index[etype]``) for relations that have them.
    """

    n_id: dict[str, torch.Tensor]
    x: dict[str, torch.Tensor]
    y: torch.Tensor | None
    batch_size: int
    target_type: str
    edge_index: dict[EdgeType, torch.Tensor]
    e_id: dict[EdgeType, torch.Tensor]
    num_sampled_nodes: dict[str, list[int]] = field(default_factory=dict)
    num_sampled_edges: dict[EdgeType, list[int]] = field(default_factory=dict)
    input_id: torch.Tensor | None = None
    y_dict: dict[str, torch.Tensor] = field(default_factory=dict)
    edge_attr: dict[EdgeType, torch.Tensor] = field(default_factory=dict)

    @property
    def node_types(self) -> list[str]:
        return list(self.n_id)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.edge_index)

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        return {t: int(v.numel()) for t, v in self.n_id.items()}

    @property
    def seeds(self) -> torch.Tensor:
        """int64 ``(batch_size,)`` global IDs of the seeds (of ``target_type``)."""
        return self.n_id[self.target_type][: self.batch_size]

    @property
    def x_dict(self) -> dict[str, torch.Tensor]:
        """PyG's name for :attr:`x`."""
        return self.x

    @property
    def edge_index_dict(self) -> dict[EdgeType, torch.Tensor]:
        """PyG's name for :attr:`edge_index`."""
        return self.edge_index

    @property
    def num_hops(self) -> int:
        return len(next(iter(self.num_sampled_nodes.values()), [0])) - 1

    def blocks(self) -> list[dict[EdgeType, Block]]:
        """DGL-style typed blocks, outermost (input) layer first: per layer and relation
        ``(s, r, d)`` a :class:`graphpipe.loaders.Block` whose destinations are the first
        ``num_dst`` nodes of ``d`` known before the hop and whose sources are the first
        ``num_src`` nodes of ``s`` known after it (``blocks[-1]`` ends at the seeds;
        ``edge_ids`` hold :attr:`e_id`). Built from ``edge_index`` on each call."""
        layers = []
        for h in range(self.num_hops):
            layer = {}
            for et, counts in self.num_sampled_edges.items():
                lo, hi = sum(counts[:h]), sum(counts[:h + 1])
                num_dst = sum(self.num_sampled_nodes[et[2]][:h + 1])
                num_src = sum(self.num_sampled_nodes[et[0]][:h + 2])
                src, dst = self.edge_index[et][0, lo:hi], self.edge_index[et][1, lo:hi]
                order = torch.argsort(dst, stable=True)
                indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
                indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_dst), 0)
                layer[et] = Block(indptr, src[order], num_dst, num_src, self.e_id[et][lo:hi][order])
            layers.append(layer)
        return layers[::-1]

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> HeteroMiniBatch:
        """A copy with ``fn`` applied to every tensor."""
        def each(d: dict) -> dict:
            return {k: fn(v) for k, v in d.items()}

        return HeteroMiniBatch(
            n_id=each(self.n_id), x=each(self.x), y=None if self.y is None else fn(self.y),
            batch_size=self.batch_size, target_type=self.target_type,
            edge_index=each(self.edge_index), e_id=each(self.e_id),
            num_sampled_nodes={k: list(v) for k, v in self.num_sampled_nodes.items()},
            num_sampled_edges={k: list(v) for k, v in self.num_sampled_edges.items()},
            input_id=None if self.input_id is None else fn(self.input_id), y_dict=each(self.y_dict),
            edge_attr=each(self.edge_attr))

    def to(self, device: torch.device | str, non_blocking: bool = False) -> HeteroMiniBatch:
        """A copy on ``device`` (tensors already there are not copied)."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> HeteroMiniBatch:
        """A copy with every tensor in pinned host memory."""
        return self._map(lambda t: t.pin_memory())

    def to_pyg(self) -> Any:
        """This batch as the ``torch_geometric.data.HeteroData`` PyG's heterogeneous
        ``NeighborLoader`` yields: per node type ``x`` (where the data has features),
        ``y`` (labelled types), ``n_id``, ``num_sampled_nodes`` and ``num_nodes`` for types
        without ``x``; per relation ``edge_index``, ``edge_attr`` (where the data has edge
        features), ``e_id``, ``num_sampled_edges``;
        ``batch_size`` and ``input_id`` on the target type.

        >>> import numpy as np
        >>> from graphpipe.loaders import HeteroGraphData, HeteroNeighborLoader
        >>> data = HeteroGraphData.from_dicts(
        ...     {"paper": 3, "author": 2},
        ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
        ...     x={"paper": np.eye(3, dtype=np.float32)}, y={"paper": np.array([1, 0, 1])})
        >>> loader = HeteroNeighborLoader(data, [2], input_nodes="paper", batch_size=2, seed=0)
        >>> pyg = next(iter(loader)).to_pyg()
        >>> pyg["paper"].batch_size, pyg["paper"].n_id.tolist(), pyg["author"].n_id.tolist()
        (2, [0, 1], [0, 1])
        >>> pyg["author", "writes", "paper"].edge_index.tolist()
        [[0, 1], [0, 0]]
        """
        try:
            from torch_geometric.data import HeteroData
        except ImportError as exc:  # pragma: no cover - exercised only without PyG
            raise ImportError("HeteroMiniBatch.to_pyg() needs torch_geometric; install it with "
                              "`pip install torch-geometric`") from exc
        data = HeteroData()
        for t, ids in self.n_id.items():
            store = data[t]
            if t in self.x:
                store.x = self.x[t]
            else:
                store.num_nodes = int(ids.numel())
            if t in self.y_dict:
                store.y = self.y_dict[t]
            store.n_id = ids
            store.num_sampled_nodes = list(self.num_sampled_nodes.get(t, []))
        for et, ei in self.edge_index.items():
            data[et].edge_index = ei
            if et in self.edge_attr:
                data[et].edge_attr = self.edge_attr[et]
            data[et].e_id = self.e_id[et]
            data[et].num_sampled_edges = list(self.num_sampled_edges.get(et, []))
        data[self.target_type].batch_size = self.batch_size
        if self.input_id is not None:
            data[self.target_type].input_id = self.input_id
        return data
