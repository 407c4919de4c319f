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

Lines end in ``\\n``, ``\\r\\n`` or a lone ``\\r``; empty lines are skipped;
spaces around a field are ignored. The fast parser accepts only what it parses
exactly as ``pyarrow.csv`` does; anything else (quotes, tabs, ``+`` before an
integer, 19-digit integers, null words like ``NA``, ...) stops it, and
:func:`parse_block_exact` then reads the block with pyarrow: pyarrow's numbers, or a
refusal when pyarrow refuses too (``tests/ingest/test_csvparse_fuzz.py`` checks this
against pyarrow on arbitrary bytes).

Memory safety: every kernel checks each index against the buffer's length and
each row against the rows counted for its range, whatever the bytes are (NUL, lone
``\\r``, non-UTF-8, no final newline); nothing relies on Numba's bounds checking.

Errors carry the row (within the block), the physical line, the column and what was
found, so the caller can name the file and line.
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
ERR_EMPTY_LINE = 5

_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)


@dataclass
class ParseFailure(Exception):
    """Where a block failed to parse: ``row`` (0-based, among the block's non-empty lines),
    ``line`` (0-based physical line within the block), ``column`` (0-based). ``detail`` is
    pyarrow's message when the fast parser handed the block over and pyarrow refused it."""

    code: int
    row: int
    column: int
    found: str
    line: int = 0
    detail: str = ""

    def describe(self, expected_columns: int) -> str:
        if self.code == NEEDS_SLOW_PATH:
            return f"(or a later line) {self.detail}"
        if self.code == ERR_EMPTY_LINE:
            return "empty line"
        if self.code == ERR_FIELD_COUNT:
            return f"expected {expected_columns} fields, found {self.found}"
        if self.code == ERR_INT_RANGE:
            return f"column {self.column + 1}: integer {self.found!r} out of range"
        return f"column {self.column + 1}: {self.found!r} is not a number"


@numba.njit(nogil=True, cache=True, inline="always")
def _is_eol(c) -> bool:
    return c == 10 or c == 13


@numba.njit(nogil=True, cache=True)
def _is_line_start(buf, pos) -> bool:
    """Whether a line starts at ``0 < pos < len(buf)`` (after LF, or after a CR not before LF)."""
    c = buf[pos - 1]
    return c == 10 or (c == 13 and buf[pos] != 10)


@numba.njit(nogil=True, cache=True)
def _line_starts(buf: np.ndarray, parts: int) -> np.ndarray:
    """Cut positions splitting ``buf`` into about ``parts`` ranges at line starts (``\\n``,
    ``\\r\\n`` and a lone ``\\r`` end a line; a ``\\r\\n`` pair is never cut)."""
    n = buf.shape[0]
    cuts = np.empty(parts + 1, dtype=np.int64)
    cuts[0] = 0
    for p in range(1, parts):
        pos = max(cuts[p - 1], (n * p) // parts)
        while 0 < pos < n and not _is_line_start(buf, pos):
            pos += 1
        cuts[p] = pos
    cuts[parts] = n
    return cuts


@numba.njit(nogil=True, cache=True)
def _row_bound(buf: np.ndarray, start: int, stop: int) -> int:
    """An upper bound on the non-empty lines of ``buf[start:stop]``: its line-ending bytes,
    plus one if it does not end with one. Exact for ``\\n`` files without empty lines; a
    single pass without loop-carried state (as fast as counting ``\\n`` alone)."""
    start = max(start, 0)
    stop = min(stop, buf.shape[0])
    if start >= stop:
        return 0
    lf = 0
    cr = 0
    for i in range(start, stop):
        lf += buf[i] == 10
        cr += buf[i] == 13
    return lf + cr + (0 if _is_eol(buf[stop - 1]) else 1)


@numba.njit(nogil=True, cache=True)
def _line_of_row(buf: np.ndarray, row: int) -> int:
    """0-based physical line (``\\r\\n`` counts once) holding non-empty line number ``row``."""
    n = buf.shape[0]
    line = 0
    seen = -1
    prev_eol = True
    for i in range(n):
        c = buf[i]
        eol = _is_eol(c)
        if prev_eol and not eol:
            seen += 1
            if seen == row:
                return line
        if c == 10 or (c == 13 and (i + 1 >= n or buf[i + 1] != 10)):
            line += 1
        prev_eol = eol
    return line


@numba.njit(nogil=True, cache=True)
def _parse_float_field(buf, i, stop, pow10):
    """Parse one float field starting at ``i`` (after leading spaces); returns
    (value, next_pos, status). Reads only ``buf[i:stop]``."""
    neg = False
    signed = False
    if i < stop and (buf[i] == 45 or buf[i] == 43):  # '-' '+'
        neg = buf[i] == 45
        signed = True
        i += 1
    if i >= stop or buf[i] == 44 or _is_eol(buf[i]):
        if signed:  # a sign alone
            return 0.0, i, ERR_NOT_NUMBER
        return np.nan, i, OK  # an empty field: NaN (a null, as pandas and pyarrow read it)
    c = buf[i] | 32
    if c == 110:  # "nan", any case
        if i + 2 < stop and (buf[i + 1] | 32) == 97 and (buf[i + 2] | 32) == 110:
            return np.nan, i + 3, OK
        return 0.0, i, ERR_NOT_NUMBER
    if c == 105:  # "inf" or "infinity", any case
        if i + 2 < stop and (buf[i + 1] | 32) == 110 and (buf[i + 2] | 32) == 102:
            j = i + 3
            if (j + 4 < stop and (buf[j] | 32) == 105 and (buf[j + 1] | 32) == 110
                    and (buf[j + 2] | 32) == 105 and (buf[j + 3] | 32) == 116 and (buf[j + 4] | 32) == 121):
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
    """Parse one integer field: optional '-', 1 to 18 digits (more: the slow path decides;
    a '+' or anything else is refused here and judged by the slow path)."""
    neg = False
    if i < stop and buf[i] == 45:
        neg = True
        i += 1
    value = np.int64(0)
    ndig = 0
    while i < stop and 48 <= buf[i] <= 57:
        if ndig >= 18:
            return value, i, NEEDS_SLOW_PATH
        value = value * 10 + (buf[i] - 48)
        ndig += 1
        i += 1
    if ndig == 0:
        return value, i, ERR_NOT_NUMBER
    return (-value if neg else value), i, OK


@numba.njit(nogil=True, cache=True)
def _fail(status, code, row, col, pos) -> None:
    status[0] = code
    status[1] = row
    status[2] = col
    status[3] = pos


@numba.njit(nogil=True, cache=True)
def _parse_range(buf, start, stop, ncols, out_f, out_i, as_int, skip_empty, row0, row_end, pow10, status):
    """Parse the non-empty lines of buf[start:stop] into rows ``row0 .. row_end-1`` of out;
    status = [code, row, col, pos, rows written]. Empty lines are skipped when ``skip_empty``, else refused.
    Every index is checked: whatever the bytes, nothing is
    read outside ``buf[start:stop]`` nor written outside rows ``row0 .. row_end-1``."""
    stop = min(stop, buf.shape[0])
    i = max(start, 0)
    row = row0
    at_line_start = True
    while True:
        if not at_line_start:  # the ending of the row just parsed: \n, \r\n or \r
            if i < stop and buf[i] == 13:
                i += 1
            if i < stop and buf[i] == 10 and buf[i - 1] != 10:
                i += 1
        at_line_start = False
        if i < stop and _is_eol(buf[i]):  # empty lines
            if not skip_empty:
                _fail(status, ERR_EMPTY_LINE, row, 0, -1)
                return
            while i < stop and _is_eol(buf[i]):
                i += 1
        if i >= stop:
            break
        if row >= row_end:  # cannot happen: row_end - row0 bounds the lines of the range
            _fail(status, ERR_FIELD_COUNT, row, 0, -1)
            return
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
                if st == OK and i == field_start and field_start > 0 and buf[field_start - 1] == 32:
                    st = ERR_NOT_NUMBER  # spaces only: not an empty field
                if st == OK and col < ncols:
                    out_f[row, col] = fv
            while i < stop and buf[i] == 32:
                i += 1
            if st == OK and i < stop and buf[i] != 44 and not _is_eol(buf[i]):
                st = ERR_NOT_NUMBER
            if st != OK:
                _fail(status, st, row, col, field_start)
                return
            col += 1
            if i < stop and buf[i] == 44:
                i += 1
                continue
            break
        if col != ncols:
            _fail(status, ERR_FIELD_COUNT, row, col, -1)
            return
        row += 1
        status[4] = row - row0


@numba.njit(nogil=True, parallel=True, cache=True)
def _parse_block(buf, ncols, as_int, skip_empty, parts, pow10):
    """Parse ``parts`` line ranges of ``buf`` in parallel, part ``p`` into rows
    ``offsets[p] .. offsets[p+1]-1`` (its row bound); ``status[p, 4]`` says how many it wrote."""
    cuts = _line_starts(buf, parts)
    offsets = np.zeros(parts + 1, dtype=np.int64)
    for p in numba.prange(parts):
        offsets[p + 1] = _row_bound(buf, cuts[p], cuts[p + 1])
    for p in range(parts):
        offsets[p + 1] += offsets[p]
    rows = offsets[parts]
    out_f = np.empty((rows if not as_int else 0, ncols), dtype=np.float64)
    out_i = np.empty((rows if as_int else 0, ncols), dtype=np.int64)
    status = np.zeros((parts, 5), dtype=np.int64)
    for p in numba.prange(parts):
        _parse_range(buf, cuts[p], cuts[p + 1], ncols, out_f, out_i, as_int, skip_empty, offsets[p],
                     offsets[p + 1], pow10, status[p])
    return out_f, out_i, status, offsets


def first_nonempty_line(block: bytes) -> bytes | None:
    """The first non-empty line of ``block`` without its line ending (``None``: no such line)."""
    start = 0
    n = len(block)
    while start < n and block[start] in b"\r\n":
        start += 1
    if start == n:
        return None
    ends = [e for e in (block.find(b"\n", start), block.find(b"\r", start)) if e >= 0]
    return block[start: min(ends) if ends else n]


def next_line_start(block: bytes, pos: int) -> int:
    """Index just past the line ending that ends the line holding ``pos`` (``len(block)``
    if the line has none); ``\\r\\n`` is one ending."""
    ends = [e for e in (block.find(b"\n", pos), block.find(b"\r", pos)) if e >= 0]
    if not ends:
        return len(block)
    end = min(ends)
    return end + (2 if block[end:end + 2] == b"\r\n" else 1)


def count_columns(line: bytes) -> int:
    """Number of comma-separated fields in ``line`` (quoted fields counted as CSV does);
    :class:`ValueError` if quotes make it unreadable."""
    line = line.rstrip(b"\r\n")
    if b'"' not in line:
        return line.count(b",") + 1
    import io

    import pyarrow.csv as pcsv

    try:
        table = pcsv.read_csv(io.BytesIO(line + b"\n"),
                              read_options=pcsv.ReadOptions(autogenerate_column_names=True))
    except Exception as exc:  # noqa: BLE001 - pyarrow's error says what is wrong
        raise ValueError(f"cannot count the fields of the first line ({' '.join(str(exc).split())[:120]})") \
            from None
    return table.num_columns


def count_lines(block: bytes) -> int:
    """Physical lines ended in ``block`` (``\\n``, ``\\r\\n`` or a lone ``\\r`` each end one)."""
    lines = block.count(b"\n")
    if b"\r" in block:
        lines += block.count(b"\r") - block.count(b"\r\n")
    return lines


def line_of_row(block: bytes, row: int) -> int:
    """0-based physical line of ``block`` that holds its ``row``-th non-empty line."""
    return int(_line_of_row(np.frombuffer(block, dtype=np.uint8), row))


def _found_text(buf: np.ndarray, pos: int) -> str:
    """The field starting at ``pos`` (at most 40 bytes of it) for an error message."""
    segment = buf[pos: pos + 41]
    ends = np.flatnonzero((segment == 44) | (segment == 10) | (segment == 13))
    cut = int(ends[0]) if ends.size else min(len(segment), 40)
    text = bytes(segment[:cut]).decode("utf-8", "replace")
    return text + ("..." if not ends.size and len(segment) > 40 else "")


def parse_block(block: bytes, ncols: int, dtype: np.dtype | type, *, parts: int | None = None,
                skip_empty_lines: bool = True) -> np.ndarray:
    """Parse a block of whole lines into a ``(rows, ncols)`` array of ``dtype``.

    ``dtype`` int64 parses integers; float32/float64 parse floats (computed in
    float64, then cast). Lines end in ``\\n``, ``\\r\\n`` or ``\\r``; empty lines
    are skipped (refused with ``skip_empty_lines=False``). Raises :class:`ParseFailure` at the first field the fast parser does
    not accept, with ``code == NEEDS_SLOW_PATH`` when a value needs a full parser
    (:func:`parse_block_exact` then asks pyarrow).
    """
    dtype = np.dtype(dtype)
    if ncols < 1:
        raise ValueError(f"ncols must be >= 1, got {ncols}")
    buf = np.frombuffer(block, dtype=np.uint8)
    as_int = dtype.kind in "iu"
    if parts is None:
        parts = min(numba.get_num_threads() * 4, len(buf) // (1 << 18) or 1)
    parts = max(1, int(parts))
    out_f, out_i, status, offsets = _parse_block(buf, ncols, as_int, skip_empty_lines, parts, _POW10)
    written = status[:, 4]
    bad = np.flatnonzero(status[:, 0])
    if bad.size:
        first = int(bad[0])  # parts are in line order; those before it parsed whole
        code, row, col, pos = (int(v) for v in status[first, :4])
        row = int(written[:first].sum()) + row - int(offsets[first])
        found = str(col) if code == ERR_FIELD_COUNT else (_found_text(buf, pos) if pos >= 0 else "")
        raise ParseFailure(code, row, col, found, int(_line_of_row(buf, row)))
    out = out_i if as_int else out_f
    if not np.array_equal(written, np.diff(offsets)):  # CR or empty lines: close the gaps
        out = np.concatenate([out[offsets[p]: offsets[p] + written[p]] for p in range(parts)], axis=0)
    return out if out.dtype == dtype else out.astype(dtype)


def parse_block_slow(block: bytes, ncols: int, dtype: np.dtype | type) -> np.ndarray:
    """The same result through pyarrow's CSV reader (for values outside the fast path).

    An empty field or a null word (``NA``, ``null``, ...) reads as NaN in a float
    column and is refused (:class:`ValueError`) in an integer column. The block is read
    after an empty line, so a byte-order mark is skipped only where the caller removed it
    (at the start of the file).
    """
    import io

    import pyarrow as pa
    import pyarrow.csv as pcsv

    names = [f"c{i}" for i in range(ncols)]
    kind = pa.int64() if np.dtype(dtype).kind in "iu" else pa.float64()
    table = pcsv.read_csv(
        io.BytesIO(b"\n" + block),
        read_options=pcsv.ReadOptions(column_names=names),
        convert_options=pcsv.ConvertOptions(column_types={n: kind for n in names}),
    )
    out = np.empty((table.num_rows, ncols), dtype=np.float64 if kind == pa.float64() else np.int64)
    for j, n in enumerate(names):
        column = table.column(n)
        if kind == pa.int64() and column.null_count:
            raise ValueError(f"column {j + 1}: empty or null value in an integer column")
        out[:, j] = column.to_numpy(zero_copy_only=False)
    return out.astype(dtype, copy=False)


def parse_block_exact(block: bytes, ncols: int, dtype: np.dtype | type) -> np.ndarray:
    """:func:`parse_block`, and where it stops, pyarrow's reading of the same block: the
    numbers pyarrow gives, or a :class:`ParseFailure` when pyarrow refuses the block too."""
    try:
        return parse_block(block, ncols, dtype)
    except ParseFailure as fail:
        import pyarrow as pa

        try:
            return parse_block_slow(block, ncols, dtype)
        except (pa.ArrowInvalid, ValueError) as exc:
            if fail.code == NEEDS_SLOW_PATH:
                fail.detail = " ".join(str(exc).split())[:200]
            raise fail from None


def warm_up() -> None:
    """Run the parallel parser once (compiles or loads it, and starts Numba's threading layer)."""
    parse_block(b"1,2\n", 2, np.int64, parts=2)
