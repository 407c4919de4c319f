"""Streaming decompression of text inputs in fixed-size blocks, decompressing ahead in a thread.

``.gz`` files are inflated with ISA-L (``isal``, several times faster than zlib)
when it is installed, else with :mod:`gzip`; the inflating thread releases the
GIL, so a consumer parsing block *k* overlaps with the inflation of block *k+1*.
Blocks are cut at line boundaries: every block ends with ``\\n`` (a final line
without one gets it appended).
"""

from __future__ import annotations

import gzip
import os
import queue
import threading
import zlib
from pathlib import Path
from typing import Iterator

from graphpipe.ingest.errors import IngestError

try:  # pragma: no cover - exercised when isal is installed, which the package requires
    from isal import igzip as _igzip
    from isal.isal_zlib import error as _IsalError
except ImportError:  # pragma: no cover
    _igzip = None
    _IsalError = zlib.error

DEFAULT_BLOCK_BYTES = 8 << 20
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


def iter_line_blocks(path: str | os.PathLike, block_bytes: int = DEFAULT_BLOCK_BYTES,
                     prefetch: int = 2) -> Iterator[bytes]:
    """Yield the (decompressed) content of ``path`` as blocks of whole lines.

    Raises :class:`IngestError` naming the file for a missing file and for
    truncated or corrupt gzip data.
    """
    path = Path(path)
    if not path.is_file():
        raise IngestError(f"{path}: file not found")
    out: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
    stop = threading.Event()

    def produce() -> None:
        try:
            with _open_binary(path) as fh:
                carry = b""
                while not stop.is_set():
                    data = fh.read(block_bytes)
                    if not data:
                        break
                    data = carry + data
                    cut = data.rfind(b"\n")
                    if cut < 0:
                        carry = data
                        continue
                    carry = data[cut + 1:]
                    out.put(data[: cut + 1])
                if carry and not stop.is_set():
                    out.put(carry + b"\n")
            out.put(_DONE)
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
