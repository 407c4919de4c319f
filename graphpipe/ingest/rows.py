"""The row stage of the store builder: row blocks (node or edge features) streamed into one array.

Both builders of :mod:`graphpipe.ingest.pipeline` (a homogeneous store's ``node/feat``
and ``edge/feat``, a typed store's per-type features) write rows through
:func:`write_rows`, so every store gets the same checks: the width of every row, the
number of rows against what the source declares, non-finite values (refused unless
``allow_nonfinite``) and float16's range (refused unless ``clamp_float16``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.options import IngestOptions
from graphpipe.ingest.source import RowBlock
from graphpipe.store import StoreWriter
from graphpipe.store.arrays import RowWriter

ProgressFn = Callable[[str, int, int], None]
FLOAT16_MAX = float(np.finfo(np.float16).max)


def _to_float16(values: np.ndarray, block: RowBlock, clamp: bool) -> np.ndarray:
    """``values`` as float16; a finite value beyond ±65504 is refused (or clamped with ``clamp``)."""
    if values.dtype == np.float16:
        return values
    with np.errstate(over="ignore"):            # overflow is detected below, by value
        out = values.astype(np.float16)
    overflow = np.isinf(out) & np.isfinite(values) if values.dtype.kind == "f" else np.isinf(out)
    if not overflow.any():
        return out
    if clamp:
        return np.clip(values, -FLOAT16_MAX, FLOAT16_MAX).astype(np.float16)
    row, col = np.argwhere(overflow)[0]
    raise IngestError(f"{block.source}: line {block.first_line + row}, column {col + 1}: value "
                      f"{values[row, col]} does not fit in float16 (|x| <= {FLOAT16_MAX:g}); "
                      f"use --feature-dtype float32, or --clamp-float16 to clamp it")


def write_rows(writer: StoreWriter, key: str, blocks: Iterator[RowBlock], num_rows: int,
               dim_hint: int | None, dtype: np.dtype, options: IngestOptions, report: ProgressFn,
               stage: str, *, what: str, expected_from: str | None,
               stop: threading.Event | None = None, chunk_rows: int | None = None) -> int:
    """Stream row blocks into array ``key`` (``(num_rows, dim)`` of ``dtype``); returns the
    row width. Rows are checked as they pass (width, count, non-finite values unless
    ``allow_nonfinite``, float16 range); ``what`` names the rows in messages (``"nodes"``,
    ``"'paper' nodes"``), ``expected_from`` the file that declares ``num_rows``.

    >>> import tempfile
    >>> from graphpipe.store import StoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with StoreWriter(tmp.name + "/s") as w:
    ...     blocks = [RowBlock(0, np.ones((2, 3)), "x.csv", 1), RowBlock(2, np.zeros((1, 3)), "x.csv", 3)]
    ...     write_rows(w, "node/feat", iter(blocks), 3, None, np.dtype(np.float16), IngestOptions(),
    ...                lambda *a: None, "features", what="nodes", expected_from=None)
    3
    >>> tmp.cleanup()
    """
    rows_writer: RowWriter | None = None
    done = 0
    source = key
    for block in blocks:
        if stop is not None and stop.is_set():
            raise IngestError(f"{block.source}: stopped because another stage failed")
        values = block.values.reshape(block.values.shape[0], -1)
        source = block.source
        if rows_writer is None:
            dim = values.shape[1] if dim_hint is None else int(dim_hint)
            rows_writer = RowWriter(writer.path, key, (num_rows, dim), dtype, chunk_rows=chunk_rows,
                                    compression=options.compression)
        if values.shape[1] != rows_writer.shape[1]:
            raise IngestError(f"{block.source}: line {block.first_line}: {values.shape[1]} values, "
                              f"expected {rows_writer.shape[1]}")
        if done + values.shape[0] > num_rows:
            extra_line = block.first_line + (num_rows - done)
            raise IngestError(f"{block.source}: line {extra_line}: more rows than the {num_rows} {what}"
                              + (f" given by {expected_from}" if expected_from else ""))
        if not options.allow_nonfinite and values.dtype.kind == "f":
            finite = np.isfinite(values)
            if not finite.all():
                row, col = np.argwhere(~finite)[0]
                raise IngestError(f"{block.source}: line {block.first_line + row}, column {col + 1}: "
                                  f"non-finite value {values[row, col]} (pass --allow-nonfinite to keep it)")
        if dtype == np.float16:
            rows_writer.write(_to_float16(values, block, options.clamp_float16))
        else:
            rows_writer.write(values.astype(dtype, copy=False))
        done += values.shape[0]
        report(stage, done, num_rows)
    if rows_writer is None and num_rows == 0 and dim_hint is not None:
        rows_writer = RowWriter(writer.path, key, (0, int(dim_hint)), dtype, chunk_rows=chunk_rows,
                                compression=options.compression)
    if rows_writer is None:
        raise IngestError(f"{source}: no rows, expected {num_rows}")
    if done != num_rows:
        rows_writer.abort()
        raise IngestError(f"{source}: {done} rows, but there are {num_rows} {what}"
                          + (f" ({expected_from})" if expected_from else ""))
    rows_writer.close()
    return int(rows_writer.shape[1])
