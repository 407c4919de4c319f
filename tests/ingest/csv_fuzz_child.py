"""Hypothesis fuzz of the CSV reader against ``pyarrow.csv``, run as a child process.

``python csv_fuzz_child.py EXAMPLES`` checks that :func:`graphpipe.ingest.ogb.read_csv_table`
(textio's block cutting + the Numba parser + its pyarrow fallback) gives, on arbitrary
bytes, the same numbers as ``pyarrow.csv.read_csv`` on the whole file, or that both
refuse. It runs in its own process (started by ``test_csvparse_fuzz.py``) so that a
crash in a Numba kernel fails that test instead of killing pytest.

The oracle is pyarrow with the column count given (or inferred from the first row) and
the column types forced to int64 / float64, plus two documented rules of ours: an
integer column holding a null (empty field, ``NA``, ``null``...) is refused, and a file
with no non-empty line is zero rows (pyarrow says "Empty CSV file").
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphpipe.ingest.csvparse import ParseFailure, parse_block
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.ogb import read_csv_table

BOM = b"\xef\xbb\xbf"
DTYPES = (np.int64, np.float32, np.float64)


def oracle(data: bytes, ncols: int | None, dtype) -> np.ndarray | None:
    """pyarrow's reading of the whole file ``data`` (``None``: refused)."""
    body = data.removeprefix(BOM)
    if not body.strip(b"\r\n"):
        return np.zeros((0, ncols or 1), dtype=dtype)
    kind = pa.int64() if np.dtype(dtype).kind == "i" else pa.float64()
    if ncols is None:  # (pyarrow cannot infer the width of a one-line file without a line ending)
        read = pcsv.ReadOptions(autogenerate_column_names=True)
        types = {f"f{i}": kind for i in range(64)}
        data = data if data.endswith((b"\n", b"\r")) else data + b"\n"
    else:
        read = pcsv.ReadOptions(column_names=[f"c{i}" for i in range(ncols)])
        types = {f"c{i}": kind for i in range(ncols)}
    try:
        table = pcsv.read_csv(io.BytesIO(data), read_options=read,
                              convert_options=pcsv.ConvertOptions(column_types=types))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_columns > 64 or (kind == pa.int64() and any(c.null_count for c in table.columns)):
        return None
    out = np.empty((table.num_rows, table.num_columns), dtype=np.float64 if kind == pa.float64() else np.int64)
    for j, column in enumerate(table.columns):
        out[:, j] = column.to_numpy(zero_copy_only=False)
    return out.astype(dtype)


def ours(data: bytes, ncols: int | None, dtype, block_bytes: int) -> np.ndarray | None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t.csv"
        path.write_bytes(data)
        try:
            return read_csv_table(path, dtype, ncols=ncols, block_bytes=block_bytes)
        except IngestError:
            return None


def same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.shape[0] == 0 and b.shape[0] == 0:
        return True
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True) and
                    np.array_equal(np.signbit(a) | np.isnan(a), np.signbit(b) | np.isnan(b)))
    return bool(np.array_equal(a, b))


# -- inputs: numbers in many spellings, odd fields, odd line endings, random bytes --------

_ints = st.integers(-(2 ** 63), 2 ** 63 - 1).map(lambda v: str(v).encode())
_big_ints = st.integers(-(10 ** 22), 10 ** 22).map(lambda v: str(v).encode())
_floats = st.floats(allow_nan=True, allow_infinity=True, width=64).flatmap(
    lambda v: st.sampled_from([repr(v), f"{v:e}", f"{v:.3f}", f"{v:.17g}", f"{v:g}"]).map(str.encode))
_words = st.sampled_from([b"", b" ", b"nan", b"NaN", b"NAN", b"-nan", b"+nan", b"inf", b"-inf", b"+Inf",
                          b"infinity", b"-Infinity", b"infin", b"NA", b"null", b"N/A", b"-", b"+", b".",
                          b"1.", b".5", b"-.5", b"+1", b"1e", b"e5", b"1e5", b"1E+05", b"0x10", b"00012",
                          b"1_0", b"--1", b"1e400", b"1e-400", b"0e0", b"-0", b"-0.0", b'"1"', b'" 2"',
                          b'"3', b'4"', b"\t5", b"6\t", b" 7 ", b"8\x00", b"\x00", b"\xff", BOM + b"9",
                          b"12345678901234567890", b"0.1234567890123456789", b"9007199254740993"])
_odd = st.one_of(_words, st.binary(max_size=6))
PRE = [b"+", b"-", b" ", b"\t", b'"', b"0", b".", b"\x00", BOM]
POST = [b" ", b"\t", b'"', b".", b"e", b"e5", b"0", b"\x00", b"\xff"]
_eol = st.sampled_from([b"\n", b"\r\n", b"\r", b"\n\n", b"\r\r", b"\n\r", b"\r\n\r\n"])


@st.composite
def _field(draw, is_int: bool, odd: int, decor: int, pre: bytes, post: bytes) -> bytes:
    """A number (an integer for an int column, mostly), decorated with ``pre``/``post`` in
    ``decor`` percent of fields, or (``odd`` percent) an odd word or random bytes."""
    if draw(st.integers(0, 99)) < odd:
        return draw(_odd)
    numbers = (st.one_of(_ints, _big_ints) if is_int and draw(st.integers(0, 19))
               else st.one_of(_ints, _floats))
    value = draw(numbers)
    if draw(st.integers(0, 99)) < decor:
        value = pre + value + post
    return value


@st.composite
def csv_bytes(draw, dtype) -> bytes:
    is_int = np.dtype(dtype).kind == "i"
    width = draw(st.integers(1, 4))
    odd, decor = draw(st.sampled_from([0, 0, 2, 10, 100])), draw(st.sampled_from([0, 5, 30]))
    pre = draw(st.sampled_from([b""] * len(PRE) + PRE))
    post = draw(st.sampled_from([b""] * len(POST) + POST))
    rows = []
    for _ in range(draw(st.integers(0, 12))):
        count = width if draw(st.integers(0, 9)) else draw(st.integers(1, width + 1))
        rows.append([draw(_field(is_int, odd, decor, pre, post)) for _ in range(count)])
    eols = [draw(_eol) if draw(st.integers(0, 4)) == 0 else b"\n" for _ in rows]
    data = b"".join(b",".join(r) + e for r, e in zip(rows, eols))
    if data and draw(st.booleans()):
        data = data.rstrip(b"\r\n")  # no final line ending
    if draw(st.integers(0, 5)) == 0:
        data = BOM + data
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):  # random byte edits
        pos = draw(st.integers(0, len(data)))
        data = data[:pos] + draw(st.binary(min_size=1, max_size=2)) + data[pos + 1:]
    return data


def inputs(dtype) -> st.SearchStrategy[bytes]:
    return st.one_of(csv_bytes(dtype), st.binary(max_size=64), st.lists(st.sampled_from(
        [b"1", b",", b"\n", b"\r", b" ", b"-", b".", b"e", b'"', b"\x00", BOM, b"n", b"a", b"i"]),
        max_size=40).map(b"".join))


def fast_in_parts(data: bytes, ncols: int, dtype, parts: int) -> np.ndarray | None:
    """The Numba parser alone, ``data`` cut in ``parts`` ranges (``None``: it stopped)."""
    try:
        return parse_block(data.removeprefix(BOM), ncols, dtype, parts=parts)
    except ParseFailure:
        return None


def check(data: bytes, dtype, ncols: int | None, block_bytes: int) -> None:
    expected = oracle(data, ncols, dtype)
    got = ours(data, ncols, dtype, block_bytes)
    assert same(got, expected), (data, ncols, np.dtype(dtype).name, got, expected)
    if ncols is not None:  # what the fast path accepts, in any number of parts, is exact
        for parts in (2, 5):
            fast = fast_in_parts(data, ncols, dtype, parts)
            assert fast is None or same(fast, expected), (data, ncols, parts, fast, expected)


def tokens() -> list[bytes]:
    """Every odd word, and a few numbers with every decoration, each alone in a field."""
    numbers = [b"-7", b"0", b"1.5", b"1e3", b"9223372036854775807"]
    decorated = [p + n + q for n in numbers for p in [b""] + PRE for q in [b""] + POST]
    return list(_words.elements) + decorated


def check_tokens() -> None:
    """Each token of :func:`tokens` as a one-field file, and as the middle field of a row,
    in each dtype: same numbers as pyarrow, or both refuse."""
    for token in tokens():
        for dtype in DTYPES:
            for data, ncols in ((token + b"\n", 1), (b"5," + token + b",6\r\n", 3)):
                check(data, dtype, ncols, 1 << 20)
    print(f"ok: {len(tokens())} tokens")


def corpus() -> list[bytes]:
    """Inputs that crashed or confused earlier parsers: lone CR (old Mac files), NUL bytes,
    BOMs, non-UTF-8, quotes, CR runs at block edges, and seeded random bytes."""
    rng = np.random.default_rng(14)
    fixed = [b"1,2\r3,4\r", b"1,2\r3,4", b"\r" * 5000 + b"1,2", b"1,2" + b"\r" * 5000,
             b"1,2\r\r\n\n3,4\n\r", b"\x00" * 100, b"1,\x002\n", b"\xef\xbb\xbf1,2\n3,4\n",
             b"1,2\n\xef\xbb\xbf3,4\n", b"\xff\xfe1,2\n", b'"1","2"\n3,4\n', b'"1\n2",3\n',
             b"1,2\n3", b"-,+\n", b"1e99999999999999999999,2\n", b"1" * 5000 + b",2\n",
             b"0." + b"0" * 5000 + b"1,2\n", b"1,2\r\n" * 3000 + b"3,x\r\n"]
    noise = [rng.choice(np.frombuffer(b"0123456789,\r\n -.e\"\x00", np.uint8), size=n).tobytes()
             for n in rng.integers(1, 3000, size=60)]
    return fixed + noise + [rng.bytes(int(n)) for n in rng.integers(1, 3000, size=20)]


def check_corpus() -> None:
    for data in corpus():
        for dtype in DTYPES:
            for ncols in (None, 1, 2):
                for block_bytes in ((3, 1 << 20) if len(data) < 500 else (1 << 10, 1 << 20)):
                    check(data, dtype, ncols, block_bytes)
    print(f"ok: {len(corpus())} corpus files")


def main(examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=st.sampled_from(DTYPES).flatmap(lambda dtype: st.tuples(st.just(dtype), inputs(dtype))),
           ncols=st.one_of(st.none(), st.integers(1, 4)),
           block_bytes=st.sampled_from([1, 2, 3, 7, 64, 1 << 20]))
    def fuzz(case: tuple, ncols: int | None, block_bytes: int) -> None:
        dtype, data = case
        check(data, dtype, ncols, block_bytes)

    fuzz()
    print(f"ok: {examples} examples")


if __name__ == "__main__":
    if sys.argv[1:] == ["tokens"]:
        check_tokens()
    elif sys.argv[1:] == ["corpus"]:
        check_corpus()
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
