"""Fast text output for the dataset writers: numeric arrays to CSV bytes, and a parallel gzip.

- :func:`format_rows` turns an ``(n, k)`` int or float array into CSV text
  (one row per line, fields joined by a delimiter) with Numba kernels, instead
  of a Python ``%`` per value; floats are written fixed-point, like
  ``"%.6f" % x`` (``-0.057943``).
- :class:`ParallelGzipWriter` writes ONE standard gzip member, compressing
  chunks in threads the way pigz does (each chunk a raw-deflate run ending in a
  sync flush; a final empty block; CRC-32 and length in the trailer), so any
  gzip reader (Python's ``gzip``, pandas, Arrow, ``zcat``) reads it.
- :func:`write_csv_gz` / :func:`write_csv` put the two together chunk by chunk,
  so memory stays bounded by the chunk size however large the array.

The slow, obvious reference :func:`format_rows_reference` sits next to the fast
path; the tests compare the two.
"""

from __future__ import annotations

import collections
import math
import os
import re
import struct
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba
import numpy as np

# Per value, at most: sign + 19 digits + '.' + decimals + delimiter.
_MAX_FLOAT_DECIMALS = 9
# |x| * 10**decimals must stay well inside int64 for the fixed-point path.
_FIXED_POINT_LIMIT = 2.0**62

_FIXED_FORMAT = re.compile(r"^%\.(\d)f$")

ProgressFn = Callable[[str, int, int], None]


# ---------------------------------------------------------------------------
# formatting kernels


@numba.njit(inline="always")
def _num_digits(value):
    # value >= 0
    digits = 1
    while value >= 10:
        value //= 10
        digits += 1
    return digits


@numba.njit(inline="always")
def _write_uint(out, pos, value, digits):
    end = pos + digits
    for i in range(digits):
        out[end - 1 - i] = 48 + value % 10
        value //= 10
    return end


@numba.njit(parallel=True, nogil=True, cache=True)
def _int_row_lengths(values, lengths):
    n, k = values.shape
    for row in numba.prange(n):
        total = k  # k - 1 delimiters + the newline
        for col in range(k):
            v = values[row, col]
            if v < 0:
                total += 1
                v = -v
            total += _num_digits(v)
        lengths[row] = total


@numba.njit(parallel=True, nogil=True, cache=True)
def _int_rows_write(values, offsets, delimiter, out):
    n, k = values.shape
    for row in numba.prange(n):
        pos = offsets[row]
        for col in range(k):
            v = values[row, col]
            if v < 0:
                out[pos] = 45  # '-'
                pos += 1
                v = -v
            pos = _write_uint(out, pos, v, _num_digits(v))
            out[pos] = delimiter if col < k - 1 else 10
            pos += 1


@numba.njit(inline="always")
def _fixed(value, scale):
    # (negative, fixed-point magnitude) of a finite value, rounded half to even as printf
    # does (exactly so for float32 input: the product with 10**decimals is exact in float64)
    negative = value < 0
    magnitude = -value if negative else value
    q = np.int64(np.rint(magnitude * scale))
    return negative and q > 0, q


@numba.njit(parallel=True, nogil=True, cache=True)
def _float_row_lengths(values, decimals, lengths):
    n, k = values.shape
    scale = 10.0**decimals
    pow10 = np.int64(10) ** decimals
    for row in numba.prange(n):
        total = k
        for col in range(k):
            v = np.float64(values[row, col])
            if np.isnan(v):
                total += 3  # nan
            elif np.isinf(v):
                total += 3 if v > 0 else 4  # inf / -inf
            else:
                negative, q = _fixed(v, scale)
                if negative:
                    total += 1
                total += _num_digits(q // pow10)
                if decimals > 0:
                    total += 1 + decimals
        lengths[row] = total


@numba.njit(parallel=True, nogil=True, cache=True)
def _float_rows_write(values, decimals, offsets, delimiter, out):
    n, k = values.shape
    scale = 10.0**decimals
    pow10 = np.int64(10) ** decimals
    for row in numba.prange(n):
        pos = offsets[row]
        for col in range(k):
            v = np.float64(values[row, col])
            if np.isnan(v):
                out[pos] = 110  # n
                out[pos + 1] = 97  # a
                out[pos + 2] = 110  # n
                pos += 3
            elif np.isinf(v):
                if v < 0:
                    out[pos] = 45
                    pos += 1
                out[pos] = 105  # i
                out[pos + 1] = 110  # n
                out[pos + 2] = 102  # f
                pos += 3
            else:
                negative, q = _fixed(v, scale)
                if negative:
                    out[pos] = 45
                    pos += 1
                whole = q // pow10
                pos = _write_uint(out, pos, whole, _num_digits(whole))
                if decimals > 0:
                    out[pos] = 46  # '.'
                    pos = _write_uint(out, pos + 1, q - whole * pow10, decimals)
            out[pos] = delimiter if col < k - 1 else 10
            pos += 1


def parse_float_format(feat_format: str) -> int | None:
    """Decimals of a ``"%.Nf"`` format (the fast path), or None for any other format."""
    match = _FIXED_FORMAT.match(feat_format)
    return int(match.group(1)) if match else None


def _as_2d(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.ndim != 2:
        raise ValueError(f"'values' must be 1-D or 2-D (got shape {values.shape})")
    return values


def format_rows(
    values: np.ndarray, *, float_format: str = "%.6f", delimiter: str = ","
) -> np.ndarray:
    """CSV text of a 1-D or 2-D numeric array: one line per row, as a uint8 array.

    Integers are written in full; floats with ``float_format`` (printf style:
    ``"%.Nf"`` takes the Numba fast path, any other format the slow reference
    path). NaN and infinities are written ``nan``, ``inf``, ``-inf``.
    """
    values = _as_2d(values)
    if len(delimiter) != 1:
        raise ValueError(f"'delimiter' must be one character (got {delimiter!r})")
    delim = ord(delimiter)
    n = values.shape[0]
    lengths = np.empty(n, dtype=np.int64)
    if values.dtype.kind in "iub":
        # int64's minimum has no positive counterpart, uint64 may not fit int64: slow path
        if n and values.size and (
            (values.dtype == np.uint64 and values.max() > np.iinfo(np.int64).max)
            or (values.dtype == np.int64 and values.min() == np.iinfo(np.int64).min)
        ):
            return np.frombuffer(
                format_rows_reference(values, float_format=float_format, delimiter=delimiter),
                dtype=np.uint8,
            )
        values = np.ascontiguousarray(values, dtype=np.int64)
        _int_row_lengths(values, lengths)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        out = np.empty(int(offsets[-1]), dtype=np.uint8)
        _int_rows_write(values, offsets, delim, out)
        return out
    if values.dtype.kind != "f":
        raise ValueError(f"'values' must be numeric (got dtype {values.dtype})")
    decimals = parse_float_format(float_format)
    if decimals is not None and values.size:
        finite = values[np.isfinite(values)]
        if finite.size and float(np.abs(finite).max()) * 10.0**decimals >= _FIXED_POINT_LIMIT:
            decimals = None
    if decimals is None or decimals > _MAX_FLOAT_DECIMALS:
        return np.frombuffer(
            format_rows_reference(values, float_format=float_format, delimiter=delimiter),
            dtype=np.uint8,
        )
    if values.dtype not in (np.float32, np.float64):
        values = values.astype(np.float64)
    values = np.ascontiguousarray(values)
    _float_row_lengths(values, decimals, lengths)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    _float_rows_write(values, decimals, offsets, delim, out)
    return out


def format_rows_reference(
    values: np.ndarray, *, float_format: str = "%.6f", delimiter: str = ","
) -> bytes:
    """Reference for :func:`format_rows` (Python formatting, one value at a time): slow."""
    values = _as_2d(values)
    is_float = values.dtype.kind == "f"
    lines = []
    for row in values.tolist():
        fields = []
        for v in row:
            if is_float:
                if math.isnan(v):
                    fields.append("nan")
                elif v in (float("inf"), float("-inf")):
                    fields.append("inf" if v > 0 else "-inf")
                else:
                    text = float_format % v
                    if text.startswith("-") and float(text) == 0:
                        text = text[1:]  # the fast path never writes "-0.000000"
                    fields.append(text)
            else:
                fields.append(str(int(v)))
        lines.append(delimiter.join(fields) + "\n")
    return "".join(lines).encode()


def rows_per_chunk(values: np.ndarray, target_bytes: int = 8 << 20) -> int:
    """How many rows of ``values`` make about ``target_bytes`` of text."""
    values = _as_2d(values)
    per_value = 11 if values.dtype.kind == "f" else 8
    per_row = max(1, values.shape[1] * per_value)
    return max(1024, target_bytes // per_row)


# ---------------------------------------------------------------------------
# gzip


def _deflate_chunk(data, level: int) -> bytes:
    compressor = zlib.compressobj(level, zlib.DEFLATED, -15, 9)
    return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)


def default_workers() -> int:
    """Threads used for compression: the CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class ParallelGzipWriter:
    """Write one gzip member, deflating the chunks given to :meth:`write` in threads.

    Chunks are compressed independently (no shared dictionary, so a little
    larger than a serial gzip) and written in order. Use as a context manager;
    the file is complete only after :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike, *, level: int = 1, workers: int | None = None):
        if not 0 <= level <= 9:
            raise ValueError(f"'level' must be in 0..9 (got {level})")
        self.path = Path(path)
        self.level = level
        self.workers = workers or default_workers()
        self._file = open(self.path, "wb")  # noqa: SIM115 - closed by close()/abort()
        # gzip header: magic, deflate, no flags, mtime, no extra flags, OS unknown
        self._file.write(struct.pack("<BBBBIBB", 0x1F, 0x8B, 8, 0, int(time.time()), 0, 255))
        self._pool = ThreadPoolExecutor(max_workers=self.workers) if self.workers > 1 else None
        self._pending: collections.deque = collections.deque()
        self._crc = 0
        self._size = 0
        self._closed = False

    def write(self, data) -> None:
        """Queue ``data`` (bytes or a uint8 array) to be compressed and appended."""
        view = memoryview(data).cast("B")
        if not len(view):
            return
        self._crc = zlib.crc32(view, self._crc)
        self._size += len(view)
        if self._pool is None:
            self._file.write(_deflate_chunk(view, self.level))
            return
        self._pending.append(self._pool.submit(_deflate_chunk, data, self.level))
        while len(self._pending) > 2 * self.workers:
            self._file.write(self._pending.popleft().result())

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            while self._pending:
                self._file.write(self._pending.popleft().result())
            final = zlib.compressobj(self.level, zlib.DEFLATED, -15, 9)
            self._file.write(final.flush(zlib.Z_FINISH))  # an empty final block
            self._file.write(struct.pack("<II", self._crc & 0xFFFFFFFF, self._size & 0xFFFFFFFF))
        finally:
            self._file.close()
            if self._pool is not None:
                self._pool.shutdown(wait=True)

    def abort(self) -> None:
        """Stop without finishing the file (used when an error interrupts writing)."""
        self._closed = True
        for future in self._pending:
            future.cancel()
        self._file.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True)

    def __enter__(self) -> ParallelGzipWriter:  # noqa: PYI034
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class _PlainWriter:
    def __init__(self, path: str | os.PathLike):
        self._file = open(path, "wb")  # noqa: SIM115 - closed by __exit__

    def write(self, data) -> None:
        self._file.write(memoryview(data).cast("B"))

    def __enter__(self) -> _PlainWriter:  # noqa: PYI034
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._file.close()


def open_text_sink(path: str | os.PathLike, *, level: int = 1, workers: int | None = None):
    """A writer for ``path``: gzip-compressed when the name ends in ``.gz``, plain otherwise."""
    if str(path).endswith(".gz"):
        return ParallelGzipWriter(path, level=level, workers=workers)
    return _PlainWriter(path)


def write_csv(
    path: str | os.PathLike,
    values: np.ndarray,
    *,
    header: str | None = None,
    float_format: str = "%.6f",
    delimiter: str = ",",
    level: int = 1,
    workers: int | None = None,
    progress: ProgressFn | None = None,
    label: str | None = None,
) -> Path:
    """Write a numeric array as CSV to ``path`` (gzip when it ends in ``.gz``), chunk by chunk.

    ``header``: an optional first line (without the newline). ``progress`` is
    called as ``progress(label, rows_done, rows_total)`` after each chunk.
    """
    path = Path(path)
    values = _as_2d(values)
    label = label or path.name
    n = values.shape[0]
    step = rows_per_chunk(values)
    with open_text_sink(path, level=level, workers=workers) as sink:
        if header is not None:
            sink.write((header + "\n").encode())
        for start in range(0, n, step):
            sink.write(
                format_rows(values[start : start + step], float_format=float_format,
                            delimiter=delimiter)
            )
            if progress is not None:
                progress(label, min(n, start + step), n)
        if progress is not None and n == 0:
            progress(label, 0, 0)
    return path
