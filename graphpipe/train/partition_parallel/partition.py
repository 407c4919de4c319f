"""One rank's partition and its halo (Sylvie's local layout), from METIS parts.

Input: the whole graph's CSC by destination (``indptr`` int64 ``(N + 1,)``, ``indices``
``(E,)``, source of every in-edge) and ``parts`` (``(N,)`` ints in ``[0, P)``, e.g.
``partition/k{P}/part`` written by ``graphpipe partition``).

Rank ``r`` owns the *inner* nodes ``{v : parts[v] == r}`` (increasing global ID). Its
*halo* is every node of another part with an edge into an inner node, ordered by owner
rank, then by global ID. Local IDs: inner nodes ``0 .. n_in - 1``, halo nodes ``n_in ..
n_in + n_halo - 1``. The local CSC holds **every** in-edge of every inner node (the
edges of a destination keep their order in the global CSC), so one layer on ``[inner |
halo]`` rows computes exactly the full-graph rows of the inner nodes.

Exchange lists (the halo plan, computed by every rank from the same global arrays, so
nothing is exchanged at start-up):

- ``send[p]``: local IDs of the inner nodes that rank ``p`` holds in its halo, in
  increasing global ID, i.e. in the order of ``p``'s halo block from this rank;
- ``recv[q]``: the slice of the halo owned by rank ``q`` (``halo_offsets[q] ..
  halo_offsets[q + 1]``).

Global degrees (counted over the whole graph, self loops excluded) come along for GCN's
normalisation and Sylvie's degree-ranked bit widths.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LocalPartition", "local_partition"]


@dataclass(frozen=True)
class LocalPartition:
    """Rank ``rank``'s share of a ``num_parts``-way partition.

    Attributes:
        rank, num_parts: this rank and P.
        inner: int64 ``(n_in,)`` global IDs of the owned nodes, increasing.
        halo: int64 ``(n_halo,)`` global IDs of the halo, grouped by owner rank.
        halo_offsets: int64 ``(P + 1,)``: owner ``q``'s halo rows are
            ``halo[halo_offsets[q]:halo_offsets[q + 1]]`` (empty for ``q == rank``).
        send: ``P`` int64 arrays; ``send[p]`` local IDs (``< n_in``) of the rows rank
            ``p`` receives from this rank (empty for ``p == rank``).
        indptr: int64 ``(n_in + 1,)`` local CSC offsets by destination.
        indices: int64 ``(E_local,)`` local source IDs in ``[0, n_in + n_halo)``.
        in_degree: int64 ``(n_in + n_halo,)`` global in-degree of every local node (no
            self loops).
        out_degree: int64 ``(n_in + n_halo,)`` global out-degree of every local node
            (no self loops).
    """

    rank: int
    num_parts: int
    inner: np.ndarray
    halo: np.ndarray
    halo_offsets: np.ndarray
    send: tuple[np.ndarray, ...]
    indptr: np.ndarray
    indices: np.ndarray
    in_degree: np.ndarray
    out_degree: np.ndarray

    @property
    def num_inner(self) -> int:
        return int(self.inner.shape[0])

    @property
    def num_halo(self) -> int:
        return int(self.halo.shape[0])

    @property
    def local_ids(self) -> np.ndarray:
        """int64 ``(n_in + n_halo,)`` global ID of every local row (inner, then halo)."""
        return np.concatenate([self.inner, self.halo])

    def recv_slice(self, owner: int) -> slice:
        """Halo rows received from ``owner``, as a slice of the halo."""
        return slice(int(self.halo_offsets[owner]), int(self.halo_offsets[owner + 1]))


def _check(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray, rank: int,
           num_parts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    parts = np.asarray(parts)
    n = indptr.shape[0] - 1
    if indptr.ndim != 1 or n < 0 or indptr[0] != 0 or indptr[-1] != indices.shape[0] or \
            (n and np.any(np.diff(indptr) < 0)):
        raise ValueError("'indptr' must be non-decreasing offsets from 0 to len(indices)")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"'indices' must lie in [0, {n})")
    if parts.shape != (n,) or parts.dtype.kind not in "iu":
        raise ValueError(f"'parts' must be an integer array of shape ({n},) (got {parts.dtype}, "
                         f"{parts.shape})")
    if not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
        raise ValueError(f"'num_parts' must be a positive integer (got {num_parts!r})")
    if parts.size and (parts.min() < 0 or parts.max() >= num_parts):
        raise ValueError(f"'parts' must lie in [0, {num_parts}) (got {parts.min()} .. {parts.max()})")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < num_parts:
        raise ValueError(f"'rank' must be in [0, {num_parts}) (got {rank!r})")
    return indptr, indices, parts.astype(np.int64)


def _cross_pairs(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray) -> np.ndarray:
    """Unique ``(needing part, source node)`` pairs of the cross-part edges, sorted by part
    then node: int64 ``(K, 2)``."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    cross = parts[indices] != parts[dst]
    pairs = np.stack([parts[dst[cross]], indices[cross]], axis=1)
    return np.unique(pairs, axis=0) if pairs.size else pairs.reshape(0, 2)


def local_partition(indptr: np.ndarray, indices: np.ndarray, parts: np.ndarray, rank: int,
                    num_parts: int) -> LocalPartition:
    """Rank ``rank``'s inner nodes, halo, local CSC and exchange lists.

    Args:
        indptr: int ``(N + 1,)`` global CSC offsets by destination.
        indices: int ``(E,)`` source of every in-edge.
        parts: int ``(N,)`` part of every node, in ``[0, num_parts)``.
        rank: the part this rank owns.
        num_parts: P.

    Returns:
        :class:`LocalPartition` (see the module docstring for the layout).

    A path 0 - 1 - 2 - 3 (edges both ways) cut in two: rank 0 owns 0, 1 and needs
    node 2 from rank 1, which needs node 1.

    >>> import numpy as np
    >>> indptr = np.array([0, 1, 3, 5, 6]); indices = np.array([1, 0, 2, 1, 3, 2])
    >>> p = local_partition(indptr, indices, np.array([0, 0, 1, 1]), 0, 2)
    >>> p.inner.tolist(), p.halo.tolist(), [s.tolist() for s in p.send]
    ([0, 1], [2], [[], [1]])
    >>> p.indptr.tolist(), p.indices.tolist()
    ([0, 1, 3], [1, 0, 2])
    """
    indptr, indices, parts = _check(indptr, indices, parts, rank, num_parts)
    n = indptr.shape[0] - 1
    inner = np.flatnonzero(parts == rank).astype(np.int64)
    pairs = _cross_pairs(indptr, indices, parts)
    # halo of this rank: sources needed by `rank`, grouped by owner then ID
    mine = pairs[pairs[:, 0] == rank, 1]
    halo = mine[np.lexsort((mine, parts[mine]))]
    halo_offsets = np.zeros(num_parts + 1, dtype=np.int64)
    np.cumsum(np.bincount(parts[halo], minlength=num_parts), out=halo_offsets[1:])
    local_of = np.full(n, -1, dtype=np.int64)
    local_of[inner] = np.arange(inner.shape[0])
    local_of[halo] = inner.shape[0] + np.arange(halo.shape[0])
    send = []
    for peer in range(num_parts):
        needed = pairs[(pairs[:, 0] == peer) & (parts[pairs[:, 1]] == rank), 1]
        send.append(local_of[needed] if peer != rank else np.zeros(0, np.int64))
    starts, stops = indptr[inner], indptr[inner + 1]
    counts = stops - starts
    local_indptr = np.zeros(inner.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=local_indptr[1:])
    edge_pos = np.repeat(starts - local_indptr[:-1], counts) + np.arange(local_indptr[-1])
    local_indices = local_of[indices[edge_pos]]
    in_deg, out_deg = _degrees(indptr, indices)
    return LocalPartition(int(rank), int(num_parts), inner, halo, halo_offsets, tuple(send),
                          local_indptr, local_indices, in_deg[np.concatenate([inner, halo])],
                          out_deg[np.concatenate([inner, halo])])


def _degrees(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global ``(in_degree, out_degree)`` int64 ``(N,)``, self loops not counted."""
    n = indptr.shape[0] - 1
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    keep = indices != dst
    in_deg = np.bincount(dst[keep], minlength=n).astype(np.int64)
    out_deg = np.bincount(indices[keep], minlength=n).astype(np.int64)
    return in_deg, out_deg
