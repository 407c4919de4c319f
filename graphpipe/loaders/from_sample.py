"""A sampled subgraph (:class:`graphpipe.ops.sampling.SampleOutput`) as a
:class:`MiniBatch`: DGL-style blocks as tensors, PyG-style ``edge_index``/``e_id``
(:func:`pyg_edges`), the seeds' labels, the feature rows the gather stage assembled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
import torch

from graphpipe.loaders.minibatch import Block, MiniBatch
from graphpipe.ops.sampling import SampleOutput

__all__ = ["BatchAttrs", "minibatch_from_sample", "pyg_edges"]


@dataclass
class BatchAttrs:
    """What a batch carries besides ``x`` and ``y``: the edge order and the other node and
    edge arrays of the data (all optional).

    Attributes:
        edge_order: int64 ``(E,)`` input edge ID of each CSC slot (a store's
            ``csc/edge_id``); None: ``e_id`` stays the CSC slot.
        num_input_edges: edges of the input list; IDs ``>=`` it are reverse edges added at
            ingest (``E_input + i`` is the reverse of edge ``i``, same attributes).
        edge_attr: ``(E_input, ...)`` edge features in input order (PyG's ``edge_attr``).
        node_attrs: ``{name: (N, ...)}`` other node-level arrays.
        edge_attrs: ``{name: (E_input, ...)}`` other edge-level arrays, input order.
        slot_attrs: ``{name: (E, ...)}`` edge-level arrays in CSC slot order (a store's
            ``csc/time`` as ``edge_time``), gathered by slot into the batch's edge attributes.
    """

    edge_order: np.ndarray | None = None
    num_input_edges: int = 0
    edge_attr: np.ndarray | None = None
    node_attrs: dict[str, np.ndarray] = field(default_factory=dict)
    edge_attrs: dict[str, np.ndarray] = field(default_factory=dict)
    slot_attrs: dict[str, np.ndarray] = field(default_factory=dict)

    def input_edges(self, slots: np.ndarray) -> np.ndarray:
        """int64 input edge ID of CSC ``slots`` (the slots themselves without an edge order)."""
        return slots if self.edge_order is None else np.asarray(self.edge_order)[slots]

    def edge_rows(self, e_id: np.ndarray) -> np.ndarray:
        """Row of each edge in the edge arrays: reverse edges read their input edge's row."""
        if self.num_input_edges and e_id.size and int(e_id.max()) >= self.num_input_edges:
            return np.where(e_id >= self.num_input_edges, e_id - self.num_input_edges, e_id)
        return e_id


def _rows(values: np.ndarray, ids: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(np.take(values, ids, axis=0)))


@numba.njit(cache=True, nogil=True)
def _fill_hop_edges(indptr, indices, edge_ids, dst_lo, dst_hi, edge_index, e_id, offset):
    """Edges into destinations ``dst_lo..dst_hi-1`` of one block, written from column ``offset``."""
    col = offset
    for v in range(dst_lo, dst_hi):
        for e in range(indptr[v], indptr[v + 1]):
            edge_index[0, col] = indices[e]
            edge_index[1, col] = v
            e_id[col] = edge_ids[e]
            col += 1
    return col


def pyg_edges(blocks: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """PyG-style edges of DGL-style blocks (numpy, local IDs of ``n_id``).

    Hop 1 (``blocks[-1]``) contributes all its edges; hop ``h > 1`` contributes
    the edges into the nodes first reached by hop ``h-1``: destination local IDs
    ``[blocks[-h+1].num_dst, blocks[-h+1].num_src)``, a contiguous CSC range.

    Returns:
        ``(edge_index int64 (2, E), e_id int64 (E,), edges per hop)``.
    """
    ranges = []
    inner = None
    for block in reversed(blocks):
        lo = 0 if inner is None else inner.num_dst
        indptr = np.asarray(block.indptr)
        ranges.append((block, lo, block.num_dst, int(indptr[block.num_dst]) - int(indptr[lo])))
        inner = block
    total = sum(r[3] for r in ranges)
    edge_index = np.empty((2, total), dtype=np.int64)
    e_id = np.empty(total, dtype=np.int64)
    offset = 0
    for block, lo, hi, _count in ranges:
        offset = _fill_hop_edges(np.asarray(block.indptr, dtype=np.int64),
                                 np.asarray(block.indices, dtype=np.int64),
                                 np.asarray(block.edge_ids, dtype=np.int64), lo, hi, edge_index, e_id,
                                 offset)
    return edge_index, e_id, [r[3] for r in ranges]


def minibatch_from_sample(out: SampleOutput, n_id: np.ndarray, x: torch.Tensor | None,
                          labels: np.ndarray | None, attrs: BatchAttrs | None = None) -> MiniBatch:
    """The :class:`MiniBatch` of one sampled subgraph.

    Args:
        out: the sampler's output (``blocks``, ``batch_size``).
        n_id: int64 ``(k,)`` its node IDs (``out.n_id``, contiguous).
        x: ``(k, dim)`` feature rows of ``n_id``, or None (not assembled yet, or none).
        labels: ``(N,)`` / ``(N, tasks)`` labels of all nodes, or None; the batch gets the
            rows of every node of ``n_id`` (seeds first).
        attrs: edge order and other arrays (:class:`BatchAttrs`), or None.
    """
    attrs = attrs if attrs is not None else BatchAttrs()
    blocks = [Block(indptr=torch.from_numpy(np.ascontiguousarray(b.indptr, dtype=np.int64)),
                    indices=torch.from_numpy(np.ascontiguousarray(b.indices, dtype=np.int64)),
                    num_dst=int(b.num_dst), num_src=int(b.num_src),
                    edge_ids=torch.from_numpy(np.ascontiguousarray(b.edge_ids, dtype=np.int64)))
              for b in out.blocks]
    edge_index, slots, per_hop = pyg_edges(out.blocks)
    e_id = attrs.input_edges(slots)
    y = None if labels is None else _rows(labels, n_id)
    rows = attrs.edge_rows(e_id)
    num_sampled_nodes = [int(out.batch_size)] + [int(b.num_src - b.num_dst) for b in reversed(out.blocks)]
    return MiniBatch(n_id=torch.from_numpy(n_id), x=x, y=y, batch_size=int(out.batch_size),
                     blocks=blocks, edge_index=torch.from_numpy(edge_index), e_id=torch.from_numpy(e_id),
                     num_sampled_nodes=num_sampled_nodes, num_sampled_edges=per_hop,
                     edge_attr=None if attrs.edge_attr is None else _rows(attrs.edge_attr, rows),
                     node_attrs={k: _rows(v, n_id) for k, v in attrs.node_attrs.items()},
                     edge_attrs={**{k: _rows(v, rows) for k, v in attrs.edge_attrs.items()},
                                 **{k: _rows(v, slots) for k, v in attrs.slot_attrs.items()}},
                     batch=None if out.batch is None else torch.from_numpy(np.asarray(out.batch)),
                     seed_time=None if out.seed_time is None else torch.from_numpy(np.asarray(out.seed_time)))
