"""A :class:`MiniBatch` as DGL gives one: ``(input_nodes, output_nodes, blocks)`` with real
``DGLBlock``s (``dgl.create_block``), what ``dgl.dataloading.DataLoader`` over a
``NeighborSampler`` yields. DGL is imported only here, when a conversion is asked for.

Per block (input layer first, as DGL lists them): ``srcdata[dgl.NID]`` / ``dstdata[dgl.NID]``
the global node IDs, ``edata[dgl.EID]`` the global edge IDs; ``blocks[0].srcdata["feat"]``
the input features (``MiniBatch.x``, DGL's ``prefetch_node_feats=["feat"]``) and
``blocks[-1].dstdata["label"]`` the seeds' labels (``prefetch_labels=["label"]``). A typed
batch gives typed blocks (:func:`to_dgl_typed_blocks`), as DGL's loader over a heterograph.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

if TYPE_CHECKING:  # annotations only: MiniBatch.to_dgl imports this module
    from graphpipe.loaders.minibatch import Block, MiniBatch
    from graphpipe.loaders.typed_batch import HeteroMiniBatch

__all__ = ["FANOUT_ORDERS", "import_dgl", "seed_first_fanouts", "to_dgl_blocks", "to_dgl_typed_blocks"]

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


def to_dgl_typed_blocks(batch: HeteroMiniBatch, *, feat: str = "feat", label: str = "label"
                        ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor], list]:
    """``(input_nodes, output_nodes, blocks)`` of a typed ``batch`` as DGL's DataLoader
    yields them over a heterograph: one typed ``DGLBlock`` per layer, input layer first
    (:meth:`HeteroMiniBatch.blocks`), every node type on both sides; per type
    ``srcnodes[t].data[dgl.NID]`` / ``dstnodes[t].data[dgl.NID]`` the type's global IDs, per
    relation ``edges[etype].data[dgl.EID]`` the edges' IDs (``e_id``);
    ``blocks[0].srcnodes[t].data[feat]`` the input rows of the types with features and
    ``blocks[-1].dstnodes[target].data[label]`` the seeds' labels. ``input_nodes`` and
    ``output_nodes`` are ``{ntype: IDs}`` (``output_nodes`` the seeds' type only)."""
    dgl = import_dgl()
    hops = batch.num_hops
    device = batch.n_id[batch.target_type].device
    blocks = []
    for layer, relations in enumerate(batch.blocks()):  # input layer first: hop hops - 1 - layer
        hop = hops - 1 - layer
        num_dst = {t: sum(c[:hop + 1]) for t, c in batch.num_sampled_nodes.items()}
        num_src = {t: sum(c[:hop + 2]) for t, c in batch.num_sampled_nodes.items()}
        data = {et: ("csc", (b.indptr, b.indices, torch.arange(b.num_edges, dtype=torch.int64, device=device)))
                for et, b in relations.items()}
        made = dgl.create_block(data, num_src_nodes=num_src, num_dst_nodes=num_dst, device=device)
        for t in batch.num_sampled_nodes:
            made.srcnodes[t].data[dgl.NID] = batch.n_id[t][:num_src[t]]
            made.dstnodes[t].data[dgl.NID] = batch.n_id[t][:num_dst[t]]
        for et, b in relations.items():
            made.edges[et].data[dgl.EID] = b.edge_ids
        blocks.append(made)
    if feat:
        for t, x in batch.x.items():
            blocks[0].srcnodes[t].data[feat] = x[:blocks[0].num_src_nodes(t)]
    if batch.y is not None and label:
        blocks[-1].dstnodes[batch.target_type].data[label] = batch.y[:batch.batch_size]
    input_nodes = {t: blocks[0].srcnodes[t].data[dgl.NID] for t in batch.num_sampled_nodes}
    return input_nodes, {batch.target_type: batch.seeds}, blocks
