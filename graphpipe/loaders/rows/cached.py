"""A dynamic row cache as a row-source wrapper: :class:`CachedRows` keeps up to
``capacity_rows`` recently used rows of the source it wraps (the disk tier) in memory
and replaces them with CLOCK.

Why CLOCK: the static hot set by in-degree (:class:`graphpipe.loaders.rows.DegreeCachedRows`,
composed outside this wrapper) already holds the rows that are frequent for the whole
run; what is left is recency (consecutive batches, Match-Reorder's window, the seeds'
neighbourhoods). CLOCK approximates LRU with one reference bit per slot: a hit sets a
bit (a vectorised store, no list to reorder, no lock per row), a miss sweeps a hand.
S3-FIFO's advantage is resistance to one-time scans, which the degree tier already
absorbs by taking the heavy hitters out of the stream.

The rows are the wrapped source's rows, bit for bit. Unlike a degree cache they are not
*held* rows (their set changes batch by batch, so a device copy could not be kept):
the cache sits in the backing path and counts hits and misses (:attr:`CachedRows.hits`,
:attr:`CachedRows.misses`). Memory: ``capacity_rows * row_bytes`` for the rows plus
4 bytes per row of ``X`` for the slot table.
"""

from __future__ import annotations

import threading

import numba
import numpy as np

from graphpipe.loaders.rows.base import RowSource, WrappedRows

__all__ = ["POLICIES", "CachedRows"]

POLICIES = ("clock",)


@numba.njit(cache=True, nogil=True)
def _clock_victims(ref: np.ndarray, hand: int, count: int) -> tuple[np.ndarray, int]:
    """``count`` distinct slots to replace (``count <= len(ref)``), sweeping from ``hand``:
    a slot with its reference bit set loses the bit and is passed over once; a slot
    already chosen in this sweep is never chosen again (marked 2; the caller resets the
    victims' bits)."""
    n = ref.shape[0]
    out = np.empty(count, dtype=np.int64)
    got = 0
    while got < count:
        if ref[hand] == 1:
            ref[hand] = 0
        elif ref[hand] == 0:
            out[got] = hand
            ref[hand] = 2
            got += 1
        hand += 1
        if hand == n:
            hand = 0
    return out, hand


class CachedRows(WrappedRows):
    """``source`` behind a CLOCK cache of ``capacity_rows`` rows.

    Args:
        source: the row source wrapped (read for misses).
        capacity_rows: rows the cache holds (0: a pass-through that still counts misses).
        policy: replacement policy; ``"clock"``.
    """

    def __init__(self, source: RowSource, capacity_rows: int, *, policy: str = "clock"):
        if policy not in POLICIES:
            raise ValueError(f"'policy' must be one of {POLICIES} (got {policy!r})")
        if isinstance(capacity_rows, bool) or int(capacity_rows) < 0:
            raise ValueError(f"'capacity_rows' must be a row count >= 0 (got {capacity_rows!r})")
        self.source, self.policy = source, policy
        self.capacity = min(int(capacity_rows), source.num_rows)
        self.rows = np.empty((self.capacity, source.dim), dtype=source.dtype)
        self.slot_id = np.full(self.capacity, -1, dtype=np.int64)
        self.ref = np.zeros(self.capacity, dtype=np.uint8)
        slot_dtype = np.int32 if self.capacity < 2**31 else np.int64
        self.slot_of = np.full(source.num_rows if self.capacity else 0, -1, dtype=slot_dtype)
        self.hand = 0
        self.hits = self.misses = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(np.count_nonzero(self.slot_id >= 0))

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        with self._lock:
            if self.capacity == 0:
                self.misses += int(ids.shape[0])
                return self.source.gather_into(ids, out)
            slots = self.slot_of[ids]
            hit = np.flatnonzero(slots >= 0)
            if hit.shape[0]:
                out[hit] = self.rows[slots[hit]]
                self.ref[slots[hit]] = 1
            miss = np.flatnonzero(slots < 0)
            self.hits += int(hit.shape[0])
            self.misses += int(miss.shape[0])
            if miss.shape[0]:
                out[miss] = self.source.gather(ids[miss])
                self._insert(ids[miss], out[miss])
            return out

    def _insert(self, ids: np.ndarray, rows: np.ndarray) -> None:
        """Put the (missed) rows in the cache, evicting with CLOCK."""
        uniq, first = np.unique(ids, return_index=True)
        if uniq.shape[0] > self.capacity:
            uniq, first = uniq[:self.capacity], first[:self.capacity]
        victims, self.hand = _clock_victims(self.ref, self.hand, uniq.shape[0])
        old = self.slot_id[victims]
        self.slot_of[old[old >= 0]] = -1
        self.slot_id[victims] = uniq
        self.slot_of[uniq] = victims.astype(self.slot_of.dtype)
        self.rows[victims] = rows[first]
        self.ref[victims] = 0

    def reset_counts(self) -> tuple[int, int]:
        """``(hits, misses)`` since the last reset, and reset them."""
        with self._lock:
            counts, self.hits, self.misses = (self.hits, self.misses), 0, 0
        return counts

    def __repr__(self) -> str:
        return f"CachedRows({self.source!r}, capacity_rows={self.capacity}, policy={self.policy!r})"
