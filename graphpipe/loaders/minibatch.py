"""What the loaders hand to a training step: :class:`MiniBatch` and its per-layer :class:`Block`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Block", "MiniBatch"]


@dataclass
class Block:
    """One sampled layer in DGL's block convention, local IDs of the batch's ``n_id``.

    Attributes:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets by destination.
        indices: int64 ``(num_edges,)`` local source ID of each edge, in ``[0, num_src)``.
        num_dst: destinations are local IDs ``0 .. num_dst-1`` (a prefix of the sources).
        num_src: sources are local IDs ``0 .. num_src-1`` (``n_id[:num_src]``).
        edge_ids: int64 ``(num_edges,)`` position of each edge in the store's CSC
            ``indices`` (for edge features via the store's ``edge_id``).
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    num_dst: int
    num_src: int
    edge_ids: torch.Tensor

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    def dst_of_edges(self) -> torch.Tensor:
        """int64 ``(num_edges,)`` local destination of every edge (CSC expanded)."""
        counts = self.indptr[1:] - self.indptr[:-1]
        return torch.repeat_interleave(torch.arange(self.num_dst, device=self.indptr.device), counts)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        return Block(self.indptr.to(device, non_blocking=non_blocking),
                     self.indices.to(device, non_blocking=non_blocking), self.num_dst, self.num_src,
                     self.edge_ids.to(device, non_blocking=non_blocking))


@dataclass
class MiniBatch:
    """A sampled mini-batch with its input features.

    Attributes:
        n_id: int64 ``(num_nodes,)`` global node IDs; the seeds first
            (``n_id[:batch_size]``), then each hop's new nodes. Local ID ``i`` of any
            block or of ``edge_index`` is global ID ``n_id[i]``.
        x: ``(num_nodes, dim)`` feature rows of ``n_id`` (the store's dtype, usually
            float32); ``None`` when the loader was built with ``features=False``.
            Treat it as read-only: with Match the loader copies its rows into the next
            batch, and raises ``RuntimeError`` if it was modified in place (clone first).
        y: labels of every node of ``n_id`` (seeds first, as PyG's ``NeighborLoader``:
            ``y[:batch_size]`` are the seeds'), ``(num_nodes,)`` or ``(num_nodes, tasks)``;
            ``None`` when the data has no labels.
        batch_size: number of seeds.
        blocks: per layer, outermost (input) layer first; ``blocks[-1].num_dst ==
            batch_size`` and ``blocks[0].num_src == num_nodes``.
        edge_index: int64 ``(2, E)`` in PyG's convention (row 0 = source, row 1 =
            target, local IDs): the edges of hop 1 into the seeds, then, for each
            later hop, the edges into the nodes first reached by the hop before, so
            every node's in-edges are sampled once, as PyG's ``NeighborLoader`` gives.
        e_id: int64 ``(E,)`` of every ``edge_index`` column: its position in the input edge
            list (``data.edge_index`` of a PyG graph, the ingested edge list of a store;
            reverse edges added at ingest have ``E_input + i``), or its CSC position when
            the data has no edge order (CSC arrays given directly).
        num_sampled_nodes: per hop, seeds first: nodes first reached by each hop
            (length ``num_layers + 1``), for PyG's ``trim_to_layer``.
        num_sampled_edges: per hop, seed hop first: the ``edge_index`` columns of each
            hop (length ``num_layers``).
        input_id: int64 ``(batch_size,)`` index of each seed in the loader's
            ``input_nodes`` as given (PyG's ``input_id``: the position in a tensor, array
            or split; the node ID for a boolean mask or None).
        edge_attr: ``(E, ...)`` edge features of the ``edge_index`` columns (gathered by
            ``e_id``), or None when the data has none.
        node_attrs: other node-level arrays of the data, rows of ``n_id``
            (``{"train_mask": ...}``); read as attributes (``batch.train_mask``).
        edge_attrs: other edge-level arrays, rows of ``e_id``; read as attributes too.
        batch: int64 ``(num_nodes,)`` with ``disjoint=True``: the seed (position in the
            batch) whose tree each node belongs to; None otherwise.
        seed_time: int64 ``(batch_size,)`` with temporal sampling (``time_attr``): each
            seed's time (PyG's ``seed_time``); every node of a seed's tree was reached over
            edges no newer than it (:attr:`node_seed_time` per node). Node and edge
            timestamps of a store come as ``batch.time`` (``nodes/time`` of ``n_id``) and
            ``batch.edge_time`` (``csc/time`` of the ``edge_index`` columns).
    """

    n_id: torch.Tensor
    x: torch.Tensor | None
    y: torch.Tensor | None
    batch_size: int
    blocks: list[Block]
    edge_index: torch.Tensor
    e_id: torch.Tensor
    num_sampled_nodes: list[int] = field(default_factory=list)
    num_sampled_edges: list[int] = field(default_factory=list)
    input_id: torch.Tensor | None = None
    edge_attr: torch.Tensor | None = None
    node_attrs: dict[str, torch.Tensor] = field(default_factory=dict)
    edge_attrs: dict[str, torch.Tensor] = field(default_factory=dict)
    batch: torch.Tensor | None = None
    seed_time: torch.Tensor | None = None

    @property
    def node_seed_time(self) -> torch.Tensor | None:
        """int64 ``(num_nodes,)``: the time of each node's tree (``seed_time[batch]``), the
        time the node was sampled at; None without temporal sampling."""
        if self.seed_time is None or self.batch is None:
            return None
        return self.seed_time[self.batch]

    def __getattr__(self, name: str) -> Any:
        """Other node/edge attributes of the data by name (``batch.train_mask``)."""
        if not name.startswith("__"):
            for attrs in (self.__dict__.get("node_attrs"), self.__dict__.get("edge_attrs")):
                if attrs and name in attrs:
                    return attrs[name]
        raise AttributeError(f"'MiniBatch' object has no attribute {name!r}")

    def _map(self, fn: Any, names: tuple[str, ...] = ()) -> MiniBatch:
        """A copy with ``fn`` applied to every tensor (None stays None), or only to the
        attributes ``names`` (``"x"``, ``"edge_index"``, ``"blocks"``, a node/edge attribute)."""
        def keep(name: str, t: torch.Tensor | None) -> torch.Tensor | None:
            return t if t is None or (names and name not in names) else fn(t)

        blocks = (self.blocks if names and "blocks" not in names else
                  [Block(fn(b.indptr), fn(b.indices), b.num_dst, b.num_src, fn(b.edge_ids))
                   for b in self.blocks])
        return MiniBatch(n_id=keep("n_id", self.n_id), x=keep("x", self.x), y=keep("y", self.y),
                         batch_size=self.batch_size, blocks=blocks,
                         edge_index=keep("edge_index", self.edge_index), e_id=keep("e_id", self.e_id),
                         num_sampled_nodes=list(self.num_sampled_nodes),
                         num_sampled_edges=list(self.num_sampled_edges),
                         input_id=keep("input_id", self.input_id), edge_attr=keep("edge_attr", self.edge_attr),
                         node_attrs={k: keep(k, v) for k, v in self.node_attrs.items()},
                         edge_attrs={k: keep(k, v) for k, v in self.edge_attrs.items()},
                         batch=keep("batch", self.batch), seed_time=keep("seed_time", self.seed_time))

    @property
    def num_nodes(self) -> int:
        return int(self.n_id.numel())

    @property
    def seeds(self) -> torch.Tensor:
        """int64 ``(batch_size,)`` global IDs of the seeds."""
        return self.n_id[: self.batch_size]

    def to(self, device: torch.device | str, *attrs: str, non_blocking: bool = False) -> MiniBatch:
        """A copy on ``device`` (tensors already there are not copied); with ``attrs``
        (PyG's ``batch.to(device, "x", "edge_index")``) only those attributes move."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking), attrs)

    def pin_memory(self) -> MiniBatch:
        """A copy with every tensor in pinned host memory."""
        return self._map(lambda t: t.pin_memory())

    def to_dgl(self, edge_id: Any = None, *, feat: str = "feat",
               label: str = "label") -> tuple[torch.Tensor, torch.Tensor, list]:
        """This batch as DGL's ``DataLoader`` yields one: ``(input_nodes, output_nodes,
        blocks)`` with ``DGLBlock``s (input layer first), ``dgl.NID``/``dgl.EID`` filled,
        ``blocks[0].srcdata[feat]`` the input features and ``blocks[-1].dstdata[label]``
        the seeds' labels. ``edge_id``: the store's ``edge_id`` (CSC slot -> original edge
        ID) for ``dgl.EID``; None keeps CSC slots. Needs ``dgl`` (imported here only);
        see :func:`graphpipe.loaders.dgl_blocks.to_dgl_blocks`. With DGL installed::

            input_nodes, output_nodes, blocks = batch.to_dgl(store.edge_id)
            h = sage(blocks, blocks[0].srcdata["feat"])   # a DGL model, unchanged
        """
        from graphpipe.loaders.dgl_blocks import to_dgl_blocks

        return to_dgl_blocks(self, edge_id, feat=feat, label=label)

    def to_pyg(self) -> Any:
        """This batch as the ``torch_geometric.data.Data`` PyG's ``NeighborLoader`` yields:
        ``x, edge_index, y`` (every node), ``edge_attr``, the other node/edge attributes,
        ``n_id, e_id, input_id, batch_size, num_sampled_nodes, num_sampled_edges``,
        ``batch`` (``disjoint=True``) and ``seed_time`` (temporal sampling); attributes the data lacks are left out (``num_nodes``
        is set only without ``x``).

        >>> import numpy as np
        >>> from graphpipe.loaders import NeighborLoader
        >>> indptr, indices = np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0])
        >>> x, y = np.eye(3, dtype=np.float32), np.array([1, 0, 0])
        >>> loader = NeighborLoader((indptr, indices, x, y), fanouts=[2], batch_size=1,
        ...                         input_nodes=np.array([0]), seed=0)
        >>> data = next(iter(loader)).to_pyg()
        >>> data  # doctest: +NORMALIZE_WHITESPACE
        Data(x=[3, 3], edge_index=[2, 2], y=[3], n_id=[3], e_id=[2], input_id=[1],
             batch_size=1, num_sampled_nodes=[2], num_sampled_edges=[1])
        >>> data.edge_index.tolist(), data.n_id.tolist()
        ([[1, 2], [0, 0]], [0, 1, 2])
        """
        try:
            from torch_geometric.data import Data
        except ImportError as exc:  # pragma: no cover - exercised only without PyG
            raise ImportError("MiniBatch.to_pyg() needs torch_geometric; install it with "
                              "`pip install torch-geometric`") from exc
        fields: dict[str, Any] = {"x": self.x, "edge_index": self.edge_index, "edge_attr": self.edge_attr,
                                  "y": self.y, **self.node_attrs, **self.edge_attrs, "n_id": self.n_id,
                                  "e_id": self.e_id, "input_id": self.input_id, "batch": self.batch,
                                  "seed_time": self.seed_time,
                                  "batch_size": self.batch_size,
                                  "num_nodes": self.num_nodes if self.x is None else None,
                                  "num_sampled_nodes": list(self.num_sampled_nodes),
                                  "num_sampled_edges": list(self.num_sampled_edges)}
        return Data(**{k: v for k, v in fields.items() if v is not None})
