"""Fused-Map hash table (graphpipe.ops.sampling.idmap): fastgl.md 10.2 M1-M5, M7-M9 on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphpipe.ops.sampling.cpu import _insert_seeds, _relation_hop, _scratch_for
from graphpipe.ops.sampling.idmap import (
    EMPTY_KEY,
    HASH_MIX,
    HASH_MOD,
    check_table_invariants,
    fused_map,
    fused_map_reference,
    home_slot,
    new_table,
    table_capacity,
    table_grow,
    table_insert_or_get,
    table_lookup,
)


def check_map(dst, src, unique, local_src) -> None:
    """M1-M4 for one mapped block."""
    dst = np.asarray(dst, dtype=np.int64)
    src = np.asarray(src, dtype=np.int64)
    expected = set(dst.tolist()) | set(src.tolist())
    assert set(unique.tolist()) == expected  # M1
    assert unique.size == len(expected)  # M2: bijection onto 0..U-1
    assert np.array_equal(unique[: dst.size], dst)  # M3: dst prefix
    assert np.array_equal(unique[local_src], src)  # M4: round trip
    if local_src.size:
        assert local_src.min() >= 0 and local_src.max() < unique.size


def equivalent_up_to_relabelling(dst, unique_a, local_a, unique_b, local_b) -> bool:
    """M5: pi = b_local o a_local^-1 maps a's edges onto b's, identity on the dst prefix."""
    pos_b = {int(g): i for i, g in enumerate(unique_b)}
    pi = np.array([pos_b[int(g)] for g in unique_a], dtype=np.int64)
    return bool(np.array_equal(pi[local_a], local_b) and np.array_equal(pi[: len(dst)], np.arange(len(dst))))


CASES = {
    "random": (np.array([10, 3, 99]), np.random.default_rng(0).integers(0, 200, 500)),
    "star": (np.array([0]), np.full(300, 7)),
    "no_edges": (np.array([4, 2]), np.array([], dtype=np.int64)),
    "src_are_dst": (np.array([1, 2, 3]), np.array([3, 2, 1, 1, 2])),
    "int32_limit": (np.array([2**31 - 2]), np.array([2**31 - 3, 2**31 - 2, 0, 2**31 - 3])),
    "above_2_32": (np.array([2**32 + 5]), np.array([2**40, 2**32 + 5, 2**33, 2**40])),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("mode", [HASH_MIX, HASH_MOD])
def test_fused_map_matches_reference(name, mode):
    dst, src = CASES[name]
    unique, local_src, (keys, values) = fused_map(dst, src, mode=mode, return_table=True)
    ref_unique, ref_local = fused_map_reference(dst, src)
    check_map(dst, src, unique, local_src)
    assert np.array_equal(unique, ref_unique) and np.array_equal(local_src, ref_local)  # sequential: identical
    assert equivalent_up_to_relabelling(dst, unique, local_src, ref_unique, ref_local)
    assert check_table_invariants(keys, values, mode) == unique.size  # M7
    for g, lid in zip(unique, range(unique.size)):
        assert table_lookup(keys, values, int(g), mode) == lid
    assert table_lookup(keys, values, 2**41, mode) == -1


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 2**40), min_size=0, max_size=60),
    num_dst=st.integers(0, 10),
    mode=st.sampled_from([HASH_MIX, HASH_MOD]),
    slack=st.integers(1, 8),
)
def test_property_fused_map_equals_reference(keys, num_dst, mode, slack):
    dst = np.array(list(dict.fromkeys(keys[:num_dst])), dtype=np.int64)  # unique, order kept
    src = np.array(keys[num_dst:], dtype=np.int64)
    distinct = len(set(keys))
    size = distinct + slack if mode == HASH_MOD else table_capacity(distinct)
    unique, local_src, (tkeys, tvalues) = fused_map(dst, src, table_size=size, mode=mode, return_table=True)
    ref_unique, ref_local = fused_map_reference(dst, src)
    assert np.array_equal(unique, ref_unique) and np.array_equal(local_src, ref_local)
    check_map(dst, src, unique, local_src)
    assert check_table_invariants(tkeys, tvalues, mode) == unique.size


def test_relabelling_check_can_fail():
    dst, src = np.array([5]), np.array([1, 2, 1])
    unique, local = fused_map_reference(dst, src)
    assert equivalent_up_to_relabelling(dst, unique, local, np.array([5, 2, 1]), np.array([2, 1, 2]))
    assert not equivalent_up_to_relabelling(dst, unique, local, np.array([5, 2, 1]), np.array([2, 1, 1]))
    assert not equivalent_up_to_relabelling(dst, unique, local, np.array([1, 5, 2]), np.array([0, 2, 0]))


def test_fig8_example_table_size_5():
    # M9: HashIndex = id % 5, table size 5, input [3, 3, 3]: one insertion, 3 -> local 0, counter ends at 1
    unique, local_src, (keys, values) = fused_map([], [3, 3, 3], table_size=5, mode=HASH_MOD, return_table=True)
    assert unique.tolist() == [3] and local_src.tolist() == [0, 0, 0]
    assert keys.tolist() == [-1, -1, -1, 3, -1] and values.tolist() == [-1, -1, -1, 0, -1]
    # Fig. 8 style: colliding IDs 3, 8, 13 (all % 5 == 3) probe linearly 3 -> 4 -> 0
    unique, local_src, (keys, values) = fused_map([], [3, 8, 3, 13, 8], table_size=5, mode=HASH_MOD, return_table=True)
    assert unique.tolist() == [3, 8, 13] and local_src.tolist() == [0, 1, 0, 2, 1]
    assert keys.tolist() == [13, -1, -1, 3, 8]
    check_table_invariants(keys, values, HASH_MOD)


def test_insert_or_get_single_new_flag():
    keys, values = new_table(8, np.int64)
    results = [table_insert_or_get(keys, values, 3, 0, HASH_MOD) for _ in range(4)]
    assert results == [(0, True), (0, False), (0, False), (0, False)]


@pytest.mark.parametrize("mode", [HASH_MIX, HASH_MOD])
def test_adversarial_collisions(mode):
    # M8: every key has the same home slot
    size = 64
    if mode == HASH_MOD:
        colliding = [7 + k * size for k in range(31)]
    else:
        target = int(home_slot(12345, size, HASH_MIX))
        colliding = [x for x in range(200000) if int(home_slot(x, size, HASH_MIX)) == target][:31]
        assert len(colliding) == 31
    dst = np.array(colliding[:3])
    src = np.array(colliding[3:] * 2 + colliding[:3])
    unique, local_src, (keys, values) = fused_map(dst, src, table_size=size, mode=mode, return_table=True)
    ref = fused_map_reference(dst, src)
    assert np.array_equal(unique, ref[0]) and np.array_equal(local_src, ref[1])
    check_map(dst, src, unique, local_src)
    assert check_table_invariants(keys, values, mode) == 31
    occupied = np.flatnonzero(keys != EMPTY_KEY)
    home = int(home_slot(colliding[0], size, mode))
    assert set(occupied.tolist()) == {(home + i) % size for i in range(31)}  # one contiguous probe run


def test_full_table_wraps_around():
    # keys homed at the last slot wrap to slot 0 and later lookups still find them
    _unique, _local_src, (keys, values) = fused_map([], [4, 9, 14, 19], table_size=5, mode=HASH_MOD, return_table=True)
    assert keys.tolist() == [9, 14, 19, -1, 4]
    check_table_invariants(keys, values, HASH_MOD)
    assert table_lookup(keys, values, 24, HASH_MOD) == -1


def test_invariant_checker_detects_broken_tables():
    keys, values = new_table(8, np.int64)
    keys[home_slot(5, 8, HASH_MOD) + 1] = 5  # key placed past an empty home slot
    values[home_slot(5, 8, HASH_MOD) + 1] = 0
    with pytest.raises(AssertionError, match="probe path"):
        check_table_invariants(keys, values, HASH_MOD)
    keys, values = new_table(8, np.int64)
    keys[[1, 2]] = [1, 2]
    values[[1, 2]] = [0, 0]
    with pytest.raises(AssertionError, match="0..U-1"):
        check_table_invariants(keys, values, HASH_MOD)


def test_table_grow_keeps_local_ids():
    keys, values = new_table(16, np.int32)
    for i, g in enumerate([5, 900, 33, 7]):
        table_insert_or_get(keys, values, g, i, HASH_MIX)
    bigger_keys, bigger_values = table_grow(keys, values, 64, HASH_MIX)
    assert bigger_keys.dtype == np.int32 and bigger_keys.shape == (64,)
    assert [table_lookup(bigger_keys, bigger_values, g, HASH_MIX) for g in [5, 900, 33, 7, 8]] == [0, 1, 2, 3, -1]
    check_table_invariants(bigger_keys, bigger_values)


def test_table_after_real_sampling_holds_invariants():
    # the sampler's own table: batch-sized, load <= 0.5, all of n_id and nothing else
    rng = np.random.default_rng(1)
    n = 5000
    src, dst = rng.integers(0, n, 40000), rng.integers(0, n, 40000)
    order = np.argsort(dst, kind="stable")
    indices = src[order].astype(np.int32)
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    seeds = rng.permutation(n)[:32].astype(np.int32)
    keys = np.full(table_capacity(32), -1, np.int32)
    values = np.full(keys.shape[0], -1, np.int32)
    n_id = np.empty(32, np.int64)
    assert _insert_seeds(seeds, keys, values, n_id) == -1
    num = 32
    for fanout in [4, 3]:
        ss, sl = _scratch_for(fanout)
        _, _, _, n_id, num, keys, values = _relation_hop(indptr, indices, n_id, 0, num, fanout, False,
                                                         np.uint64(7), n_id, num, keys, values, n, ss, sl)
    assert check_table_invariants(keys, values) == num
    assert num <= keys.shape[0] // 2 and keys.shape[0] < n  # sized to the batch, not to N
    assert sorted(keys[keys != EMPTY_KEY].tolist()) == sorted(n_id[:num].tolist())
    for lid in range(num):
        assert table_lookup(keys, values, int(n_id[lid]), HASH_MIX) == lid


def test_value_errors():
    with pytest.raises(ValueError, match=r"'dst_global' must be unique \(got 3 twice\)"):
        fused_map([3, 4, 3], [1])
    with pytest.raises(ValueError, match=r"'dst_global' must be unique \(got 3 twice\)"):
        fused_map_reference([3, 4, 3], [1])
    with pytest.raises(ValueError, match="'table_size' must exceed the number of distinct keys 3"):
        fused_map([1], [2, 3], table_size=3, mode=HASH_MOD)
    with pytest.raises(ValueError, match="'table_size' must be a power of two"):
        fused_map([1], [2, 3], table_size=12)
    with pytest.raises(ValueError, match="non-negative global IDs"):
        fused_map([1], [-2])
    with pytest.raises(ValueError, match="'mode'"):
        fused_map([1], [2], mode=7)
    with pytest.raises(ValueError, match="'max_distinct' must be non-negative"):
        table_capacity(-1)
    with pytest.raises(ValueError, match="'capacity' must be positive"):
        new_table(0)
    assert table_capacity(0) == 16 and table_capacity(100) == 256 and table_capacity(128) == 256
