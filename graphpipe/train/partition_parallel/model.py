"""Full-graph GCN / GraphSAGE on one partition: the project's models, layer by layer on
``[inner | halo]`` rows.

:class:`PartitionModel` wraps a :class:`graphpipe.train.GCN` or
:class:`graphpipe.train.GraphSAGE` (same parameters, so a state dict moves between the
single-process model and this one). Layer ``l`` consumes the rows of every local node:

- layer 0: the input features of the inner and halo nodes, both read once (features do
  not change, so they are not exchanged every epoch: Sylvie's ``use_pp``);
- layer ``l > 0``: the inner rows computed by layer ``l - 1`` and the halo rows that
  ``halo_fn(h, l)`` returns (a :class:`.staleness.StaleHalo` exchange).

The local CSC holds every in-edge of the inner nodes, so SAGE's mean is the full graph's.
GCN's symmetric normalisation needs the degrees of the whole graph (a halo node's
in-partition degree is not its degree): the edge weights ``1 / sqrt(deg_in(u) *
deg_out(v))`` are computed once from the global degrees with the self loop counted, as
:class:`graphpipe.train.layers.GCNConv` computes them on the full graph.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from graphpipe.ops.aggregate import aggregate
from graphpipe.train.layers import LocalGraph, add_self_loops
from graphpipe.train.models import GCN, BlockModel, GraphSAGE

from .partition import LocalPartition

__all__ = ["PartitionModel"]

HaloFn = Callable[[torch.Tensor, int], torch.Tensor]


class PartitionModel(nn.Module):
    """A GCN or GraphSAGE run on one partition.

    Args:
        base: a :class:`GCN` or :class:`GraphSAGE` (its parameters are this model's).
        part: the rank's :class:`LocalPartition`.

    ``forward(x, halo_fn)``: ``x`` float ``(n_in + n_halo, F)`` input rows of the local
    nodes, ``halo_fn(h (n_in, D), layer) -> (n_halo, D)``; returns logits ``(n_in, C)``.
    """

    def __init__(self, base: BlockModel, part: LocalPartition):
        super().__init__()
        if not isinstance(base, (GCN, GraphSAGE)):
            raise ValueError(f"partition-parallel training runs gcn or sage "  # noqa: TRY004
                             f"(got {type(base).__name__})")
        self.base = base
        n_in, n_local = part.num_inner, part.num_inner + part.num_halo
        self.graph = LocalGraph(torch.from_numpy(part.indptr), torch.from_numpy(part.indices),
                                n_in, n_local)
        self.gcn = isinstance(base, GCN)
        if self.gcn:
            self.graph = add_self_loops(self.graph) if base.convs[0].add_self_loops else self.graph
            loops = 1 if base.convs[0].add_self_loops else 0
            d_in = torch.from_numpy(part.in_degree[:n_in] + loops).clamp(min=1).double()
            d_out = torch.from_numpy(part.out_degree + loops).clamp(min=1).double()
            dst = torch.repeat_interleave(torch.arange(n_in), self.graph.indptr.diff())
            self.register_buffer("edge_weight", (d_in[dst] * d_out[self.graph.indices]).rsqrt().float(),
                                 persistent=False)

    def _conv(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        conv = self.base.convs[layer]
        if not self.gcn:
            return conv(x, self.graph)
        g = self.graph
        if not conv.normalize:
            raise ValueError("partition-parallel GCN needs normalize=True")
        if conv.out_dim <= conv.in_dim:  # as GCNConv: transform first when narrower
            out = aggregate(g.indptr, g.indices, conv.lin(x), num_dst=g.num_dst,
                            edge_weight=self.edge_weight)
        else:
            out = conv.lin(aggregate(g.indptr, g.indices, x, num_dst=g.num_dst,
                                     edge_weight=self.edge_weight))
        return out + conv.bias if conv.bias is not None else out

    def forward(self, x: torch.Tensor, halo_fn: HaloFn) -> torch.Tensor:
        n_in = self.graph.num_dst
        h = x
        for layer in range(self.base.num_layers):
            if layer > 0:
                h = torch.cat([h, halo_fn(h, layer)])
            h = self._conv(layer, h)
            if layer < self.base.num_layers - 1:
                h = self.base.activation_dropout(h)
        assert h.shape[0] == n_in
        return h
