"""DGL's graph samplers as option objects: :class:`NeighborSampler` and
:class:`MultiLayerFullNeighborSampler` say what :class:`graphpipe.dgl.DataLoader` samples
(fanouts, input layer first, as DGL lists them) and what it attaches to the blocks
(``prefetch_node_feats``, ``prefetch_labels``, ``prefetch_edge_feats``). The sampling is
graphpipe's (``frontier="all"``: each hop expands every node of the layer before it,
DGL's rule; ``-1`` takes every in-neighbour; without replacement unless ``replace``).

DGL options graphpipe does not implement (``edge_dir="out"``, ``prob``, ``mask``,
per-edge-type fanouts) are refused, never ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphpipe.ops._core.checks import check_fanouts

__all__ = ["MultiLayerFullNeighborSampler", "NeighborSampler"]


def _names(value: Sequence[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, dict):
        raise ValueError(f"'{what}' per node or edge type (heterogeneous graphs) is not supported")  # noqa: TRY004 - the project reports bad arguments as ValueError
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


class NeighborSampler:
    """DGL's ``dgl.dataloading.NeighborSampler``: ``fanouts[i]`` in-neighbours per node of
    layer ``i`` (input layer first: ``[5, 10, 15]`` samples 15 neighbours of each seed).

    Args:
        fanouts: neighbours per layer, input layer first; ``-1`` = all.
        edge_dir: ``"in"`` only (DGL's default).
        prob, mask: None only (uniform sampling).
        replace: sample with replacement.
        prefetch_node_feats: node features for ``blocks[0].srcdata`` (``["feat"]``).
        prefetch_labels: node labels for ``blocks[-1].dstdata`` (``["label"]``).
        prefetch_edge_feats: edge features for every block's ``edata``.
        output_device, fused: accepted; they change nothing a batch holds.

    >>> sampler = NeighborSampler([5, 10, 15], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    >>> sampler
    NeighborSampler(fanouts=[5, 10, 15], prefetch_node_feats=['feat'], prefetch_labels=['label'])
    >>> sampler.seed_first_fanouts
    [15, 10, 5]
    """

    def __init__(self, fanouts: Sequence[int], edge_dir: str = "in", prob: Any = None, mask: Any = None,
                 replace: bool = False, prefetch_node_feats: Sequence[str] | None = None,
                 prefetch_labels: Sequence[str] | None = None,
                 prefetch_edge_feats: Sequence[str] | None = None, output_device: Any = None,
                 fused: bool = True):
        if any(isinstance(f, dict) for f in fanouts):
            raise ValueError("fanouts per edge type (heterogeneous graphs) are not supported")
        if edge_dir != "in":
            raise ValueError(f"only edge_dir='in' is supported (got {edge_dir!r})")
        if prob is not None or mask is not None:
            raise ValueError("'prob' and 'mask' (weighted or masked sampling) are not supported")
        self.fanouts = check_fanouts(list(fanouts))
        self.replace = bool(replace)
        self.prefetch_node_feats = _names(prefetch_node_feats, "prefetch_node_feats")
        self.prefetch_labels = _names(prefetch_labels, "prefetch_labels")
        self.prefetch_edge_feats = _names(prefetch_edge_feats, "prefetch_edge_feats")
        self.output_device = output_device

    @property
    def seed_first_fanouts(self) -> list[int]:
        """The fanouts seed hop first (graphpipe's and PyG's order)."""
        return self.fanouts[::-1]

    def __repr__(self) -> str:
        parts = [f"fanouts={self.fanouts}"]
        for name in ("prefetch_node_feats", "prefetch_labels", "prefetch_edge_feats"):
            if getattr(self, name):
                parts.append(f"{name}={getattr(self, name)}")
        if self.replace:
            parts.append("replace=True")
        return f"{type(self).__name__}({', '.join(parts)})"


class MultiLayerFullNeighborSampler(NeighborSampler):
    """DGL's ``MultiLayerFullNeighborSampler``: every in-neighbour, ``num_layers`` layers
    (``NeighborSampler([-1] * num_layers, ...)``).

    >>> MultiLayerFullNeighborSampler(2, prefetch_node_feats=["feat"])
    MultiLayerFullNeighborSampler(fanouts=[-1, -1], prefetch_node_feats=['feat'])
    """

    def __init__(self, num_layers: int, **kwargs: Any):
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"'num_layers' must be a positive integer (got {num_layers!r})")
        super().__init__([-1] * num_layers, **kwargs)
