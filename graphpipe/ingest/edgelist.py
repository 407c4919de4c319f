"""Edge-list files (CSV / TSV / Parquet with named columns) and node tables → :class:`DatasetSource`.

``read_edge_list(paths, src=..., dst=..., nodes=...)`` reads one edge list
spread over one or more files (in the given order) and, optionally, a node
table whose row order defines the dense node IDs and which carries node
features, labels and a split column.

How it streams (memory bounded by the number of nodes, never by the number of
edges):

1. The node table, if any, is read once: IDs, labels, split and extra columns
   are kept (one value per node); feature columns are validated and dropped.
2. Pass 1 over the edge files validates every field (with its file and line),
   counts the edges and, without a node table, finds the ID space: the largest
   ID when the IDs are non-negative integers (kept as they are), else the
   sorted unique external IDs (dense ID = rank). Non-negative integer IDs that
   are *sparse* are mapped too (a second pass collects the unique IDs): sparse
   means ``max ID + 1 > max(SPARSE_IDS_FLOOR, SPARSE_IDS_FACTOR * 2 * E)``, i.e.
   fewer than one ID in eight could be an edge's endpoint (``map_ids=False``
   keeps them dense anyway; the pipeline then asks for ``allow_isolated_nodes``).
3. ``edge_chunks()`` / ``edge_features()`` / ``node_features()`` re-read the
   files batch by batch whenever the pipeline asks.

Line numbers: CSV/TSV lines are 1-based physical lines of the (decompressed)
file, counting the header and any leading ``#`` comment lines; Parquet rows are
1-based. Blank CSV lines (every field read being empty) are skipped.

CSV type decisions never depend on the block size: ID columns are read as
int64 when every ID of every file is an integer (``id_type="auto"``), else as
strings; node-table columns are read as text and typed from all their values.
"""

from __future__ import annotations

import bisect
import fnmatch
import glob
import io
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.idmap_build import (
    DuplicateIdError,
    IntIdIndex,
    StringIdIndex,
    UniqueCollector,
)
from graphpipe.ingest.source import DatasetSource, RowBlock

FileFormat = Literal["auto", "csv", "tsv", "parquet"]
IdType = Literal["auto", "int", "string"]

_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".lz4", ".br")
_PARQUET_SUFFIXES = (".parquet", ".pq")
_TEXT_SUFFIXES = (".csv", ".tsv", ".tab", ".txt", ".edges", ".el")
_INT_TEXT = r"^\s*-?[0-9]+\s*$"
SPARSE_IDS_FLOOR = 1 << 20
"""Non-negative integer IDs below this are always kept as dense IDs (unless map_ids=True)."""
SPARSE_IDS_FACTOR = 8
"""Above the floor, IDs are mapped when max ID + 1 exceeds this many times 2E."""
_SPLIT_NAMES = {"train": "train", "training": "train", "valid": "valid", "val": "valid",
                "validation": "valid", "dev": "valid", "test": "test", "testing": "test"}


# ---------------------------------------------------------------------------
# files


@dataclass
class _TableFile:
    """One resolved input file.

    Attributes:
        path: the file as given (shown in messages).
        format: ``"csv"`` (any delimiter) or ``"parquet"``.
        delimiter: field separator for CSV.
        header: whether the first (non-comment) CSV line holds the column names.
        skip_rows: leading ``#`` comment lines skipped in a CSV file.
        columns: column names in file order (``f0, f1, ...`` for a CSV without header).
        num_rows: Parquet row count (None for CSV).
        collapse: a whitespace-separated file: each run of spaces and tabs is one separator,
            and none is read at either end of a line (:class:`_CollapsedWhitespace`).
    """

    path: str
    format: str
    delimiter: str = ","
    header: bool = True
    skip_rows: int = 0
    columns: list[str] = field(default_factory=list)
    num_rows: int | None = None
    collapse: bool = False

    def csv_input(self) -> str | io.BufferedReader:
        """What pyarrow's CSV reader reads: the path, or the whitespace-collapsed stream."""
        return io.BufferedReader(_CollapsedWhitespace(self.path)) if self.collapse else self.path

    @property
    def unit(self) -> str:
        return "line" if self.format == "csv" else "row"

    @property
    def first_data_line(self) -> int:
        """1-based line (CSV) or row (Parquet) number of the first data row."""
        return self.skip_rows + int(self.header) + 1 if self.format == "csv" else 1

    def where(self, line: int) -> str:
        return f"{self.path}: {self.unit} {line}"

    def require(self, names: Sequence[str], role: str = "column") -> None:
        """IngestError naming the file and the columns present if a name in ``names`` is missing."""
        for name in names:
            if name not in self.columns:
                hint = (f" (if line {self.first_data_line - 1} is an edge, pass --no-header)"
                        if self.header and self.format == "csv" and role in ("source column", "destination column") else "")
                raise IngestError(f"{self.path}: no {role} {name!r}; columns present: {self.columns}{hint}")


def _one_line(exc: BaseException) -> str:
    """An exception's text on one line (pyarrow messages can span several)."""
    return " ".join(str(exc).split())


def _strip_compression(name: str) -> str:
    lower = name.lower()
    for suffix in _COMPRESSION_SUFFIXES:
        if lower.endswith(suffix):
            return lower[: -len(suffix)]
    return lower


def _expand_paths(paths: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """Files named by ``paths``: a file, a glob pattern, a folder (its data files, sorted) or a list of these."""
    items = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not items:
        raise IngestError("edge list: no files given")
    out: list[str] = []
    for item in items:
        text = os.fspath(item)
        if any(ch in text for ch in "*?[") and not os.path.exists(text):
            matches = sorted(glob.glob(text))
            if not matches:
                raise IngestError(f"{text}: no file matches this pattern")
            out.extend(matches)
        elif os.path.isdir(text):
            found = sorted(str(p) for p in Path(text).iterdir() if p.is_file() and
                           _strip_compression(p.name).endswith(_PARQUET_SUFFIXES + _TEXT_SUFFIXES))
            if not found:
                raise IngestError(f"{text}: folder holds no .csv/.tsv/.txt/.parquet file")
            out.extend(found)
        elif not os.path.isfile(text):
            raise IngestError(f"{text}: no such file")
        else:
            out.append(text)
    return out


class _CollapsedWhitespace(io.RawIOBase):
    """A text file (decompressed) with each run of spaces and tabs read as one tab and none
    at either end of a line: SNAP/KONECT-style whitespace-separated edge lists as CSV.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "e.txt")
    >>> _ = open(path, "wb").write(b"  0   1 \\n1\\t \\t2\\n")
    >>> _CollapsedWhitespace(path).read()
    b'0\\t1\\n1\\t2\\n'
    """

    def __init__(self, path: str, block_bytes: int = 1 << 20):
        self._stream = pa.input_stream(path, compression="detect")
        self._block_bytes = block_bytes
        self._pending = memoryview(b"")
        self._tail = b""  # an incomplete last line, collapsed once its end is read
        self._eof = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not len(self._pending) and not self._eof:
            block = self._stream.read(self._block_bytes)
            data = self._tail + block
            cut = len(data) if not block else data.rfind(b"\n") + 1
            data, self._tail = data[:cut], data[cut:]
            self._eof = not block
            self._pending = memoryview(_collapse_whitespace(data))
        count = min(len(buffer), len(self._pending))
        buffer[:count] = self._pending[:count]
        self._pending = self._pending[count:]
        return count

    def close(self) -> None:
        self._stream.close()
        super().close()


def _collapse_whitespace(lines: bytes) -> bytes:
    """Whole lines with each run of whitespace as one tab, none at a line's ends (a
    ``\\r`` before the ``\\n`` goes too)."""
    return b"\n".join(b"\t".join(line.split()) for line in lines.split(b"\n"))


def _irregular_tabs(lines: list[bytes]) -> bool:
    """Whether tab-separated ``lines`` have runs of tabs, spaces beside a tab or whitespace
    at a line's ends: then each run of whitespace is one separator (a space inside a field,
    ``New York``, keeps a regular file tab-separated)."""
    pattern = re.compile(rb"\t\t| \t|\t |^[ \t]|[ \t]\r?$")
    return any(pattern.search(line) for line in lines)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _resolve_header(path: str, fields: list[str], header: bool | None, after_comments: bool) -> bool:
    """Whether the first data line (split into ``fields``) names the columns.

    Detected (``header=None``): a line of numbers only is an edge, anything else a header;
    ``0,1,...`` (the column names pandas writes for unnamed columns, or the edge 0→1) is
    an edge after ``#`` comment lines (SNAP's layout), else ambiguous and refused. A header
    asked for whose fields are all numbers is refused too: it would drop an edge.
    """
    numeric = bool(fields) and all(_is_number(f) for f in fields)
    positions = [f.strip() for f in fields] == [str(i) for i in range(len(fields))]
    shown = ",".join(fields)
    if header is None:
        if numeric and positions and not after_comments:
            raise IngestError(f"{path}: line {shown!r} is either a header (the column names pandas "
                              f"writes) or an edge; pass --header or --no-header")
        return not numeric
    if header and numeric and not positions:
        raise IngestError(f"{path}: the header line {shown!r} holds only numbers, so it is an edge; "
                          f"pass --no-header (columns by position: --src 0 --dst 1)")
    return header


def _header_words(spec: _TableFile) -> str:
    return "a header line" if spec.header else "no header line"


def _open_file(path: str, format: FileFormat, delimiter: str | None, header: bool | None) -> _TableFile:
    """Resolve format, delimiter, header (``None``: detected), leading comments and the
    column names of ``path``."""
    if not os.path.isfile(path):
        raise IngestError(f"{path}: no such file")
    plain = _strip_compression(os.path.basename(path))
    explicit_csv = format == "csv"
    if format == "auto":
        format = "parquet" if plain.endswith(_PARQUET_SUFFIXES) else \
            "tsv" if plain.endswith((".tsv", ".tab")) else "csv"
    if format not in ("csv", "tsv", "parquet"):
        raise IngestError(f"{path}: 'format' must be auto, csv, tsv or parquet (got {format!r})")
    if format == "parquet":
        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise IngestError(f"{path}: not a readable Parquet file ({_one_line(exc)})") from None
        return _TableFile(path, "parquet", header=True, columns=list(parquet.schema_arrow.names),
                          num_rows=int(parquet.metadata.num_rows))
    try:
        with pa.input_stream(path, compression="detect") as stream:
            head = stream.read(1 << 16)
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(f"{path}: cannot read ({_one_line(exc)})") from None
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else lines
    skip = 0
    while skip < len(complete) and complete[skip].lstrip().startswith(b"#"):
        skip += 1
    first = complete[skip].decode("utf-8", "replace").rstrip("\r") if skip < len(complete) else ""
    collapse = False
    if delimiter is None:
        if format == "tsv":
            delimiter = "\t"
        elif explicit_csv or plain.endswith(".csv") or "," in first and "\t" not in first:
            delimiter = ","
        elif "\t" in first:  # SNAP: tab-separated, after '#' comment lines
            delimiter, collapse = "\t", _irregular_tabs(complete[skip:skip + 1000])
        else:  # .txt / .edges / unknown without commas or tabs: space-separated (KONECT)
            delimiter, collapse = "\t", True
    if not first.strip():
        raise IngestError(f"{path}: empty file" + (" (expected a header line)" if header else ""))
    fields = first.split() if collapse else first.split(delimiter)
    header = _resolve_header(path, fields, header, after_comments=skip > 0)
    spec = _TableFile(path, "csv", delimiter=delimiter, header=header, skip_rows=skip, collapse=collapse)
    try:
        reader = pcsv.open_csv(spec.csv_input(), read_options=_csv_read_options(spec, 1 << 20),
                               parse_options=pcsv.ParseOptions(delimiter=delimiter))
        spec.columns = list(reader.schema.names)
        reader.close()
    except (pa.ArrowException, OSError) as exc:
        raise _csv_error(spec, exc, [], spec.first_data_line - 1) from None
    return spec


def _csv_read_options(spec: _TableFile, block_bytes: int) -> pcsv.ReadOptions:
    return pcsv.ReadOptions(use_threads=False, block_size=block_bytes, skip_rows=spec.skip_rows,
                            autogenerate_column_names=not spec.header)


def _csv_block_bytes(block_rows: int) -> int:
    return int(min(max(block_rows * 24, 1 << 16), 1 << 22))  # larger blocks cost RSS, not speed


class _ConversionError(IngestError):
    """A field that does not convert to its column's type (``column``, ``line`` name it)."""

    def __init__(self, message: str, column: str | None, line: int | None):
        super().__init__(message)
        self.column, self.line = column, line


def _csv_error(spec: _TableFile, exc: Exception, invalid_rows: list, lines_done: int) -> IngestError:
    """Turn a pyarrow CSV error into an IngestError naming the file, line and column."""
    text = _one_line(exc)
    row = re.search(r"Row #(\d+)", text)
    col = re.search(r"In CSV column #(\d+)", text)
    line = int(row.group(1)) if row else (invalid_rows[0].number if invalid_rows and invalid_rows[0].number
                                          else None)
    column = spec.columns[int(col.group(1))] if col and int(col.group(1)) < len(spec.columns) else None
    detail = re.sub(r"^(In CSV column #\d+: )?(Row #\d+: )?", "", text)
    detail = re.sub(r"^CSV parse error: (Row #\d+: )?", "", detail)
    where = spec.where(line) if line is not None else f"{spec.path}: after line {lines_done}"
    if column is not None:
        value = re.search(r"invalid value '(.*)'$", detail)
        target = re.search(r"conversion error to (\w+)", detail)
        if value:
            as_type = target.group(1) if target else "its type"
            detail = f"column {column!r}: cannot read {value.group(1)!r} as {as_type}"
        else:
            detail = f"column {column!r}: {detail}"
    return _ConversionError(f"{where}: {detail}", column, line)


def _iter_batches(spec: _TableFile, columns: list[str], types: dict[str, pa.DataType],
                  block_rows: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """``(batch, first_line)`` runs of at most ``block_rows`` rows with ``columns`` (in that order).

    CSV columns in ``types`` are converted by the CSV reader; Parquet columns are cast
    (failures name the row). Every row of the file is yielded, blank CSV lines as nulls.
    """
    spec.require(columns)
    line = spec.first_data_line
    if spec.format == "parquet":
        try:
            batches = pq.ParquetFile(spec.path).iter_batches(batch_size=block_rows, columns=columns)
            for batch in batches:
                arrays = [_cast(batch.column(name), types[name], spec, name, line) if name in types
                          else batch.column(name) for name in columns]
                yield pa.RecordBatch.from_arrays(arrays, names=columns), line
                line += batch.num_rows
        except (pa.ArrowException, OSError) as exc:
            raise IngestError(f"{spec.path}: cannot read Parquet data after row {line - 1} ({_one_line(exc)})") from None
        return
    already = 0
    if _fast_path_applies(spec, columns, types):
        try:
            for batch, first_line in _iter_int_csv_fast(spec, columns, block_rows):
                yield batch, first_line
                already += batch.num_rows
            return
        except _FastPathGivesUp:
            pass  # the general reader below re-reads the file and names the exact line at fault
    invalid_rows: list = []

    def on_invalid(row: object) -> str:
        invalid_rows.append(row)
        return "error"

    convert = pcsv.ConvertOptions(column_types={name: types[name] for name in columns if name in types},
                                  include_columns=columns, null_values=[""], strings_can_be_null=True)
    parse = pcsv.ParseOptions(delimiter=spec.delimiter, ignore_empty_lines=False, invalid_row_handler=on_invalid)
    try:
        reader = pcsv.open_csv(spec.csv_input(), read_options=_csv_read_options(spec, _csv_block_bytes(block_rows)),
                               parse_options=parse, convert_options=convert)
    except (pa.ArrowException, OSError) as exc:
        raise _csv_error(spec, exc, invalid_rows, line - 1) from None
    while True:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            return
        except (pa.ArrowException, OSError) as exc:
            raise _csv_error(spec, exc, invalid_rows, line - 1) from None
        batch = batch.select(columns)
        if already:  # rows the fast path already delivered
            drop = min(already, batch.num_rows)
            batch, line, already = batch.slice(drop), line + drop, already - drop
        for start in range(0, batch.num_rows, block_rows):
            yield batch.slice(start, block_rows), line + start
        line += batch.num_rows


class _FastPathGivesUp(Exception):
    """A block the numeric fast path cannot parse (blank line, quotes, bad field, ...)."""


def _fast_path_applies(spec: _TableFile, columns: list[str], types: dict[str, pa.DataType]) -> bool:
    """Integer-only columns of a comma-, tab- or space-separated file, plain or gzip: parse
    with the Numba reader (tabs and spaces read as commas)."""
    name = spec.path.lower()
    compressed = any(name.endswith(suffix) for suffix in _COMPRESSION_SUFFIXES)
    return (spec.format == "csv" and spec.delimiter in (",", "\t", " ")
            and (not compressed or name.endswith(".gz"))
            and bool(columns) and all(types.get(c) == pa.int64() for c in columns))


def _iter_int_csv_fast(spec: _TableFile, columns: list[str],
                       block_rows: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """The integer columns of a simple CSV file through :mod:`graphpipe.ingest.csvparse`
    (Numba, parallel, about an order of magnitude faster than a general CSV reader here).
    Raises :class:`_FastPathGivesUp` at the first block it cannot parse exactly."""
    from graphpipe.ingest.csvparse import ParseFailure, next_line_start, parse_block
    from graphpipe.ingest.textio import iter_line_blocks

    positions = [spec.columns.index(c) for c in columns]
    ncols = len(spec.columns)
    to_skip = spec.skip_rows + int(spec.header)
    line = 1
    for block in iter_line_blocks(spec.path):
        if spec.collapse:
            block = _collapse_whitespace(block)
        if spec.delimiter != ",":  # a field holding a comma then fails: the general reader takes over
            block = block.replace(spec.delimiter.encode(), b",")
        cut = 0
        while to_skip and cut < len(block):
            cut = next_line_start(block, cut)
            to_skip -= 1
            line += 1
        if cut:
            block = block[cut:]
        if not block:
            continue
        try:
            rows = parse_block(block, ncols, np.int64, skip_empty_lines=False)  # lines stay exact
        except ParseFailure:
            raise _FastPathGivesUp from None
        batch = pa.RecordBatch.from_arrays([pa.array(rows[:, p]) for p in positions], names=columns)
        for start in range(0, batch.num_rows, block_rows):
            yield batch.slice(start, block_rows), line + start
        line += batch.num_rows


def _first_failing(values: pa.Array, convert) -> int:
    """Index of the first element of ``values`` that ``convert`` (on a slice) rejects; -1 if none."""
    lo, hi = 0, len(values)          # invariant: values[:lo] converts
    try:
        convert(values)
        return -1
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        pass
    while hi - lo > 1:
        mid = (lo + hi) // 2
        try:
            convert(values.slice(0, mid))
            lo = mid
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
            hi = mid
    return lo if hi - lo == 1 else hi - 1


def _cast(values: pa.Array, target: pa.DataType, spec: _TableFile, name: str, first_line: int,
          *, line_of=None) -> pa.Array:
    """``values`` as ``target`` (int64, string or float64); a failure names the row/line and value."""
    if isinstance(values, pa.ChunkedArray):
        values = pa.concat_arrays(values.chunks) if values.num_chunks else pa.array([], values.type)
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if values.type.equals(target):
        return values
    kind = values.type
    if pa.types.is_string(target) or pa.types.is_large_string(target):
        if pa.types.is_integer(kind) or pa.types.is_string(kind) or pa.types.is_large_string(kind):
            return values.cast(target)
        raise IngestError(f"{spec.path}: column {name!r} has type {kind}; IDs must be integers or strings")
    is_text = pa.types.is_string(kind) or pa.types.is_large_string(kind)
    if pa.types.is_integer(target) and not (pa.types.is_integer(kind) or pa.types.is_boolean(kind) or is_text):
        raise IngestError(f"{spec.path}: column {name!r} has type {kind}, expected integers")
    if pa.types.is_floating(target) and not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                                             or pa.types.is_boolean(kind) or pa.types.is_decimal(kind)
                                             or is_text):
        raise IngestError(f"{spec.path}: column {name!r} has type {kind}, expected numbers")

    def convert(part: pa.Array) -> pa.Array:
        if is_text:
            part = pc.utf8_trim_whitespace(part)
        return part.cast(target)

    try:
        return convert(values)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = _first_failing(values, convert)
        line = line_of(bad) if line_of is not None else first_line + bad
        readable = "an integer (int64)" if pa.types.is_integer(target) else "a number"
        raise _ConversionError(f"{spec.where(line)}: column {name!r}: cannot read {values[bad].as_py()!r} "
                               f"as {readable}", name, line) from None


def _null_check(batch: pa.RecordBatch, names: Sequence[str], spec: _TableFile, first_line: int,
                what: str = "value") -> None:
    """IngestError at the first null in any of ``names``, naming line and column."""
    for name in names:
        column = batch.column(name)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            raise IngestError(f"{spec.where(first_line + row)}: column {name!r}: empty {what}")


def _segments(batch: pa.RecordBatch, key_columns: Sequence[str], spec: _TableFile,
              first_line: int) -> Iterator[tuple[pa.RecordBatch, int]]:
    """Split ``batch`` around blank CSV lines (all ``key_columns`` null); ``(part, first_line)``."""
    if spec.format != "csv" or not any(batch.column(n).null_count for n in key_columns):
        yield batch, first_line
        return
    blank = np.ones(batch.num_rows, dtype=bool)
    for name in key_columns:
        blank &= batch.column(name).is_null().to_numpy(zero_copy_only=False)
    keep = np.flatnonzero(~blank)
    if keep.size == 0:
        return
    breaks = np.flatnonzero(np.diff(keep) != 1) + 1
    for run in np.split(keep, breaks):
        yield batch.slice(int(run[0]), len(run)), first_line + int(run[0])


def _line_runs_lookup(runs: list[tuple[int, int]]):
    """``dense row → line`` from ``[(first_row, first_line), ...]`` runs of consecutive lines."""
    starts = [r[0] for r in runs]

    def line_of(row: int) -> int:
        i = bisect.bisect_right(starts, int(row)) - 1
        return runs[i][1] + int(row) - runs[i][0]

    return line_of


# ---------------------------------------------------------------------------
# node table


@dataclass
class _NodeData:
    """Everything kept from the node table (one entry per dense node)."""

    spec: _TableFile
    node_id: str                                # the ID column
    kind: str                                   # "int" or "string"
    external: np.ndarray | pa.Array            # int64 ndarray or string array, row order
    index: IntIdIndex | StringIdIndex
    line_of: Callable[[int], int]               # dense row → line / row number in spec
    feature_columns: list[str]
    feature_list: bool                          # one list column instead of several scalar ones
    feature_int: bool
    feature_dim: int | None
    labels: np.ndarray | None = None
    task_type: str | None = None
    num_classes: int | None = None
    label_classes: list | None = None
    splits: dict[str, np.ndarray] = field(default_factory=dict)
    table: pa.Table | None = None

    @property
    def num_nodes(self) -> int:
        return len(self.external)


def _is_numeric(kind: pa.DataType) -> bool:
    return (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)
            or pa.types.is_decimal(kind))


def _expand_feature_pattern(spec: _TableFile, columns: list[str] | str | None,
                            exclude: set) -> list[str] | str | None:
    """A glob pattern (``"f*"``) becomes the matching columns in table order (never the ID,
    label or split column); anything else is returned as given."""
    if not isinstance(columns, str) or columns in spec.columns \
            or not any(ch in columns for ch in "*?["):
        return columns
    matched = [c for c in spec.columns if fnmatch.fnmatchcase(c, columns) and c not in exclude]
    if not matched:
        raise IngestError(f"{spec.path}: no column matches the feature pattern {columns!r}; "
                          f"columns present: {spec.columns}")
    return matched


def _read_node_table(path: str, node_id: str, feature_columns: list[str] | str | None,
                     label: str | list[str] | None, split_column: str | None, split_required: bool,
                     id_type: IdType, block_rows: int) -> _NodeData:
    spec = _open_file(path, "auto", None, True)
    labels_named = [label] if isinstance(label, str) else list(label or [])
    feature_columns = _expand_feature_pattern(spec, feature_columns,
                                              {node_id, split_column, *labels_named})
    if isinstance(feature_columns, str):
        features, single = [feature_columns], True
    else:
        features, single = list(feature_columns or []), False
    labels = [label] if isinstance(label, str) else list(label or [])
    spec.require([node_id], "node ID column")
    spec.require(features, "feature column")
    spec.require(labels, "label column")
    if split_column is not None and split_column not in spec.columns:
        if split_required:
            spec.require([split_column], "split column")
        split_column = None
    used = {node_id, *features, *labels, *([split_column] if split_column else [])}
    extra_columns = [c for c in spec.columns if c not in used]
    is_csv = spec.format == "csv"
    text_types = {c: pa.string() for c in spec.columns} if is_csv else {}

    keep_columns = [node_id, *labels, *([split_column] if split_column else []), *extra_columns]
    kept: dict[str, list[pa.Array]] = {c: [] for c in keep_columns}
    runs: list[tuple[int, int]] = []
    rows = 0
    feature_int = True
    feature_dim: int | None = len(features) if features and not single else None
    parquet_schema = None if is_csv else pq.ParquetFile(path).schema_arrow
    if not is_csv and features:
        for name in features:
            kind = parquet_schema.field(name).type
            if single and (pa.types.is_list(kind) or pa.types.is_large_list(kind)
                           or pa.types.is_fixed_size_list(kind)):
                kind = kind.value_type
                if pa.types.is_fixed_size_list(parquet_schema.field(name).type):
                    feature_dim = parquet_schema.field(name).type.list_size
            elif single:
                feature_dim, single = 1, False
            if not _is_numeric(kind):
                raise IngestError(f"{path}: feature column {name!r} has type {kind}, expected numbers")
            feature_int &= pa.types.is_integer(kind) or pa.types.is_boolean(kind)
    elif is_csv and single:
        feature_dim, single = 1, False   # CSV has no list columns: one numeric column

    for batch, first_line in _iter_batches(spec, spec.columns if is_csv else keep_columns + features,
                                           text_types, block_rows):
        for part, line in _segments(batch, spec.columns if is_csv else [], spec, first_line):
            _null_check(part, [node_id], spec, line, "node ID")
            runs.append((rows, line))
            for name in keep_columns:
                kept[name].append(part.column(name))
            for name in features:
                _null_check(part, [name], spec, line)
                column = part.column(name)
                if is_csv:
                    feature_int &= bool(pc.all(pc.match_substring_regex(column, _INT_TEXT)).as_py())
                    _cast(column, pa.float64(), spec, name, line)
                elif single:
                    feature_dim = _check_list_column(column, spec, name, line, feature_dim)
            rows += part.num_rows
    line_of = _line_runs_lookup(runs) if runs else (lambda row: spec.first_data_line + row)
    if single and feature_dim is None:
        feature_dim = 0

    def whole(name: str) -> pa.Array:
        chunks = kept[name]
        if not chunks:
            return pa.array([], pa.string() if is_csv else parquet_schema.field(name).type)
        return pa.concat_arrays([c if not pa.types.is_dictionary(c.type) else c.dictionary_decode()
                                 for c in chunks])

    raw_ids = whole(node_id)
    kind = _id_kind_of_column(raw_ids, id_type, spec, node_id, line_of)
    if kind == "int":
        external = _cast(raw_ids, pa.int64(), spec, node_id, 0, line_of=line_of).to_numpy()
    else:
        external = _cast(raw_ids, pa.string(), spec, node_id, 0, line_of=line_of)
    try:
        index = IntIdIndex(external) if kind == "int" else StringIdIndex(external)
    except DuplicateIdError as dup:
        raise IngestError(f"{spec.where(line_of(dup.duplicate_row))}: duplicate node ID {dup.value!r} "
                          f"(first at {spec.unit} {line_of(dup.first_row)})") from None
    data = _NodeData(spec, node_id, kind, external, index, line_of, features, single, feature_int,
                     feature_dim if features else None)
    if labels:
        _labels_into(data, [whole(name) for name in labels], labels, spec, line_of)
    if split_column:
        data.splits = _splits_of(whole(split_column), spec, split_column, line_of)
    if extra_columns:
        data.table = pa.table({name: _typed_text(whole(name)) if is_csv else whole(name)
                               for name in extra_columns})
    return data


def _check_list_column(column: pa.Array, spec: _TableFile, name: str, first_line: int,
                       dim: int | None) -> int:
    """Every list in ``column`` has ``dim`` non-null numbers (``dim`` from the first row if None)."""
    lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
    if dim is None and len(lengths):
        dim = int(lengths[0])
    bad = np.flatnonzero(lengths != dim)
    if bad.size:
        raise IngestError(f"{spec.where(first_line + int(bad[0]))}: column {name!r}: list of "
                          f"{int(lengths[bad[0]])} values, expected {dim}")
    flat = pc.list_flatten(column)
    if flat.null_count:
        pos = int(np.flatnonzero(flat.is_null().to_numpy(zero_copy_only=False))[0])
        raise IngestError(f"{spec.where(first_line + pos // max(dim, 1))}: column {name!r}: empty value "
                          f"in list")
    return int(dim if dim is not None else 0)


def _id_kind_of_column(values: pa.Array, id_type: IdType, spec: _TableFile, name: str, line_of) -> str:
    if id_type in ("int", "string"):
        return id_type
    if id_type != "auto":
        raise IngestError(f"'id_type' must be auto, int or string (got {id_type!r})")
    kind = values.type
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if spec.format == "csv" and bool(pc.all(pc.match_substring_regex(values, _INT_TEXT)).as_py()
                                         if len(values) else True):
            return "int"
        return "string"
    raise IngestError(f"{spec.path}: column {name!r} has type {kind}; IDs must be integers or strings")


def _typed_text(values: pa.Array) -> pa.Array:
    """A CSV text column typed from all its values: int64, else float64, else string."""
    trimmed = pc.utf8_trim_whitespace(values)
    if len(values) and bool(pc.all(pc.match_substring_regex(values, _INT_TEXT)).as_py()):
        try:
            return trimmed.cast(pa.int64())
        except pa.ArrowInvalid:
            pass
    try:
        return trimmed.cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return values


def _label_column(values: pa.Array, spec: _TableFile, name: str, line_of) -> tuple[np.ndarray, str, list | None]:
    """One label column → ``(values, kind, classes)``; kind is int / float / category."""
    kind = values.type
    is_csv_text = spec.format == "csv"
    if is_csv_text:
        typed = _typed_text(values)
        kind = typed.type
        values = typed
    if pa.types.is_boolean(kind):
        values, kind = values.cast(pa.int64()), pa.int64()
    if pa.types.is_integer(kind):
        ints = values.cast(pa.int64())
        if ints.null_count:
            return ints.cast(pa.float64()).fill_null(np.nan).to_numpy(), "int", None
        return ints.to_numpy(), "int", None
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return values.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False), "float", None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        classes = pc.unique(values.drop_null())
        classes = classes.take(pc.array_sort_indices(classes))
        codes = pc.index_in(values, value_set=classes)
        if codes.null_count:
            return codes.cast(pa.float64()).fill_null(np.nan).to_numpy(), "category", classes.to_pylist()
        return codes.cast(pa.int64()).to_numpy(), "category", classes.to_pylist()
    raise IngestError(f"{spec.path}: label column {name!r} has type {kind}, expected numbers or class names")


def _labels_into(data: _NodeData, columns: list[pa.Array], names: list[str], spec: _TableFile, line_of) -> None:
    parsed = [_label_column(col, spec, name, line_of) for col, name in zip(columns, names)]
    kinds = {p[1] for p in parsed}
    if "float" in kinds and kinds != {"float"}:
        kinds = {"float"}
    stacked = np.stack([p[0] for p in parsed], axis=1) if len(parsed) > 1 else parsed[0][0]
    if kinds == {"float"}:
        data.labels, data.task_type = stacked.astype(np.float64), "regression"
        return
    data.labels = stacked if stacked.dtype.kind == "f" else stacked.astype(np.int64)
    known = stacked[~np.isnan(stacked)] if stacked.dtype.kind == "f" else stacked
    if len(parsed) > 1 and known.size and np.isin(known, (0, 1)).all():
        data.task_type, data.num_classes = "binary classification", 2
    else:
        data.task_type = "multiclass classification"
        data.num_classes = int(known.max()) + 1 if known.size else 0
        if len(parsed) == 1 and parsed[0][2] is not None:
            data.label_classes = parsed[0][2]
            data.num_classes = len(parsed[0][2])


def _splits_of(values: pa.Array, spec: _TableFile, name: str, line_of) -> dict[str, np.ndarray]:
    """``{train/valid/test: dense IDs}`` from a split column (train/valid/val/test; empty: no split)."""
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise IngestError(f"{spec.path}: split column {name!r} has type {values.type}, "
                          f"expected train/valid/test")
    normal = pc.utf8_lower(pc.utf8_trim_whitespace(values))
    known = pa.array(sorted(_SPLIT_NAMES))
    found = pc.is_in(normal, value_set=known).to_numpy(zero_copy_only=False)
    empty = pc.fill_null(pc.equal(normal, ""), True).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~found & ~empty)
    if bad.size:
        raise IngestError(f"{spec.where(line_of(int(bad[0])))}: column {name!r}: unknown split "
                          f"{values[int(bad[0])].as_py()!r} (expected train, valid or test)")
    text = normal.to_numpy(zero_copy_only=False)
    out: dict[str, np.ndarray] = {}
    for canonical in ("train", "valid", "test"):
        names = [k for k, v in _SPLIT_NAMES.items() if v == canonical]
        ids = np.flatnonzero(np.isin(text, names) & found).astype(np.int64)
        if ids.size:
            out[canonical] = ids
    return out


def _node_features(data: _NodeData, block_rows: int) -> Iterator[RowBlock]:
    """Feature rows of the node table in dense order: ``(rows, F)`` float32, or int64 when all integers."""
    spec = data.spec
    columns = data.feature_columns
    dense = 0
    if spec.format == "csv":      # blank lines: ID empty (pass 1 refused an empty ID on a non-blank line)
        read = list(dict.fromkeys([data.node_id, *columns]))
        types = {c: pa.string() for c in read}
    else:
        read = list(columns)
        types = {}
    target = pa.int64() if data.feature_int else pa.float64()
    out_dtype = np.int64 if data.feature_int else np.float32
    for batch, first_line in _iter_batches(spec, read, types, block_rows):
        for part, line in _segments(batch, [data.node_id] if spec.format == "csv" else [], spec, first_line):
            if part.num_rows == 0:
                continue
            _null_check(part, columns, spec, line)
            if data.feature_list:
                column = part.column(columns[0])
                _check_list_column(column, spec, columns[0], line, data.feature_dim)
                flat = _cast(pc.list_flatten(column), target, spec, columns[0], line)
                values = flat.to_numpy(zero_copy_only=False).reshape(part.num_rows, data.feature_dim)
            else:
                values = np.empty((part.num_rows, len(columns)), dtype=out_dtype)
                for j, name in enumerate(columns):
                    values[:, j] = _cast(part.column(name), target, spec, name, line).to_numpy(
                        zero_copy_only=False)
            yield RowBlock(first_row=dense, values=values.astype(out_dtype, copy=False), source=spec.path,
                           first_line=line)
            dense += part.num_rows


# ---------------------------------------------------------------------------
# edge list


class _NeedsMap(Exception):
    """A negative integer ID appeared while the IDs were assumed to be dense."""


def ids_are_sparse(max_id: int, num_edges: int) -> bool:
    """Whether non-negative integer IDs up to ``max_id`` are too sparse to use as dense IDs."""
    space = int(max_id) + 1
    return space > max(SPARSE_IDS_FLOOR, SPARSE_IDS_FACTOR * 2 * int(num_edges))


class _EdgeListReader:
    """The edge files, their ID space and the node table; methods feed a DatasetSource."""

    def __init__(self, files: list[_TableFile], src: str, dst: str, value_columns: list[str],
                 kind: str, nodes: _NodeData | None, map_ids: bool | None, block_rows: int,
                 value_types: dict[str, pa.DataType] | None = None):
        self.files, self.src, self.dst = files, src, dst
        self.value_columns, self.kind, self.nodes = value_columns, kind, nodes
        self.value_types = value_types or {name: pa.float64() for name in value_columns}
        self.map_ids, self.block_rows = map_ids, block_rows
        self.time_column: str | None = None
        self.index: IntIdIndex | StringIdIndex | None = nodes.index if nodes is not None else None
        self.external: np.ndarray | pa.Array | None = None
        self.num_nodes = nodes.num_nodes if nodes is not None else 0
        self.num_edges = 0
        self.mapped_because: str | None = None

    # one pass over the edge files -------------------------------------------------
    def _id_type(self) -> pa.DataType:
        return pa.int64() if self.kind == "int" else pa.string()

    def _segments(self, with_values: bool, with_ids: bool = True) -> Iterator[tuple[_TableFile, pa.RecordBatch, int]]:
        """Non-blank runs ``(file, batch, first_line)`` with IDs (and values) checked for nulls."""
        ids = [self.src, self.dst] if self.src != self.dst else [self.src]
        for spec in self.files:
            columns = (ids if with_ids or spec.format == "csv" else []) + \
                      (self.value_columns if with_values else [])
            columns = list(dict.fromkeys(columns))
            types = {name: self._id_type() for name in ids}
            types.update(self.value_types)
            for batch, first_line in _iter_batches(spec, columns, types, self.block_rows):
                for part, line in _segments(batch, columns, spec, first_line):
                    _null_check(part, ids if with_ids or spec.format == "csv" else [], spec, line, "node ID")
                    if with_values:
                        _null_check(part, self.value_columns, spec, line)
                    yield spec, part, line

    def _ids(self, part: pa.RecordBatch, name: str) -> np.ndarray | pa.Array:
        column = part.column(name)
        return column.to_numpy() if self.kind == "int" else column

    def _to_dense(self, values: np.ndarray | pa.Array, spec: _TableFile, line: int, name: str) -> np.ndarray:
        if self.index is None:          # a writable copy, not a view of Arrow's read-only buffer
            return np.array(values, dtype=np.int64)
        dense = self.index.lookup(values)
        unknown = np.flatnonzero(dense < 0)
        if unknown.size:
            row = int(unknown[0])
            value = values[row].as_py() if isinstance(values, pa.Array) else int(values[row])
            where = f" in node table {self.nodes.spec.path}" if self.nodes is not None else ""
            raise IngestError(f"{spec.where(line + row)}: column {name!r}: unknown node ID {value!r}"
                              f" (not{where or ' among the IDs of pass 1'})")
        return dense

    def scan(self) -> None:
        """Pass 1: validate every field, count edges, find the ID space (restarting once if needed)."""
        collect = self.nodes is None and (self.kind == "string" or self.map_ids is True)
        try:
            self._scan(collect)
        except _NeedsMap:
            self._scan(True)
            return
        if not collect and self.nodes is None and self.map_ids is None and \
                ids_are_sparse(self.num_nodes - 1, self.num_edges):
            self._scan(True)
            self.mapped_because = "sparse"

    def _scan(self, collect: bool) -> None:
        collector = UniqueCollector(self.kind) if collect else None
        num_edges, max_id, min_id = 0, -1, 0
        for spec, part, line in self._segments(with_values=True):
            for name in (self.src, self.dst):
                values = self._ids(part, name)
                if self.nodes is not None:
                    self._to_dense(values, spec, line, name)
                elif collector is not None:
                    collector.add(values)
                elif len(values):
                    lo, hi = int(values.min()), int(values.max())
                    if lo < 0:
                        if self.map_ids is False:
                            row = int(np.flatnonzero(values < 0)[0])
                            raise IngestError(f"{spec.where(line + row)}: column {name!r}: negative node ID "
                                              f"{int(values[row])} (pass map_ids=True, or a node table)")
                        raise _NeedsMap
                    max_id, min_id = max(max_id, hi), min(min_id, lo)
            num_edges += part.num_rows
        self.num_edges = num_edges
        if self.nodes is not None:
            return
        if collector is not None:
            uniques = collector.result()
            self.external = uniques
            self.num_nodes = len(uniques)
            self.index = IntIdIndex(uniques) if self.kind == "int" else StringIdIndex(uniques)
        else:
            self.num_nodes = max_id + 1

    # streams for the DatasetSource ------------------------------------------------
    def edge_chunks(self) -> Iterator[EdgeChunk]:
        position = 0
        for spec, part, line in self._segments(with_values=False):
            src = self._to_dense(self._ids(part, self.src), spec, line, self.src)
            dst = self._to_dense(self._ids(part, self.dst), spec, line, self.dst)
            yield EdgeChunk(src=src, dst=dst, first_row=position, source=spec.path, first_line=line)
            position += part.num_rows

    @property
    def value_dtype(self) -> np.dtype:
        """The edge features' dtype: int64 when every value column holds integers, float32
        for CSV decimals and Parquet float32, float64 for Parquet float64 (the common type
        of the columns)."""
        dtypes = [np.dtype(np.int64) if pa.types.is_integer(kind) else
                  np.dtype(np.float64) if kind == pa.float64() and self._parquet_float64(name)
                  else np.dtype(np.float32) for name, kind in self.value_types.items()
                  if name != self.time_column]
        return np.result_type(*dtypes) if dtypes else np.dtype(np.float32)

    def _parquet_float64(self, name: str) -> bool:
        return any(spec.format == "parquet" and
                   pq.ParquetFile(spec.path).schema_arrow.field(name).type == pa.float64()
                   for spec in self.files)

    def edge_features(self) -> Iterator[RowBlock]:
        position = 0
        dtype = self.value_dtype
        columns = [c for c in self.value_columns if c != self.time_column]
        for spec, part, line in self._segments(with_values=True, with_ids=False):
            values = np.empty((part.num_rows, len(columns)), dtype=dtype)
            for j, name in enumerate(columns):
                values[:, j] = part.column(name).to_numpy(zero_copy_only=False)
            yield RowBlock(first_row=position, values=values, source=spec.path, first_line=line)
            position += part.num_rows

    def edge_times(self) -> Iterator[RowBlock]:
        """The time column (int64) in edge-list order."""
        position = 0
        for spec, part, line in self._segments(with_values=True, with_ids=False):
            values = part.column(self.time_column).to_numpy(zero_copy_only=False).astype(np.int64)
            yield RowBlock(first_row=position, values=values, source=spec.path, first_line=line)
            position += part.num_rows


def _value_types(files: list[_TableFile], value_columns: list[str]) -> dict[str, pa.DataType]:
    """How each edge value column is read: a Parquet column as its own integer / float type
    (integers as int64), CSV as int64 first (a column that is not all integers is read
    again as float64, see ``read_edge_list``)."""
    types: dict[str, pa.DataType] = {}
    for name in value_columns:
        kinds = [pq.ParquetFile(spec.path).schema_arrow.field(name).type
                 for spec in files if spec.format == "parquet"]
        if not kinds or all(pa.types.is_integer(k) or pa.types.is_boolean(k) for k in kinds):
            types[name] = pa.int64()
        elif all(k in (pa.float16(), pa.float32()) or pa.types.is_integer(k) for k in kinds):
            types[name] = pa.float32()
        else:
            types[name] = pa.float64()
    return types


def _edge_id_kind(files: list[_TableFile], columns: Sequence[str], id_type: IdType) -> str | None:
    """``int``/``string`` when forced or decided by a Parquet schema; None: try int, fall back to string."""
    if id_type in ("int", "string"):
        return id_type
    if id_type != "auto":
        raise IngestError(f"'id_type' must be auto, int or string (got {id_type!r})")
    for spec in files:
        if spec.format != "parquet":
            continue
        schema = pq.ParquetFile(spec.path).schema_arrow
        for name in columns:
            kind = schema.field(name).type
            if pa.types.is_dictionary(kind):
                kind = kind.value_type
            if pa.types.is_string(kind) or pa.types.is_large_string(kind):
                return "string"
            if not pa.types.is_integer(kind):
                raise IngestError(f"{spec.path}: column {name!r} has type {kind}; IDs must be integers or strings")
    return None


def is_edge_list(path: str | os.PathLike) -> bool:
    """Whether ``path`` can be read as an edge list: an existing file or folder, or a glob
    pattern (the last format tried: anything else is not a dataset).

    >>> is_edge_list("parts/*.csv"), is_edge_list("/no/such/file.csv")
    (True, False)
    """
    text = os.fspath(path)
    return os.path.exists(text) or any(ch in text for ch in "*?[")


def read_edge_list(paths: str | os.PathLike | Sequence[str | os.PathLike], *,
                   src: str | int = "src", dst: str | int = "dst", format: FileFormat = "auto",
                   delimiter: str | None = None, header: bool | None = None, weight: str | None = None,
                   edge_feature_columns: list[str] | None = None, nodes: str | os.PathLike | None = None,
                   node_id: str = "id", feature_columns: list[str] | str | None = None,
                   label: str | list[str] | None = None, split_column: str | None = None,
                   split_files: Mapping[str, str | os.PathLike] | None = None,
                   id_type: IdType = "auto", map_ids: bool | None = None, name: str | None = None,
                   block_rows: int = 1 << 20, time_column: str | None = None) -> DatasetSource:
    """Read an edge list (one or more CSV/TSV/Parquet files) and an optional node table.

    Args:
        paths: a file, a list of files (read in order as one edge list), a folder or a glob pattern.
            CSV/TSV may be compressed (``.gz``, ``.bz2``, ``.zst``); leading ``#`` lines are skipped.
        src, dst: source / destination ID columns (names, or 0-based positions; without a header
            they default to the first two columns).
        format: ``auto`` (by extension: ``.parquet``/``.pq``, ``.tsv``, else CSV with the delimiter
            sniffed for other extensions than ``.csv``: commas, else tabs (SNAP), else spaces;
            in a space-separated file, or a tab-separated one with runs of whitespace, each
            run of spaces and tabs is one separator), ``csv``, ``tsv`` or ``parquet``.
        delimiter: CSV field separator (default by format / sniffed).
        header: whether CSV files start with a header line; ``None`` (default): detected per
            file (a first line of numbers only is an edge, see :func:`_resolve_header`), and
            every file must agree.
        weight: a numeric edge column stored as the first edge feature.
        edge_feature_columns: further numeric edge columns; edge features are ``(E, k)`` in
            the source's type: int64 when every column holds integers (integer weights
            above 2**24 stay exact), float32 for CSV decimals, Parquet floats as stored.
        nodes: node table (CSV/TSV/Parquet, with header). Its row order defines the dense IDs;
            every edge endpoint must appear in it.
        node_id: the ID column of the node table.
        feature_columns: numeric node-table columns forming ``(N, F)`` features, or ONE column name
            (a list / fixed-size-list column in Parquet gives ``F`` = list length), or a glob
            pattern such as ``"f*"`` (the matching columns, in table order). float32, or
            int64 when every value is an integer.
        label: label column (or several for multi-task ``(N, T)`` labels): integers → int64
            classification, other numbers → float64 regression, text → class codes by sorted name;
            an empty label makes the labels float64 with NaN there.
        split_column: node-table column with train/valid/test (val/validation also accepted,
            empty = none); default: ``"split"`` when that column exists.
        split_files: ``{split: file}`` of node-ID files instead (see
            :mod:`graphpipe.ingest.splitfiles`): IDs as in the edge list / node table.
        id_type: ``auto`` (int64 when every ID is an integer, else strings), ``int`` or ``string``.
        map_ids: without a node table, integer IDs that are all non-negative are kept as the
            dense IDs (N = max + 1) unless ``map_ids=True`` or they are sparse (see the module
            docstring); negative IDs are mapped by sorted unique value unless ``map_ids=False``
            (then an error). String IDs are always mapped.
        name: dataset name (default: the first file's stem).
        block_rows: the most rows per edge chunk / row block.
        time_column: an integer edge column holding each edge's timestamp (stored as
            ``csc/time``, CSC order, for temporal sampling; not an edge feature).

    Returns:
        A :class:`DatasetSource` (``source_format="edge-list"``); pass 1 over the edge files has
        already validated every field. Raises :class:`IngestError` naming file and line/row/column.
    """
    if block_rows < 1:
        raise ValueError(f"'block_rows' must be positive (got {block_rows})")
    edge_paths = _expand_paths(paths)
    files = [_open_file(p, format, delimiter, header) for p in edge_paths]
    csv_files = [spec for spec in files if spec.format == "csv"]
    for spec in csv_files[1:]:
        if spec.header != csv_files[0].header:
            raise IngestError(f"{spec.path}: has {_header_words(spec)}, but {csv_files[0].path} has "
                              f"{_header_words(csv_files[0])}; pass --header or --no-header")
    if csv_files and not csv_files[0].header:
        src = 0 if src == "src" else src
        dst = 1 if dst == "dst" else dst
    names: list[str] = []
    for ref, role in ((src, "source column"), (dst, "destination column")):
        if isinstance(ref, int):
            short = min(files, key=lambda f: len(f.columns))
            if not 0 <= ref < len(short.columns):
                raise IngestError(f"{short.path}: no column at position {ref} ({role}); "
                                  f"columns present: {short.columns}")
            names.append(short.columns[ref])
        else:
            names.append(ref)
    src_name, dst_name = names
    feature_columns_e = ([weight] if weight else []) + list(edge_feature_columns or [])
    value_columns = feature_columns_e + ([time_column] if time_column else [])
    if len(set(value_columns)) != len(value_columns):
        raise IngestError(f"edge feature / time columns repeat a name: {value_columns}")
    for spec in files:
        spec.require([src_name], "source column")
        spec.require([dst_name], "destination column")
        spec.require(feature_columns_e, "edge feature column")
        spec.require([time_column] if time_column else [], "time column")

    node_data = None
    if nodes is not None:
        node_data = _read_node_table(os.fspath(nodes), node_id, feature_columns, label,
                                     split_column or "split", split_column is not None, id_type, block_rows)
        kind = node_data.kind
    elif feature_columns or label or split_column:
        raise IngestError("feature_columns / label / split_column need a node table (nodes=...)")
    else:
        kind = _edge_id_kind(files, [src_name, dst_name], id_type)

    value_types = _value_types(files, value_columns)

    def make(kind_now: str) -> _EdgeListReader:
        while True:
            reader = _EdgeListReader(files, src_name, dst_name, value_columns, kind_now, node_data,
                                     map_ids, block_rows, value_types)
            reader.time_column = time_column
            try:
                reader.scan()
                return reader
            except _ConversionError as exc:  # a CSV value column that is not all integers
                if exc.column is not None and exc.column == time_column:
                    raise IngestError(f"{exc}; timestamps must be integers (years, seconds since "
                                      f"the epoch, ...)") from None
                if value_types.get(exc.column) != pa.int64() or \
                        any(spec.format == "parquet" for spec in files):
                    raise
                value_types[exc.column] = pa.float64()

    if kind is None:   # auto: integers unless some ID field is not one
        try:
            reader = make("int")
        except _ConversionError as exc:
            if exc.column not in (src_name, dst_name):
                raise
            reader = make("string")
    else:
        reader = make(kind)
    if reader.num_edges == 0 and node_data is None:
        raise IngestError(f"{edge_paths[0]}: no edges (and no node table to say how many nodes there are)")

    external_ids: pa.Array | None = None
    if node_data is not None:
        ext = node_data.external
        if not (node_data.kind == "int" and np.array_equal(ext, np.arange(len(ext)))):
            external_ids = pa.array(ext, pa.int64()) if node_data.kind == "int" else ext
    elif reader.external is not None:
        external_ids = pa.array(reader.external, pa.int64()) if reader.kind == "int" else reader.external

    extra: dict = {"edge_files": ";".join(edge_paths), "id_type": reader.kind,
                   **({"ids_mapped": "sparse integer IDs"} if reader.mapped_because else {}),
                   "edge_file": edge_paths[0] if len(edge_paths) == 1 else ";".join(edge_paths)}
    source = DatasetSource(
        name=name or _stem(edge_paths[0]),
        source_format="edge-list",
        source_path=edge_paths[0] if len(edge_paths) == 1 else os.path.commonpath(edge_paths),
        num_nodes=int(reader.num_nodes),
        edge_chunks=reader.edge_chunks,
        num_input_edges=int(reader.num_edges),
        external_ids=external_ids,
        extra=extra,
    )
    if feature_columns_e:
        source.edge_features = reader.edge_features
        source.edge_feature_dim = len(feature_columns_e)
        source.edge_feature_dtype = reader.value_dtype
        extra["edge_feature_columns"] = ",".join(feature_columns_e)
    if time_column:
        if value_types.get(time_column) != pa.int64():
            raise IngestError(f"{edge_paths[0]}: time column {time_column!r} must hold integers "
                              f"(got {value_types.get(time_column)})")
        source.edge_time = reader.edge_times
        extra["edge_time_file"] = f"{extra['edge_file']}: column {time_column!r}"
    if node_data is not None:
        extra["node_table"] = node_data.spec.path
        source.num_nodes_backed = True
        if node_data.labels is not None:
            extra["label_file"] = f"{node_data.spec.path}: column {label!r}"
        if node_data.feature_columns:
            source.node_features = lambda: _node_features(node_data, block_rows)
            source.feature_dim = node_data.feature_dim
            extra["feature_columns"] = ",".join(node_data.feature_columns)
        source.labels = node_data.labels
        source.task_type, source.num_classes = node_data.task_type, node_data.num_classes
        if node_data.label_classes is not None:
            extra["label_classes"] = node_data.label_classes
        source.splits = node_data.splits
        source.split_sources = {k: node_data.spec.path for k in node_data.splits}
        source.node_table = node_data.table
    if split_files:
        if source.splits:
            raise IngestError(f"{node_data.spec.path}: has a split column and split files were "
                              f"given too; use one")
        from graphpipe.ingest.splitfiles import read_split_files

        ids = external_ids
        if isinstance(ids, pa.ChunkedArray):
            ids = ids.combine_chunks()
        elif ids is not None and not isinstance(ids, pa.Array):
            ids = pa.array(ids)
        source.splits, source.split_sources = read_split_files(split_files, ids, node_id)
    return source


def _stem(path: str) -> str:
    base = os.path.basename(path)
    plain = _strip_compression(base)
    base = base[:len(plain)]
    return os.path.splitext(base)[0] or base
