"""The ``reorder`` stage: Greedy Reorder of a sampled window (FastGL §3.3), so that each
batch follows the one it shares most input nodes with (:mod:`graphpipe.ops.features.reorder`);
:func:`typed_reorder` is the same over typed batches (per-type overlaps weighted by row bytes)."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from graphpipe.loaders.stats import StatsRef
from graphpipe.ops.features.reorder import (
    OverlapWorkspace,
    greedy_reorder,
    match_degree_matrix,
    overlap_matrix,
)
from graphpipe.ops.sampling import SampleOutput

__all__ = ["ReorderStage", "check_criterion", "typed_reorder"]


class ReorderStage:
    """``reorder``: the Greedy Reorder permutation of a window (identity when disabled).

    ``criterion="match"`` orders by FastGL's match degree ``|V_i ∩ V_j| / min(|V_i|, |V_j|)``;
    ``"overlap"`` by the raw ``|V_i ∩ V_j|`` (the rows the next batch does not load).
    """

    def __init__(self, enabled: bool, stats_ref: StatsRef, criterion: str = "match"):
        self.enabled = enabled
        self.criterion = check_criterion(criterion)
        self._stats = stats_ref
        self._workspace: OverlapWorkspace | None = None

    def __call__(self, outputs: Sequence[SampleOutput]) -> np.ndarray:
        """int64 ``(len(outputs),)``: the order to deliver the window's batches in."""
        if not self.enabled or len(outputs) < 3:  # with 2 batches the order is fixed (first stays)
            return np.arange(len(outputs), dtype=np.int64)
        t0 = time.perf_counter()
        node_sets = [o.n_id for o in outputs]
        num_ids = max(int(o.n_id.max()) + 1 if len(o.n_id) else 0 for o in outputs)
        if self._workspace is None or not self._workspace.fits(num_ids, len(outputs)):
            self._workspace = OverlapWorkspace(num_ids, len(outputs))
        if self.criterion == "match":
            order = greedy_reorder(match_degree_matrix(node_sets, "bitmap", workspace=self._workspace))
        else:
            overlap, _sizes = overlap_matrix(node_sets, "bitmap", workspace=self._workspace)
            order = greedy_reorder(overlap.astype(np.float64))
        self._stats.current.reorder_s += time.perf_counter() - t0
        return order


def check_criterion(criterion: str) -> str:
    """``criterion`` if it is a Reorder criterion (``"match"`` or ``"overlap"``), else ``ValueError``."""
    if criterion not in ("match", "overlap"):
        raise ValueError(f"'reorder_by' must be 'match' or 'overlap' (got {criterion!r})")
    return criterion


def typed_reorder(n_ids: Sequence[dict[str, np.ndarray]], row_bytes: dict[str, int],
                  criterion: str = "overlap") -> np.ndarray:
    """Greedy Reorder of a window of typed batches: the first batch stays first, then each
    next one is the unplaced batch sharing the most row bytes with the one before (per
    type overlaps weighted by ``row_bytes[t]``, the bytes of one row of ``X_t``;
    ``criterion="overlap"``), or the highest byte match degree (``"match"``: shared bytes
    over the smaller batch's bytes). On one node type each is :class:`ReorderStage`'s
    criterion of the same name, so the orders are the same.

    >>> import numpy as np
    >>> batches = [{"a": np.array([0, 1])}, {"a": np.array([7, 8])}, {"a": np.array([1, 2, 3, 4])}]
    >>> typed_reorder(batches, {"a": 4}).tolist(), typed_reorder(batches, {"a": 4}, "match").tolist()
    ([0, 2, 1], [0, 2, 1])
    """
    n = len(n_ids)
    weight = np.zeros((n, n), dtype=np.float64)
    size = np.zeros(n, dtype=np.float64)
    for t, nbytes in row_bytes.items():
        overlap, sizes = overlap_matrix([b[t] for b in n_ids])
        weight += overlap * float(nbytes)
        size += sizes * float(nbytes)
    if check_criterion(criterion) == "match":  # as match_degree_matrix, on bytes
        smaller = np.minimum(size[:, None], size[None, :])
        weight = np.where(smaller > 0, weight / np.where(smaller > 0, smaller, 1.0), 0.0)
        np.fill_diagonal(weight, 0.0)
    return np.asarray(greedy_reorder(weight), dtype=np.int64)
