"""Graph microbatches (UniTG, thesis §5.4): the nodes cut into ``M`` METIS parts, each
part its induced subgraph (edges between parts dropped, as Cluster-GCN), with one self
loop per node for the GCN layers.

>>> import numpy as np
>>> indptr, indices = np.array([0, 1, 3, 5, 6]), np.array([1, 0, 2, 1, 3, 2])  # a path
>>> mbs = graph_microbatches(indptr, indices, np.array([0, 0, 1, 1]),
...                          {"train": np.array([0, 3])}, 2)
>>> [mb.nodes.tolist() for mb in mbs], [mb.split["train"].tolist() for mb in mbs]
([[0, 1], [2, 3]], [[0], [1]])
>>> mbs[0].graph.indptr.tolist(), mbs[0].graph.indices.tolist()  # 0-1 kept, 1-2 dropped
([0, 2, 4], [0, 1, 1, 0])
>>> whole = whole_graph(indptr, indices, {"train": np.array([0, 3])})
>>> whole.num_nodes, int(whole.graph.indices.numel())
(4, 10)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from graphpipe.ops.partition import induced_subgraph, metis_partition
from graphpipe.train.layers import LocalGraph, add_self_loops

__all__ = ["Microbatch", "graph_microbatches", "metis_parts", "whole_graph"]


@dataclass
class Microbatch:
    """One part: global ``nodes`` (sorted), its ``graph`` (local CSC with self loops) and
    each split's local positions in ``split``."""

    nodes: np.ndarray
    graph: LocalGraph
    split: dict[str, np.ndarray]

    @property
    def num_nodes(self) -> int:
        return int(self.nodes.size)


def metis_parts(indptr: np.ndarray, indices: np.ndarray, parts: int, seed: int = 0) -> np.ndarray:
    """int64 ``(N,)``: the METIS part of every node (one part: all zeros)."""
    return metis_partition(indptr, indices, parts, seed=seed).parts.astype(np.int64)


def _microbatch(indptr: np.ndarray, indices: np.ndarray, nodes: np.ndarray,
                splits: dict[str, np.ndarray]) -> Microbatch:
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, nodes)
    n = int(nodes.size)
    graph = add_self_loops(LocalGraph(torch.from_numpy(sub_ptr), torch.from_numpy(sub_idx), n, n))
    local = {name: np.flatnonzero(np.isin(nodes, ids)) for name, ids in splits.items()}
    return Microbatch(nodes, graph, local)


def graph_microbatches(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray,
                       splits: dict[str, np.ndarray], count: int) -> list[Microbatch]:
    """Microbatch ``m`` holds the nodes with ``parts == m``, for ``m < count``."""
    parts = np.asarray(parts)
    return [_microbatch(indptr, indices, np.flatnonzero(parts == m), splits)
            for m in range(count)]


def whole_graph(indptr: np.ndarray, indices: np.ndarray,
                splits: dict[str, np.ndarray]) -> Microbatch:
    """Every node in one microbatch, every edge kept (evaluation)."""
    n = int(np.asarray(indptr).shape[0] - 1)
    return _microbatch(indptr, indices, np.arange(n, dtype=np.int64), splits)
