"""A fast, strict parser for headerless numeric CSV blocks (OGB's raw files), in Numba.

OGB ships every table as headerless numeric CSV (``edge.csv.gz``,
``node-feat.csv.gz``, ...). A general CSV reader spends most of its time on
generality; this one parses exactly that shape, in parallel over line ranges of
a block, without the GIL:

- integers: optional sign and digits (at most 18);
- floats: optional sign, digits, optional fraction, optional exponent; ``nan``,
  ``inf`` (any case, signed) and an empty field (NaN, as pandas reads it).
  A value is computed as ``m * 10**e`` or ``m / 10**-e`` with an exact integer
  mantissa ``m < 2**53`` and ``|e| <= 22``: one correctly rounded IEEE operation
  (Clinger's fast path), so the float64 equals what a correctly rounding parser
  gives, and float32 output is that float64 rounded once, as ``astype(float32)``
  does after pandas. Values outside the fast path (more than 15 significant
  digits, huge exponents) are reported so the caller can re-parse that block
  with pyarrow.

Errors carry the row (within the block), the column and what was found, so the
caller can name the file and line.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

OK = 0
ERR_NOT_NUMBER = 1
ERR_FIELD_COUNT = 2
ERR_INT_RANGE = 3
NEEDS_SLOW_PATH = 4

_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)


@dataclass
class ParseFailure(Exception):
    """Where a block failed to parse: ``row`` within the block (0-based), ``column`` (0-based)."""

    code: int
    row: int
    column: int
    found: str

    def describe(self, expected_columns: int) -> str:
        if self.code == ERR_FIELD_COUNT:
            return f"expected {expected_columns} fields, found {self.found}"
        if self.code == ERR_INT_RANGE:
            return f"column {self.column + 1}: integer {self.found!r} out of range"
        return f"column {self.column + 1}: {self.found!r} is not a number"


@numba.njit(nogil=True, cache=True)
def _line_starts(buf: np.ndarray, parts: int) -> np.ndarray:
    """Cut positions splitting ``buf`` into about ``parts`` ranges at line starts."""
    n = buf.shape[0]
    cuts = np.empty(parts + 1, dtype=np.int64)
    cuts[0] = 0
    for p in range(1, parts):
        pos = max(cuts[p - 1], (n * p) // parts)
        while pos < n and pos > 0 and buf[pos - 1] != 10:
            pos += 1
        cuts[p] = pos
    cuts[parts] = n
    return cuts


@numba.njit(nogil=True, cache=True)
def _count_rows(buf: np.ndarray, start: int, stop: int) -> int:
    rows = 0
    for i in range(start, stop):
        if buf[i] == 10:
            rows += 1
    return rows


@numba.njit(nogil=True, cache=True)
def _parse_float_field(buf, i, stop, pow10):
    """Parse one float field starting at ``i``; returns (value, next_pos, status)."""
    neg = False
    if i < stop and (buf[i] == 45 or buf[i] == 43):  # '-' '+'
        neg = buf[i] == 45
        i += 1
    # special values and empty fields
    c = buf[i] if i < stop else 44
    if c == 44 or c == 10 or c == 13:
        return np.nan, i, OK
    if c == 110 or c == 78:  # n / N
        if i + 2 < stop and (buf[i + 1] | 32) == 97 and (buf[i + 2] | 32) == 110:
            return np.nan, i + 3, OK
        return 0.0, i, ERR_NOT_NUMBER
    if c == 105 or c == 73:  # i / I
        if i + 2 < stop and (buf[i + 1] | 32) == 110 and (buf[i + 2] | 32) == 102:
            j = i + 3
            if j + 4 < stop and (buf[j] | 32) == 105 and (buf[j + 1] | 32) == 110:  # "inity"
                j += 5
            return (-np.inf if neg else np.inf), j, OK
        return 0.0, i, ERR_NOT_NUMBER
    mant = np.int64(0)
    digits = 0
    exp10 = 0
    seen_digit = False
    while i < stop and 48 <= buf[i] <= 57:
        seen_digit = True
        if digits < 18:
            mant = mant * 10 + (buf[i] - 48)
            if mant > 0:
                digits += 1
        else:
            exp10 += 1
            if buf[i] != 48:
                digits += 1  # precision beyond 18 digits: slow path below
        i += 1
    if i < stop and buf[i] == 46:  # '.'
        i += 1
        while i < stop and 48 <= buf[i] <= 57:
            seen_digit = True
            if digits < 18:
                mant = mant * 10 + (buf[i] - 48)
                exp10 -= 1
                if mant > 0:
                    digits += 1
            elif buf[i] != 48:
                digits += 1
            i += 1
    if not seen_digit:
        return 0.0, i, ERR_NOT_NUMBER
    if i < stop and (buf[i] == 101 or buf[i] == 69):  # e / E
        i += 1
        eneg = False
        if i < stop and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        if not (i < stop and 48 <= buf[i] <= 57):
            return 0.0, i, ERR_NOT_NUMBER
        e = 0
        while i < stop and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        exp10 += -e if eneg else e
    if mant == 0:
        return (-0.0 if neg else 0.0), i, OK
    if digits > 15 or mant >= (np.int64(1) << 53) or exp10 > 22 or exp10 < -22:
        return 0.0, i, NEEDS_SLOW_PATH
    value = float(mant)
    if exp10 >= 0:
        value = value * pow10[exp10]
    else:
        value = value / pow10[-exp10]
    return (-value if neg else value), i, OK


@numba.njit(nogil=True, cache=True)
def _parse_int_field(buf, i, stop):
    neg = False
    if i < stop and (buf[i] == 45 or buf[i] == 43):
        neg = buf[i] == 45
        i += 1
    value = np.int64(0)
    ndig = 0
    while i < stop and 48 <= buf[i] <= 57:
        if ndig >= 18:
            return value, i, ERR_INT_RANGE
        value = value * 10 + (buf[i] - 48)
        ndig += 1
        i += 1
    if ndig == 0:
        return value, i, ERR_NOT_NUMBER
    return (-value if neg else value), i, OK


@numba.njit(nogil=True, cache=True)
def _parse_range(buf, start, stop, ncols, out_f, out_i, as_int, row0, pow10, status):
    """Parse lines in buf[start:stop] into rows row0.. of out; status = [code, row, col, pos]."""
    i = start
    row = row0
    while i < stop:
        col = 0
        while True:
            while i < stop and buf[i] == 32:  # spaces around fields
                i += 1
            field_start = i
            if as_int:
                v, i, st = _parse_int_field(buf, i, stop)
                if st == OK and col < ncols:
                    out_i[row, col] = v
            else:
                fv, i, st = _parse_float_field(buf, i, stop, pow10)
                if st == OK and col < ncols:
                    out_f[row, col] = fv
            while i < stop and buf[i] == 32:
                i += 1
            if st == OK and i < stop and buf[i] != 44 and buf[i] != 10 and buf[i] != 13:
                st = ERR_NOT_NUMBER
            if st != OK:
                status[0] = st
                status[1] = row
                status[2] = col
                status[3] = field_start
                return
            col += 1
            if i < stop and buf[i] == 44:
                i += 1
                continue
            break
        if i < stop and buf[i] == 13:
            i += 1
        if col != ncols:
            status[0] = ERR_FIELD_COUNT
            status[1] = row
            status[2] = col
            status[3] = -1
            return
        i += 1  # the newline
        row += 1


@numba.njit(nogil=True, parallel=True, cache=True)
def _parse_block(buf, ncols, as_int, parts, pow10):
    cuts = _line_starts(buf, parts)
    counts = np.zeros(parts + 1, dtype=np.int64)
    for p in numba.prange(parts):
        counts[p + 1] = _count_rows(buf, cuts[p], cuts[p + 1])
    for p in range(parts):
        counts[p + 1] += counts[p]
    rows = counts[parts]
    out_f = np.empty((rows if not as_int else 0, ncols), dtype=np.float64)
    out_i = np.empty((rows if as_int else 0, ncols), dtype=np.int64)
    status = np.zeros((parts, 4), dtype=np.int64)
    for p in numba.prange(parts):
        _parse_range(buf, cuts[p], cuts[p + 1], ncols, out_f, out_i, as_int, counts[p], pow10, status[p])
    return out_f, out_i, status


def count_columns(first_line: bytes) -> int:
    """Number of comma-separated fields in a line."""
    return first_line.rstrip(b"\r\n").count(b",") + 1


def parse_block(block: bytes, ncols: int, dtype: np.dtype | type, *, parts: int | None = None) -> np.ndarray:
    """Parse a block of whole lines into a ``(rows, ncols)`` array of ``dtype``.

    ``dtype`` int64 parses integers; float32/float64 parse floats (computed in
    float64, then cast). Raises :class:`ParseFailure` at the first bad field,
    with ``code == NEEDS_SLOW_PATH`` when a value needs a full parser.
    """
    dtype = np.dtype(dtype)
    buf = np.frombuffer(block, dtype=np.uint8)
    as_int = dtype.kind in "iu"
    if parts is None:
        parts = max(1, min(numba.get_num_threads() * 4, len(buf) // (1 << 18) or 1))
    out_f, out_i, status = _parse_block(buf, ncols, as_int, parts, _POW10)
    bad = np.flatnonzero(status[:, 0])
    if bad.size:
        first = bad[np.argmin(status[bad, 1])]
        code, row, col, pos = (int(v) for v in status[first])
        if code == ERR_FIELD_COUNT:
            found = str(col)
        else:
            end = pos
            while end < len(buf) and buf[end] not in (44, 10, 13):
                end += 1
            found = bytes(buf[pos:end]).decode("utf-8", "replace")
        raise ParseFailure(code, row, col, found)
    out = out_i if as_int else out_f
    return out if out.dtype == dtype else out.astype(dtype)


def parse_block_slow(block: bytes, ncols: int, dtype: np.dtype | type) -> np.ndarray:
    """The same result through pyarrow's CSV reader (for values outside the fast path)."""
    import io

    import pyarrow as pa
    import pyarrow.csv as pcsv

    names = [f"c{i}" for i in range(ncols)]
    kind = pa.int64() if np.dtype(dtype).kind in "iu" else pa.float64()
    table = pcsv.read_csv(
        io.BytesIO(block),
        read_options=pcsv.ReadOptions(column_names=names),
        convert_options=pcsv.ConvertOptions(column_types={n: kind for n in names}),
    )
    out = np.empty((table.num_rows, ncols), dtype=np.float64 if kind == pa.float64() else np.int64)
    for j, n in enumerate(names):
        out[:, j] = table.column(n).to_numpy(zero_copy_only=False)
    return out.astype(dtype, copy=False)


def warm_up() -> None:
    """Run the parallel parser once (compiles or loads it, and starts Numba's threading layer)."""
    parse_block(b"1,2\n", 2, np.int64, parts=2)
