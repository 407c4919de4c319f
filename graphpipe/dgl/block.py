"""DGL's block face for graphpipe's samples: ``(input_nodes, output_nodes, blocks)`` as
``dgl.dataloading.DataLoader`` yields them.

Real ``DGLBlock``s (``dgl.create_block``) when DGL can be imported, so ``dgl.nn`` layers
take them; otherwise :class:`Block`, graphpipe's own object with the parts of DGL's face
a training loop reads: ``srcdata`` / ``dstdata`` / ``edata`` (dicts; ``NID`` / ``EID``
hold global node and edge IDs, as ``dgl.NID`` / ``dgl.EID``), ``num_src_nodes()``,
``num_dst_nodes()``, ``num_edges()``, ``edges()``, ``in_degrees()``, ``adj_tensors("csc")``,
``to(device)``. Blocks are listed input layer first; each block's destinations are the
first ``num_dst_nodes()`` of its sources (DGL's ``to_block`` convention).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.minibatch import MiniBatch

__all__ = ["EID", "NID", "Block", "BlockData", "as_tensor", "block_module", "dgl_or_none", "new_block",
           "to_blocks"]

NID = "_ID"
"""Key of the global node IDs in ``srcdata`` / ``dstdata`` (``dgl.NID``)."""
EID = "_ID"
"""Key of the global edge IDs in ``edata`` (``dgl.EID``)."""


@functools.lru_cache(maxsize=1)
def dgl_or_none() -> Any:
    """The ``dgl`` module when it imports (DGL 2.x next to a torch it supports), else None."""
    try:
        import dgl
    except Exception:  # noqa: BLE001 - an absent or broken DGL (wrong torch) both mean "none"
        return None
    return dgl


def block_module(use_dgl: bool | None = None) -> Any:
    """``dgl`` for real DGL blocks, None for :class:`Block`: ``use_dgl`` True (DGL or an
    ImportError), False (None) or None (``dgl`` when it imports)."""
    dgl = dgl_or_none() if use_dgl is not False else None
    if use_dgl and dgl is None:
        raise ImportError("DGL blocks need dgl (2.x, NumPy < 2): see docs/guide/dgl.md, "
                          "'graphpipe beside DGL'")
    return dgl


class Block:
    """One sampled layer with DGL's block face (local IDs; destinations first among sources).

    Args:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets by destination.
        indices: int64 ``(num_edges,)`` local source of each edge, in ``[0, num_src)``.
        num_src: number of source nodes; num_dst: number of destination nodes (<= num_src).

    >>> block = Block(torch.tensor([0, 2, 3]), torch.tensor([1, 2, 0]), num_src=3, num_dst=2)
    >>> block
    Block(num_src_nodes=3, num_dst_nodes=2, num_edges=3)
    >>> [t.tolist() for t in block.edges()], block.in_degrees().tolist()
    ([[1, 2, 0], [0, 0, 1]], [2, 1])
    """

    is_block = True

    def __init__(self, indptr: torch.Tensor, indices: torch.Tensor, num_src: int, num_dst: int):
        self._indptr, self._indices = indptr, indices
        self._num_src, self._num_dst = int(num_src), int(num_dst)
        self.srcdata: dict[str, torch.Tensor] = {}
        self.dstdata: dict[str, torch.Tensor] = {}
        self.edata: dict[str, torch.Tensor] = {}

    def num_src_nodes(self) -> int:
        return self._num_src

    def num_dst_nodes(self) -> int:
        return self._num_dst

    def num_edges(self) -> int:
        return int(self._indices.numel())

    @property
    def device(self) -> torch.device:
        return self._indices.device

    def in_degrees(self) -> torch.Tensor:
        """int64 ``(num_dst,)`` sampled in-degree of every destination."""
        return self._indptr[1:] - self._indptr[:-1]

    def edges(self, form: str = "uv") -> tuple[torch.Tensor, ...]:
        """``(src, dst)`` local IDs of every edge (``form="all"``: and its local edge ID)."""
        dst = torch.repeat_interleave(torch.arange(self._num_dst, device=self.device), self.in_degrees())
        if form == "uv":
            return self._indices, dst
        if form == "all":
            return self._indices, dst, torch.arange(self.num_edges(), device=self.device)
        raise ValueError(f"'form' must be 'uv' or 'all' (got {form!r})")

    def adj_tensors(self, fmt: str = "csc") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(indptr, indices, edge IDs)`` by destination (``fmt="csc"`` only)."""
        if fmt != "csc":
            raise ValueError(f"only 'csc' is available (got {fmt!r})")
        return self._indptr, self._indices, torch.arange(self.num_edges(), device=self.device)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Block:
        """A copy on ``device`` with its data."""
        moved = Block(self._indptr.to(device, non_blocking=non_blocking),
                      self._indices.to(device, non_blocking=non_blocking), self._num_src, self._num_dst)
        for mine, theirs in ((self.srcdata, moved.srcdata), (self.dstdata, moved.dstdata),
                             (self.edata, moved.edata)):
            theirs.update({k: v.to(device, non_blocking=non_blocking) for k, v in mine.items()})
        return moved

    def __repr__(self) -> str:
        return (f"Block(num_src_nodes={self._num_src}, num_dst_nodes={self._num_dst}, "
                f"num_edges={self.num_edges()})")


class BlockData:
    """What to attach to a batch's blocks, DGL's ``prefetch_*`` (full tensors, indexed here).

    Attributes:
        gathered: name for ``MiniBatch.x`` in ``blocks[0].srcdata`` (the loader's gathered
            rows), or None.
        node: ``{name: (N, ...) tensor}`` more input features for ``blocks[0].srcdata``.
        labels: ``{name: (N, ...) tensor}`` for ``blocks[-1].dstdata`` (the seeds' rows).
        edge: ``{name: (E, ...) tensor}`` by edge ID, for every block's ``edata``.
        edge_id: int64 ``(E,)`` edge ID of every CSC slot, or None (the slot is the ID).
    """

    def __init__(self, gathered: str | None = None, node: Mapping[str, torch.Tensor] | None = None,
                 labels: Mapping[str, torch.Tensor] | None = None,
                 edge: Mapping[str, torch.Tensor] | None = None, edge_id: torch.Tensor | None = None):
        self.gathered = gathered
        self.node, self.labels, self.edge = dict(node or {}), dict(labels or {}), dict(edge or {})
        self.edge_id = edge_id


def _rows(table: torch.Tensor, ids: torch.Tensor, device: torch.device) -> torch.Tensor:
    return table[ids.to(table.device)].to(device)


def _edge_ids(slots: torch.Tensor, edge_id: torch.Tensor | None) -> torch.Tensor:
    return slots if edge_id is None else _rows(edge_id, slots, slots.device)


def to_blocks(batch: MiniBatch, data: BlockData | None = None, *,
              use_dgl: bool | None = None) -> tuple[torch.Tensor, torch.Tensor, list]:
    """``(input_nodes, output_nodes, blocks)`` of ``batch``, blocks input layer first.

    Args:
        batch: a :class:`graphpipe.loaders.MiniBatch` (any device; blocks are built there).
        data: the features, labels and edge IDs to attach (:class:`BlockData`).
        use_dgl: ``dgl.create_block`` blocks (True), :class:`Block` (False), or the former
            when DGL imports (None).

    >>> from graphpipe.loaders import NeighborLoader
    >>> indptr, indices = np.array([0, 2, 3, 4]), np.array([1, 2, 0, 0])
    >>> x, y = torch.eye(3), torch.tensor([1, 0, 0])
    >>> loader = NeighborLoader((indptr, indices, x), [-1], batch_size=1, frontier="all")
    >>> data = BlockData(gathered="feat", labels={"label": y})
    >>> input_nodes, output_nodes, blocks = to_blocks(next(iter(loader)), data, use_dgl=False)
    >>> input_nodes.tolist(), output_nodes.tolist(), blocks
    ([0, 1, 2], [0], [Block(num_src_nodes=3, num_dst_nodes=1, num_edges=2)])
    >>> blocks[0].srcdata["feat"].shape, blocks[-1].dstdata["label"].tolist()
    (torch.Size([3, 3]), [1])
    """
    data = data if data is not None else BlockData()
    dgl = block_module(use_dgl)
    blocks = [_one_block(b, dgl) for b in batch.blocks]
    for made, block in zip(blocks, batch.blocks):
        made.srcdata[NID] = batch.n_id[:block.num_src]
        made.dstdata[NID] = batch.n_id[:block.num_dst]
        made.edata[EID] = _edge_ids(block.edge_ids, data.edge_id)
        for name, table in data.edge.items():
            made.edata[name] = _rows(table, made.edata[EID], block.indices.device)
    input_nodes, output_nodes = blocks[0].srcdata[NID], blocks[-1].dstdata[NID]
    if data.gathered is not None and batch.x is not None:
        blocks[0].srcdata[data.gathered] = batch.x[:batch.blocks[0].num_src]
    for name, table in data.node.items():
        blocks[0].srcdata[name] = _rows(table, input_nodes, input_nodes.device)
    for name, table in data.labels.items():
        blocks[-1].dstdata[name] = _rows(table, output_nodes, output_nodes.device)
    return input_nodes, output_nodes, blocks


def new_block(indptr: torch.Tensor, indices: torch.Tensor, num_src: int, num_dst: int,
              dgl: Any = None) -> Any:
    """A block of a local CSC: ``dgl.create_block`` when ``dgl`` (the module) is given,
    else a :class:`Block`; edge ``i`` is CSC slot ``i`` either way."""
    if dgl is None:
        return Block(indptr, indices, num_src, num_dst)
    eids = torch.arange(indices.numel(), dtype=indptr.dtype, device=indptr.device)
    return dgl.create_block(("csc", (indptr, indices, eids)), num_src_nodes=num_src,
                            num_dst_nodes=num_dst, device=indptr.device)


def _one_block(block: Any, dgl: Any) -> Any:
    return new_block(block.indptr, block.indices, block.num_src, block.num_dst, dgl)


def as_tensor(values: Any) -> torch.Tensor:
    """``values`` (a tensor, NumPy array or memory map) as a tensor (no copy when possible)."""
    if isinstance(values, torch.Tensor):
        return values
    array = np.ascontiguousarray(values)
    return torch.from_numpy(array if array.flags.writeable else array.copy())
