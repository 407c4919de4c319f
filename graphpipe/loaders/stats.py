"""The loader's per-epoch counters (:class:`LoaderStats`) and the handle the stages share
to update the current epoch's (:class:`StatsRef`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LoaderStats", "StatsRef"]


@dataclass
class LoaderStats:
    """Counters of one epoch (updated while iterating).

    ``batches`` counts the batches handed to the caller; ``batches_prepared`` those the
    stages gathered, which includes batches prefetched but never taken (an epoch stopped
    early, ``max_steps``). The row, seed and time counters count prepared work.

    ``rows_needed == rows_gathered + rows_reused + rows_cached`` at every point.
    ``match_degree_mean`` averages ``|V_t ∩ V_prev| / min(|V_t|, |V_prev|)`` over
    consecutive batches (``V`` = the batch's ``n_id``; the first batch of a loader
    has no predecessor). Times are seconds: ``sample_s`` in the sampler,
    ``reorder_s`` in Greedy Reorder, ``gather_s`` assembling features (and labels,
    edge_index), ``transfer_s`` moving to the device, ``wait_s`` the training
    loop blocked waiting for the next batch.

    ``feature_bytes_gathered``: bytes of the rows read from the store as they are
    transferred (packed codes + 4-byte min + 4-byte scale per row when quantized, the
    raw rows otherwise); ``feature_bytes_full``: what those rows cost in float32.
    Cached and reused rows move no store bytes.

    The disk tier (features read with ``pread``, :class:`graphpipe.loaders.rows.DiskRows`):
    ``rows_cache_hits`` rows came from its CLOCK cache, ``rows_disk`` distinct rows were
    read from disk, ``disk_bytes_read`` bytes in ``disk_read_s`` seconds of reading.
    ``hit_rate`` is the share of needed rows served from memory (degree cache, previous
    batch, CLOCK cache): ``1 - rows_disk / rows_needed`` (1.0 when nothing is on disk).
    """

    epoch: int = 0
    batches: int = 0
    batches_prepared: int = 0
    seeds: int = 0
    sampled_nodes: int = 0
    sampled_edges: int = 0
    rows_needed: int = 0
    rows_gathered: int = 0
    rows_reused: int = 0
    rows_cached: int = 0
    match_degree_sum: float = 0.0
    match_degree_count: int = 0
    sample_s: float = 0.0
    reorder_s: float = 0.0
    gather_s: float = 0.0
    transfer_s: float = 0.0
    wait_s: float = 0.0
    feature_bytes_gathered: int = 0
    feature_bytes_full: int = 0
    rows_cache_hits: int = 0
    rows_disk: int = 0
    disk_bytes_read: int = 0
    disk_read_s: float = 0.0

    @property
    def match_degree_mean(self) -> float:
        return self.match_degree_sum / self.match_degree_count if self.match_degree_count else 0.0

    @property
    def gathered_fraction(self) -> float:
        """Rows read from the store over rows needed."""
        return self.rows_gathered / self.rows_needed if self.rows_needed else 0.0

    @property
    def hit_rate(self) -> float:
        """Needed rows served from memory over rows needed (0.0 before any row)."""
        return 1.0 - min(self.rows_disk, self.rows_needed) / self.rows_needed if self.rows_needed else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["hit_rate"] = self.hit_rate
        out["match_degree_mean"] = self.match_degree_mean
        out["gathered_fraction"] = self.gathered_fraction
        return out


class StatsRef:
    """A mutable handle on the current epoch's :class:`LoaderStats` shared by the stages."""

    def __init__(self) -> None:
        self.current = LoaderStats()
