"""A :class:`MiniBatch` as DGL gives one: ``(input_nodes, output_nodes, blocks)`` with real
``DGLBlock``s (``dgl.create_block``), what ``dgl.dataloading.DataLoader`` over a
``NeighborSampler`` yields. DGL is imported only here, when a conversion is asked for.

Per block (input layer first, as DGL lists them): ``srcdata[dgl.NID]`` / ``dstdata[dgl.NID]``
the global node IDs, ``edata[dgl.EID]`` the global edge IDs; ``blocks[0].srcdata["feat"]``
the input features (``MiniBatch.x``, DGL's ``prefetch_node_feats=["feat"]``) and
``blocks[-1].dstdata["label"]`` the seeds' labels (``prefetch_labels=["label"]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:  # annotations only: MiniBatch.to_dgl imports this module
    from graphpipe.loaders.minibatch import Block, MiniBatch

__all__ = ["FANOUT_ORDERS", "import_dgl", "seed_first_fanouts", "to_dgl_blocks"]

FANOUT_ORDERS = ("seed", "dgl")
"""``"seed"``: fanouts listed seed hop first (graphpipe, PyG); ``"dgl"``: input layer first
(DGL's ``NeighborSampler``, which samples ``reversed(fanouts)`` from the seeds out)."""


def seed_first_fanouts(fanouts: Sequence[int], fanout_order: str) -> list[int]:
    """``fanouts`` listed seed hop first, from a list in ``fanout_order``.

    >>> seed_first_fanouts([5, 10, 15], "dgl"), seed_first_fanouts([15, 10, 5], "seed")
    ([15, 10, 5], [15, 10, 5])
    """
    if fanout_order not in FANOUT_ORDERS:
        raise ValueError(f"'fanout_order' must be 'seed' or 'dgl' (got {fanout_order!r})")
    values = list(fanouts)
    return values[::-1] if fanout_order == "dgl" else values


def import_dgl() -> Any:
    """``import dgl``, or an ImportError saying how to get it."""
    try:
        import dgl
    except ImportError as exc:
        raise ImportError("DGL output needs dgl (2.x, NumPy < 2): see docs/guide/dgl.md, "
                          "'graphpipe beside DGL' for an environment with both") from exc
    return dgl


def _edge_ids(block: Block, edge_id: np.ndarray | torch.Tensor | None) -> torch.Tensor:
    """Global edge IDs of a block's edges: through ``edge_id`` (store CSC slot -> original
    edge) when given, else the CSC slots themselves."""
    if edge_id is None:
        return block.edge_ids
    slots = block.edge_ids.to("cpu")
    if isinstance(edge_id, torch.Tensor):
        return edge_id[slots.to(edge_id.device)].to(block.edge_ids.device)
    ids = np.asarray(edge_id)[slots.numpy()].astype(np.int64, copy=False)
    return torch.from_numpy(ids).to(block.edge_ids.device)


def to_dgl_blocks(batch: MiniBatch, edge_id: np.ndarray | torch.Tensor | None = None, *,
                  feat: str = "feat", label: str = "label") -> tuple[torch.Tensor, torch.Tensor, list]:
    """``(input_nodes, output_nodes, blocks)`` of ``batch`` as DGL's DataLoader yields them.

    Args:
        batch: a :class:`MiniBatch` (on any device; the blocks are built there).
        edge_id: int64 ``(E,)`` original edge ID of every CSC slot (``GraphStore.edge_id``),
            so that ``edata[dgl.EID]`` indexes edges in the graph's edge order; None keeps
            the CSC slots (``Block.edge_ids``).
        feat: name of the input features in ``blocks[0].srcdata`` (``x``; absent when None).
        label: name of the seeds' labels in ``blocks[-1].dstdata`` (absent when None).

    Returns:
        ``input_nodes`` int64 ``(num_src of blocks[0],)`` global IDs, ``output_nodes`` int64
        ``(batch_size,)`` the seeds, ``blocks`` one ``DGLBlock`` per layer, input layer first.
    """
    dgl = import_dgl()
    blocks = []
    for block in batch.blocks:
        eids = torch.arange(block.num_edges, dtype=torch.int64, device=block.indptr.device)
        made = dgl.create_block(("csc", (block.indptr, block.indices, eids)),
                                num_src_nodes=block.num_src, num_dst_nodes=block.num_dst,
                                device=block.indptr.device)
        made.srcdata[dgl.NID] = batch.n_id[:block.num_src]
        made.dstdata[dgl.NID] = batch.n_id[:block.num_dst]
        made.edata[dgl.EID] = _edge_ids(block, edge_id)
        blocks.append(made)
    if batch.x is not None and feat:
        blocks[0].srcdata[feat] = batch.x[:batch.blocks[0].num_src]
    if batch.y is not None and label:
        blocks[-1].dstdata[label] = batch.y[:batch.batch_size]
    return blocks[0].srcdata[dgl.NID], blocks[-1].dstdata[dgl.NID], blocks
