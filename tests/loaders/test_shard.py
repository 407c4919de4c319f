"""Seed shards: SeedShard against torch's DistributedSampler (the oracle), disjoint and
covering shards, equal batch counts per rank in a sharded NeighborLoader, the unsharded
loader's batches and keys at world_size 1, and PartitionShard's ownership rules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

from graphpipe.loaders import NeighborLoader, PartitionShard, SeedShard
from graphpipe.loaders.shard import deal_parts


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 10, 64, 101])
@pytest.mark.parametrize("world", [1, 2, 3, 4, 8])
def test_seed_shard_is_distributed_sampler(n: int, world: int, drop_last: bool) -> None:
    perm = np.random.default_rng(n * 31 + world).permutation(n).astype(np.int64) * 7
    for rank in range(world):
        oracle = list(DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=False,
                                         drop_last=drop_last)) if n else []
        shard = SeedShard(rank, world, drop_last=drop_last)
        got = shard.select(perm)
        assert got.tolist() == perm[oracle].tolist()
        assert shard.count(perm) == len(got)


@pytest.mark.parametrize("n, world", [(10, 3), (64, 4), (5, 8), (101, 2)])
def test_seed_shards_disjoint_and_covering(n: int, world: int) -> None:
    perm = np.random.default_rng(0).permutation(n)
    pad = [SeedShard(r, world).select(perm) for r in range(world)]
    drop = [SeedShard(r, world, drop_last=True).select(perm) for r in range(world)]
    assert len({len(s) for s in pad}) == 1 and len({len(s) for s in drop}) == 1
    everything = np.concatenate(pad)
    assert set(everything.tolist()) == set(perm.tolist())           # covering
    assert len(everything) - n == (-n) % world                      # only the padding repeats
    assert all(len(set(s.tolist())) == len(s) for s in pad)          # never twice on one rank
    dropped = np.concatenate(drop)
    assert len(set(dropped.tolist())) == len(dropped) == (n // world) * world  # disjoint


def _ring(n: int = 50) -> tuple:
    ids = np.arange(n)
    indptr = np.arange(0, 2 * n + 1, 2)
    indices = np.stack([(ids - 1) % n, (ids + 1) % n], 1).reshape(-1)
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    return indptr, indices, x, ids % 3


@pytest.mark.parametrize("drop_last", [False, True])
def test_loader_equal_batch_counts_and_cover(drop_last: bool) -> None:
    data, world, seeds = _ring(), 3, np.arange(0, 50, 2)  # 25 seeds over 3 ranks
    for epoch in range(2):
        per_rank = []
        for rank in range(world):
            loader = NeighborLoader(data, [2, 2], seeds, batch_size=4, shuffle=True, seed=5,
                                    shard=SeedShard(rank, world, drop_last=drop_last))
            loader.set_epoch(epoch)
            batches = [b.seeds.numpy() for b in loader]
            assert len(batches) == len(loader)
            per_rank.append(batches)
        assert len({len(b) for b in per_rank}) == 1                 # equal batch counts
        got = np.concatenate([np.concatenate(b) for b in per_rank])
        perm = np.random.default_rng([5, epoch, 0]).permutation(seeds)  # the loader's permutation
        expect = np.concatenate([SeedShard(r, world, drop_last=drop_last).select(perm)
                                 for r in range(world)])
        assert sorted(got.tolist()) == sorted(expect.tolist())
        if not drop_last:
            assert set(got.tolist()) == set(seeds.tolist())


def test_world_size_one_is_the_unsharded_loader() -> None:
    data = _ring()
    plain = NeighborLoader(data, [2, 2], batch_size=8, shuffle=True, seed=3)
    sharded = NeighborLoader(data, [2, 2], batch_size=8, shuffle=True, seed=3, shard=SeedShard(0, 1))
    for a, b in zip(plain, sharded, strict=True):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)


def test_rank_keys_interleave_the_unsharded_keys() -> None:
    data = _ring()
    plain = NeighborLoader(data, [2], batch_size=5, seed=3)
    keys = plain.batch_keys(0, 10)
    for rank in range(2):
        loader = NeighborLoader(data, [2], batch_size=5, seed=3, shard=SeedShard(rank, 2))
        assert loader.batch_keys(0, 5) == keys[rank::2]


def test_shard_argument_checked() -> None:
    with pytest.raises(ValueError, match="'shard' must be"):
        NeighborLoader(_ring(), [2], batch_size=2, shard=(0, 2))
    for rank, world in ((2, 2), (-1, 2), (0, 0), (True, 2)):
        with pytest.raises(ValueError):
            SeedShard(rank, world)


# ----------------------------------------------------------------------------- partitions
def test_deal_parts_balances_seed_counts() -> None:
    part = np.repeat(np.arange(8), [50, 40, 30, 30, 20, 10, 10, 10])
    owner = deal_parts(part, 2)
    load = np.bincount(owner, weights=np.bincount(part), minlength=2)
    assert load.tolist() == [100.0, 100.0]
    seeds = np.flatnonzero(part < 2)          # only parts 0 and 1 hold seeds: one each
    assert sorted(deal_parts(part, 2, seeds)[:2].tolist()) == [0, 1]


@pytest.mark.parametrize("drop_last", [False, True])
def test_partition_shard_owns_its_parts(drop_last: bool) -> None:
    rng = np.random.default_rng(0)
    part = rng.integers(0, 6, size=300)
    seeds = np.sort(rng.choice(300, 170, replace=False))
    perm = rng.permutation(seeds)
    world = 3
    shards = [PartitionShard(part, r, world, seeds=seeds, drop_last=drop_last) for r in range(world)]
    picked = [s.select(perm) for s in shards]
    owners = shards[0].part_owner[part[perm]]
    counts = np.bincount(owners, minlength=world)
    target = counts.min() if drop_last else counts.max()
    for r, got in enumerate(picked):
        assert len(got) == shards[r].count(perm) == target
        assert len(set(got.tolist())) == len(got)                     # never twice on one rank
        own = perm[owners == r]
        assert got[: min(len(own), target)].tolist() == own[:target].tolist()  # permutation order
    if not drop_last:
        assert set(np.concatenate(picked).tolist()) == set(seeds.tolist())


def test_partition_shard_in_a_loader() -> None:
    data = _ring(60)
    part = np.arange(60) // 15                          # four arcs of the ring
    lens = []
    for rank in range(2):
        loader = NeighborLoader(data, [2], batch_size=4, shuffle=True, seed=1,
                                shard=PartitionShard(part, rank, 2))
        seeds = np.concatenate([b.seeds.numpy() for b in loader])
        assert set(loader.shard.part_owner[part[seeds]].tolist()) == {rank}
        lens.append(len(loader))
    assert lens == [8, 8]


def test_partition_shard_refuses_bad_parts() -> None:
    with pytest.raises(ValueError, match="cannot give each"):
        PartitionShard(np.zeros(5, dtype=np.int64), 0, 2)
    with pytest.raises(ValueError, match="IDs >= 0"):
        PartitionShard(np.array([0, -1, 1]), 0, 2)
    with pytest.raises(ValueError, match="integer array"):
        PartitionShard(np.array([0.0, 1.0]), 0, 2)
    with pytest.raises(ValueError, match="seeds"):
        PartitionShard(np.array([0, 1]), 0, 2, seeds=np.array([5]))
    with pytest.raises(ValueError, match="seed IDs"):
        PartitionShard(np.array([0, 1]), 0, 2).select(np.array([2]))


def test_partition_shard_by_part_groups_each_part() -> None:
    rng = np.random.default_rng(3)
    part = rng.integers(0, 8, size=400)
    perm = rng.permutation(400)
    for rank in range(2):
        plain = PartitionShard(part, rank, 2).select(perm)
        grouped = PartitionShard(part, rank, 2, by_part=True).select(perm)
        assert sorted(plain.tolist()) == sorted(grouped.tolist())
        owned = grouped[PartitionShard(part, rank, 2).owners(grouped) == rank]
        parts = part[owned]
        runs = parts[np.r_[True, parts[1:] != parts[:-1]]]
        assert len(runs) == len(set(runs.tolist()))            # each part one contiguous run
        first_seen = list(dict.fromkeys(part[plain[np.isin(plain, owned)]].tolist()))
        assert runs.tolist() == first_seen                     # in the permutation's order
        for p in runs:                                         # a part's seeds keep their order
            assert owned[parts == p].tolist() == [v for v in plain if part[v] == p and v in set(owned)]
