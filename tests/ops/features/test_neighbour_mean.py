"""neighbour_mean_blocks against a NumPy reference: exact in float32/float64, float16 kept."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.features.neighbour_mean import neighbour_mean_blocks, transpose_csc


def _reference(indptr, indices, x):
    """Per row: the float64 sum of its neighbours' rows in storage order, / degree, cast."""
    out = np.zeros((len(indptr) - 1, x.shape[1]), dtype=np.float64)
    for r in range(len(indptr) - 1):
        acc = np.zeros(x.shape[1], dtype=np.float64)
        for e in range(indptr[r], indptr[r + 1]):
            acc += x[indices[e]].astype(np.float64)
        if indptr[r + 1] > indptr[r]:
            out[r] = acc / (indptr[r + 1] - indptr[r])
    return out.astype(x.dtype)


def _graph(seed, rows=300, sources=200, edges=2000, dim=7, dtype=np.float32):
    rng = np.random.default_rng(seed)
    deg = rng.multinomial(edges, rng.dirichlet(np.full(rows, 0.3)))  # skewed, with empty rows
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, sources, edges)
    x = (rng.standard_normal((sources, dim)) * 10).astype(dtype)
    return indptr, indices, x


@pytest.mark.parametrize("memory_bytes", [64, 1000, 1 << 20])  # one row / a few rows / one block
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equals_the_reference_exactly(memory_bytes, dtype):
    indptr, indices, x = _graph(0, dtype=dtype)
    blocks = list(neighbour_mean_blocks(indptr, indices, x, memory_bytes=memory_bytes))
    got = np.concatenate(blocks)
    assert got.dtype == dtype and (memory_bytes > 1000 or len(blocks) > 10)
    assert np.array_equal(got, _reference(indptr, indices, x))
    assert (got[np.diff(indptr) == 0] == 0).all() and (np.diff(indptr) == 0).any()


def test_float16_stays_float16_within_rounding():
    indptr, indices, x = _graph(1, dtype=np.float16)
    got = np.concatenate(list(neighbour_mean_blocks(indptr, indices, x, memory_bytes=4096)))
    assert got.dtype == np.float16
    want = _reference(indptr, indices, x.astype(np.float32))  # float32 mean of the float16 rows
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2**-10, atol=2**-14)
    assert np.array_equal(got, _reference(indptr, indices, x))


def test_memory_map_input_and_transposed_rows(tmp_path):
    """Rows = the relation's sources (its transpose), features read from a memory map."""
    indptr, indices, x = _graph(2, rows=120, sources=90)
    mm = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=x.dtype,
                                   shape=(120, x.shape[1]))
    mm[:] = np.random.default_rng(3).standard_normal((120, x.shape[1]))
    # the relation: sources 0..89 -> destinations 0..119 (rows of mm)
    t_indptr, t_dst, _ = transpose_csc(indptr, indices, 90)
    got = np.concatenate(list(neighbour_mean_blocks(t_indptr, t_dst, mm, memory_bytes=512)))
    assert np.array_equal(got, _reference(t_indptr, t_dst, np.asarray(mm)))


def test_bad_input_is_refused():
    indptr, indices, x = _graph(4)
    with pytest.raises(ValueError, match="indices"):
        list(neighbour_mean_blocks(indptr, indices + 1000, x))
    with pytest.raises(ValueError, match="indptr"):
        list(neighbour_mean_blocks(indptr[:-1], indices, x))
    with pytest.raises(ValueError, match="float"):
        list(neighbour_mean_blocks(indptr, indices, x.astype(np.int64)))
