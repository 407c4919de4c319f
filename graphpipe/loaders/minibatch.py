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
        y: labels of the seeds, ``(batch_size,)`` or ``(batch_size, tasks)``; ``None``
            when the data has no labels.
        batch_size: number of seeds.
        blocks: per layer, outermost (input) layer first; ``blocks[-1].num_dst ==
            batch_size`` and ``blocks[0].num_src == num_nodes``.
        edge_index: int64 ``(2, E)`` in PyG's convention (row 0 = source, row 1 =
            target, local IDs): the edges of hop 1 into the seeds, then, for each
            later hop, the edges into the nodes first reached by the hop before, so
            every node's in-edges are sampled once, as PyG's ``NeighborLoader`` gives.
        e_id: int64 ``(E,)`` store CSC position of every ``edge_index`` column.
        num_sampled_nodes: per hop, seeds first: nodes first reached by each hop
            (length ``num_layers + 1``), for PyG's ``trim_to_layer``.
        num_sampled_edges: per hop, seed hop first: the ``edge_index`` columns of each
            hop (length ``num_layers``).
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

    @property
    def num_nodes(self) -> int:
        return int(self.n_id.numel())

    @property
    def seeds(self) -> torch.Tensor:
        """int64 ``(batch_size,)`` global IDs of the seeds."""
        return self.n_id[: self.batch_size]

    def to(self, device: torch.device | str, non_blocking: bool = False) -> MiniBatch:
        """A copy on ``device`` (tensors already there are not copied)."""
        def move(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=non_blocking)

        return MiniBatch(n_id=move(self.n_id), x=move(self.x), y=move(self.y),
                         batch_size=self.batch_size,
                         blocks=[b.to(device, non_blocking) for b in self.blocks],
                         edge_index=move(self.edge_index), e_id=move(self.e_id),
                         num_sampled_nodes=list(self.num_sampled_nodes),
                         num_sampled_edges=list(self.num_sampled_edges))

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
        """This batch as ``torch_geometric.data.Data(x, edge_index, y, n_id, e_id, batch_size,
        num_sampled_nodes, num_sampled_edges)``; ``y`` holds the seeds' labels only.

        >>> import numpy as np
        >>> from graphpipe.loaders import NeighborLoader
        >>> indptr, indices = np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0])
        >>> x, y = np.eye(3, dtype=np.float32), np.array([1, 0, 0])
        >>> loader = NeighborLoader((indptr, indices, x, y), fanouts=[2], batch_size=1,
        ...                         input_nodes=np.array([0]), seed=0)
        >>> data = next(iter(loader)).to_pyg()
        >>> data  # doctest: +NORMALIZE_WHITESPACE
        Data(x=[3, 3], edge_index=[2, 2], y=[1], n_id=[3], e_id=[2], batch_size=1,
             num_nodes=3, num_sampled_nodes=[2], num_sampled_edges=[1])
        >>> data.edge_index.tolist(), data.n_id.tolist()
        ([[1, 2], [0, 0]], [0, 1, 2])
        """
        try:
            from torch_geometric.data import Data
        except ImportError as exc:  # pragma: no cover - exercised only without PyG
            raise ImportError("MiniBatch.to_pyg() needs torch_geometric; install it with "
                              "`pip install torch-geometric`") from exc
        return Data(x=self.x, edge_index=self.edge_index, y=self.y, n_id=self.n_id,
                    e_id=self.e_id, batch_size=self.batch_size, num_nodes=self.num_nodes,
                    num_sampled_nodes=list(self.num_sampled_nodes),
                    num_sampled_edges=list(self.num_sampled_edges))
