"""Seed shards for data-parallel training: which of an epoch's seeds each rank trains on.

Every rank builds the same :class:`~graphpipe.loaders.NeighborLoader` (same data, seed,
batch size) plus its own shard, ``NeighborLoader(..., shard=SeedShard(rank, world_size))``.
Each epoch the loader draws the one permutation of its input nodes that every rank
draws (from the loader's ``seed`` and the epoch), the shard picks the rank's part of it,
and the loader cuts that part into batches. Every rank gets the **same number of seeds**,
so the same number of batches: a rank never waits in an all-reduce for a batch another
rank does not have.

- :class:`SeedShard` is ``torch.utils.data.DistributedSampler``'s rule applied to the
  permutation: pad by wrapping (default) or drop, then take positions
  ``rank, rank + W, rank + 2W, ...``. With ``n`` seeds and ``W`` ranks:

  - ``drop_last=False`` (**pad**, the default, as DistributedSampler): the permutation
    is extended by its own first ``ceil(n / W) * W - n`` seeds, so each rank gets
    ``ceil(n / W)`` seeds and those few seeds are trained twice per epoch;
  - ``drop_last=True`` (**drop**): the permutation is cut to ``floor(n / W) * W``, each
    rank gets ``floor(n / W)`` seeds and up to ``W - 1`` seeds (different ones every
    epoch) are left out of that epoch.

  The shards are disjoint except for the padded seeds, and cover the epoch (pad) or
  all but the dropped tail (drop).
- :class:`PartitionShard` gives rank ``r`` the seeds of its METIS parts (parts are dealt
  to ranks so that each holds about the same number of seeds), in the permutation's
  order: its batches draw on one region of the graph, so they share more neighbours
  (fewer rows gathered, more Match reuse). Counts are equalised the same two ways: pad
  (default) tops a short rank up with the first seeds of the permutation that other
  ranks own (never a seed twice on one rank), drop cuts every rank to the smallest count.

With ``world_size=1`` both give the whole permutation, unchanged.
"""

from __future__ import annotations

import abc

import numpy as np

__all__ = ["BaseShard", "PartitionShard", "SeedShard", "deal_parts"]


def _check_rank(rank: int, world_size: int) -> None:
    for name, value, low in (("world_size", world_size, 1), ("rank", rank, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"'{name}' must be an integer >= {low} (got {value!r})")
    if rank >= world_size:
        raise ValueError(f"'rank' must be < world_size={world_size} (got {rank})")


class BaseShard(abc.ABC):
    """The part of an epoch's seeds a rank takes: :meth:`count` and :meth:`select`.

    ``count(ids)`` must be the same on every rank and equal ``len(select(ids))`` for
    any order of the same ``ids``.
    """

    rank: int
    world_size: int
    drop_last: bool

    @abc.abstractmethod
    def count(self, ids: np.ndarray) -> int:
        """Seeds this rank (and every other) takes from the epoch's ``ids`` ``(n,)``."""

    @abc.abstractmethod
    def select(self, ids: np.ndarray) -> np.ndarray:
        """This rank's seeds ``(count(ids),)`` int64, from the epoch's ordered ``ids``."""


class SeedShard(BaseShard):
    """``DistributedSampler``'s split of the epoch's permutation (see the module docstring).

    Args:
        rank: this process's rank in ``[0, world_size)``.
        world_size: number of ranks.
        drop_last: False (default): pad by wrapping; True: drop the tail.

    Ten seeds over three ranks, padded by wrapping (each rank gets four) or dropped
    (each gets three):

    >>> import numpy as np
    >>> ids = np.arange(10) * 10
    >>> [SeedShard(r, 3).select(ids).tolist() for r in range(3)]
    [[0, 30, 60, 90], [10, 40, 70, 0], [20, 50, 80, 10]]
    >>> [SeedShard(r, 3, drop_last=True).select(ids).tolist() for r in range(3)]
    [[0, 30, 60], [10, 40, 70], [20, 50, 80]]
    """

    def __init__(self, rank: int, world_size: int, *, drop_last: bool = False):
        _check_rank(rank, world_size)
        self.rank, self.world_size, self.drop_last = int(rank), int(world_size), bool(drop_last)

    def count(self, ids: np.ndarray) -> int:
        n = len(ids)
        return n // self.world_size if self.drop_last else -(-n // self.world_size)

    def select(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        total = self.count(ids) * self.world_size
        if total > ids.shape[0]:  # pad by wrapping (repeatedly when n < W)
            ids = np.resize(ids, total)
        return ids[self.rank:total:self.world_size]

    def __repr__(self) -> str:
        return f"SeedShard(rank={self.rank}, world_size={self.world_size}, drop_last={self.drop_last})"


def deal_parts(node_part: np.ndarray, world_size: int, seeds: np.ndarray | None = None
               ) -> np.ndarray:
    """Deal ``K`` parts to ``world_size`` ranks, balancing the seeds each rank owns:
    largest part first (ties: lower part ID) to the rank holding fewest seeds so far (ties:
    lower rank). Returns the owner rank of each part, int64 ``(K,)``.

    ``node_part``: int ``(N,)`` part of each node in ``[0, K)``; ``seeds``: the node IDs
    whose counts are balanced (None: all nodes).

    >>> deal_parts(np.array([0, 0, 0, 1, 2, 2, 3]), 2).tolist()  # parts of 3, 1, 2, 1 nodes
    [0, 1, 1, 0]
    """
    part = np.asarray(node_part)
    num_parts = int(part.max()) + 1 if part.size else 0
    chosen = part if seeds is None else part[np.asarray(seeds, dtype=np.int64)]
    counts = np.bincount(chosen.astype(np.int64, copy=False), minlength=num_parts)
    owner = np.empty(num_parts, dtype=np.int64)
    load = np.zeros(world_size, dtype=np.int64)
    for p in np.lexsort((np.arange(num_parts), -counts)):
        r = int(np.argmin(load))
        owner[p] = r
        load[r] += counts[p]
    return owner


class PartitionShard(BaseShard):
    """Rank ``rank`` owns the seeds of the parts :func:`deal_parts` gives it.

    Args:
        node_part: int ``(N,)`` part of each node (a store's ``partition/k{K}/part``),
            ``K >= world_size`` parts; values are checked to lie in ``[0, K)``.
        rank, world_size: as :class:`SeedShard`.
        seeds: the training seeds the deal balances (None: all nodes); give the loader's
            ``input_nodes``.
        drop_last: False (default): a rank short of seeds is topped up with the
            permutation's first seeds owned by other ranks; True: every rank is cut to the
            smallest count.
        by_part: False (default): the rank's seeds in the permutation's order (its
            batches mix its parts); True: one part after another (parts in the order the
            permutation first meets them, so a new order every epoch; seeds of a part in
            permutation order): a batch draws on one part, so its neighbourhoods overlap
            more, and batches are less alike to a random draw (as ClusterGCN's).

    Six nodes in two parts, two ranks: rank 0 owns part 0 (nodes 0-2), rank 1 part 1:

    >>> import numpy as np
    >>> part = np.array([0, 0, 0, 1, 1, 1])
    >>> order = np.array([5, 0, 3, 1, 4, 2])                # the epoch's permutation
    >>> [PartitionShard(part, r, 2).select(order).tolist() for r in range(2)]
    [[0, 1, 2], [5, 3, 4]]
    >>> PartitionShard(part, 1, 2).select(np.array([0, 1, 2, 3])).tolist()  # padded
    [3, 0, 1]

    Three parts, rank 0 owns parts 0 and 2; ``by_part=True`` trains one part after another:

    >>> part3 = np.array([0, 1, 0, 1, 2, 2])
    >>> order = np.array([4, 0, 5, 2])
    >>> PartitionShard(part3, 0, 2).part_owner.tolist()
    [0, 1, 0]
    >>> [PartitionShard(part3, 0, 2, by_part=g).select(order).tolist() for g in (False, True)]
    [[4, 0, 5, 2], [4, 5, 0, 2]]
    """

    def __init__(self, node_part: np.ndarray, rank: int, world_size: int, *,
                 seeds: np.ndarray | None = None, drop_last: bool = False, by_part: bool = False):
        _check_rank(rank, world_size)
        part = np.asarray(node_part)
        if part.ndim != 1 or part.dtype.kind not in "iu":
            raise ValueError(f"'node_part' must be a 1-D integer array (got dtype {part.dtype}, "
                             f"shape {part.shape})")
        if part.size and int(part.min()) < 0:
            raise ValueError(f"'node_part' must hold part IDs >= 0 (got {int(part.min())})")
        num_parts = int(part.max()) + 1 if part.size else 0
        if num_parts < world_size:
            raise ValueError(f"a partition of {num_parts} parts cannot give each of "
                             f"{world_size} ranks a part (partition into >= {world_size})")
        if seeds is not None:
            seeds = np.asarray(seeds, dtype=np.int64)
            if seeds.size and (int(seeds.min()) < 0 or int(seeds.max()) >= part.shape[0]):
                raise ValueError(f"'seeds' must be node IDs in [0, {part.shape[0]})")
        self.rank, self.world_size, self.drop_last = int(rank), int(world_size), bool(drop_last)
        self.by_part = bool(by_part)
        self.node_part = part
        self.part_owner = deal_parts(part, world_size, seeds)
        self.num_parts = num_parts

    def owners(self, ids: np.ndarray) -> np.ndarray:
        """Owner rank of each of ``ids`` ``(n,)`` -> int64 ``(n,)``."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= self.node_part.shape[0]):
            raise ValueError(f"seed IDs must be in [0, {self.node_part.shape[0]}) (the partition's nodes)")
        return self.part_owner[self.node_part[ids]]

    def count(self, ids: np.ndarray) -> int:
        counts = np.bincount(self.owners(ids), minlength=self.world_size)
        return int(counts.min() if self.drop_last else counts.max()) if len(ids) else 0

    def select(self, ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        owner = self.owners(ids)
        target = self.count(ids)
        own = ids[owner == self.rank]
        if self.by_part and own.size:
            own = own[_group_by_first_seen(self.node_part[own])]
        if own.shape[0] >= target:
            return own[:target]
        return np.concatenate([own, ids[owner != self.rank][:target - own.shape[0]]])

    def __repr__(self) -> str:
        return (f"PartitionShard(parts={self.num_parts}, rank={self.rank}, "
                f"world_size={self.world_size}, drop_last={self.drop_last}, by_part={self.by_part})")


def _group_by_first_seen(keys: np.ndarray) -> np.ndarray:
    """The order that puts equal ``keys`` ``(n,)`` together, groups in the order of their
    first occurrence, each group in its original order."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank_of_group = np.argsort(np.argsort(first))
    return np.argsort(rank_of_group[inverse], kind="stable")
