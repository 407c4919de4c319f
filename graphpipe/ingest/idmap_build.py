"""Building the external → dense node ID map while reading a dataset.

Two lookups, both built once and then queried batch by batch:

- :class:`IntIdIndex` for int64 external IDs: the keys sorted once, then
  ``np.searchsorted`` per batch.
- :class:`StringIdIndex` for string external IDs: an open-addressing hash
  table (FNV-1a over the UTF-8 bytes, Numba) over the Arrow buffers of the
  external IDs, so a batch lookup costs O(batch) whatever the number of nodes
  (``pyarrow.compute.index_in`` would rebuild its hash set on every call).

:class:`UniqueCollector` gathers the sorted unique IDs of a stream of batches
(without a node table, the dense ID of a node is its rank among the sorted
unique external IDs); its memory is bounded by a small multiple of the number
of distinct IDs, however long the stream.

The slow, obvious reference for both lookups is :func:`lookup_reference`.
"""

from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)


def string_buffers(values: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets int64 (n+1,), data uint8)`` of a string array, offsets rebased to ``data``.

    Nulls are not looked at (callers reject them first); a null reads as ``""``.
    """
    if isinstance(values, pa.ChunkedArray):
        values = pa.concat_arrays(values.chunks) if values.num_chunks else pa.array([], pa.large_string())
    values = values.cast(pa.large_string())
    n = len(values)
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64)[values.offset:values.offset + n + 1] \
        if buffers[1] is not None else np.zeros(n + 1, dtype=np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None and n else np.zeros(0, np.uint8)
    return np.ascontiguousarray(offsets), data


@numba.njit(cache=True, nogil=True, inline="always")
def _hash_bytes(data, start, end):
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, end):
        h = (h ^ np.uint64(data[i])) * np.uint64(0x100000001B3)
    # final avalanche (splitmix64) so the low bits used for the slot are well mixed
    h ^= h >> np.uint64(31)
    h *= np.uint64(0x7FB5D329728EA185)
    h ^= h >> np.uint64(27)
    return h


@numba.njit(cache=True, nogil=True, inline="always")
def _bytes_equal(a_data, a_start, a_end, b_data, b_start, b_end):
    if a_end - a_start != b_end - b_start:
        return False
    for i in range(a_end - a_start):
        if a_data[a_start + i] != b_data[b_start + i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _build_table(offsets, data, slots):
    """Insert keys 0..n-1; returns (-1, -1) or (first, duplicate) row indices of a repeated key."""
    mask = np.uint64(slots.shape[0] - 1)
    n = offsets.shape[0] - 1
    for row in range(n):
        start, end = offsets[row], offsets[row + 1]
        slot = _hash_bytes(data, start, end) & mask
        while True:
            other = slots[slot]
            if other < 0:
                slots[slot] = row
                break
            if _bytes_equal(data, offsets[other], offsets[other + 1], data, start, end):
                return other, row
            slot = (slot + np.uint64(1)) & mask
    return -1, -1


@numba.njit(cache=True, nogil=True)
def _probe_table(key_offsets, key_data, slots, offsets, data, out):
    mask = np.uint64(slots.shape[0] - 1)
    for i in range(offsets.shape[0] - 1):
        start, end = offsets[i], offsets[i + 1]
        slot = _hash_bytes(data, start, end) & mask
        found = -1
        while True:
            other = slots[slot]
            if other < 0:
                break
            if _bytes_equal(key_data, key_offsets[other], key_offsets[other + 1], data, start, end):
                found = other
                break
            slot = (slot + np.uint64(1)) & mask
        out[i] = found


class DuplicateIdError(ValueError):
    """Two rows of the external IDs hold the same ID.

    Attributes:
        first_row / duplicate_row: 0-based positions (dense IDs) of the two rows.
        value: the repeated external ID.
    """

    def __init__(self, first_row: int, duplicate_row: int, value: object):
        super().__init__(f"rows {first_row} and {duplicate_row} both hold ID {value!r}")
        self.first_row, self.duplicate_row, self.value = int(first_row), int(duplicate_row), value


class IntIdIndex:
    """Lookup of int64 external IDs; ``external[d]`` is the external ID of dense node ``d``.

    Raises :class:`DuplicateIdError` when an ID appears twice.
    """

    def __init__(self, external: np.ndarray):
        external = np.ascontiguousarray(external, dtype=np.int64)
        self.num_nodes = int(external.shape[0])
        if self.num_nodes and np.all(external[1:] > external[:-1]):
            self._keys, self._dense = external, None          # already sorted and unique
        else:
            order = np.argsort(external, kind="stable")
            keys = external[order]
            same = np.flatnonzero(keys[1:] == keys[:-1])
            if same.size:
                pairs = np.stack([order[same], order[same + 1]], axis=1)
                first_dup = pairs[np.argmin(pairs[:, 1])]      # the earliest row that repeats an ID
                raise DuplicateIdError(int(first_dup[0]), int(first_dup[1]), int(external[first_dup[0]]))
            self._keys, self._dense = keys, order.astype(np.int64)

    def lookup(self, values: np.ndarray) -> np.ndarray:
        """Dense IDs (int64) of external ``values``; ``-1`` where unknown."""
        values = np.asarray(values, dtype=np.int64)
        out = np.full(values.shape[0], -1, dtype=np.int64)
        if self.num_nodes == 0:
            return out
        pos = np.searchsorted(self._keys, values)
        np.minimum(pos, self.num_nodes - 1, out=pos)
        found = self._keys[pos] == values
        out[found] = pos[found] if self._dense is None else self._dense[pos[found]]
        return out


class StringIdIndex:
    """Lookup of string external IDs by hash table; ``external[d]`` is the ID of dense node ``d``.

    Raises :class:`DuplicateIdError` when an ID appears twice.
    """

    def __init__(self, external: pa.Array):
        self._offsets, self._data = string_buffers(external)
        self.num_nodes = int(self._offsets.shape[0] - 1)
        size = 1 << max(4, int(2 * max(self.num_nodes, 1) - 1).bit_length())
        self._slots = np.full(size, -1, dtype=np.int64)
        first, dup = _build_table(self._offsets, self._data, self._slots)
        if first >= 0:
            value = bytes(self._data[self._offsets[first]:self._offsets[first + 1]]).decode("utf-8", "replace")
            raise DuplicateIdError(int(first), int(dup), value)

    def lookup(self, values: pa.Array) -> np.ndarray:
        """Dense IDs (int64) of the strings ``values``; ``-1`` where unknown."""
        offsets, data = string_buffers(values)
        out = np.empty(offsets.shape[0] - 1, dtype=np.int64)
        _probe_table(self._offsets, self._data, self._slots, offsets, data, out)
        return out


def lookup_reference(external: list, values: list) -> np.ndarray:
    """Reference for both indexes: a dict, one Python lookup per value (``-1`` if unknown)."""
    position = {}
    for dense, key in enumerate(external):
        position.setdefault(key, dense)
    return np.array([position.get(v, -1) for v in values], dtype=np.int64)


class UniqueCollector:
    """Sorted unique IDs of a stream of batches (int64 numpy arrays, or Arrow string arrays).

    Batches are reduced to their unique values on arrival and merged whenever
    the pending ones outgrow the merged set, so memory stays within a small
    multiple of the number of distinct IDs plus one batch.
    """

    def __init__(self, kind: str):
        if kind not in ("int", "string"):
            raise ValueError(f"'kind' must be 'int' or 'string' (got {kind!r})")
        self.kind = kind
        self._merged = np.zeros(0, np.int64) if kind == "int" else pa.array([], pa.large_string())
        self._pending: list = []
        self._pending_size = 0

    def add(self, values: np.ndarray | pa.Array) -> None:
        if self.kind == "int":
            part = np.unique(np.asarray(values, dtype=np.int64))
        else:
            part = pc.unique(values.cast(pa.large_string()))
        self._pending.append(part)
        self._pending_size += len(part)
        if self._pending_size > max(len(self._merged), 1 << 16):
            self._merge()

    def _merge(self) -> None:
        if not self._pending:
            return
        if self.kind == "int":
            self._merged = np.unique(np.concatenate([self._merged, *self._pending]))
        else:
            self._merged = pc.unique(pa.concat_arrays([self._merged, *self._pending]))
        self._pending, self._pending_size = [], 0

    def result(self) -> np.ndarray | pa.Array:
        """Sorted unique IDs: int64 ndarray, or a string Arrow array in byte order."""
        self._merge()
        if self.kind == "int":
            return self._merged
        merged = self._merged.cast(pa.large_string())
        ordered = merged.take(pc.array_sort_indices(merged))
        return ordered.cast(pa.string()) if ordered.nbytes < (1 << 31) else ordered
