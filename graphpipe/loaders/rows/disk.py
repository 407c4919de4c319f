"""The disk tier: :class:`DiskRows` reads feature rows of an uncompressed store with
explicit, batched positional reads instead of page faults on memory maps.

Row ``r`` of ``X`` lives in chunk file ``r // chunk_rows`` at byte
``(r % chunk_rows) * row_bytes`` (the store's raw row-chunk layout,
:func:`graphpipe.store.arrays.raw_chunk_files`). A gather takes the distinct IDs in
sorted order, plans the reads (:func:`graphpipe.loaders.rows.read_plan.plan_reads`:
neighbouring rows of one file share a read) and issues them into one page-aligned
scratch buffer from a pool of ``threads`` threads, each running a Numba loop that calls
``pread`` without the GIL (:func:`graphpipe.loaders.rows.read_plan.run_reads`), so
``threads`` reads are in flight at once (the queue depth the device sees) at no Python
cost per read.
A Numba kernel then copies the rows to the requested order.

Files are opened with ``O_DIRECT`` (``direct=True``, the default): reads go from the
device to the scratch buffer, bypassing the page cache, so rows are not cached twice
(the memory a cap allows goes to the row cache above this tier) and a read costs only
the blocks it asks for: with the device's logical block size (512 bytes on most
drives) a 512-byte float32 row costs 512 bytes, not a 4 KiB page. Whether a file
accepts O_DIRECT, and with which alignment (512 or 4096), is found once per file by
one probing read; a file that refuses it (tmpfs, some network file systems: EINVAL) is
read buffered with ``posix_fadvise(POSIX_FADV_RANDOM)``: no readahead, only the pages
asked for (memory maps under a cap read ~500x the bytes needed, issue 16).

Rows are bit-for-bit the stored bytes. Counters (:attr:`DiskRows.counters`) record
rows read, bytes actually read from the files (whole blocks), read calls and seconds.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.loaders.rows.base import RowSource, check_ids
from graphpipe.loaders.rows.read_plan import plan_reads, run_reads, scatter_rows

__all__ = ["DiskRows", "ReadCounters"]

DIRECT_BLOCKS = (512, 4096)
"""O_DIRECT alignments tried, smallest first (the device's logical block size)."""
MAX_REQUEST = 128 << 10
"""The longest read that merging neighbouring rows may make (bounds a call's latency)."""
GAP_BYTES = 0
"""Default gap between two rows' blocks that one read still covers (0: only touching
or shared blocks; a gap costs bytes read for fewer calls)."""
BULK_GAP_BYTES = 8 << 10
"""The gap of :meth:`DiskRows.read_bulk`: where reading the gap costs less than another
random read (measured here: ~250 MB/s in long reads, ~40K random reads/s, so ~6 KiB),
dense ID sets become near-sequential scans."""
BULK_SPAN_BYTES = 8 << 20
""":meth:`DiskRows.read_bulk` reads in pieces spanning at most this many bytes of ``X``
(bounds its scratch buffer)."""
SCRATCH_KEEP_BYTES = 8 << 20
"""A scratch buffer larger than this is dropped after its gather, not kept for the next."""


class ReadCounters:
    """Running totals of a :class:`DiskRows`' reads (reset by the loader per epoch)."""

    def __init__(self) -> None:
        self.rows = 0
        self.bytes = 0
        self.calls = 0
        self.seconds = 0.0

    def snapshot(self) -> tuple[int, int, int, float]:
        """``(rows, bytes, calls, seconds)`` so far."""
        return self.rows, self.bytes, self.calls, self.seconds


class DiskRows(RowSource):
    """Rows of ``X`` read with ``pread`` (O_DIRECT where allowed) from its raw chunk files.

    Args:
        paths: the chunk files; ``paths[c]`` holds rows ``c*chunk_rows ...`` back to back.
        chunk_rows: rows per chunk file (every file holds this many row slots).
        num_rows: rows of ``X``.
        dim: values per row.
        dtype: the rows' dtype.
        threads: reads in flight at once (16–64 suit an NVMe drive).
        direct: read with O_DIRECT where the file system accepts it (else buffered).
        gap: bytes between two rows' blocks that one read still covers.

    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> x = np.arange(40, dtype=np.float32).reshape(10, 4)
    >>> d = Path(tempfile.mkdtemp())
    >>> x[:6].tofile(d / "0"); np.pad(x[6:], ((0, 2), (0, 0))).tofile(d / "1")
    >>> rows = DiskRows([d / "0", d / "1"], 6, 10, 4, np.float32)
    >>> rows.gather(np.array([9, 0, 9, 5])).tolist()[0]
    [36.0, 37.0, 38.0, 39.0]
    >>> bool((rows.gather(np.array([9, 0, 9, 5])) == x[[9, 0, 9, 5]]).all())
    True
    """

    def __init__(self, paths: list[Path], chunk_rows: int, num_rows: int, dim: int, dtype: Any, *,
                 threads: int = 32, direct: bool = True, gap: int = GAP_BYTES, root: Any = None):
        if threads < 1:
            raise ValueError(f"'threads' must be >= 1 (got {threads})")
        if gap < 0:
            raise ValueError(f"'gap' must be >= 0 (got {gap})")
        self.paths = [Path(p) for p in paths]
        self.root = root  # the store directory as opened: files opened later come from it
        self.chunk_rows, self._num_rows, self._dim = int(chunk_rows), int(num_rows), int(dim)
        self._dtype = np.dtype(dtype)
        self.row_bytes = self._dim * self._dtype.itemsize
        self.threads, self.direct, self.gap = int(threads), bool(direct), int(gap)
        self.counters = ReadCounters()
        self._fds: list[int] = []
        self._blocks = np.ones(0, dtype=np.int64)  # per file: O_DIRECT alignment, 1 = buffered
        self._sizes: list[int] = []
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()  # counters, open/close
        self._gather_lock = threading.Lock()  # one gather at a time owns the scratch buffer
        self._scratch: mmap.mmap | None = None

    @classmethod
    def from_store(cls, store: Any, *, threads: int = 32, direct: bool = True,
                   key: str = "node/feat") -> DiskRows:
        """The node features of ``store`` (a :class:`graphpipe.store.GraphStore`; ``key``:
        the array, e.g. a typed store's ``typed/<ntype>/feat``); raises ValueError when
        they are compressed (no fixed row offsets)."""
        from graphpipe.store.arrays import raw_chunk_files

        raw = raw_chunk_files(store.path, key)
        if raw is None:
            raise ValueError(f"{store.path}: features {key!r} are compressed; the disk tier needs "
                             f"an uncompressed store (ingest with compression=None)")
        paths, chunk_rows, shape, dtype = raw
        return cls(paths, chunk_rows, shape[0], shape[1] if len(shape) > 1 else 1, dtype,
                   threads=threads, direct=direct, root=store.path)

    @property
    def num_rows(self) -> int:
        return self._num_rows

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def direct_files(self) -> int:
        """Files read with O_DIRECT (opens the files)."""
        self._open()
        return int(np.count_nonzero(self._blocks > 1))

    def _open(self) -> tuple[list[int], ThreadPoolExecutor]:
        with self._lock:
            if self._pool is None:
                blocks = []
                for path in self.paths:
                    fd, block = _open_file(path, self.direct)
                    self._fds.append(fd)
                    self._sizes.append(os.fstat(fd).st_size)
                    blocks.append(block)
                self._blocks = np.asarray(blocks, dtype=np.int64)
                if self.root is not None:
                    from graphpipe.store.generation import confirm

                    confirm(self.root)  # the files opened are the opened store's
                self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="graphpipe-pread")
            return self._fds, self._pool

    def close(self) -> None:
        """Close the files and stop the read threads (reopened on the next gather)."""
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            for fd in self._fds:
                os.close(fd)
            self._fds, self._sizes = [], []
            self._scratch = None

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self._gather(ids, out, self.gap)

    def read_bulk(self, ids: np.ndarray) -> np.ndarray:
        """``X[ids]`` like :meth:`gather`, merging reads across gaps of up to
        :data:`BULK_GAP_BYTES`: for filling a cache with a dense set of rows (a hot
        set), a few long near-sequential reads instead of one read per row."""
        ids = check_ids(ids, self.num_rows)
        uniq, inverse = np.unique(ids, return_inverse=True)
        rows = np.empty((uniq.shape[0], self.dim), dtype=self.dtype)
        piece = uniq * self.row_bytes // BULK_SPAN_BYTES  # same piece: within one span
        cuts = np.flatnonzero(piece[1:] != piece[:-1]) + 1
        for lo, hi in zip([0, *cuts.tolist()], [*cuts.tolist(), uniq.shape[0]]):
            self._gather(uniq[lo:hi], rows[lo:hi], BULK_GAP_BYTES)
        return rows if np.array_equal(uniq, ids) else rows[inverse.reshape(-1)]

    def _gather(self, ids: np.ndarray, out: np.ndarray, gap: int) -> np.ndarray:
        if ids.shape[0] == 0:
            return out
        uniq, inverse = np.unique(ids, return_inverse=True)
        fds, pool = self._open()
        t0 = time.perf_counter()
        with self._gather_lock:
            r_file, r_off, r_len, r_buf, row_at, total = plan_reads(
                uniq, self.chunk_rows, self.row_bytes, self._blocks, gap, max(MAX_REQUEST, 2 * gap))
            scratch = np.frombuffer(self._scratch_of(total), dtype=np.uint8, count=max(1, total))
            parts = np.unique(np.linspace(0, r_file.shape[0], min(self.threads, r_file.shape[0]) + 1
                                          ).astype(np.int64))
            fd_arr, sizes = np.asarray(fds, dtype=np.int64), np.asarray(self._sizes, dtype=np.int64)

            def work(lo: int, hi: int) -> int:
                return run_reads(fd_arr, r_file, r_off, r_len, r_buf, sizes, scratch, lo, hi)

            failed = [r for r in pool.map(work, parts[:-1].tolist(), parts[1:].tolist()) if r >= 0]
            if failed:
                self._raise_read_error(int(r_file[failed[0]]), int(r_off[failed[0]]), int(r_len[failed[0]]))
            flat = out.reshape(out.shape[0], -1).view(np.uint8)
            scatter_rows(scratch, row_at, inverse.reshape(-1).astype(np.int64), flat)
            if total > SCRATCH_KEEP_BYTES:
                self._scratch = None
        with self._lock:
            c = self.counters
            c.rows, c.bytes = c.rows + uniq.shape[0], c.bytes + int(r_len.sum())
            c.calls, c.seconds = c.calls + int(r_file.shape[0]), c.seconds + time.perf_counter() - t0
        return out

    def _scratch_of(self, nbytes: int) -> mmap.mmap:
        """A page-aligned (anonymous map) buffer of at least ``nbytes``, reused across gathers."""
        if self._scratch is None or len(self._scratch) < nbytes:
            self._scratch = mmap.mmap(-1, max(4096, 1 << (max(1, nbytes) - 1).bit_length()))
        return self._scratch

    def _raise_read_error(self, f: int, offset: int, length: int) -> None:
        """Repeat a failed read in Python to raise its error (OSError naming the file)."""
        buf = mmap.mmap(-1, max(4096, length))
        need = min(length, self._sizes[f] - offset)
        done = 0
        while done < need:
            got = os.preadv(self._fds[f], [memoryview(buf)[done:length]], offset + done)
            if got <= 0:
                break
            done += got
        raise OSError(f"{self.paths[f]}: ends at byte {offset + done}, before the rows asked for "
                      f"(file truncated since the store was opened?)")

    def __repr__(self) -> str:
        return (f"DiskRows(rows={self.num_rows}, dim={self.dim}, files={len(self.paths)}, "
                f"threads={self.threads}, direct={self.direct})")


def _open_file(path: Path, direct: bool) -> tuple[int, int]:
    """``(fd, block)``: ``path`` opened with O_DIRECT and the smallest alignment a probing
    read accepts, or buffered with ``POSIX_FADV_RANDOM`` and block 1 when O_DIRECT is
    refused (or ``direct`` is False)."""
    flag = getattr(os, "O_DIRECT", 0)
    if direct and flag:
        try:
            fd = os.open(path, os.O_RDONLY | flag)
        except OSError:
            fd = -1
        if fd >= 0:
            probe = mmap.mmap(-1, max(DIRECT_BLOCKS))
            for block in DIRECT_BLOCKS:
                try:
                    os.preadv(fd, [memoryview(probe)[:block]], 0)
                except OSError:
                    continue
                return fd, block
            os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
    return fd, 1
