"""GraphBolt's sampling graph (``FusedCSCSamplingGraph``) face over a graphpipe store: the
CSC by destination the ``sample_neighbor`` stage samples (memory maps, or in memory when
the store was opened so), its sizes, and the edge IDs of its slots."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["SamplingGraph"]


class SamplingGraph:
    """A store's topology as GraphBolt's graph (homogeneous).

    Attributes:
        indptr: int64 ``(N + 1,)`` CSC offsets; indices: ``(E,)`` in-neighbours.
        edge_id: int64 ``(E,)`` original edge ID of every CSC slot, or None (slot = ID).

    >>> graph = SamplingGraph(np.array([0, 2, 3, 3]), np.array([1, 2, 0]))
    >>> graph
    SamplingGraph(num_nodes=3, num_edges=3)
    >>> graph.total_num_nodes, graph.csc_indptr.tolist(), graph.to("cpu") is graph
    (3, [0, 2, 3, 3], True)
    """

    node_type_to_id = None
    edge_type_to_id = None

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, edge_id: np.ndarray | None = None):
        self.indptr, self.indices, self.edge_id = indptr, indices, edge_id

    @classmethod
    def from_store(cls, store: Any) -> SamplingGraph:
        """The graph of a :class:`graphpipe.store.GraphStore` (topology checked once)."""
        indptr, indices = store.topology()
        return cls(np.asarray(indptr), np.asarray(indices),
                   np.asarray(store.edge_id) if store.has_edge_ids else None)

    @property
    def total_num_nodes(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def total_num_edges(self) -> int:
        return int(self.indices.shape[0])

    @property
    def csc_indptr(self) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.indptr, dtype=np.int64))

    @property
    def is_homogeneous(self) -> bool:
        return True

    def to(self, device: Any) -> SamplingGraph:
        """The graph itself: it is sampled on the CPU whatever the device."""
        return self

    def pin_memory_(self) -> SamplingGraph:
        return self

    def __repr__(self) -> str:
        return f"SamplingGraph(num_nodes={self.total_num_nodes}, num_edges={self.total_num_edges})"
