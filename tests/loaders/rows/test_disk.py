"""DiskRows (:mod:`graphpipe.loaders.rows.disk`) against NumPy indexing of the same
matrix, bit for bit: O_DIRECT and buffered reads, row sizes that are not a multiple of
the block, rows in several chunk files, repeats, empty requests, bulk reads; and its
read plan (:mod:`graphpipe.loaders.rows.read_plan`) against a pure-Python model."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from graphpipe.loaders.rows import DiskRows
from graphpipe.loaders.rows.read_plan import plan_reads


def _files(folder: Path, x: np.ndarray, chunk_rows: int) -> list[Path]:
    """``x`` cut into raw chunk files of ``chunk_rows`` row slots (the last one padded)."""
    paths = []
    for c in range(0, x.shape[0], chunk_rows):
        block = np.zeros((chunk_rows, *x.shape[1:]), dtype=x.dtype)
        part = x[c:c + chunk_rows]
        block[:part.shape[0]] = part
        paths.append(folder / str(c // chunk_rows))
        block.tofile(paths[-1])
    return paths


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize(("dim", "dtype", "chunk_rows"), [
    (128, np.float32, 300),   # 512-byte rows: one block each under O_DIRECT
    (100, np.float32, 257),   # 400-byte rows straddle blocks
    (3, np.float64, 1000),    # 24-byte rows, several per block
    (1, np.int8, 999),        # 1-byte rows, odd file sizes
    (1200, np.float32, 7),    # rows longer than a 4 KiB page
])
def test_rows_are_the_stored_bytes(tmp_path: Path, direct, dim, dtype, chunk_rows) -> None:
    rng = np.random.default_rng(dim)
    n = 2000
    x = (rng.standard_normal((n, dim)) * 100).astype(dtype)
    rows = DiskRows(_files(tmp_path, x, chunk_rows), chunk_rows, n, dim, dtype, threads=4, direct=direct)
    for ids in (rng.integers(0, n, 700), np.arange(n)[::-1], np.array([n - 1, 0, n - 1, chunk_rows - 1,
                                                                      chunk_rows, 5, 5]),
                np.arange(chunk_rows - 3, min(n, chunk_rows + 3))):  # a run crossing two files
        got = rows.gather(ids)
        assert got.dtype == x.dtype and np.array_equal(got.view(np.uint8), x[ids].view(np.uint8))
        assert np.array_equal(rows.read_bulk(ids).view(np.uint8), x[ids].view(np.uint8))
    assert rows.gather(np.zeros(0, dtype=np.int64)).shape == (0, dim)
    r, nbytes, calls, _s = rows.counters.snapshot()
    assert r > 0 and calls > 0 and nbytes >= r * dim * np.dtype(dtype).itemsize
    if not direct:
        assert rows.direct_files == 0
    rows.close()
    assert np.array_equal(rows.gather(np.array([3])), x[[3]])  # reopens


def test_direct_reads_cost_their_blocks_only(tmp_path: Path) -> None:
    """512-byte rows under O_DIRECT with 512-byte blocks: bytes read == bytes of the rows."""
    x = np.random.default_rng(0).standard_normal((4096, 128)).astype(np.float32)
    rows = DiskRows(_files(tmp_path, x, 1024), 1024, 4096, 128, np.float32, threads=8)
    if rows.direct_files == 0 or int(rows._blocks.max()) != 512:
        pytest.skip("this file system refuses 512-byte O_DIRECT reads")
    ids = np.arange(0, 4096, 7)
    assert np.array_equal(rows.gather(ids), x[ids])
    assert rows.counters.bytes == ids.shape[0] * 512


def test_truncated_file_is_an_error_naming_it(tmp_path: Path) -> None:
    x = np.ones((100, 4), dtype=np.float32)
    paths = _files(tmp_path, x, 50)
    rows = DiskRows(paths, 50, 100, 4, np.float32, threads=2)
    rows.gather(np.array([0]))
    with open(paths[1], "r+b") as f:
        f.truncate(16)
    with pytest.raises(OSError, match=str(paths[1].name)):
        rows.gather(np.array([99]))


def _plan_model(uniq, chunk_rows, row_bytes, block, gap, max_request):
    """Pure-Python model of plan_reads: widen each row to blocks, merge neighbours."""
    reads, row_at = [], []
    for r in uniq.tolist():
        f, off = r // chunk_rows, (r % chunk_rows) * row_bytes
        lo, hi = off // block * block, -(-(off + row_bytes) // block) * block
        if reads and reads[-1][0] == f and lo <= reads[-1][2] + gap and hi - reads[-1][1] <= max_request:
            reads[-1][2] = max(reads[-1][2], hi)
        else:
            reads.append([f, lo, hi])
        base = sum(e - s for _f, s, e in reads[:-1])
        row_at.append(base + off - reads[-1][1])
    return reads, row_at


@pytest.mark.parametrize(("row_bytes", "block", "gap"), [(512, 512, 0), (400, 512, 0), (24, 4096, 0),
                                                         (512, 512, 8192), (48, 1, 0), (4800, 512, 1000)])
def test_read_plan_matches_the_model(row_bytes, block, gap) -> None:
    rng = np.random.default_rng(row_bytes + gap)
    uniq = np.unique(rng.integers(0, 5000, 800)).astype(np.int64)
    r_file, r_off, r_len, r_buf, row_at, total = plan_reads(
        uniq, 1000, row_bytes, np.full(5, block, dtype=np.int64), gap, 1 << 16)
    reads, model_at = _plan_model(uniq, 1000, row_bytes, block, gap, 1 << 16)
    assert r_file.tolist() == [f for f, _s, _e in reads] and r_off.tolist() == [s for _f, s, _e in reads]
    assert r_len.tolist() == [e - s for _f, s, e in reads] and row_at.tolist() == model_at
    assert total == int(r_len.sum()) and r_buf.tolist() == np.concatenate([[0], np.cumsum(r_len)[:-1]]).tolist()
    assert (r_off % block == 0).all() and (r_len % block == 0).all()
