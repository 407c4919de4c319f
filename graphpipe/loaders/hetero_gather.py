"""Feature rows of typed batches: :class:`TypedGather` gathers ``X_t[n_id[t]]`` for every
node type with features from that type's row source, optionally reusing rows of the batch
before (Match, per type), and counts where rows came from; :func:`typed_reorder` is
Greedy Reorder over a window of typed batches (FastGL's Match-Reorder, per type).

Match per type: row ``i`` of type ``t`` is copied from the previous batch's ``x[t]``
when that batch held the node, held rows (a degree cache) first, the rest read from the
row source (:meth:`graphpipe.loaders.rows.RowSource.assemble`). A batch's rows are the same
either way; the previous batch's ``x`` must not have been changed in place (checked:
``RuntimeError``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from graphpipe.loaders.rows import RowSource
from graphpipe.ops.features.gather import SOURCE_CACHE, SOURCE_PREVIOUS, positions_in
from graphpipe.ops.features.reorder import greedy_reorder, overlap_matrix

__all__ = ["RowCounts", "TypedGather", "typed_reorder"]


@dataclass
class RowCounts:
    """Rows delivered per node type in an epoch: ``read`` from the row source, ``reused``
    from the batch before (Match), ``held`` from a degree cache. ``total = sum``."""

    read: dict[str, int] = field(default_factory=dict)
    reused: dict[str, int] = field(default_factory=dict)
    held: dict[str, int] = field(default_factory=dict)

    def add(self, ntype: str, read: int, reused: int, held: int) -> None:
        for counts, n in ((self.read, read), (self.reused, reused), (self.held, held)):
            counts[ntype] = counts.get(ntype, 0) + int(n)

    def total(self, ntype: str | None = None) -> int:
        types = [ntype] if ntype is not None else list(self.read)
        return sum(self.read.get(t, 0) + self.reused.get(t, 0) + self.held.get(t, 0) for t in types)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {"read": dict(self.read), "reused": dict(self.reused), "held": dict(self.held)}


class TypedGather:
    """``{ntype: rows}`` of a sampled batch from ``rows[ntype]`` (``match``: reuse rows
    of the batch before, per type)."""

    def __init__(self, rows: dict[str, RowSource], match: bool):
        self.rows, self.match = rows, bool(match)
        self.counts = RowCounts()
        self._prev: dict[str, tuple[np.ndarray, np.ndarray, torch.Tensor, int]] = {}

    def reset(self) -> None:
        """New epoch: zero the counters (the batch before stays resident, as in
        :class:`graphpipe.loaders.NeighborLoader`)."""
        self.counts = RowCounts()

    def __call__(self, n_id: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        out = {}
        for t, rows in self.rows.items():
            ids = n_id[t]
            prev = self._prev.get(t) if self.match else None
            if prev is not None and prev[2]._version != prev[3]:
                raise RuntimeError(f"x[{t!r}] of the previous batch was modified in place; with "
                                   "match_reorder its rows are reused: clone before changing it")
            prev_pos = positions_in(prev[0], ids) if prev is not None else None
            x, source = rows.assemble(ids, prev_pos=prev_pos, prev_rows=None if prev is None else prev[1])
            reused = int(np.count_nonzero(source == SOURCE_PREVIOUS))
            held = int(np.count_nonzero(source == SOURCE_CACHE))
            self.counts.add(t, ids.shape[0] - reused - held, reused, held)
            out[t] = torch.from_numpy(x)
            if self.match:
                self._prev[t] = (ids, x, out[t], out[t]._version)
        return out


def typed_reorder(n_ids: Sequence[dict[str, np.ndarray]], row_bytes: dict[str, int]) -> np.ndarray:
    """Greedy Reorder of a window of typed batches: the first batch stays first, then each
    next one is the unplaced batch sharing the most row bytes with the one before (per
    type overlaps weighted by ``row_bytes[t]``, the bytes of one row of ``X_t``).

    >>> import numpy as np
    >>> batches = [{"a": np.array([0, 1])}, {"a": np.array([7, 8])}, {"a": np.array([1, 2])}]
    >>> typed_reorder(batches, {"a": 4}).tolist()
    [0, 2, 1]
    """
    n = len(n_ids)
    weight = np.zeros((n, n), dtype=np.float64)
    for t, nbytes in row_bytes.items():
        overlap, _sizes = overlap_matrix([b[t] for b in n_ids])
        weight += overlap * float(nbytes)
    return np.asarray(greedy_reorder(weight), dtype=np.int64)
