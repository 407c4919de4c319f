"""Counters of the dynamic tiers inside a chain of row-source wrappers, for the loader's
per-epoch stats: :func:`tier_counters` walks ``source`` -> ``source.source`` -> ... and
sums the CLOCK cache hits (:class:`graphpipe.loaders.rows.CachedRows`) and the disk
tier's reads (:class:`graphpipe.loaders.rows.DiskRows`) so far."""

from __future__ import annotations

from typing import NamedTuple

from graphpipe.loaders.rows.base import RowSource
from graphpipe.loaders.rows.cached import CachedRows
from graphpipe.loaders.rows.disk import DiskRows

__all__ = ["TierCounters", "tier_counters"]


class TierCounters(NamedTuple):
    """Running totals: rows served by CLOCK caches, rows/bytes read from disk, read seconds."""

    cache_hits: int = 0
    disk_rows: int = 0
    disk_bytes: int = 0
    disk_s: float = 0.0

    def minus(self, other: TierCounters) -> TierCounters:
        return TierCounters(*(a - b for a, b in zip(self, other)))


def tier_counters(source: RowSource | None) -> TierCounters:
    """The totals of every :class:`CachedRows` and :class:`DiskRows` in ``source``'s chain."""
    hits = rows = nbytes = 0
    seconds = 0.0
    seen = 0
    while source is not None and seen < 64:
        if isinstance(source, CachedRows):
            hits += source.hits
        elif isinstance(source, DiskRows):
            r, b, _calls, s = source.counters.snapshot()
            rows, nbytes, seconds = rows + r, nbytes + b, seconds + s
        source = getattr(source, "source", None)
        seen += 1
    return TierCounters(hits, rows, nbytes, seconds)
