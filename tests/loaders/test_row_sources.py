"""One conformance suite for every row source (zarr's ``StoreTests`` style): ``RowSourceTests``
is subclassed per source (store-backed chunk views, few and many chunks; in-memory; the
degree cache over each; a cache over a cache; quantization over a plain and a cached
source) and checks rows against ``X[ids]`` (bit for bit, or within the quantization bound
for the quantized sources), the Match assembly, the tier split and argument errors. A new
source (a disk tier) gets the same checks by adding a subclass here.

Then what only one source does: the degree cache's choice of rows, the quantized source's
codes against the NumPy reference quantizer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.loaders.rows import (
    ArrayRows,
    CachedRows,
    ChunkedRows,
    DegreeCachedRows,
    DiskRows,
    QuantizedRowSource,
    RowSource,
)
from graphpipe.ops.features.degree import degree_order
from graphpipe.ops.features.gather import SOURCE_CACHE, SOURCE_PREVIOUS, SOURCE_STORE
from graphpipe.ops.features.quantize import reference_pack, reference_quantize
from graphpipe.store import GraphStore, StoreWriter

N, DIM = 700, 5


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((N, DIM)) * rng.uniform(0.1, 4.0, size=(N, 1))).astype(np.float32)
    x[3] = 2.5  # a constant row
    return x


def _store(tmp: Path, x: np.ndarray, chunk_rows: int) -> GraphStore:
    """A real store holding ``x`` as its node features in chunks of ``chunk_rows`` rows."""
    indptr = np.zeros(N + 1, dtype=np.int64)
    with StoreWriter(tmp / f"store{chunk_rows}") as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", np.zeros(0, dtype=np.int32))
        w.write_array("node/feat", x, chunk_rows=chunk_rows)
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, 0
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.commit()
    return GraphStore.open(tmp / f"store{chunk_rows}")


def _hot_ids() -> np.ndarray:
    """Rows a cache holds: every 7th row, shuffled."""
    return np.random.default_rng(1).permutation(np.arange(0, N, 7)).astype(np.int64)


class RowSourceTests:
    """The checks every :class:`RowSource` passes. Subclasses implement :meth:`make`;
    ``bits`` (None: exact rows) sets the tolerance of quantized sources."""

    bits: int | None = None

    @pytest.fixture
    def source(self, x: np.ndarray, tmp_path: Path) -> RowSource:
        return self.make(x, tmp_path)

    def make(self, x: np.ndarray, tmp: Path) -> RowSource:
        raise NotImplementedError

    def assert_rows(self, got: np.ndarray, x: np.ndarray, ids: np.ndarray) -> None:
        want = x[ids]
        assert got.shape == want.shape
        if self.bits is None:
            assert got.dtype == x.dtype
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
            return
        assert got.dtype == np.float32
        scale = (want.max(axis=1) - want.min(axis=1)) / ((1 << self.bits) - 1)
        slack = 1e-5 * np.abs(want).max(axis=1)
        assert np.all(np.abs(got - want) <= (scale + slack)[:, None])

    def test_shape_and_dtype(self, source: RowSource, x: np.ndarray) -> None:
        assert (source.num_rows, source.dim) == x.shape
        assert source.dtype == (x.dtype if self.bits is None else np.float32)

    def test_gather_any_order_with_repeats(self, source: RowSource, x: np.ndarray) -> None:
        ids = np.random.default_rng(2).integers(0, N, size=300)
        ids[:3] = [N - 1, 0, 3]
        ids[3:6] = ids[0]  # repeats
        self.assert_rows(source.gather(ids), x, ids)
        self.assert_rows(source.gather(np.arange(N)), x, np.arange(N))
        self.assert_rows(source.gather(ids.astype(np.int32)), x, ids)

    def test_gather_empty(self, source: RowSource, x: np.ndarray) -> None:
        assert source.gather(np.zeros(0, dtype=np.int64)).shape == (0, DIM)

    def test_gather_into(self, source: RowSource, x: np.ndarray) -> None:
        ids = np.arange(N - 1, -1, -3, dtype=np.int64)
        out = np.full((ids.shape[0], DIM), np.nan, dtype=source.dtype)
        got = source.gather_into(ids, out)
        assert got is out
        self.assert_rows(out, x, ids)

    def test_bad_ids(self, source: RowSource) -> None:
        for bad in (np.array([0, N]), np.array([-1]), np.array([0.5]), np.zeros((2, 2), np.int64)):
            with pytest.raises(ValueError, match="'ids'"):
                source.gather(bad)

    def test_held_rows_are_the_rows(self, source: RowSource, x: np.ndarray) -> None:
        ids = np.arange(N, dtype=np.int64)
        held = source.held_positions(ids)
        if held is None:
            assert source.held_rows is None
            return
        assert held.shape == (N,) and held.dtype == np.int64
        where = np.flatnonzero(held >= 0)
        assert where.shape[0] == source.held_rows.shape[0]  # every held row is found once
        self.assert_rows(source.held_rows[held[where]], x, where)
        self.assert_rows(source.backing.gather(ids), x, ids)

    def test_split_partitions_the_rows(self, source: RowSource) -> None:
        rng = np.random.default_rng(4)
        ids = rng.permutation(N)[:250].astype(np.int64)
        prev_pos = np.where(rng.random(250) < 0.5, rng.integers(0, 90, size=250), -1)
        split = source.split(ids, prev_pos)
        held, prev = split.held_pos >= 0, split.prev_pos >= 0
        stored = np.zeros(250, dtype=bool)
        stored[split.store_idx] = True
        assert not np.any(held & prev) and np.array_equal(held | prev | stored, np.ones(250, bool))
        assert not np.any(stored & (held | prev))
        assert np.array_equal(split.prev_pos[prev], prev_pos[prev])  # Match positions kept
        assert np.array_equal(prev, (prev_pos >= 0) & ~held)  # held rows win over the Match
        assert split.counts() == (int(held.sum()), int(prev.sum()), int(stored.sum()))
        assert np.array_equal(source.split(ids).prev_pos, np.full(250, -1))

    @pytest.mark.parametrize("with_prev", [False, True])
    def test_assemble_with_match(self, source: RowSource, x: np.ndarray, with_prev: bool) -> None:
        rng = np.random.default_rng(5)
        prev_ids = rng.permutation(N)[:200].astype(np.int64)
        ids = np.concatenate([prev_ids[:120], rng.permutation(N)[:150]])
        ids = np.unique(ids)[rng.permutation(np.unique(ids).shape[0])]
        prev_rows = source.gather(prev_ids)
        where = {int(v): i for i, v in enumerate(prev_ids)}
        prev_pos = np.array([where.get(int(v), -1) for v in ids], dtype=np.int64)
        kwargs = {"prev_pos": prev_pos, "prev_rows": prev_rows} if with_prev else {}
        out = np.empty((ids.shape[0], DIM), dtype=source.dtype)
        rows, origin = source.assemble(ids, out=out, **kwargs)
        assert rows is out and origin.dtype == np.int8
        self.assert_rows(rows, x, ids)
        split = source.split(ids, prev_pos if with_prev else None)
        assert np.array_equal(origin == SOURCE_CACHE, split.held_pos >= 0)
        assert np.array_equal(origin == SOURCE_PREVIOUS, split.prev_pos >= 0)
        assert np.array_equal(np.flatnonzero(origin == SOURCE_STORE), split.store_idx)
        reused = np.flatnonzero(origin == SOURCE_PREVIOUS)
        assert reused.shape[0] == (int(((prev_pos >= 0) & (split.held_pos < 0)).sum()) if with_prev else 0)
        # reused rows are the previous batch's rows as delivered, bit for bit
        assert np.array_equal(rows[reused], prev_rows[prev_pos[reused]])


class TestStoreRows(RowSourceTests):
    def make(self, x, tmp):
        chunks, chunk_rows = _store(tmp, x, 64).feature_chunks()
        assert len(chunks) == 11
        return ChunkedRows(chunks, chunk_rows)


class TestStoreRowsManyChunks(RowSourceTests):
    """More chunks than the tuple buckets hold: the kernels' typed-list path."""

    def make(self, x, tmp):
        chunks, chunk_rows = _store(tmp, x, 8).feature_chunks()
        assert len(chunks) > 64
        return ChunkedRows(chunks, chunk_rows)


class TestArrayRows(RowSourceTests):
    def make(self, x, tmp):
        return ArrayRows(x.copy())


class TestDegreeCachedStoreRows(RowSourceTests):
    def make(self, x, tmp):
        chunks, chunk_rows = _store(tmp, x, 64).feature_chunks()
        return DegreeCachedRows(ChunkedRows(chunks, chunk_rows), _hot_ids())


class TestDegreeCachedArrayRows(RowSourceTests):
    def make(self, x, tmp):
        return DegreeCachedRows(ArrayRows(x.copy()), _hot_ids())


class TestCacheOverCache(RowSourceTests):
    """A cache whose backing source is itself a cache (no chunk views: the generic path)."""

    def make(self, x, tmp):
        inner = DegreeCachedRows(ArrayRows(x.copy()), np.arange(1, N, 5, dtype=np.int64))
        return DegreeCachedRows(inner, _hot_ids())


class TestQuantizedRows(RowSourceTests):
    bits = 8

    def make(self, x, tmp):
        return QuantizedRowSource(ArrayRows(x.copy()), 8, seed=3)


class TestQuantizedLowBitCachedRows(RowSourceTests):
    bits = 2

    def make(self, x, tmp):
        chunks, chunk_rows = _store(tmp, x, 64).feature_chunks()
        return QuantizedRowSource(DegreeCachedRows(ChunkedRows(chunks, chunk_rows), _hot_ids()), 2,
                                  seed=4)


class TestDiskRows(RowSourceTests):
    def make(self, x, tmp):
        return DiskRows.from_store(_store(tmp, x, 64), threads=4)


class TestDiskRowsOneThreadManyChunks(RowSourceTests):
    def make(self, x, tmp):
        return DiskRows.from_store(_store(tmp, x, 8), threads=1)


class TestCachedDiskRows(RowSourceTests):
    """CLOCK over the disk tier, smaller than the requests (evictions every gather)."""

    def make(self, x, tmp):
        return CachedRows(DiskRows.from_store(_store(tmp, x, 64), threads=3), 97)


class TestDegreeOverCachedDiskRows(RowSourceTests):
    """The composition the loader builds: static hot set, CLOCK, disk."""

    def make(self, x, tmp):
        return DegreeCachedRows(CachedRows(DiskRows.from_store(_store(tmp, x, 64)), 300), _hot_ids())


# -- what one source does ------------------------------------------------------------------------
def test_degree_cache_holds_the_highest_degrees(x: np.ndarray) -> None:
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(np.random.default_rng(6).integers(0, 9, size=N), out=indptr[1:])
    cache = DegreeCachedRows.by_degree(ArrayRows(x), indptr, 40)
    degrees = np.diff(indptr)
    assert np.array_equal(cache.ids, degree_order(degrees)[:40]) and len(cache) == 40
    assert degrees[cache.ids].min() >= np.delete(degrees, cache.ids).max()
    assert np.array_equal(cache.rows, x[cache.ids])
    assert np.array_equal(cache.lookup(cache.ids), np.arange(40))
    assert len(DegreeCachedRows.by_degree(ArrayRows(x), indptr, 0)) == 0


@pytest.mark.parametrize("bits", [8, 4, 2, 1])
def test_quantized_codes_match_the_reference(x: np.ndarray, bits: int) -> None:
    """Rows read from the backing source are quantized together, in request order, with the
    seed given; held rows once with the wrapper's seed; reused rows copied as packed."""
    hot = _hot_ids()
    source = QuantizedRowSource(DegreeCachedRows(ArrayRows(x), hot), bits, seed=11)
    ids = np.random.default_rng(bits).permutation(N)[:180].astype(np.int64)
    prev_packed = (np.full((90, source.row_bytes), 7, np.uint8), np.arange(90, dtype=np.float32),
                   np.ones(90, np.float32))
    prev_pos = np.where(np.arange(180) % 3 == 0, np.arange(180) % 90, -1)
    q, split = source.gather_packed(ids, 99, prev_pos, prev_packed)
    packed, mins, scales = q.packed.numpy(), q.mins.numpy(), q.scales.numpy()
    stored = split.store_idx
    codes, rmins, rscales = reference_quantize(x[ids[stored]], bits, 99)
    assert np.array_equal(packed[stored], reference_pack(codes, bits))
    assert np.array_equal(mins[stored], rmins) and np.array_equal(scales[stored], rscales)
    held = np.flatnonzero(split.held_pos >= 0)
    hcodes, hmins, _ = reference_quantize(x[hot], bits, 11)
    assert held.shape[0] > 0
    assert np.array_equal(packed[held], reference_pack(hcodes, bits)[split.held_pos[held]])
    assert np.array_equal(mins[held], hmins[split.held_pos[held]])
    reused = np.flatnonzero(split.prev_pos >= 0)
    assert reused.shape[0] > 0 and np.all(packed[reused] == 7)
    assert np.array_equal(mins[reused], prev_packed[1][split.prev_pos[reused]])
    assert isinstance(q.packed, torch.Tensor) and q.bits == bits and q.num_cols == DIM
    with pytest.raises(ValueError, match="'bits'"):
        QuantizedRowSource(ArrayRows(x), 3)


def test_disk_rows_reads_each_distinct_row_once_in_coalesced_calls(x: np.ndarray, tmp_path: Path) -> None:
    disk = DiskRows.from_store(_store(tmp_path, x, 64), threads=2, direct=False)
    ids = np.array([5, 6, 7, 8, 8, 5, 200, 63, 64], dtype=np.int64)  # 63|64 straddle a chunk
    assert np.array_equal(disk.gather(ids), x[ids])
    rows, nbytes, calls, _ = disk.counters.snapshot()
    assert (rows, nbytes, calls) == (7, 7 * DIM * 4, 4)  # buffered: 5-8, 63, 64, 200
    compressed = tmp_path / "z"
    with StoreWriter(compressed) as w:
        w.write_array("node/feat", x, compression="zstd")
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, 0
        w.commit()
    with pytest.raises(ValueError, match="compressed"):
        DiskRows.from_store(GraphStore.open(compressed))


def test_clock_cache_hits_and_evicts(x: np.ndarray) -> None:
    cache = CachedRows(ArrayRows(x), 10)
    cache.gather(np.arange(10))
    assert cache.reset_counts() == (0, 10) and len(cache) == 10
    cache.gather(np.array([0, 1, 2]))  # referenced: survive the next sweep
    cache.gather(np.arange(100, 105))
    assert cache.reset_counts() == (3, 5)
    assert np.all(cache.slot_of[[0, 1, 2]] >= 0) and np.count_nonzero(cache.slot_of >= 0) == 10
    assert np.array_equal(cache.rows[cache.slot_of[cache.slot_id]], x[cache.slot_id])
    assert np.array_equal(cache.gather(np.arange(N)), x)  # more misses than slots
    with pytest.raises(ValueError, match="'policy'"):
        CachedRows(ArrayRows(x), 10, policy="lru")
