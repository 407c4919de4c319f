"""CachedRows (:mod:`graphpipe.loaders.rows.cached`) against a pure-Python model of its
CLOCK policy: the same hits, misses and cached set after every gather, and the rows
bit for bit (a slot chosen twice in one sweep would serve one row for another ID)."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.loaders.rows import ArrayRows, CachedRows


class ClockModel:
    """CLOCK with one reference bit per slot, one gather at a time: hits set the bit;
    the distinct missed IDs (ascending, at most ``capacity``) take slots found by a hand
    that clears set bits and never takes a slot twice in one sweep."""

    def __init__(self, capacity: int):
        self.slot_id, self.ref, self.hand, self.where = [-1] * capacity, [0] * capacity, 0, {}

    def gather(self, ids: list[int]) -> tuple[int, int]:
        hits = sum(1 for v in ids if v in self.where)
        for v in ids:
            if v in self.where:
                self.ref[self.where[v]] = 1
        new = sorted({v for v in ids if v not in self.where})[:len(self.slot_id)]
        chosen: list[int] = []
        while len(chosen) < len(new):
            h = self.hand
            if h not in chosen:
                if self.ref[h]:
                    self.ref[h] = 0
                else:
                    chosen.append(h)
            self.hand = (h + 1) % len(self.slot_id)
        for v, slot in zip(new, chosen):
            if self.slot_id[slot] >= 0:
                del self.where[self.slot_id[slot]]
            self.slot_id[slot], self.where[v], self.ref[slot] = v, slot, 0
        return hits, len(ids) - hits


@pytest.mark.parametrize(("capacity", "batch"), [(3, 3), (16, 10), (50, 40), (64, 200)])
def test_clock_matches_the_model(capacity, batch) -> None:
    rng = np.random.default_rng(capacity)
    x = rng.standard_normal((300, 5)).astype(np.float32)
    cache, model = CachedRows(ArrayRows(x), capacity), ClockModel(capacity)
    hot = rng.integers(0, 300, 20)
    for _ in range(60):
        ids = np.where(rng.random(batch) < 0.5, rng.choice(hot, batch), rng.integers(0, 300, batch))
        got = cache.gather(ids)
        assert np.array_equal(got.view(np.uint32), x[ids].view(np.uint32))
        assert cache.reset_counts() == model.gather(ids.tolist())
        assert sorted(cache.slot_id[cache.slot_id >= 0].tolist()) == sorted(model.where)
        assert cache.slot_id.tolist() == model.slot_id and cache.ref.tolist() == model.ref
        assert cache.hand == model.hand
