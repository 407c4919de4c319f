"""neighbour_mean_blocks against a NumPy reference, in both layouts: bit for bit with float64
sums (float16 kept), within rounding with float32 sums; blocks and reads bounded by the plan,
``x`` read only in sequential blocks."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.features.neighbour_mean import (
    neighbour_mean_blocks,
    plan_neighbour_mean,
    transpose_csc,
)


def _reference(indptr, indices, x):
    """Per row: the float64 sum of its neighbours' rows in ascending source order, / degree,
    cast to x's dtype (zeros without neighbours)."""
    deg = np.diff(indptr)
    rows = np.repeat(np.arange(len(deg)), deg)
    order = np.lexsort((indices, rows))
    out = np.zeros((len(deg), x.shape[1]), dtype=np.float64)
    np.add.at(out, rows[order], x[indices[order]].astype(np.float64))  # in that order
    np.divide(out, deg[:, None], out=out, where=deg[:, None] > 0)
    return out.astype(x.dtype)


def _graph(seed, rows=300, sources=200, edges=2000, dim=7, dtype=np.float32):
    """Rows grouped CSC (indptr over rows, indices sources), skewed with empty rows."""
    rng = np.random.default_rng(seed)
    deg = rng.multinomial(edges, rng.dirichlet(np.full(rows, 0.3)))
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, sources, edges)
    x = (rng.standard_normal((sources, dim)) * 10).astype(dtype)
    return indptr, indices, x


def _by_sources(indptr, indices, sources):
    """The same neighbours grouped by source (indptr over x's rows, indices output rows)."""
    t_indptr, t_rows, _ = transpose_csc(indptr, indices, sources)
    return t_indptr, t_rows


class Reads:
    """``x`` recording every read: ``(first row, end row, rows, whole)`` of a slice
    (``whole``) or of an ascending array of rows (anything else fails the test)."""

    def __init__(self, x):
        self.x, self.reads = x, []
        self.shape, self.dtype, self.ndim = x.shape, x.dtype, x.ndim

    def __getitem__(self, rows):
        if isinstance(rows, slice):
            self.reads.append((rows.start, rows.stop, rows.stop - rows.start, True))
        else:
            assert (np.diff(rows) > 0).all()
            self.reads.append((int(rows[0]), int(rows[-1]) + 1, len(rows), False))
        return self.x[rows]


def _run(indptr, indices, x, grouped, **kw):
    found = list(neighbour_mean_blocks(indptr, indices, x, grouped=grouped, **kw))
    blocks = [(r0, b) for r0, b, _ in found]
    starts = [r0 for r0, _ in blocks]
    got = np.concatenate([b for _, b in blocks])
    assert starts == list(np.cumsum([0] + [len(b) for _, b in blocks])[:-1] + starts[0])
    counts = np.concatenate([c for *_, c in found])
    deg = np.diff(indptr) if grouped == "rows" else np.bincount(indices, minlength=len(got))
    assert np.array_equal(counts, deg[starts[0]:])  # each row's number of neighbours
    return blocks, got


@pytest.mark.parametrize("memory_bytes", [1000, 3000, 1 << 20])  # few rows / more / one pass
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("grouped", ["rows", "sources"])
def test_equals_the_reference_exactly(grouped, dtype, memory_bytes):
    indptr, indices, x = _graph(0, dtype=dtype)
    want = _reference(indptr, indices, x)
    layout = (indptr, indices) if grouped == "rows" else _by_sources(indptr, indices, 200)
    blocks, got = _run(*layout, x, grouped, num_rows=300, memory_bytes=memory_bytes)
    assert got.dtype == dtype and (memory_bytes > 3000 or len(blocks) > 10)
    if dtype == np.float64 and grouped == "rows" and memory_bytes < 1 << 20:
        # a row with more edges than a step takes is summed a step at a time: float64
        # rows' sums are not exact, so that order shows in the last bits
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13)
    else:  # float64 sums of float16/float32 rows are exact: no order shows
        assert np.array_equal(got, want)
    assert (got[np.diff(indptr) == 0] == 0).all() and (np.diff(indptr) == 0).any()


def test_float16_mean_within_rounding_and_float32_sums():
    indptr, indices, x = _graph(1, dtype=np.float16)
    want32 = _reference(indptr, indices, x.astype(np.float32))  # float32 mean of float16 rows
    _, got = _run(indptr, indices, x, "rows", memory_bytes=4096)
    np.testing.assert_allclose(got.astype(np.float32), want32, rtol=2**-10, atol=2**-14)
    t = _by_sources(indptr, indices, 200)
    _, got32 = _run(*t, x, "sources", num_rows=300, memory_bytes=4096, accumulate=np.float32)
    assert got32.dtype == np.float16  # float32 sums: one float16 rounding from the exact mean
    np.testing.assert_allclose(got32.astype(np.float32), want32, rtol=2**-10, atol=2**-14)


@pytest.mark.parametrize("grouped", ["rows", "sources"])
def test_blocks_and_reads_bounded_by_the_plan(grouped):
    """Output blocks of at most plan.out_rows rows; x read in ascending, disjoint slices of at
    most plan.source_rows rows per pass; a pass reads x once at most."""
    indptr, indices, x = _graph(2, rows=400, sources=300, edges=3000, dim=16)
    memory = 16 * 12 * 20 * 2  # 20 output rows per pass in float64 + float32 out
    plan = plan_neighbour_mean(16, x.dtype, memory)
    assert plan.out_rows == 20 and plan.source_rows < 300 and plan.max_edges < 3000
    rec = Reads(x)
    layout = (indptr, indices) if grouped == "rows" else _by_sources(indptr, indices, 300)
    blocks, got = _run(*layout, rec, grouped, num_rows=400, memory_bytes=memory)
    assert np.array_equal(got, _reference(indptr, indices, x))
    assert max(len(b) for _, b in blocks) <= plan.out_rows and len(blocks) >= 400 // 20
    assert all(0 < s1 - s0 <= plan.source_rows for s0, s1, *_ in rec.reads)
    assert not all(whole for *_, whole in rec.reads)  # sparse blocks: only the rows named
    rows_read = sum(k for _, _, k, _ in rec.reads)
    if grouped == "sources":  # edges never split a pass: one pass per output block
        passes = [i for i, (s0, *_) in enumerate(rec.reads) if i and s0 < rec.reads[i - 1][1]]
        assert len(passes) + 1 <= len(blocks) and rows_read <= len(blocks) * 300
    else:
        assert rows_read <= (len(blocks) + 3000 // plan.max_edges) * 300


def test_memory_map_input_and_resume_from_a_row(tmp_path):
    indptr, indices, x = _graph(3, rows=120, sources=90)
    mm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=x.dtype, shape=x.shape)
    mm[:] = x
    t = _by_sources(indptr, indices, 90)
    blocks, got = _run(*t, np.load(tmp_path / "x.npy", mmap_mode="r"), "sources",
                       num_rows=120, memory_bytes=2000)
    assert np.array_equal(got, _reference(indptr, indices, x))
    cut = blocks[len(blocks) // 2][0]
    tail, got_tail = _run(*t, mm, "sources", num_rows=120, memory_bytes=2000, start=cut)
    assert tail[0][0] == cut and np.array_equal(got_tail, got[cut:])


def test_bad_input_is_refused():
    indptr, indices, x = _graph(4)
    with pytest.raises(ValueError, match="indices"):
        list(neighbour_mean_blocks(indptr, indices + 1000, x))
    with pytest.raises(ValueError, match="indices"):
        list(neighbour_mean_blocks(*_by_sources(indptr, indices, 200), x, grouped="sources",
                                   num_rows=10))
    with pytest.raises(ValueError, match="indptr"):
        list(neighbour_mean_blocks(indptr[:-1], indices, x))
    with pytest.raises(ValueError, match="num_rows"):
        list(neighbour_mean_blocks(*_by_sources(indptr, indices, 200), x, grouped="sources"))
    with pytest.raises(ValueError, match="float"):
        list(neighbour_mean_blocks(indptr, indices, x.astype(np.int64)))
    with pytest.raises(ValueError, match="accumulate"):
        list(neighbour_mean_blocks(indptr, indices, x, accumulate=np.float16))


@pytest.mark.parametrize("grouped", ["rows", "sources"])
def test_memory_stays_within_the_budget(tmp_path, grouped):
    """x (a 768 KB memory map) and the sums (2 MB in float64) far beyond a 256 KiB budget: the
    allocations (tracemalloc: numpy's arrays, not the mapped pages) peak within it."""
    import tracemalloc

    rng = np.random.default_rng(5)
    rows, sources, edges, dim, budget = 2000, 3000, 20000, 128, 256 << 10
    np.save(tmp_path / "x.npy", rng.standard_normal((sources, dim)).astype(np.float16))
    x = np.load(tmp_path / "x.npy", mmap_mode="r")
    row_of = np.sort(rng.integers(0, rows, edges))
    indptr, indices = np.searchsorted(row_of, np.arange(rows + 1)), rng.integers(0, sources, edges)
    layout = (indptr, indices) if grouped == "rows" else _by_sources(indptr, indices, sources)
    list(neighbour_mean_blocks(np.array([0, 1]), np.array([0]), x[:1]))  # the kernel compiled
    tracemalloc.start()
    try:
        blocks = neighbour_mean_blocks(*layout, x, grouped=grouped, num_rows=rows, memory_bytes=budget)
        first = [r0 for r0, *_ in blocks]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(first) >= 2000 // 102 and peak <= budget, (len(first), peak)
