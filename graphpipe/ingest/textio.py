"""Streaming decompression of text inputs in fixed-size blocks, decompressing ahead in a thread.

``.gz`` files are inflated with ISA-L (``isal``, several times faster than zlib)
when it is installed, else with :mod:`gzip`; the inflating thread releases the
GIL, so a consumer parsing block *k* overlaps with the inflation of block *k+1*.
Blocks are cut at line boundaries: every block ends with a line ending (``\\n``,
``\\r\\n`` or a lone ``\\r``, never between the ``\\r`` and ``\\n`` of a pair),
except the last block when the file's last line has none (nothing is added: an
unterminated quote at the end must read as pyarrow reads the file). A line longer than
``max_line_bytes`` (default 64 MiB, far beyond any numeric table's row) is refused
rather than buffered without bound; a long line is gathered in pieces and joined
once, so the work stays linear in its length.
"""

from __future__ import annotations

import gzip
import os
import queue
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

from graphpipe.ingest.errors import IngestError

try:  # pragma: no cover - exercised when isal is installed, which the package requires
    from isal import igzip as _igzip
    from isal.isal_zlib import error as _IsalError
except ImportError:  # pragma: no cover
    _igzip = None
    _IsalError = zlib.error

DEFAULT_BLOCK_BYTES = 8 << 20
DEFAULT_MAX_LINE_BYTES = 64 << 20
_DONE = object()


def _open_binary(path: Path):
    if path.suffix == ".gz":
        return _igzip.open(path, "rb") if _igzip is not None else gzip.open(path, "rb")
    return open(path, "rb")


def _describe(path: Path, exc: BaseException) -> IngestError:
    if isinstance(exc, EOFError):
        return IngestError(f"{path}: truncated gzip file ({exc})")
    if isinstance(exc, (gzip.BadGzipFile, zlib.error, _IsalError, OSError)):
        return IngestError(f"{path}: corrupt gzip data ({exc})")
    return IngestError(f"{path}: cannot read ({exc})")


def _last_line_end(data: bytes, at_eof: bool) -> int:
    """Index just past the last line ending in ``data`` (0: none). A ``\\r`` as the very
    last byte counts only at end of file (a ``\\n`` may follow in the next read)."""
    cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
    if cut == len(data) - 1 and data[cut] == 13 and not at_eof:
        cut = max(data.rfind(b"\n", 0, cut), data.rfind(b"\r", 0, cut))
    return cut + 1


def _split_lines(path: Path, fh, block_bytes: int, max_line_bytes: int,
                 stop: threading.Event) -> Iterator[bytes]:
    """Blocks of whole lines read from ``fh``; see :func:`iter_line_blocks`."""
    pending: list[bytes] = []  # a line still without its ending, in pieces
    pending_bytes = 0
    offset = 0  # bytes of the file before ``pending``
    while not stop.is_set():
        data = fh.read(block_bytes)
        at_eof = not data
        if at_eof:
            break
        cut = _last_line_end(data, at_eof=False)
        if cut == 0:
            pending.append(data)
            pending_bytes += len(data)
            if pending_bytes > max_line_bytes:
                raise IngestError(f"{path}: a line starting at byte {offset} is longer than "
                                  f"{max_line_bytes} bytes (not a text table, or no line endings)")
            continue
        block = b"".join(pending) + data[:cut] if pending else data[:cut]
        offset += len(block)
        pending, pending_bytes = ([data[cut:]], len(data) - cut) if cut < len(data) else ([], 0)
        yield block
    if pending and not stop.is_set():
        yield b"".join(pending)  # the last line, without a line ending


def iter_line_blocks(path: str | os.PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES,
                     prefetch: int = 2, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[bytes]:
    """Yield the (decompressed) content of ``path`` as blocks of whole lines.

    Raises :class:`IngestError` naming the file for a missing file, for truncated or
    corrupt gzip data and for a line longer than ``max_line_bytes``.
    """
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: file not found")
    out: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
    stop = threading.Event()

    def produce() -> None:
        try:
            with _open_binary(path) as fh:
                for block in _split_lines(path, fh, block_bytes, max_line_bytes, stop):
                    out.put(block)
            out.put(_DONE)
        except IngestError as exc:
            out.put(exc)
        except BaseException as exc:  # noqa: BLE001 - forwarded to the consumer
            out.put(_describe(path, exc))

    thread = threading.Thread(target=produce, name=f"inflate-{path.name}", daemon=True)
    thread.start()
    try:
        while True:
            item = out.get()
            if item is _DONE:
                break
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while thread.is_alive():
            try:
                out.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)
