"""Fused-Map: global→local node-ID assignment in one pass over a batch-sized hash table.

FastGL (see the FastGL digest, shared/reports/fastgl.md §5) fuses the three steps of an ID map
(build a table, assign local IDs, relabel) into the sampling pass itself. On the CPU
the sampler inserts every sampled source node into an open-addressing table *while*
it samples; the first insertion of a key assigns the next local ID, later insertions
read it back. There is no separate unique/sort/relabel pass and no N-sized array.

Table layout (shared by the CPU sampler, the random-walk sampler and the tests):

- ``keys``: int32 or int64 array of global node IDs, ``EMPTY_KEY`` (-1) in free slots.
  The size is a power of two (the default hash masks) or any positive size when the
  ``HASH_MOD`` mode of the paper's Fig. 8 (``key % size``) is used.
- ``values``: int32 array of local IDs, ``-1`` in free slots.
- Probing is linear (``slot + 1 mod size``), the same for insert and lookup.

ID spaces: keys are *global* node IDs (index into the store's CSC); values are
*local* IDs of one sampled batch, ``0 .. count-1``. Destination (seed) nodes are
inserted first, so they occupy the local prefix ``0 .. num_dst-1``.

The GPU version (atomic CAS + atomic add, race-free) lives in
:mod:`graphpipe.ops.sampling.cuda` and uses the same hash functions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

__all__ = [
    "EMPTY_KEY",
    "HASH_MIX",
    "HASH_MOD",
    "check_table_invariants",
    "fused_map",
    "fused_map_reference",
    "home_slot",
    "new_table",
    "table_capacity",
    "table_grow",
    "table_insert_or_get",
    "table_lookup",
]

EMPTY_KEY = -1
HASH_MIX = 0  # multiplicative mix of the key, masked to a power-of-two size
HASH_MOD = 1  # key % size (the paper's Fig. 8 example; any size)

_MIX_MUL = np.uint64(0x9E3779B97F4A7C15)
_SHIFT32 = np.uint64(32)
_MAX_TABLE_BITS = 40


def table_capacity(max_distinct: int, *, load: float = 0.5) -> int:
    """Power-of-two table size holding ``max_distinct`` keys at load factor ≤ ``load``.

    ``max_distinct`` is an upper bound on distinct keys (callers cap it at the
    number of graph nodes); the result is at least 16.
    """
    if max_distinct < 0:
        raise ValueError(f"'max_distinct' must be non-negative (got {max_distinct})")
    if not 0.0 < load <= 1.0:
        raise ValueError(f"'load' must be in (0, 1] (got {load})")
    need = max(16, int(np.ceil(max_distinct / load)))
    cap = 1 << (need - 1).bit_length()
    if cap.bit_length() > _MAX_TABLE_BITS:
        raise ValueError(f"'max_distinct' is too large for one table (got {max_distinct})")
    return cap


def new_table(capacity: int, key_dtype: np.dtype | type = np.int64) -> tuple[np.ndarray, np.ndarray]:
    """Empty table: ``keys`` (``key_dtype``, (capacity,), all -1) and ``values`` (int32, all -1)."""
    if capacity <= 0:
        raise ValueError(f"'capacity' must be positive (got {capacity})")
    key_dtype = np.dtype(key_dtype)
    if key_dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise ValueError(f"'key_dtype' must be int32 or int64 (got {key_dtype})")
    return np.full(capacity, EMPTY_KEY, dtype=key_dtype), np.full(capacity, -1, dtype=np.int32)


@numba.njit(cache=True, nogil=True, inline="always")
def home_slot(key: int, size: int, mode: int) -> int:
    """First slot probed for ``key`` (global ID ≥ 0) in a table of ``size`` slots."""
    if mode == HASH_MOD:
        return np.int64(key) % size
    h = np.uint64(key) * _MIX_MUL
    h = h ^ (h >> _SHIFT32)
    return np.int64(h & np.uint64(size - 1))


@numba.njit(cache=True, nogil=True, inline="always")
def table_insert_or_get(keys: np.ndarray, values: np.ndarray, key: int, new_local: int, mode: int) -> tuple[int, bool]:
    """Insert ``key`` with local ID ``new_local`` unless present.

    Returns ``(local_id, is_new)``: the stored local ID and whether this call inserted
    the key (then ``local_id == new_local`` and the caller advances its counter).
    The table must have a free slot (callers size it at load ≤ 0.5).
    """
    size = keys.shape[0]
    slot = home_slot(key, size, mode)
    while True:
        k = keys[slot]
        if k == key:
            return np.int64(values[slot]), False
        if k == EMPTY_KEY:
            keys[slot] = key
            values[slot] = new_local
            return np.int64(new_local), True
        slot += 1
        if slot == size:
            slot = 0


@numba.njit(cache=True, nogil=True)
def table_lookup(keys: np.ndarray, values: np.ndarray, key: int, mode: int) -> int:
    """Local ID of ``key``, or -1 when absent (stops at the first empty slot or after a full cycle)."""
    size = keys.shape[0]
    slot = home_slot(key, size, mode)
    for _ in range(size):
        k = keys[slot]
        if k == key:
            return np.int64(values[slot])
        if k == EMPTY_KEY:
            return -1
        slot += 1
        if slot == size:
            slot = 0
    return -1


@numba.njit(cache=True, nogil=True)
def table_grow(keys: np.ndarray, values: np.ndarray, new_size: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """Rehash every entry into a fresh table of ``new_size`` slots (local IDs unchanged)."""
    new_keys = np.full(new_size, EMPTY_KEY, dtype=keys.dtype)
    new_values = np.full(new_size, -1, dtype=np.int32)
    for slot in range(keys.shape[0]):
        k = keys[slot]
        if k != EMPTY_KEY:
            table_insert_or_get(new_keys, new_values, k, values[slot], mode)
    return new_keys, new_values


@numba.njit(cache=True, nogil=True)
def _fused_map_kernel(
    keys: np.ndarray, values: np.ndarray, dst_global: np.ndarray, src_global: np.ndarray, mode: int
) -> tuple[np.ndarray, np.ndarray, int]:
    num_dst = dst_global.shape[0]
    unique = np.empty(num_dst + src_global.shape[0], dtype=np.int64)
    for i in range(num_dst):
        _, is_new = table_insert_or_get(keys, values, dst_global[i], i, mode)
        if not is_new:
            return unique[:0], np.empty(0, dtype=np.int64), -1 - i
        unique[i] = dst_global[i]
    count = num_dst
    local_src = np.empty(src_global.shape[0], dtype=np.int64)
    for e in range(src_global.shape[0]):
        lid, is_new = table_insert_or_get(keys, values, src_global[e], count, mode)
        if is_new:
            unique[count] = src_global[e]
            count += 1
        local_src[e] = lid
    return unique[:count], local_src, count


def fused_map(
    dst_global: np.ndarray,
    src_global: np.ndarray,
    *,
    table_size: int | None = None,
    mode: int = HASH_MIX,
    return_table: bool = False,
):
    """Map one block's global IDs to local IDs in a single pass (CPU, sequential).

    Args:
        dst_global: int (num_dst,) unique global destination IDs; they get local IDs
            ``0..num_dst-1`` in the given order.
        src_global: int (num_edges,) global source ID of every edge (duplicates allowed).
        table_size: slots in the table; default ``table_capacity(num_dst + num_edges)``.
            Must exceed the number of distinct keys; any size with ``mode=HASH_MOD``.
        mode: ``HASH_MIX`` (power-of-two sizes) or ``HASH_MOD`` (``key % size``).
        return_table: also return ``(keys, values)``.

    Returns:
        ``(unique_global, local_src)``: int64 (U,) global ID of each local ID (dst first,
        then first-occurrence order), int64 (num_edges,) local source ID per edge;
        plus the table when ``return_table``.
    """
    dst = np.ascontiguousarray(dst_global, dtype=np.int64)
    src = np.ascontiguousarray(src_global, dtype=np.int64)
    if dst.ndim != 1 or src.ndim != 1:
        raise ValueError(f"'dst_global' and 'src_global' must be 1-D (got {dst.ndim}-D and {src.ndim}-D)")
    if (dst.size and dst.min() < 0) or (src.size and src.min() < 0):
        raise ValueError("'dst_global' and 'src_global' must hold non-negative global IDs")
    if mode not in (HASH_MIX, HASH_MOD):
        raise ValueError(f"'mode' must be HASH_MIX or HASH_MOD (got {mode})")
    bound = dst.size + src.size
    if table_size is None:
        table_size = table_capacity(bound)
    if mode == HASH_MIX and table_size & (table_size - 1):
        raise ValueError(f"'table_size' must be a power of two with HASH_MIX (got {table_size})")
    distinct = np.unique(np.concatenate([dst, src])).size if table_size <= bound else 0
    if table_size <= distinct:
        raise ValueError(f"'table_size' must exceed the number of distinct keys {distinct} (got {table_size})")
    keys, values = new_table(table_size, np.int64)
    unique, local_src, count = _fused_map_kernel(keys, values, dst, src, mode)
    if count < 0:
        i = -1 - count
        raise ValueError(f"'dst_global' must be unique (got {int(dst[i])} twice)")
    if return_table:
        return unique, local_src, (keys, values)
    return unique, local_src


def fused_map_reference(dst_global: Sequence[int], src_global: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Plain-Python oracle for :func:`fused_map`: a dict, dst first, then first-occurrence order.

    Returns ``(unique_global, local_src)`` with the same meaning and dtypes as ``fused_map``.
    """
    local_of: dict[int, int] = {}
    for g in dst_global:
        g = int(g)
        if g in local_of:
            raise ValueError(f"'dst_global' must be unique (got {g} twice)")
        local_of[g] = len(local_of)
    local_src = []
    for g in src_global:
        g = int(g)
        if g not in local_of:
            local_of[g] = len(local_of)
        local_src.append(local_of[g])
    return np.fromiter(local_of.keys(), dtype=np.int64, count=len(local_of)), np.asarray(local_src, dtype=np.int64)


def check_table_invariants(keys: np.ndarray, values: np.ndarray, mode: int = HASH_MIX) -> int:
    """Assert fastgl.md 10.2 M7 on a table; returns the number of occupied slots.

    Each key occupies one slot; no empty slot lies on the probe path from its home
    slot to its slot; the occupied slots' local IDs are exactly ``0..U-1``.
    Raises ``AssertionError`` naming the first violation.
    """
    keys = np.asarray(keys)
    values = np.asarray(values)
    size = keys.shape[0]
    occupied = np.flatnonzero(keys != EMPTY_KEY)
    occ_keys = keys[occupied]
    if np.unique(occ_keys).size != occ_keys.size:
        raise AssertionError("a key occupies more than one slot")
    lids = np.sort(values[occupied])
    if not np.array_equal(lids, np.arange(occupied.size)):
        raise AssertionError("local IDs of occupied slots are not 0..U-1")
    if np.any(values[keys == EMPTY_KEY] != -1):
        raise AssertionError("an empty slot holds a local ID")
    for slot in occupied:
        key = int(keys[slot])
        pos = int(home_slot(key, size, mode))
        steps = 0
        while pos != slot:
            if keys[pos] == EMPTY_KEY:
                raise AssertionError(f"empty slot {pos} on the probe path of key {key}")
            pos = (pos + 1) % size
            steps += 1
            if steps > size:
                raise AssertionError(f"key {key} unreachable from its home slot")
    return int(occupied.size)
