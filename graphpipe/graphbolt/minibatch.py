"""GraphBolt's ``MiniBatch``: what every stage takes and returns (seeds, labels, sampled
subgraphs, input nodes, fetched features), and its DGL ``blocks``."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import torch

from graphpipe.dgl.block import EID, NID, block_module, new_block

__all__ = ["MiniBatch", "SampledSubgraph"]


@dataclass
class SampledSubgraph:
    """One sampled layer (GraphBolt's ``SampledSubgraphImpl``, homogeneous).

    Attributes:
        indptr: int64 ``(num_dst + 1,)`` CSC offsets of the layer's destinations.
        indices: int64 ``(num_edges,)`` local sources, in ``[0, num_src)``.
        original_column_node_ids: int64 ``(num_dst,)`` global IDs of the destinations.
        original_row_node_ids: int64 ``(num_src,)`` global IDs of the sources (destinations
            first).
        original_edge_ids: int64 ``(num_edges,)`` global edge IDs.
    """

    indptr: torch.Tensor
    indices: torch.Tensor
    original_column_node_ids: torch.Tensor
    original_row_node_ids: torch.Tensor
    original_edge_ids: torch.Tensor

    @property
    def sampled_csc(self) -> Any:
        """``(indptr, indices)`` as GraphBolt's ``CSCFormatBase`` exposes them."""
        return _CSC(self.indptr, self.indices)

    def to(self, device: torch.device | str) -> SampledSubgraph:
        return SampledSubgraph(*(getattr(self, f.name).to(device) for f in fields(self)))


def _narrow(indptr: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(indptr, indices)`` as int32 when every offset fits (GraphBolt's
    ``cast_to_minimum_dtype``), else unchanged."""
    if max(indptr.numel() - 2, indices.numel()) <= torch.iinfo(torch.int32).max:
        return indptr.to(torch.int32), indices.to(torch.int32)
    return indptr, indices


@dataclass
class _CSC:
    indptr: torch.Tensor
    indices: torch.Tensor


@dataclass
class MiniBatch:
    """A batch as GraphBolt's stages hand it on (homogeneous graphs).

    Attributes:
        seed_nodes: int64 ``(B,)`` the batch's seeds (also ``seeds``, newer GraphBolt's name).
        labels: ``(B, ...)`` their labels, when the item set has them.
        sampled_subgraphs: per layer, input layer first (:class:`SampledSubgraph`).
        input_nodes: int64 global IDs of the first layer's sources.
        node_features: ``{name: (len(input_nodes), ...)}`` fetched rows.
        edge_features: per layer ``{name: (num_edges, ...)}``.

    >>> batch = MiniBatch(seed_nodes=torch.tensor([3, 1]))
    >>> batch.seeds.tolist(), batch.blocks
    ([3, 1], None)
    """

    seed_nodes: torch.Tensor | None = None
    labels: torch.Tensor | None = None
    sampled_subgraphs: list[SampledSubgraph] | None = None
    input_nodes: torch.Tensor | None = None
    node_features: dict[str, torch.Tensor] | None = None
    edge_features: list[dict[str, torch.Tensor]] | None = None
    _blocks: list | None = field(default=None, repr=False)

    @property
    def seeds(self) -> torch.Tensor | None:
        return self.seed_nodes

    @seeds.setter
    def seeds(self, value: torch.Tensor | None) -> None:
        self.seed_nodes = value

    @property
    def num_layers(self) -> int:
        return len(self.sampled_subgraphs or [])

    @property
    def blocks(self) -> list | None:
        """DGL blocks of the sampled layers (``dgl.create_block`` when DGL imports, else
        :class:`graphpipe.dgl.Block`), input layer first: ``blocks[0].srcdata[NID]`` the
        input nodes, every ``edata[EID]`` the global edge IDs (as GraphBolt sets them)."""
        if not self.sampled_subgraphs:
            return None
        if self._blocks is None:
            dgl = block_module()
            blocks = [new_block(*_narrow(s.indptr, s.indices), s.original_row_node_ids.numel(),
                                s.original_column_node_ids.numel(), dgl) for s in self.sampled_subgraphs]
            blocks[0].srcdata[NID] = self.sampled_subgraphs[0].original_row_node_ids
            for block, sub in zip(blocks, self.sampled_subgraphs):
                block.edata[EID] = sub.original_edge_ids
            self._blocks = blocks
        return self._blocks

    def to(self, device: torch.device | str) -> MiniBatch:
        """A copy with every tensor on ``device`` (blocks rebuilt there)."""
        def move(value: Any) -> Any:
            if isinstance(value, (torch.Tensor, SampledSubgraph)):
                return value.to(device)
            if isinstance(value, dict):
                return {k: move(v) for k, v in value.items()}
            if isinstance(value, list):
                return [move(v) for v in value]
            return value

        return MiniBatch(**{f.name: move(getattr(self, f.name)) for f in fields(self) if f.name != "_blocks"})
