"""The disk tier: :class:`DiskRows` reads feature rows of an uncompressed store with
explicit, batched positional reads instead of page faults on memory maps.

Row ``r`` of ``X`` lives in chunk file ``r // chunk_rows`` at byte
``(r % chunk_rows) * row_bytes`` (the store's raw row-chunk layout,
:func:`graphpipe.store.arrays.raw_chunk_files`). A gather takes the distinct IDs in
sorted order, coalesces runs of consecutive rows in one file into one read, and issues
the reads (``os.preadv`` straight into a preallocated buffer; ``pread`` releases the GIL)
from a pool of ``threads`` threads, so ``threads`` reads are in flight at once (the
queue depth the device sees). The buffer's rows are then scattered to the requested
order. Files are opened with ``posix_fadvise(POSIX_FADV_RANDOM)``: the kernel reads
only the pages asked for, no readahead, so a memory cap is not spent on rows nobody
asked for (memory maps under a cap read ~500x the bytes needed, issue 16).

Rows are bit-for-bit the stored bytes. Counters (:attr:`DiskRows.counters`) record
rows and bytes read, read calls and seconds spent reading, for the loader's stats.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.loaders.rows.base import RowSource

__all__ = ["DiskRows", "ReadCounters"]

MAX_RUN_ROWS = 256
"""The most consecutive rows one read call covers (bounds a call's latency)."""


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
    """Rows of ``X`` read with ``pread`` from its raw chunk files.

    Args:
        paths: the chunk files; ``paths[c]`` holds rows ``c*chunk_rows ...`` back to back.
        chunk_rows: rows per chunk file (every file holds this many row slots).
        num_rows: rows of ``X``.
        dim: values per row.
        dtype: the rows' dtype.
        threads: reads in flight at once (16–64 suit an NVMe drive).
    """

    def __init__(self, paths: list[Path], chunk_rows: int, num_rows: int, dim: int, dtype: Any, *,
                 threads: int = 32):
        if threads < 1:
            raise ValueError(f"'threads' must be >= 1 (got {threads})")
        self.paths = [Path(p) for p in paths]
        self.chunk_rows, self._num_rows, self._dim = int(chunk_rows), int(num_rows), int(dim)
        self._dtype = np.dtype(dtype)
        self.row_bytes = self._dim * self._dtype.itemsize
        self.threads = int(threads)
        self.counters = ReadCounters()
        self._fds: list[int] = []
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    @classmethod
    def from_store(cls, store: Any, *, threads: int = 32) -> DiskRows:
        """The node features of ``store`` (a :class:`graphpipe.store.GraphStore`); raises
        ValueError when they are compressed (no fixed row offsets)."""
        from graphpipe.store.arrays import raw_chunk_files

        raw = raw_chunk_files(store.path, "node/feat")
        if raw is None:
            raise ValueError(f"{store.path}: node features are compressed; the disk tier needs "
                             f"an uncompressed store (ingest with compression=None)")
        paths, chunk_rows, shape, dtype = raw
        return cls(paths, chunk_rows, shape[0], shape[1] if len(shape) > 1 else 1, dtype,
                   threads=threads)

    @property
    def num_rows(self) -> int:
        return self._num_rows

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    def _open(self) -> tuple[list[int], ThreadPoolExecutor]:
        with self._lock:
            if self._pool is None:
                for path in self.paths:
                    fd = os.open(path, os.O_RDONLY)
                    if hasattr(os, "posix_fadvise"):
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                    self._fds.append(fd)
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
            self._fds = []

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()

    def gather_into(self, ids: np.ndarray, out: np.ndarray) -> np.ndarray:
        if ids.shape[0] == 0:
            return out
        uniq, inverse = np.unique(ids, return_inverse=True)
        if uniq.shape[0] == ids.shape[0] and out.flags.c_contiguous and np.all(ids[1:] > ids[:-1]):
            self._read_sorted(uniq, out)
            return out
        buf = np.empty((uniq.shape[0], self._dim), dtype=self._dtype)
        self._read_sorted(uniq, buf)
        np.take(buf, inverse.reshape(-1), axis=0, out=out)
        return out

    def _read_sorted(self, uniq: np.ndarray, buf: np.ndarray) -> None:
        """``buf[i] = X[uniq[i]]`` for sorted distinct ``uniq``, in coalesced parallel reads."""
        starts = _runs(uniq, self.chunk_rows)
        fds, pool = self._open()
        view = memoryview(buf.reshape(-1).view(np.uint8))
        bounds = np.linspace(0, starts.shape[0] - 1, min(self.threads * 4, starts.shape[0] - 1) + 1)
        bounds = np.unique(bounds.astype(np.int64))
        t0 = time.perf_counter()

        def work(lo: int, hi: int) -> int:
            calls = 0
            for r in range(lo, hi):
                a, b = int(starts[r]), int(starts[r + 1])
                first = int(uniq[a])
                self._pread(fds[first // self.chunk_rows], view[a * self.row_bytes:b * self.row_bytes],
                            (first % self.chunk_rows) * self.row_bytes, first)
                calls += 1
            return calls

        calls = sum(pool.map(work, bounds[:-1].tolist(), bounds[1:].tolist()))
        with self._lock:
            c = self.counters
            c.rows, c.bytes = c.rows + uniq.shape[0], c.bytes + uniq.shape[0] * self.row_bytes
            c.calls, c.seconds = c.calls + calls, c.seconds + time.perf_counter() - t0

    def _pread(self, fd: int, dest: memoryview, offset: int, first: int) -> None:
        """Fill ``dest`` from ``fd`` at ``offset`` (loops over short reads)."""
        done = 0
        while done < len(dest):
            got = os.preadv(fd, [dest[done:]], offset + done)
            if got <= 0:
                raise OSError(f"{self.paths[first // self.chunk_rows]}: ends before row {first} "
                              f"(file truncated since the store was opened?)")
            done += got

    def __repr__(self) -> str:
        return (f"DiskRows(rows={self.num_rows}, dim={self.dim}, files={len(self.paths)}, "
                f"threads={self.threads})")


def _runs(uniq: np.ndarray, chunk_rows: int) -> np.ndarray:
    """int64 ``(R+1,)`` start positions of the runs of ``uniq`` (sorted distinct IDs) that
    one read covers: consecutive IDs in one chunk file, at most :data:`MAX_RUN_ROWS` long;
    the last entry is ``len(uniq)``."""
    k = uniq.shape[0]
    brk = np.ones(k, dtype=bool)
    brk[1:] = (np.diff(uniq) != 1) | (uniq[1:] // chunk_rows != uniq[:-1] // chunk_rows)
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, k))
    if lengths.max() > MAX_RUN_ROWS:  # split long runs
        pieces = [np.arange(s, s + n, MAX_RUN_ROWS) for s, n in zip(starts.tolist(), lengths.tolist())]
        starts = np.concatenate(pieces)
    return np.append(starts, k).astype(np.int64)
