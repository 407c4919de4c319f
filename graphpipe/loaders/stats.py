"""The loader's per-epoch counters (:class:`LoaderStats`) and the handle the stages share
to update the current epoch's (:class:`StatsRef`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["LoaderStats", "StatsRef"]


@dataclass
class LoaderStats:
    """Counters of one epoch (updated while iterating).

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
    """

    epoch: int = 0
    batches: int = 0
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

    @property
    def match_degree_mean(self) -> float:
        return self.match_degree_sum / self.match_degree_count if self.match_degree_count else 0.0

    @property
    def gathered_fraction(self) -> float:
        """Rows read from the store over rows needed."""
        return self.rows_gathered / self.rows_needed if self.rows_needed else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["match_degree_mean"] = self.match_degree_mean
        out["gathered_fraction"] = self.gathered_fraction
        return out


class StatsRef:
    """A mutable handle on the current epoch's :class:`LoaderStats` shared by the stages."""

    def __init__(self) -> None:
        self.current = LoaderStats()
