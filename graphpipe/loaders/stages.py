"""The stages of the neighbour-loader pipeline, each a small object that can be swapped
or moved to another thread (GraphBolt style):

``sample``   :class:`SampleStage`: a window of seed batches → sampled subgraphs (a sampler).
``reorder``  :class:`ReorderStage`: Greedy Reorder of the window by match degree.
``gather``   :class:`GatherStage`: feature rows of a batch from the static cache, the
             batch currently resident, and the store, in that order (Match).
``transfer`` :class:`TransferStage`: tensors to the device (pinned host memory when CUDA;
             on CUDA the reused rows are copied device-to-device).

Low-bit feature transfer (``feature_bits`` in {8, 4, 2, 1}, Sylvie's per-row stochastic
quantization, :mod:`graphpipe.ops.features.quantize`): rows are quantized where they are
gathered and dequantized where they are used.

* store rows: quantized by ``gather`` right after they are read, with a rounding seed
  derived from the batch's sampler key (itself from the loader seed, epoch and batch);
* static cache: quantized once when the loader is built (seed from the loader seed);
* Match reuse: the previous batch's *quantized* rows (packed codes, min, scale) stay
  resident and are copied into the next batch; dequantization is deterministic, so the
  reused rows are bit-identical to what the previous batch delivered for those nodes;
* ``transfer``: the packed codes + per-row min/scale go to the device and are dequantized
  there (on the CPU: just before the :class:`MiniBatch` is handed out).

A quantized batch is always assembled (in packed form) on the host: its bytes are a
fraction of the float rows, so the device-side assembly of the float path is not used.

Plus the data they share: :class:`GraphData` (topology, feature chunks, labels),
:class:`FeatureCache` (static cache of the hottest rows) and :class:`LoaderStats`.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch

from graphpipe.loaders.minibatch import Block, MiniBatch
from graphpipe.loaders.sampler import BaseSampler
from graphpipe.ops.features.degree import degree_order
from graphpipe.ops.features.gather import (
    SOURCE_CACHE,
    SOURCE_PREVIOUS,
    SOURCE_STORE,
    FeatureChunks,
    PositionTable,
    ResidentIndex,
    assemble_rows,
    gather_rows,
)
from graphpipe.ops.features.quantize import QuantizedRows, dequantize, quantize
from graphpipe.ops.features.reorder import (
    OverlapWorkspace,
    greedy_reorder,
    match_degree_matrix,
    overlap_matrix,
)
from graphpipe.ops.sampling import SampleOutput
from graphpipe.store.checks import check_topology
from graphpipe.store.derived import read_degree_order

__all__ = [
    "FeatureCache",
    "GatherStage",
    "GraphData",
    "LoaderStats",
    "PreparedBatch",
    "ReorderStage",
    "SampleStage",
    "TransferStage",
    "resolve_graph_data",
]


# -- data ---------------------------------------------------------------------------------------
@dataclass
class GraphData:
    """What a loader reads, whatever it was given.

    Attributes:
        indptr: int64 ``(N+1,)`` CSC offsets by destination.
        indices: int32/int64 ``(E,)`` in-neighbour global IDs.
        num_nodes: ``N``.
        feature_chunks: row-chunk views of the features (``chunks[c]`` holds rows
            ``c*chunk_rows ...``), or None without features.
        chunk_rows: rows per chunk.
        labels: ``(N,)`` or ``(N, tasks)`` labels, or None.
        splits: ``{name: int64 node IDs}`` for array input; read from the store otherwise.
        store: the :class:`graphpipe.store.GraphStore` when built from a store.
    """

    indptr: np.ndarray
    indices: np.ndarray
    num_nodes: int
    feature_chunks: list[np.ndarray] | None
    chunk_rows: int
    labels: np.ndarray | None
    splits: dict[str, np.ndarray] = field(default_factory=dict)
    store: Any = None
    _prepared: FeatureChunks | None = field(default=None, repr=False)

    def prepared_chunks(self) -> FeatureChunks:
        """The feature chunk views prepared for the gather kernels (built once)."""
        if self._prepared is None:
            assert self.feature_chunks is not None
            self._prepared = FeatureChunks(self.feature_chunks, self.chunk_rows)
        return self._prepared

    @property
    def split_names(self) -> list[str]:
        return list(self.store.split_names) if self.store is not None else list(self.splits)

    def split(self, name: str) -> np.ndarray:
        if name not in self.split_names:
            raise ValueError(f"'input_nodes' names an unknown split {name!r}; "
                             f"known splits: {self.split_names}")
        if self.store is not None:
            return np.asarray(self.store.split(name), dtype=np.int64)
        return np.asarray(self.splits[name], dtype=np.int64)

    def feature_dim(self) -> int:
        assert self.feature_chunks is not None
        return int(self.feature_chunks[0].shape[1])


def _to_numpy(value: Any, name: str) -> np.ndarray | None:
    if value is None:
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"'store_or_arrays' entry {name!r} is not a numeric array (got {type(value)})")
    return arr


def resolve_graph_data(store_or_arrays: Any) -> GraphData:
    """A :class:`GraphData` from a GraphStore, a store path, a dict with keys
    ``indptr, indices[, x, y, splits]`` or a tuple ``(indptr, indices, x, y)``.

    The topology handed on is checked (once, ``O(N + E)``) to be a CSC whose every
    slice and index is in bounds: :meth:`GraphStore.topology` for a store, the same
    check (raising ``ValueError``) for arrays given directly."""
    from graphpipe.store import GraphStore

    if isinstance(store_or_arrays, (str, os.PathLike)):
        if not Path(store_or_arrays).is_dir():
            raise ValueError(f"'store_or_arrays' is not a store directory (got {str(store_or_arrays)!r})")
        store_or_arrays = GraphStore.open(store_or_arrays, in_memory="auto")
    if isinstance(store_or_arrays, GraphStore):
        store = store_or_arrays
        chunks, chunk_rows = store.feature_chunks() if store.has_features else (None, 1)
        if chunks is not None:
            chunks = [c.reshape(-1, 1) if c.ndim == 1 else c for c in chunks]
        indptr, indices = store.topology()  # checked once: the sampling kernels trust it
        return GraphData(indptr=np.asarray(indptr), indices=np.asarray(indices),
                         num_nodes=store.num_nodes, feature_chunks=chunks, chunk_rows=int(chunk_rows),
                         labels=np.asarray(store.labels) if store.has_labels else None, store=store)
    if isinstance(store_or_arrays, dict):
        unknown = set(store_or_arrays) - {"indptr", "indices", "x", "y", "splits"}
        if unknown or not {"indptr", "indices"} <= set(store_or_arrays):
            raise ValueError("'store_or_arrays' as a dict needs keys 'indptr', 'indices' and optionally "
                             f"'x', 'y', 'splits' (got {sorted(store_or_arrays)})")
        parts = store_or_arrays
        splits = {k: np.asarray(_to_numpy(v, k), dtype=np.int64)
                  for k, v in (parts.get("splits") or {}).items()}
    elif isinstance(store_or_arrays, (tuple, list)) and 2 <= len(store_or_arrays) <= 4:
        names = ("indptr", "indices", "x", "y")
        parts = dict(zip(names, store_or_arrays))
        splits = {}
    else:
        raise ValueError("'store_or_arrays' must be a GraphStore, a store path, a dict or a tuple "
                         f"(indptr, indices, x, y) (got {type(store_or_arrays).__name__})")
    indptr = _to_numpy(parts["indptr"], "indptr")
    indices = _to_numpy(parts["indices"], "indices")
    if indptr is None or indptr.ndim != 1 or len(indptr) < 1:
        raise ValueError("'store_or_arrays' indptr must be a 1-D array of N+1 offsets")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    num_nodes = len(indptr) - 1
    check_topology(indptr, indices, num_nodes, error=ValueError, where="'store_or_arrays'")
    x = _to_numpy(parts.get("x"), "x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
        if x.shape[0] != num_nodes:
            raise ValueError(f"'store_or_arrays' x has {x.shape[0]} rows for {num_nodes} nodes")
    y = _to_numpy(parts.get("y"), "y")
    if y is not None and y.shape[0] != num_nodes:
        raise ValueError(f"'store_or_arrays' y has {y.shape[0]} rows for {num_nodes} nodes")
    return GraphData(indptr=indptr, indices=indices, num_nodes=num_nodes,
                     feature_chunks=None if x is None else [x],
                     chunk_rows=max(1, num_nodes), labels=y, splits=splits)


# -- statistics --------------------------------------------------------------------------------
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


# -- sample ------------------------------------------------------------------------------------
class SampleStage:
    """``sample``: a window of seed batches → one :class:`SampleOutput` per batch."""

    def __init__(self, sampler: BaseSampler, stats_ref: StatsRef):
        self.sampler = sampler
        self._stats = stats_ref

    def __call__(self, seed_batches: Sequence[np.ndarray], keys: Sequence[int]) -> list[SampleOutput]:
        t0 = time.perf_counter()
        outputs = self.sampler.sample_from_nodes(seed_batches, keys)
        if len(outputs) != len(seed_batches):
            raise ValueError(f"'sampler' returned {len(outputs)} outputs for {len(seed_batches)} batches")
        self._stats.current.sample_s += time.perf_counter() - t0
        return outputs

    def stream(self, windows: Sequence[tuple[Sequence[np.ndarray], Sequence[int]]], depth: int = 2
               ) -> Iterator[list[SampleOutput]]:
        """The outputs of each window in order, through the sampler's ``sample_stream``
        (``depth`` windows in flight); the time spent waiting for each counts as sampling."""
        source = self.sampler.sample_stream(windows, depth=depth)
        try:
            for seed_batches, _keys in windows:
                t0 = time.perf_counter()
                outputs = next(source, None)
                if outputs is None or len(outputs) != len(seed_batches):
                    got = "no window" if outputs is None else f"{len(outputs)} outputs"
                    raise ValueError(f"'sampler' stream returned {got} for a window of {len(seed_batches)} batches")
                self._stats.current.sample_s += time.perf_counter() - t0
                yield outputs
        finally:
            source.close()


class StatsRef:
    """A mutable handle on the current epoch's :class:`LoaderStats` shared by the stages."""

    def __init__(self) -> None:
        self.current = LoaderStats()


# -- reorder -----------------------------------------------------------------------------------
class ReorderStage:
    """``reorder``: the Greedy Reorder permutation of a window (identity when disabled).

    ``criterion="match"`` orders by FastGL's match degree ``|V_i ∩ V_j| / min(|V_i|, |V_j|)``;
    ``"overlap"`` by the raw ``|V_i ∩ V_j|`` (the rows the next batch does not load).
    """

    def __init__(self, enabled: bool, stats_ref: StatsRef, criterion: str = "match"):
        if criterion not in ("match", "overlap"):
            raise ValueError(f"'reorder_by' must be 'match' or 'overlap' (got {criterion!r})")
        self.enabled = enabled
        self.criterion = criterion
        self._stats = stats_ref
        self._workspace: OverlapWorkspace | None = None

    def __call__(self, outputs: Sequence[SampleOutput]) -> np.ndarray:
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


# -- cache -------------------------------------------------------------------------------------
class FeatureCache:
    """A static cache of feature rows: ``rows[i]`` holds the features of global ID ``ids[i]``.

    Args:
        ids: int64 ``(C,)`` distinct global node IDs.
        rows: ``(C, dim)`` their feature rows.

    Attributes:
        quantized: the rows in low-bit form (:meth:`quantize`), or None.
    """

    def __init__(self, ids: np.ndarray, rows: np.ndarray):
        self.ids = np.ascontiguousarray(ids, dtype=np.int64)
        self.rows = np.ascontiguousarray(rows)
        self.table = PositionTable(self.ids)
        self.quantized: QuantizedRows | None = None

    def quantize(self, bits: int, seed: int) -> None:
        """Quantize the cached rows once (``bits``-bit codes, rounding seeded by ``seed``)."""
        self.quantized = quantize(torch.from_numpy(self.rows), bits, seed=seed)

    @classmethod
    def by_degree(cls, data: GraphData, budget: int) -> FeatureCache:
        """The ``budget`` nodes of highest in-degree (the store's ``derived/degree_order``
        when present, else computed)."""
        order = read_degree_order(data.store) if data.store is not None else None
        if order is None:
            order = degree_order(np.diff(data.indptr))
        ids = np.asarray(order[:budget], dtype=np.int64)
        assert data.feature_chunks is not None
        return cls(ids, gather_rows(data.prepared_chunks(), None, ids))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def lookup(self, n_id: np.ndarray) -> np.ndarray:
        """int64 ``(len(n_id),)`` row of each ID in the cache, -1 when not cached."""
        return self.table.lookup(n_id)


# -- gather ------------------------------------------------------------------------------------
@dataclass
class RowPlan:
    """Where each feature row of a batch comes from, for assembly on the device.

    Attributes:
        cache_pos: int64 ``(k,)`` row in the cache or -1.
        prev_pos: int64 ``(k,)`` row in the previous batch or -1 (only where not cached).
        store_idx: int64 ``(s,)`` positions (in the batch) of the rows read from the store.
        store_rows: ``(s, dim)`` those rows (pinned host memory when CUDA).
        prev_token: sequence number of the batch ``prev_pos`` refers to (-1: none).
    """

    cache_pos: np.ndarray
    prev_pos: np.ndarray
    store_idx: np.ndarray
    store_rows: torch.Tensor
    prev_token: int


@dataclass
class PreparedBatch:
    """A batch on the host, ready for the ``transfer`` stage."""

    batch: MiniBatch
    plan: RowPlan | None
    token: int
    reused_rows: int = 0
    """Rows copied from the batch produced before this one (Match)."""
    quantized: QuantizedRows | None = None
    """The batch's feature rows in low-bit form (``feature_bits``); ``batch.x`` is None
    until ``transfer`` dequantizes them."""


class GatherStage:
    """``gather``: the feature rows of a batch, served cache → previous batch → store.

    The previous batch is the one this stage produced last (across windows and
    epochs): its IDs, and on the host path its rows, stay resident. With
    ``match=False`` every uncached row is read from the store.

    ``on_device=False``: rows are assembled here into a contiguous host array.
    ``on_device=True``: only the store rows are gathered here (into pinned memory);
    the :class:`TransferStage` assembles on the device, where the previous batch lives.

    ``feature_bits``: store rows are quantized after they are read (the rounding seed of a
    batch comes from ``key``, the batch's sampler key, else from the batch's sequence
    number and ``seed``); cached rows come from the cache's quantized copy and reused rows
    from the previous batch's quantized rows. The batch is handed on in packed form.
    """

    def __init__(self, data: GraphData, cache: FeatureCache | None, match: bool, stats_ref: StatsRef,
                 *, features: bool = True, on_device: bool = False, pin_memory: bool = False,
                 feature_bits: int | None = None, seed: int = 0):
        self.feature_bits = feature_bits
        self.seed = int(seed)
        if feature_bits is not None:
            on_device = False  # packed rows are assembled on the host, dequantized on the device
            if cache is not None and cache.quantized is None:
                cache.quantize(feature_bits, self.seed)
        self._resident_q: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self.data = data
        self.cache = cache
        self.match = match
        self.features = features and data.feature_chunks is not None
        self.on_device = on_device
        self.pin_memory = pin_memory
        self._chunks = data.prepared_chunks() if self.features else None
        self._stats = stats_ref
        self._resident = ResidentIndex(data.num_nodes)  # the previous batch's IDs, indexed
        self._resident_rows: np.ndarray | None = None
        self._resident_token = -1
        self._next_token = 0
        self._pool: list[np.ndarray] = []

    _POOL_SIZE = 6

    def _output_rows(self, k: int) -> np.ndarray:
        """A ``(k, dim)`` output array, carved from a recycled buffer when one is free.

        A buffer is free when nothing but the pool references it: the batch whose ``x``
        was a view of it has been released by the caller (CPython reference counts are
        exact), and it is not the resident batch (this stage holds that one). Reusing
        it saves the page faults of fresh memory on every batch.
        """
        dim = self.data.feature_dim()
        dtype = self._chunks.dtype
        need = k * dim
        for i in range(len(self._pool)):
            buf = self._pool[i]
            # references: the pool list, ``buf`` and getrefcount's argument
            if buf.shape[0] >= need and sys.getrefcount(buf) == 3:
                return buf[:need].reshape(k, dim)
        buf = np.empty(max(need, 1) + need // 4, dtype=dtype)
        if len(self._pool) < self._POOL_SIZE:
            self._pool.append(buf)
        else:  # replace the smallest free buffer, if any
            free = [i for i in range(len(self._pool)) if sys.getrefcount(self._pool[i]) == 2]
            if free:
                self._pool[min(free, key=lambda i: self._pool[i].shape[0])] = buf
        return buf[:need].reshape(k, dim)

    def reset(self) -> None:
        """Forget the resident batch (the next batch reads everything from cache/store)."""
        self._resident.replace(None)
        self._resident_rows = None
        self._resident_q = None
        self._resident_token = -1

    def _prev_positions(self, n_id: np.ndarray) -> np.ndarray | None:
        return None if self._resident.ids is None else self._resident.lookup(n_id)

    def __call__(self, out: SampleOutput, key: int | None = None) -> PreparedBatch:
        t0 = time.perf_counter()
        stats = self._stats.current
        n_id = np.ascontiguousarray(out.n_id, dtype=np.int64)
        k = n_id.shape[0]
        token = self._next_token
        self._next_token += 1

        prev_pos = self._prev_positions(n_id)
        if prev_pos is not None:
            hits = int(np.count_nonzero(prev_pos >= 0))
            smaller = min(k, self._resident.ids.shape[0])
            stats.match_degree_sum += hits / smaller if smaller else 0.0
            stats.match_degree_count += 1
        x = plan = quantized = None
        source_counts = (0, 0, 0)
        if self.features:
            cache_pos = self.cache.lookup(n_id) if self.cache is not None else None
            use_prev = prev_pos if self.match else None
            if self.feature_bits is not None:
                qseed = self._batch_seed(token if key is None else key, key is not None)
                quantized, source_counts = self._gather_quantized(n_id, cache_pos, use_prev, qseed)
            elif self.on_device:
                plan = self._plan(n_id, cache_pos, use_prev)
                source_counts = (int(np.count_nonzero(plan.cache_pos >= 0)),
                                 int(np.count_nonzero(plan.prev_pos >= 0)), int(plan.store_idx.shape[0]))
            else:
                rows, source = assemble_rows(
                    n_id, chunks=self._chunks, chunk_rows=self.data.chunk_rows, cache_pos=cache_pos,
                    cache_rows=None if self.cache is None else self.cache.rows, prev_pos=use_prev,
                    prev_rows=self._resident_rows if use_prev is not None else None,
                    out=self._output_rows(k))
                counts = np.bincount(source, minlength=3)
                source_counts = (int(counts[SOURCE_CACHE]), int(counts[SOURCE_PREVIOUS]),
                                 int(counts[SOURCE_STORE]))
                x = torch.from_numpy(rows)
                self._resident_rows = rows
            stats.rows_needed += k
            stats.rows_cached += source_counts[0]
            stats.rows_reused += source_counts[1]
            stats.rows_gathered += source_counts[2]
            dim = self.data.feature_dim()
            stored = source_counts[2]
            stats.feature_bytes_full += stored * dim * 4
            if quantized is not None:
                stats.feature_bytes_gathered += stored * (int(quantized.packed.shape[1]) + 8)
            else:
                stats.feature_bytes_gathered += stored * dim * self._chunks.dtype.itemsize
        self._resident.replace(n_id)
        prev_token, self._resident_token = self._resident_token, token
        if plan is not None:
            plan.prev_token = prev_token

        batch = _make_minibatch(out, n_id, x, self.data.labels)
        stats.batches += 1
        stats.seeds += out.batch_size
        stats.sampled_nodes += k
        stats.sampled_edges += sum(int(b.indices.shape[0]) for b in out.blocks)
        stats.gather_s += time.perf_counter() - t0
        # quantized reuse reads the resident packed rows, not the x handed out: nothing to guard
        reused = source_counts[1] if self.features and quantized is None else 0
        return PreparedBatch(batch=batch, plan=plan, token=token, reused_rows=reused,
                             quantized=quantized)

    def _batch_seed(self, value: int, is_key: bool) -> int:
        """Rounding seed of one batch: a hash of (loader seed, batch key or sequence number)."""
        state = np.random.SeedSequence([self.seed, int(value), 2 if is_key else 3]).generate_state(
            1, np.uint64)
        return int(state[0])

    def _gather_quantized(self, n_id: np.ndarray, cache_pos: np.ndarray | None,
                          prev_pos: np.ndarray | None,
                          seed: int) -> tuple[QuantizedRows, tuple[int, int, int]]:
        """The batch's rows in packed form: cache → previous batch (its packed rows) → store
        (read, then quantized with ``seed``). Keeps them resident for the next batch."""
        bits = self.feature_bits
        k = n_id.shape[0]
        dim = self.data.feature_dim()
        row_bytes = (dim * bits + 7) // 8
        cache_pos = np.full(k, -1, dtype=np.int64) if cache_pos is None else cache_pos
        prev_pos = np.full(k, -1, dtype=np.int64) if prev_pos is None or self._resident_q is None \
            else prev_pos.copy()
        prev_pos[cache_pos >= 0] = -1
        cached = np.flatnonzero(cache_pos >= 0)
        reused = np.flatnonzero(prev_pos >= 0)
        store_idx = np.flatnonzero((cache_pos < 0) & (prev_pos < 0))
        packed = np.empty((k, row_bytes), dtype=np.uint8)
        mins = np.empty(k, dtype=np.float32)
        scales = np.empty(k, dtype=np.float32)
        if store_idx.shape[0]:
            rows = gather_rows(self._chunks, None, n_id[store_idx])
            q = quantize(torch.from_numpy(rows), bits, seed=seed)
            packed[store_idx] = q.packed.numpy()
            mins[store_idx] = q.mins.numpy()
            scales[store_idx] = q.scales.numpy()
        if cached.shape[0]:
            cq = self.cache.quantized
            pos = cache_pos[cached]
            packed[cached] = cq.packed.numpy()[pos]
            mins[cached] = cq.mins.numpy()[pos]
            scales[cached] = cq.scales.numpy()[pos]
        if reused.shape[0]:
            r_packed, r_mins, r_scales = self._resident_q
            pos = prev_pos[reused]
            packed[reused] = r_packed[pos]
            mins[reused] = r_mins[pos]
            scales[reused] = r_scales[pos]
        self._resident_q = (packed, mins, scales)
        quantized = QuantizedRows(torch.from_numpy(packed), torch.from_numpy(mins),
                                  torch.from_numpy(scales), bits, dim)
        return quantized, (int(cached.shape[0]), int(reused.shape[0]), int(store_idx.shape[0]))

    def _plan(self, n_id: np.ndarray, cache_pos: np.ndarray | None,
              prev_pos: np.ndarray | None) -> RowPlan:
        k = n_id.shape[0]
        cache_pos = np.full(k, -1, dtype=np.int64) if cache_pos is None else cache_pos
        prev_pos = np.full(k, -1, dtype=np.int64) if prev_pos is None else prev_pos.copy()
        prev_pos[cache_pos >= 0] = -1
        store_idx = np.flatnonzero((cache_pos < 0) & (prev_pos < 0)).astype(np.int64)
        dim = self.data.feature_dim()
        dtype = torch.from_numpy(self.data.feature_chunks[0][:0].copy()).dtype
        staged = torch.empty((store_idx.shape[0], dim), dtype=dtype, pin_memory=self.pin_memory)
        if store_idx.shape[0]:
            gather_rows(self._chunks, self.data.chunk_rows, n_id[store_idx], out=staged.numpy())
        return RowPlan(cache_pos=cache_pos, prev_pos=prev_pos, store_idx=store_idx,
                       store_rows=staged, prev_token=-1)


@numba.njit(cache=True, nogil=True)
def _fill_hop_edges(indptr, indices, edge_ids, dst_lo, dst_hi, edge_index, e_id, offset):
    """Edges into destinations ``dst_lo..dst_hi-1`` of one block, written from column ``offset``."""
    col = offset
    for v in range(dst_lo, dst_hi):
        for e in range(indptr[v], indptr[v + 1]):
            edge_index[0, col] = indices[e]
            edge_index[1, col] = v
            e_id[col] = edge_ids[e]
            col += 1
    return col


def pyg_edges(blocks: Sequence[Any]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """PyG-style edges of DGL-style blocks (numpy, local IDs of ``n_id``).

    Hop 1 (``blocks[-1]``) contributes all its edges; hop ``h > 1`` contributes
    the edges into the nodes first reached by hop ``h-1``: destination local IDs
    ``[blocks[-h+1].num_dst, blocks[-h+1].num_src)``, a contiguous CSC range.

    Returns:
        ``(edge_index int64 (2, E), e_id int64 (E,), edges per hop)``.
    """
    ranges = []
    inner = None
    for block in reversed(blocks):
        lo = 0 if inner is None else inner.num_dst
        indptr = np.asarray(block.indptr)
        ranges.append((block, lo, block.num_dst, int(indptr[block.num_dst]) - int(indptr[lo])))
        inner = block
    total = sum(r[3] for r in ranges)
    edge_index = np.empty((2, total), dtype=np.int64)
    e_id = np.empty(total, dtype=np.int64)
    offset = 0
    for block, lo, hi, _count in ranges:
        offset = _fill_hop_edges(np.asarray(block.indptr, dtype=np.int64),
                                 np.asarray(block.indices, dtype=np.int64),
                                 np.asarray(block.edge_ids, dtype=np.int64), lo, hi, edge_index, e_id,
                                 offset)
    return edge_index, e_id, [r[3] for r in ranges]


def _make_minibatch(out: SampleOutput, n_id: np.ndarray, x: torch.Tensor | None,
                    labels: np.ndarray | None) -> MiniBatch:
    blocks = [Block(indptr=torch.from_numpy(np.ascontiguousarray(b.indptr, dtype=np.int64)),
                    indices=torch.from_numpy(np.ascontiguousarray(b.indices, dtype=np.int64)),
                    num_dst=int(b.num_dst), num_src=int(b.num_src),
                    edge_ids=torch.from_numpy(np.ascontiguousarray(b.edge_ids, dtype=np.int64)))
              for b in out.blocks]
    edge_index, e_id, per_hop = pyg_edges(out.blocks)
    y = None
    if labels is not None:
        y = torch.from_numpy(np.take(labels, n_id[: out.batch_size], axis=0))
    num_sampled_nodes = [int(out.batch_size)] + [int(b.num_src - b.num_dst) for b in reversed(out.blocks)]
    return MiniBatch(n_id=torch.from_numpy(n_id), x=x, y=y, batch_size=int(out.batch_size),
                     blocks=blocks, edge_index=torch.from_numpy(edge_index), e_id=torch.from_numpy(e_id),
                     num_sampled_nodes=num_sampled_nodes, num_sampled_edges=per_hop)


# -- transfer ----------------------------------------------------------------------------------
class TransferStage:
    """``transfer``: a prepared batch to ``device``.

    A batch whose rows were assembled on the host is returned as is on the CPU and
    copied otherwise (from pinned memory, without blocking, on CUDA). A batch that
    comes with a :class:`RowPlan` (the loader makes one when ``device`` is not the
    CPU) gets its feature rows assembled where it lands: store rows from the staged
    copy, cached rows from the device-resident cache, reused rows from the previous
    batch's buffer on the device (device to device: FastGL's Match).
    """

    def __init__(self, device: torch.device, data: GraphData, cache: FeatureCache | None,
                 stats_ref: StatsRef):
        self.device = device
        self.data = data
        self._stats = stats_ref
        self._cache_rows = None
        if cache is not None and len(cache):
            self._cache_rows = torch.from_numpy(cache.rows).to(device)
        self._resident_x: torch.Tensor | None = None
        self._resident_token = -1

    def __call__(self, prepared: PreparedBatch) -> MiniBatch:
        if prepared.quantized is not None:
            return self._dequantized(prepared)
        plan = prepared.plan
        if plan is None and self.device.type == "cpu":
            return prepared.batch
        t0 = time.perf_counter()
        batch = prepared.batch
        x = batch.x
        batch.x = None
        if self.device.type == "cpu":
            moved = batch
        elif self.device.type == "cuda":
            moved = _pinned(batch).to(self.device, non_blocking=True)
        else:
            moved = batch.to(self.device)
        if plan is not None:
            x = self._assemble(batch.n_id.numpy(), plan)
            self._resident_x, self._resident_token = x, prepared.token
        elif x is not None:
            x = x.to(self.device, non_blocking=self.device.type == "cuda")
        moved.x = x
        self._stats.current.transfer_s += time.perf_counter() - t0
        return moved

    def _dequantized(self, prepared: PreparedBatch) -> MiniBatch:
        """A quantized batch: the packed rows (+ min, scale) move to the device and are
        dequantized there (on the CPU with the Numba kernel)."""
        t0 = time.perf_counter()
        batch, q = prepared.batch, prepared.quantized
        if self.device.type == "cpu":
            batch.x = dequantize(q)
        else:
            batch.x = None
            if self.device.type == "cuda":
                batch = _pinned(batch).to(self.device, non_blocking=True)
                q = QuantizedRows(q.packed.pin_memory(), q.mins.pin_memory(), q.scales.pin_memory(),
                                  q.bits, q.num_cols)
            else:
                batch = batch.to(self.device)
            nb = self.device.type == "cuda"
            batch.x = dequantize_on(q.packed.to(self.device, non_blocking=nb),
                                    q.mins.to(self.device, non_blocking=nb),
                                    q.scales.to(self.device, non_blocking=nb), q.bits, q.num_cols)
        self._stats.current.transfer_s += time.perf_counter() - t0
        return batch

    def _assemble(self, n_id: np.ndarray, plan: RowPlan) -> torch.Tensor:
        dev = self.device
        k = n_id.shape[0]
        x = torch.empty((k, plan.store_rows.shape[1]), dtype=plan.store_rows.dtype, device=dev)
        if plan.store_idx.shape[0]:
            x[torch.from_numpy(plan.store_idx).to(dev)] = plan.store_rows.to(dev, non_blocking=True)
        cached = np.flatnonzero(plan.cache_pos >= 0)
        if cached.shape[0]:
            x[torch.from_numpy(cached).to(dev)] = self._cache_rows[
                torch.from_numpy(plan.cache_pos[cached]).to(dev)]
        reused = np.flatnonzero(plan.prev_pos >= 0)
        if reused.shape[0]:
            idx = torch.from_numpy(reused).to(dev)
            if self._resident_x is not None and self._resident_token == plan.prev_token:
                x[idx] = self._resident_x[torch.from_numpy(plan.prev_pos[reused]).to(dev)]
            else:  # the batch the plan refers to never reached the device: read from the store
                rows = gather_rows(self.data.prepared_chunks(), None, n_id[reused])
                x[idx] = torch.from_numpy(rows).to(dev)
        return x


def _pinned(batch: MiniBatch) -> MiniBatch:
    def pin(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t.pin_memory()

    return MiniBatch(n_id=pin(batch.n_id), x=pin(batch.x), y=pin(batch.y), batch_size=batch.batch_size,
                     blocks=[Block(pin(b.indptr), pin(b.indices), b.num_dst, b.num_src, pin(b.edge_ids))
                             for b in batch.blocks],
                     edge_index=pin(batch.edge_index), e_id=pin(batch.e_id),
                     num_sampled_nodes=batch.num_sampled_nodes, num_sampled_edges=batch.num_sampled_edges)


def dequantize_on(packed: torch.Tensor, mins: torch.Tensor, scales: torch.Tensor, bits: int,
                  num_cols: int) -> torch.Tensor:
    """:func:`graphpipe.ops.features.quantize.dequantize` with torch ops, on whatever device the
    tensors are (float32 ``scale * code + min``, codes packed per row, least significant
    bits first)."""
    per_byte = 8 // bits
    if bits == 8:
        codes = packed[:, :num_cols]
    else:
        shifts = torch.arange(0, 8, bits, dtype=torch.uint8, device=packed.device)
        codes = ((packed.unsqueeze(2) >> shifts) & ((1 << bits) - 1)).reshape(
            packed.shape[0], packed.shape[1] * per_byte)[:, :num_cols]
    x = codes.to(torch.float32) * scales.unsqueeze(1)
    return x + mins.unsqueeze(1)
