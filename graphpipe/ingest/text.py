"""Readers of node text, and :func:`attach_text`, which adds text to any ingest.

Three inputs, each a :class:`~graphpipe.ingest.text_store.TextSource`:

- **OGB + titleabs.tsv** (:func:`titleabs_source`), the ogbn-arxiv-with-text layout TAPE
  and GLEM read: ``mapping/nodeidx2paperid.csv.gz`` of the OGB folder (header
  ``node idx,paper id``, one row per node in node order) gives each node's paper ID;
  ``titleabs.tsv`` has ``paper id<TAB>title<TAB>abstract`` lines, no header, in any
  order, some with IDs no node maps to. Joined on the paper ID (an inner join from the
  nodes' side: a node whose paper has no line has no text; a line whose paper is no
  node is counted in ``unmatched_lines`` and skipped). A line with fewer than two
  fields or a non-integer ID, a paper ID on two lines, a line that is not UTF-8 or one
  longer than :data:`MAX_LINE_BYTES` is an :class:`IngestError` naming the line (the
  text rules' cut at 1 MiB applies to lines under that limit). Tabs inside the abstract are kept (the line is split at its first
  two tabs). The join is out of core: lines are spilled into buckets by node range
  (Arrow IPC files under the store's temporary tree), each bucket sorted on its own.
- **a node-table column** (:func:`column_source`): ``--text-column NAME`` of a CSV /
  Parquet node table, already one row per node.
- **a list of strings** (:func:`list_source`), e.g. a PyG ``Data``'s ``text`` attribute.
"""

from __future__ import annotations

import gzip
import math
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyarrow import ipc

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.text_store import TextSource, TokenizerOptions, write_text
from graphpipe.ingest.textio import DEFAULT_MAX_LINE_BYTES
from graphpipe.text.rules import TextRules

__all__ = ["MAPPING_FILE", "attach_text", "column_source", "list_source", "read_paper_ids",
           "titleabs_source"]

MAPPING_FILE = "mapping/nodeidx2paperid.csv.gz"
BUCKET_BYTES = 256 << 20
"""About this many bytes of the TSV per join bucket (the join's working set)."""
MAX_LINE_BYTES = DEFAULT_MAX_LINE_BYTES
"""Longest line of a text file (64 MiB, the CSV reader's limit): a longer one is refused."""
_BATCH_ROWS = 8192
_SPILL_SCHEMA = pa.schema([("node", pa.int64()), ("line", pa.int64()),
                           ("title", pa.large_binary()), ("abstract", pa.large_binary())])


def read_paper_ids(folder: str | os.PathLike, num_nodes: int) -> np.ndarray:
    """int64 ``(N,)`` paper ID of every node from ``FOLDER/mapping/nodeidx2paperid.csv.gz``."""
    path = Path(folder) / MAPPING_FILE
    if not path.is_file():
        raise IngestError(f"{path}: not found (--text with a titleabs.tsv needs the OGB "
                          f"folder's node -> paper ID mapping)")
    ids = np.full(num_nodes, -1, dtype=np.int64)
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line_no, line in enumerate(fh, start=1):
                if line_no == 1 and not line.split(",")[0].strip().isdigit():
                    continue  # the header: node idx,paper id
                parts = line.strip().split(",")
                if len(parts) != 2:
                    raise IngestError(f"{path}: line {line_no}: expected 'node idx,paper id'")
                node, paper = int(parts[0]), int(parts[1])
                if not 0 <= node < num_nodes or ids[node] != -1:
                    raise IngestError(f"{path}: line {line_no}: node {node} out of range "
                                      f"[0, {num_nodes}) or listed twice")
                ids[node] = paper
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise IngestError(f"{path}: cannot read ({exc})") from None
    except ValueError as exc:
        if isinstance(exc, IngestError):
            raise
        raise IngestError(f"{path}: line {line_no}: not two integers ({exc})") from None
    missing = np.flatnonzero(ids < 0)
    if missing.size:
        raise IngestError(f"{path}: no paper ID for {missing.size} node(s), first node "
                          f"{int(missing[0])}")
    return ids


def titleabs_source(tsv: str | os.PathLike, paper_ids: np.ndarray, scratch: str | os.PathLike,
                    *, bucket_bytes: int = BUCKET_BYTES) -> TextSource:
    """The ``title`` and ``abstract`` fields of every node, joined from ``tsv`` on
    ``paper_ids`` (module docstring); spill files go under ``scratch``.

    >>> import tempfile, numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> tsv = Path(tmp.name) / "titleabs.tsv"
    >>> _ = tsv.write_text("30\\tC title\\tC abstract\\n99\\tnot a node\\tx\\n10\\tA title\\tA\\tabs\\n")
    >>> source = titleabs_source(tsv, np.array([10, 20, 30]), tmp.name)
    >>> [rows for _, rows in source.batches()]
    [{'title': [b'A title', None, b'C title'], 'abstract': [b'A\\tabs', None, b'C abstract']}]
    >>> source.extra["matched_lines"], source.extra["unmatched_lines"]
    (2, 1)
    >>> tmp.cleanup()
    """
    tsv = Path(tsv)
    if not tsv.is_file():
        raise IngestError(f"{tsv}: text file not found")
    paper_ids = np.asarray(paper_ids, dtype=np.int64)
    order = np.argsort(paper_ids, kind="stable")
    sorted_ids = paper_ids[order]
    if sorted_ids.size > 1 and bool(np.any(sorted_ids[1:] == sorted_ids[:-1])):
        dup = int(sorted_ids[1:][sorted_ids[1:] == sorted_ids[:-1]][0])
        raise IngestError(f"{MAPPING_FILE}: paper ID {dup} is mapped to two nodes")
    n = paper_ids.size
    buckets = max(1, math.ceil(tsv.stat().st_size / max(1, bucket_bytes)))
    bucket_rows = max(1, math.ceil(n / buckets))
    extra = {"text_file": str(tsv), "join": "paper id"}

    def batches() -> Iterator[tuple[int, dict[str, list[Any]]]]:
        spill = Path(scratch) / ".text-join"
        shutil.rmtree(spill, ignore_errors=True)
        spill.mkdir(parents=True)
        try:
            extra.update(_spill(tsv, order, sorted_ids, spill, bucket_rows, buckets))
            for b in range(buckets):
                yield from _bucket_rows(spill / f"{b}.arrow", b * bucket_rows,
                                        min(n, (b + 1) * bucket_rows))
        finally:
            shutil.rmtree(spill, ignore_errors=True)

    return TextSource(["title", "abstract"], batches, str(tsv), extra)


def _checked_lines(fh: Any, tsv: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of each line; a line over :data:`MAX_LINE_BYTES` (never
    buffered whole) or one that is not UTF-8 is an :class:`IngestError` naming it."""
    line_no = 0
    while raw := fh.readline(MAX_LINE_BYTES + 1):
        line_no += 1
        if len(raw) > MAX_LINE_BYTES:
            raise IngestError(f"{tsv}: line {line_no}: longer than {MAX_LINE_BYTES >> 20} MiB, the "
                              f"limit of one line")
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(f"{tsv}: line {line_no}: byte {exc.start + 1} (0x{raw[exc.start]:02x}) "
                              f"is not UTF-8") from None
        yield line_no, raw


def _parse_line(raw: bytes, line_no: int, tsv: Path) -> tuple[int, bytes, bytes | None] | None:
    raw = raw.rstrip(b"\r\n")
    if not raw.strip():
        return None
    parts = raw.split(b"\t", 2)
    if len(parts) < 2:
        raise IngestError(f"{tsv}: line {line_no}: expected 'paper id<TAB>title<TAB>abstract'")
    try:
        paper = int(parts[0])
    except ValueError:
        raise IngestError(f"{tsv}: line {line_no}: paper id {parts[0][:40]!r} is not an "
                          "integer (the file has no header)") from None
    return paper, parts[1], parts[2] if len(parts) > 2 else None


def _spill(tsv: Path, order: np.ndarray, sorted_ids: np.ndarray, spill: Path,
           bucket_rows: int, buckets: int) -> dict[str, int]:
    """Stream ``tsv`` into per-bucket Arrow files; counts of matched / unmatched lines."""
    writers = [ipc.new_stream(str(spill / f"{b}.arrow"), _SPILL_SCHEMA) for b in range(buckets)]
    seen = np.zeros(order.size, dtype=np.int64)  # 1-based line of each node's text, 0: none
    matched = unmatched = 0
    rows: list[tuple[int, bytes, bytes | None, int]] = []
    try:
        with open(tsv, "rb") as fh:
            for line_no, raw in _checked_lines(fh, tsv):
                parsed = _parse_line(raw, line_no, tsv)
                if parsed is None:
                    continue
                rows.append((*parsed, line_no))
                if len(rows) >= _BATCH_ROWS:
                    m, u = _flush(rows, order, sorted_ids, seen, writers, bucket_rows, tsv)
                    matched, unmatched, rows = matched + m, unmatched + u, []
        m, u = _flush(rows, order, sorted_ids, seen, writers, bucket_rows, tsv)
    finally:
        for w in writers:
            w.close()
    return {"matched_lines": matched + m, "unmatched_lines": unmatched + u}


def _flush(rows: list, order: np.ndarray, sorted_ids: np.ndarray, seen: np.ndarray,
           writers: list, bucket_rows: int, tsv: Path) -> tuple[int, int]:
    if not rows:
        return 0, 0
    papers = np.array([r[0] for r in rows], dtype=np.int64)
    pos = np.searchsorted(sorted_ids, papers).clip(0, max(0, sorted_ids.size - 1))
    hit = sorted_ids.size > 0
    hit = (sorted_ids[pos] == papers) if hit else np.zeros(papers.size, dtype=bool)
    nodes = np.where(hit, order[pos] if order.size else 0, -1)
    for i in np.flatnonzero(hit):
        node = int(nodes[i])
        if seen[node]:
            raise IngestError(f"{tsv}: line {rows[i][3]}: paper id {rows[i][0]} already on "
                              f"line {int(seen[node])}")
        seen[node] = rows[i][3]
    idx = np.flatnonzero(hit)
    bucket_of = nodes[idx] // bucket_rows
    for b in np.unique(bucket_of):
        sel = idx[bucket_of == b]
        writers[int(b)].write_batch(pa.record_batch([
            pa.array(nodes[sel]), pa.array([rows[i][3] for i in sel], type=pa.int64()),
            pa.array([rows[i][1] for i in sel], type=pa.large_binary()),
            pa.array([rows[i][2] for i in sel], type=pa.large_binary())], schema=_SPILL_SCHEMA))
    return int(idx.size), int(papers.size - idx.size)


def _bucket_rows(path: Path, start: int, stop: int) -> Iterator[tuple[int, dict[str, list]]]:
    """Rows ``start..stop-1`` of one bucket, in node order (None where no line matched)."""
    with ipc.open_stream(str(path)) as reader:
        table = reader.read_all()
    nodes = np.asarray(table.column("node")) - start
    title: list[Any] = [None] * (stop - start)
    abstract: list[Any] = [None] * (stop - start)
    for i, (t, a) in zip(nodes.tolist(), zip(table.column("title").to_pylist(),
                                             table.column("abstract").to_pylist())):
        title[i], abstract[i] = t, a
    del table
    for s in range(0, stop - start, _BATCH_ROWS):
        yield start + s, {"title": title[s:s + _BATCH_ROWS], "abstract": abstract[s:s + _BATCH_ROWS]}


def column_source(table: pa.Table, column: str, origin: str) -> TextSource:
    """Field ``column`` of a node table (one row per node, node order)."""
    if column not in table.column_names:
        raise IngestError(f"{origin}: no column {column!r} (columns: "
                          f"{', '.join(table.column_names)})")
    col = table.column(column)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
            or pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)
            or pa.types.is_null(col.type)):
        raise IngestError(f"{origin}: column {column!r} is {col.type}, not text")

    def batches() -> Iterator[tuple[int, dict[str, list[Any]]]]:
        for s in range(0, col.length(), _BATCH_ROWS):
            yield s, {column: col.slice(s, _BATCH_ROWS).to_pylist()}

    return TextSource([column], batches, f"{origin}:{column}")


def list_source(texts: list[Any], name: str = "text", origin: str = "list") -> TextSource:
    """Field ``name`` from a list of strings (``None`` = no text), one per node."""
    if not isinstance(texts, (list, tuple)):
        raise ValueError(  # noqa: TRY004 - the project reports bad arguments as ValueError
            f"{origin}: text must be a list of strings (got {type(texts).__name__})")

    def batches() -> Iterator[tuple[int, dict[str, list[Any]]]]:
        for s in range(0, len(texts), _BATCH_ROWS):
            yield s, {name: list(texts[s:s + _BATCH_ROWS])}

    return TextSource([name], batches, origin)


def attach_text(source: Any, make_text: Any, tokenizer: TokenizerOptions | None = None,
                rules: TextRules | None = None) -> Any:
    """Have the ingest of ``source`` (a :class:`DatasetSource`) also write node text:
    ``make_text(scratch_dir)`` returns the :class:`TextSource`, called at the end of the
    ingest, before the commit (so a bad text file leaves nothing behind)."""
    before = source.finish

    def finish(writer: Any) -> None:
        if before is not None:
            before(writer)
        entry = write_text(writer.path, source.num_nodes, make_text(writer.path),
                           tokenizer=tokenizer, rules=rules)
        writer.manifest["text"] = entry

    source.finish = finish
    return source
