"""The ``gather`` stage: the Match step of Match-Reorder (FastGL §3.3) and the feature rows
of a batch, read from a :class:`graphpipe.loaders.rows.RowSource`.

The previous batch is the one this stage produced last (across windows and epochs): its
IDs stay resident in a :class:`graphpipe.ops.features.gather.ResidentIndex`, and on the host path
its rows too. Each row of the next batch comes, in priority order, from the source's
held rows (a degree cache wrapper), from the previous batch (Match), or from the
source's backing store; with ``match=False`` no row is reused. What the stage does not
know is which techniques the source stacks: it hands the Match positions to the source
(:meth:`graphpipe.loaders.rows.RowSource.assemble`, one fused kernel over chunk views).

Three outputs, one per path:

* host (``on_device=False``): the rows assembled here into a recycled host buffer;
* device (``on_device=True``): only the backing-store rows, staged in (pinned) memory,
  and a :class:`graphpipe.loaders.prepared.RowPlan`; the transfer stage assembles on the
  device, where the previous batch lives;
* packed (the source is a :class:`graphpipe.loaders.rows.QuantizedRowSource`): the rows
  as low-bit codes, always assembled on the host; store rows quantized with a rounding
  seed derived from the batch's sampler key (else its sequence number) and the loader
  seed, reused rows copied from the previous batch's packed rows.

Typed batches: :class:`TypedGather` gathers ``X_t[n_id[t]]`` for every node type with
features from that type's row source, Match per type (row ``i`` of type ``t`` copied from
the previous batch's ``x[t]`` when that batch held the node, held rows first, the rest
read from the row source), and counts where rows came from (:class:`RowCounts`). A
batch's rows are the same either way; the previous batch's ``x`` must not have been
changed in place (checked: ``RuntimeError``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from graphpipe.loaders.from_sample import BatchAttrs, minibatch_from_sample
from graphpipe.loaders.prepared import PreparedBatch, RowPlan
from graphpipe.loaders.rows import PackedRows, QuantizedRowSource, RowSource, check_ids
from graphpipe.loaders.rows.tiers import tier_counters
from graphpipe.loaders.stages.recycle import RecycledBuffers
from graphpipe.loaders.stats import LoaderStats, StatsRef
from graphpipe.ops.features.gather import (
    SOURCE_CACHE,
    SOURCE_PREVIOUS,
    SOURCE_STORE,
    ResidentIndex,
    positions_in,
)
from graphpipe.ops.features.quantize import QuantizedRows, dequantize
from graphpipe.ops.features.quantize.torch import dequantize_on
from graphpipe.ops.sampling import SampleOutput

__all__ = ["GatherStage", "RowCounts", "TypedGather"]


class GatherStage:
    """``gather``: Match, then the feature rows of a batch from ``rows``.

    Args:
        rows: the row source (possibly wrapped: degree cache, quantization), or None to
            gather no features.
        num_nodes: node IDs are in ``[0, num_nodes)``.
        labels: ``(N,)`` / ``(N, tasks)`` labels, or None.
        match: reuse the previous batch's rows.
        stats_ref: the loader's statistics handle.
        on_device: stage store rows for assembly on the device (ignored for packed rows).
        pin_memory: stage them in pinned memory (CUDA).
        seed: the loader seed (rounding seeds of packed rows).
        attrs: the edge order and other arrays every batch carries
            (:class:`graphpipe.loaders.from_sample.BatchAttrs`), or None.
    """

    _POOL_SIZE = 6

    def __init__(self, rows: RowSource | None, num_nodes: int, labels: np.ndarray | None, match: bool,
                 stats_ref: StatsRef, *, on_device: bool = False, pin_memory: bool = False,
                 seed: int = 0, attrs: BatchAttrs | None = None):
        self.rows = rows
        self.attrs = attrs
        self.labels = labels
        self.match = match
        self.features = rows is not None
        self.packed = isinstance(rows, QuantizedRowSource)
        self.on_device = on_device and not self.packed  # packed rows are assembled on the host
        self.pin_memory = pin_memory
        self.seed = int(seed)
        self._stats = stats_ref
        self._resident = ResidentIndex(num_nodes)  # the previous batch's IDs, indexed
        self._resident_rows: np.ndarray | None = None
        self._resident_q: PackedRows | None = None
        self._resident_token = -1
        self._next_token = 0
        self._buffers = RecycledBuffers(rows.dtype if rows is not None else np.float32, self._POOL_SIZE)
        self._tiers = tier_counters(rows)  # the disk tier's totals at the last count

    @property
    def _pool(self) -> list[np.ndarray]:
        """The recycled host buffers (at most ``_POOL_SIZE``)."""
        return self._buffers.buffers

    def reset(self) -> None:
        """Forget the resident batch (the next batch reads everything from cache/store)."""
        self._resident.replace(None)
        self._resident_rows = None
        self._resident_q = None
        self._resident_token = -1

    def _match(self, n_id: np.ndarray, stats: LoaderStats) -> np.ndarray | None:
        """int64 ``(k,)`` position of each ID in the previous batch (-1: absent), None when
        nothing is resident; adds the pair's match degree to ``stats``."""
        if self._resident.ids is None:
            return None
        prev_pos = self._resident.lookup(n_id)
        hits = int(np.count_nonzero(prev_pos >= 0))
        smaller = min(n_id.shape[0], self._resident.ids.shape[0])
        stats.match_degree_sum += hits / smaller if smaller else 0.0
        stats.match_degree_count += 1
        return prev_pos

    def __call__(self, out: SampleOutput, key: int | None = None) -> PreparedBatch:
        t0 = time.perf_counter()
        stats = self._stats.current
        n_id = check_ids(out.n_id, self._resident.num_nodes)  # before any kernel indexes by it
        k = n_id.shape[0]
        token = self._next_token
        self._next_token += 1
        prev_pos = self._match(n_id, stats)
        x = plan = quantized = None
        counts = (0, 0, 0)
        if self.features:
            use_prev = prev_pos if self.match else None
            if self.packed:
                seed = self._batch_seed(token if key is None else key, key is not None)
                quantized, counts = self._gather_packed(n_id, use_prev, seed)
            elif self.on_device:
                plan, counts = self._plan(n_id, use_prev)
            else:
                x, counts = self._gather_host(n_id, use_prev)
            self._count(stats, k, counts, quantized)
        self._resident.replace(n_id)
        prev_token, self._resident_token = self._resident_token, token
        if plan is not None:
            plan.prev_token = prev_token

        batch = minibatch_from_sample(out, n_id, x, self.labels, self.attrs)
        stats.batches_prepared += 1  # ``batches`` counts those handed out (the loader's iterator)
        stats.seeds += out.batch_size
        stats.sampled_nodes += k
        stats.sampled_edges += sum(int(b.indices.shape[0]) for b in out.blocks)
        stats.gather_s += time.perf_counter() - t0
        # packed reuse reads the resident packed rows, not the x handed out: nothing to guard
        reused = counts[1] if quantized is None else 0
        return PreparedBatch(batch=batch, plan=plan, token=token, reused_rows=reused,
                             quantized=quantized)

    def _count(self, stats: LoaderStats, k: int, counts: tuple[int, int, int],
               quantized: QuantizedRows | None) -> None:
        """Row and byte counters of one batch (``counts``: held, reused, read rows)."""
        stats.rows_needed += k
        stats.rows_cached += counts[0]
        stats.rows_reused += counts[1]
        stats.rows_gathered += counts[2]
        now = tier_counters(self.rows)
        delta, self._tiers = now.minus(self._tiers), now
        stats.rows_cache_hits += delta.cache_hits
        stats.rows_disk += delta.disk_rows
        stats.disk_bytes_read += delta.disk_bytes
        stats.disk_read_s += delta.disk_s
        stored = counts[2]
        stats.feature_bytes_full += stored * self.rows.dim * 4
        if quantized is not None:
            stats.feature_bytes_gathered += stored * (int(quantized.packed.shape[1]) + 8)
        else:
            stats.feature_bytes_gathered += stored * self.rows.dim * self.rows.dtype.itemsize

    def _gather_host(self, n_id: np.ndarray,
                     prev_pos: np.ndarray | None) -> tuple[torch.Tensor, tuple[int, int, int]]:
        """The rows assembled on the host (kept resident for the next batch's Match)."""
        rows, source = self.rows.assemble(
            n_id, prev_pos=prev_pos,
            prev_rows=self._resident_rows if prev_pos is not None else None,
            out=self._buffers.take(n_id.shape[0], self.rows.dim))
        counts = np.bincount(source, minlength=3)
        self._resident_rows = rows
        return torch.from_numpy(rows), (int(counts[SOURCE_CACHE]), int(counts[SOURCE_PREVIOUS]),
                                        int(counts[SOURCE_STORE]))

    def _batch_seed(self, value: int, is_key: bool) -> int:
        """Rounding seed of one batch: a hash of (loader seed, batch key or sequence number)."""
        state = np.random.SeedSequence([self.seed, int(value), 2 if is_key else 3]).generate_state(
            1, np.uint64)
        return int(state[0])

    def _gather_packed(self, n_id: np.ndarray, prev_pos: np.ndarray | None,
                       seed: int) -> tuple[QuantizedRows, tuple[int, int, int]]:
        """The rows in packed form (kept resident for the next batch's Match)."""
        quantized, split = self.rows.gather_packed(n_id, seed, prev_pos, self._resident_q)
        self._resident_q = (quantized.packed.numpy(), quantized.mins.numpy(), quantized.scales.numpy())
        return quantized, split.counts()

    def _plan(self, n_id: np.ndarray,
              prev_pos: np.ndarray | None) -> tuple[RowPlan, tuple[int, int, int]]:
        """Stage the backing-store rows; the rest is assembled on the device."""
        split = self.rows.split(n_id, prev_pos)
        dtype = torch.from_numpy(np.empty(0, dtype=self.rows.dtype)).dtype
        staged = torch.empty((split.store_idx.shape[0], self.rows.dim), dtype=dtype,
                             pin_memory=self.pin_memory)
        if split.store_idx.shape[0]:
            self.rows.backing.gather_into(n_id[split.store_idx], staged.numpy())
        plan = RowPlan(cache_pos=split.held_pos, prev_pos=split.prev_pos, store_idx=split.store_idx,
                       store_rows=staged, prev_token=-1)
        return plan, split.counts()


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
    of the batch before, per type).

    A type whose source is a :class:`graphpipe.loaders.rows.QuantizedRowSource`
    (``feature_bits``) is gathered as low-bit codes (rows read from its source quantized
    with :meth:`rounding_seed`, Match reusing the previous batch's codes), moved to
    ``device`` as codes + min + scale and dequantized there to float32."""

    def __init__(self, rows: dict[str, RowSource], match: bool, *, seed: int = 0,
                 device: torch.device | str = "cpu"):
        self.rows, self.match = rows, bool(match)
        self.seed, self.device = int(seed), torch.device(device)
        self.counts = RowCounts()
        self._prev: dict[str, tuple[np.ndarray, np.ndarray, torch.Tensor, int]] = {}
        self._prev_packed: dict[str, tuple[np.ndarray, PackedRows]] = {}
        self._order = {t: i for i, t in enumerate(rows)}
        self._buffers = {t: RecycledBuffers(r.dtype) for t, r in rows.items()
                         if not isinstance(r, QuantizedRowSource)}  # x[t] written into released batches' memory

    def reset(self) -> None:
        """New epoch: zero the counters (the batch before stays resident, as in
        :class:`graphpipe.loaders.NeighborLoader`)."""
        self.counts = RowCounts()

    def rounding_seed(self, key: int, ntype: str) -> int:
        """The rounding seed of ``ntype``'s rows read for the batch of sampler key ``key``
        (a hash of the loader seed, the key and the type's position)."""
        state = np.random.SeedSequence([self.seed, int(key), 4, self._order[ntype]]).generate_state(1, np.uint64)
        return int(state[0])

    def __call__(self, n_id: dict[str, np.ndarray], key: int = 0) -> dict[str, torch.Tensor]:
        out = {}
        for t, rows in self.rows.items():
            if isinstance(rows, QuantizedRowSource):
                out[t] = self._packed(t, rows, n_id[t], key)
                continue
            ids = n_id[t]
            prev = self._prev.get(t) if self.match else None
            if prev is not None and prev[2]._version != prev[3]:
                raise RuntimeError(f"x[{t!r}] of the previous batch was modified in place; with "
                                   "match_reorder its rows are reused: clone before changing it")
            prev_pos = positions_in(prev[0], ids) if prev is not None else None
            x, source = rows.assemble(ids, prev_pos=prev_pos, prev_rows=None if prev is None else prev[1],
                                      out=self._buffers[t].take(ids.shape[0], rows.dim))
            reused = int(np.count_nonzero(source == SOURCE_PREVIOUS))
            held = int(np.count_nonzero(source == SOURCE_CACHE))
            self.counts.add(t, ids.shape[0] - reused - held, reused, held)
            out[t] = torch.from_numpy(x)
            if self.match:
                self._prev[t] = (ids, x, out[t], out[t]._version)
        return out

    def _packed(self, ntype: str, rows: QuantizedRowSource, ids: np.ndarray, key: int) -> torch.Tensor:
        """``ntype``'s rows as codes (Match on the previous batch's codes), dequantized on
        the device."""
        prev = self._prev_packed.get(ntype) if self.match else None
        prev_pos = positions_in(prev[0], ids) if prev is not None else None
        q, split = rows.gather_packed(ids, self.rounding_seed(key, ntype), prev_pos,
                                      None if prev is None else prev[1])
        self.counts.add(ntype, *(split.counts()[i] for i in (2, 1, 0)))
        if self.match:
            self._prev_packed[ntype] = (ids, (q.packed.numpy(), q.mins.numpy(), q.scales.numpy()))
        if self.device.type == "cpu":
            return dequantize(q)
        dev = self.device
        return dequantize_on(q.packed.to(dev), q.mins.to(dev), q.scales.to(dev), q.bits, q.num_cols)
