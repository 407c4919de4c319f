"""Row gather, membership and the cache → previous → store assembly against NumPy references
(fastgl.md §10.3)."""

from __future__ import annotations

import numpy as np
import pytest

import graphpipe.ops.features.gather as gather_module
from graphpipe.ops.features.gather import (
    SOURCE_CACHE,
    SOURCE_PREVIOUS,
    SOURCE_STORE,
    FeatureChunks,
    PositionTable,
    assemble_rows,
    assemble_rows_reference,
    gather_rows,
    gather_rows_reference,
    positions_in,
    positions_in_reference,
)


@pytest.fixture(params=["serial", "parallel"], autouse=True)
def copy_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run every test through the serial kernels and through the parallel-block kernels."""
    if request.param == "parallel":
        monkeypatch.setattr(gather_module, "PARALLEL_MIN_BYTES", 0)
        monkeypatch.setattr(gather_module, "PARALLEL_MIN_QUERIES", 0)
        monkeypatch.setattr(gather_module.numba, "get_num_threads", lambda: 2)
    return request.param


def _chunks(x: np.ndarray, rows: int) -> list[np.ndarray]:
    views = [x[i:i + rows] for i in range(0, len(x), rows)]
    for v in views:
        v.setflags(write=False)
    return views


@pytest.mark.parametrize("chunk_rows", [1, 7, 64, 1000])
def test_gather_rows_bitwise(chunk_rows: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 5)).astype(np.float32)
    ids = rng.integers(0, 300, size=1000)
    out = gather_rows(_chunks(x, chunk_rows), chunk_rows, ids)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert np.array_equal(out.view(np.uint32), gather_rows_reference(x, ids).view(np.uint32))


@pytest.mark.parametrize("chunk_rows", [7, 3, 1000])  # tuple path, typed-list path (100 chunks), one view
def test_gather_and_assemble_float16_bitwise(chunk_rows: int) -> None:
    """float16 rows (MAG240M's dtype; Numba has no float16 type) are gathered and assembled bit
    for bit, NaN payloads and subnormals included, without a float32 copy of the table."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((300, 5)).astype(np.float16)
    x[3, 0], x[4, 1], x[5, 2] = np.float16("nan"), np.float16(6e-8), np.float16(-0.0)
    ids = rng.integers(0, 300, size=1000)
    out = gather_rows(_chunks(x, chunk_rows), chunk_rows, ids)
    assert out.dtype == np.float16 and out.flags.c_contiguous
    assert np.array_equal(out.view(np.uint16), x[ids].view(np.uint16))
    cache_ids, prev_ids = rng.choice(300, 40, replace=False), rng.choice(300, 90, replace=False)
    out, source = assemble_rows(ids, chunks=_chunks(x, chunk_rows), chunk_rows=chunk_rows,
                                cache_pos=positions_in(cache_ids, ids), cache_rows=x[cache_ids],
                                prev_pos=positions_in(prev_ids, ids), prev_rows=x[prev_ids])
    assert out.dtype == np.float16 and np.array_equal(out.view(np.uint16), x[ids].view(np.uint16))
    assert set(np.unique(source).tolist()) == {SOURCE_CACHE, SOURCE_PREVIOUS, SOURCE_STORE}


def test_gather_rows_errors() -> None:
    x = np.zeros((10, 2), np.float32)
    with pytest.raises(ValueError, match="'ids'"):
        gather_rows([x], 10, np.array([10]))
    with pytest.raises(ValueError, match="'chunk_rows'"):
        gather_rows([x], 0, np.array([1]))
    with pytest.raises(ValueError, match="'chunks"):
        FeatureChunks([x, np.zeros((3, 3), np.float32)])
    with pytest.raises(ValueError, match="'chunks\\[0\\]'"):
        FeatureChunks([x, x], chunk_rows=4)


@pytest.mark.parametrize("seed", range(4))
def test_positions_in_matches_dict(seed: int) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.choice(10**9, size=int(rng.integers(0, 500)), replace=False)
    queries = np.concatenate([rng.choice(keys, size=min(len(keys), 200)) if len(keys) else
                              np.zeros(0, np.int64), rng.integers(0, 10**9, size=300)])
    pos = positions_in(keys, queries)
    assert np.array_equal(pos, positions_in_reference(keys, queries))
    hit = pos >= 0
    assert np.array_equal(keys[pos[hit]], queries[hit])


def test_positions_adversarial_collisions_and_large_ids() -> None:
    # all keys a multiple of a large power of two: same low bits
    keys = (np.arange(1, 2000, dtype=np.int64) << 40) + (1 << 33)
    queries = np.concatenate([keys[::-3], keys[:5] + 1])
    table = PositionTable(keys)
    assert np.array_equal(table.lookup(queries), positions_in_reference(keys, queries))


def test_positions_in_overlap_sets() -> None:
    rng = np.random.default_rng(3)
    prev = rng.choice(5000, size=800, replace=False)
    nxt = rng.choice(5000, size=900, replace=False)
    pos = positions_in(prev, nxt)
    overlap = set(nxt[pos >= 0].tolist())
    load = set(nxt[pos < 0].tolist())
    assert overlap == set(nxt.tolist()) & set(prev.tolist())
    assert load == set(nxt.tolist()) - set(prev.tolist())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("chunk_rows", [3, 64])  # 134 chunks (typed-list path) and 7 (tuple path)
def test_assemble_rows_sources_and_bits(seed: int, chunk_rows: int) -> None:
    rng = np.random.default_rng(seed)
    n, dim = 400, 6
    x = rng.standard_normal((n, dim)).astype(np.float32)
    cache_ids = rng.choice(n, size=40, replace=False)
    prev_ids = rng.choice(n, size=150, replace=False)
    next_ids = rng.choice(n, size=170, replace=False)
    cache_pos = positions_in(cache_ids, next_ids)
    prev_pos = positions_in(prev_ids, next_ids)
    cache_rows, prev_rows = x[cache_ids], x[prev_ids]
    out, source = assemble_rows(next_ids, chunks=_chunks(x, chunk_rows), chunk_rows=chunk_rows,
                                cache_pos=cache_pos,
                                cache_rows=cache_rows, prev_pos=prev_pos, prev_rows=prev_rows)
    ref, ref_source = assemble_rows_reference(next_ids, x, cache_pos, cache_rows, prev_pos, prev_rows)
    assert np.array_equal(out.view(np.uint32), x[next_ids].view(np.uint32))
    assert np.array_equal(out, ref) and np.array_equal(source, ref_source)
    # each row from exactly one source, in priority order
    in_cache = np.isin(next_ids, cache_ids)
    in_prev = np.isin(next_ids, prev_ids)
    assert np.array_equal(source == SOURCE_CACHE, in_cache)
    assert np.array_equal(source == SOURCE_PREVIOUS, ~in_cache & in_prev)
    assert np.array_equal(source == SOURCE_STORE, ~in_cache & ~in_prev)
    assert int((source == SOURCE_STORE).sum()) == len(set(next_ids.tolist()) - set(prev_ids.tolist())
                                                          - set(cache_ids.tolist()))


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_assemble_rows_nothing_reused_one_view(dtype) -> None:
    """No held or previous rows, an in-memory matrix (the typed loader's common case, one
    direct pass): ``X[ids]`` bit for bit into the given ``out``, every row from the store."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((500, 33)).astype(dtype)
    ids = np.concatenate([rng.permutation(500)[:300], rng.integers(0, 500, 40)])
    out = np.full((len(ids), 33), 7, dtype=dtype)
    got, source = assemble_rows(ids, chunks=x, chunk_rows=None, out=out)
    ref, ref_source = assemble_rows_reference(ids, x, None, None, None, None)
    assert got is out and np.array_equal(got.view(np.uint8), ref.view(np.uint8))
    assert np.array_equal(source, ref_source) and (source == SOURCE_STORE).all()
    empty, source = assemble_rows(np.zeros(0, np.int64), chunks=x, chunk_rows=None)
    assert empty.shape == (0, 33) and source.shape == (0,)


def test_assemble_degenerate_cases() -> None:
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    ids = np.arange(5, 15)
    same = positions_in(ids, ids)
    out, source = assemble_rows(ids, chunks=[x], chunk_rows=20, prev_pos=same, prev_rows=x[ids])
    assert (source == SOURCE_PREVIOUS).all() and np.array_equal(out, x[ids])
    disjoint = positions_in(np.arange(15, 20), ids)
    out, source = assemble_rows(ids, chunks=[x], chunk_rows=20, prev_pos=disjoint, prev_rows=x[15:20])
    assert (source == SOURCE_STORE).all() and np.array_equal(out, x[ids])
    with pytest.raises(ValueError, match="'prev_pos'"):
        assemble_rows(ids, chunks=[x], chunk_rows=20, prev_pos=np.zeros(3, np.int64), prev_rows=x)


@pytest.mark.parametrize("dense", [True, False])
def test_resident_index_matches_positions_in(monkeypatch, dense) -> None:
    """ResidentIndex (dense map or hash table) answers like positions_in, across
    replacements, and ignores later changes to the array it was given."""
    from graphpipe.ops.features import gather

    if not dense:
        monkeypatch.setattr(gather, "DENSE_INDEX_MAX_BYTES", 0)
    rng = np.random.default_rng(7)
    n = 5000
    index = gather.ResidentIndex(n)
    assert (index.lookup(np.arange(10)) == -1).all()
    previous = None
    for _ in range(6):
        ids = rng.choice(n, int(rng.integers(1, 900)), replace=False).astype(np.int64)
        queries = rng.integers(0, n, 2000).astype(np.int64)
        if previous is not None:
            np.testing.assert_array_equal(index.lookup(queries), positions_in_reference(previous, queries))
        index.replace(ids)
        previous = ids.copy()
        ids[:] = 0  # the caller reuses its array: the index must not notice
    index.replace(None)
    assert (index.lookup(np.arange(n)) == -1).all()
    index.replace(np.array([3, 1], dtype=np.int64))
    np.testing.assert_array_equal(index.lookup(np.arange(5)), [-1, 1, -1, 0, -1])
