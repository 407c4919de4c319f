"""The supervision edges of a link loader and their epoch plan, shared by
:class:`~graphpipe.loaders.LinkNeighborLoader` and
:class:`~graphpipe.loaders.TypedLinkNeighborLoader`: ``(src, dst)`` from the forms PyG
takes (:func:`edge_pairs`), and batches of edge positions per epoch (:class:`EdgeBatches`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["EdgeBatches", "edge_array", "edge_pairs"]


def edge_array(value: Any, name: str) -> np.ndarray:
    """``value`` (array or tensor) as int64 ``(P,)`` node IDs; ``ValueError`` otherwise."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"'edge_label_index' {name} must be 1-D integer node IDs (got {arr.dtype} "
                         f"{arr.shape})")
    return arr.astype(np.int64, copy=False)


def edge_pairs(edges: Any, forms: str = "(src, dst) or a (2, P) array") -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` int64 of ``(src, dst)`` or a ``(2, P)`` array / tensor (``forms``
    names what the caller accepts, for the error).

    >>> [a.tolist() for a in edge_pairs(torch.tensor([[0, 1], [2, 3]]))]
    [[0, 1], [2, 3]]
    """
    if isinstance(edges, (tuple, list)) and len(edges) == 2:
        src, dst = (edge_array(v, n) for v, n in zip(edges, ("src", "dst")))
    else:
        both = edges.detach().cpu().numpy() if isinstance(edges, torch.Tensor) else np.asarray(edges)
        if both.ndim != 2 or both.shape[0] != 2:
            raise ValueError(f"'edge_label_index' must be {forms} (got shape {both.shape})")
        src, dst = edge_array(both[0], "src"), edge_array(both[1], "dst")
    if src.shape != dst.shape:
        raise ValueError(f"'edge_label_index' src and dst differ in length ({src.size} vs {dst.size})")
    return src, dst


class EdgeBatches:
    """A link loader's epoch plan over its ``edge_src`` positive edges (mixed in before
    :class:`~graphpipe.loaders.NeighborLoader`, whose ``batch_size``, ``shuffle``,
    ``drop_last``, ``seed`` and ``shard`` it reads). With a ``shard`` (data parallel),
    every rank draws the one permutation of the edges and takes its share of it
    (:mod:`graphpipe.loaders.shard`), as the node loader does with its seeds."""

    edge_src: np.ndarray
    batch_size: int
    shuffle: bool
    drop_last: bool
    seed: int
    shard: Any = None

    @property
    def dataset(self) -> range:
        """``range(len(edge_label_index))``: the positions of the supervision edges, PyG's."""
        return range(int(self.edge_src.shape[0]))

    def __len__(self) -> int:
        n = int(self.edge_src.shape[0])
        if self.shard is not None:
            n = self.shard.count(np.arange(n))
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def epoch_edge_batches(self, epoch: int) -> list[np.ndarray]:
        """Positions (in ``edge_label_index``) of each batch's positive edges in ``epoch``
        (this rank's share with a ``shard``)."""
        ids = np.arange(self.edge_src.shape[0], dtype=np.int64)
        if self.shuffle:
            ids = np.random.default_rng([self.seed, epoch, 0]).permutation(ids)
        if self.shard is not None:
            ids = self.shard.select(ids)
        batches = [ids[i:i + self.batch_size] for i in range(0, len(ids), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches
