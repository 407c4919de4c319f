"""One member of an ``.npz`` archive read as a stream: its ``.npy`` header, then row blocks.

``np.load`` materialises a member whole: 25.6 GB for ogbn-papers100M's ``edge_index``,
56.8 GB for its ``node_feat``. Here a member is opened as a zip stream (deflated members
are inflated piece by piece, stored members are read at their file offset), its ``.npy``
header is parsed from the stream with :mod:`numpy.lib.format`, and its rows come out in
blocks of a bounded byte size; nothing holds more than one block.

- :func:`list_members` reads every member's header (a few KiB inflated each) and checks it:
  numeric dtype (no object arrays, which only a pickle can hold), non-negative shape, and
  the member's size in the zip equal to header plus ``prod(shape) * itemsize`` bytes, so a
  header lying about its shape is refused before any row is read.
- :func:`iter_row_blocks` yields ``(first_row, block)`` over axis 0 (C order; a Fortran-
  ordered member only when its rows are contiguous, i.e. ``(N,)`` or ``(N, 1)``).
- :func:`iter_edge_blocks` pairs the two rows of a C-ordered ``(2, E)`` ``edge_index``:
  row 0 (sources) lies entirely before row 1, so the member is opened twice, the second
  stream positioned at row 1 (a seek for a stored member; inflating and discarding row 0
  for a deflated one), and the two are read side by side in two threads (zlib releases
  the GIL). A Fortran-ordered ``(2, E)`` member holds ``(src, dst)`` pairs: one stream.
- :func:`read_whole` reads a small member (``num_nodes_list``) whole, refusing a big one.

A truncated or corrupt member, a bad zip, an encrypted member: an :class:`IngestError`
naming the archive and member, in one line. The CRC-32 of a member is checked whenever a
stream reads it to its end (every deflated member, and stored ones read from the start).
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from graphpipe.ingest.errors import IngestError

__all__ = ["DEFAULT_BLOCK_BYTES", "NpyMember", "iter_edge_blocks", "iter_row_blocks",
           "list_members", "read_whole"]

DEFAULT_BLOCK_BYTES = 16 << 20
"""Bytes of one row block (rows are never split; a single row larger than this is one block)."""
PIECE_BYTES = 4 << 20
"""Bytes inflated (or read) per call on the zip stream."""
SMALL_MAX_BYTES = 64 << 20
"""Most bytes :func:`read_whole` reads by default."""
_MAX_HEADER_BYTES = 10_000  # numpy's own bound on an .npy header
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, zlib.error, OSError,
               RuntimeError, NotImplementedError, struct.error, ValueError)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200] or type(exc).__name__


@dataclass(frozen=True)
class NpyMember:
    """Where one ``.npy`` member of an archive lies, and what its header says.

    Attributes:
        archive: the ``.npz`` file.
        display: the archive as error messages name it.
        name: the member's key (``"edge_index"``; the zip entry is ``name + ".npy"``).
        shape: the array's shape.
        dtype: its dtype (numeric: kinds ``b``, ``i``, ``u``, ``f``).
        fortran_order: whether the data is in Fortran (column-major) order.
        header_bytes: bytes of the ``.npy`` magic and header before the data.
        entry: the zip entry's name.
        stored: True for an uncompressed (stored) entry.
        data_start: file offset of the entry's first byte (its local header skipped).
        crc: the entry's CRC-32.
    """

    archive: Path
    display: str
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    header_bytes: int
    entry: str
    stored: bool
    data_start: int
    crc: int

    @property
    def where(self) -> str:
        """``archive['name']``, as messages name the member."""
        return f"{self.display}[{self.name!r}]"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize

    @property
    def num_rows(self) -> int:
        return int(self.shape[0]) if self.shape else 1

    @property
    def row_elements(self) -> int:
        """Elements of one row (``prod(shape[1:])``)."""
        return int(np.prod(self.shape[1:], dtype=object)) if self.shape else 1


# -- listing ----------------------------------------------------------------------------------

def list_members(path: str | os.PathLike, display: str | None = None) -> dict[str, NpyMember]:
    """Every ``.npy`` member of the archive at ``path``, by key, with its header checked.

    >>> import io, tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "g.npz")
    >>> np.savez_compressed(path, edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
    ...                     x=np.arange(6, dtype=np.float32).reshape(3, 2))
    >>> members = list_members(path, "g.npz")
    >>> members["x"].shape, members["x"].dtype, members["x"].stored
    ((3, 2), dtype('float32'), False)
    >>> [(first, block.tolist()) for first, block in iter_row_blocks(members["x"], block_bytes=16)]
    [(0, [[0.0, 1.0], [2.0, 3.0]]), (2, [[4.0, 5.0]])]
    >>> [(first, s.tolist(), d.tolist()) for first, s, d in iter_edge_blocks(members["edge_index"])]
    [(0, [0, 1, 2], [1, 2, 0])]
    >>> tmp.cleanup()
    """
    path = Path(path)
    display = display or str(path)
    if not path.is_file():
        raise IngestError(f"{display}: file not found")
    try:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            members = {}
            for info in archive.infolist():
                if info.is_dir():
                    continue
                key = info.filename.removesuffix(".npy")
                members[key] = _read_member(archive, raw, info, path, display, key)
            return members
    except IngestError:
        raise
    except _ZIP_ERRORS as exc:
        raise IngestError(f"{display}: not a readable .npz archive ({_one_line(exc)})") from None


def _read_member(archive: zipfile.ZipFile, raw, info: zipfile.ZipInfo, path: Path, display: str,
                 key: str) -> NpyMember:
    where = f"{display}[{key!r}]"
    if info.flag_bits & 0x1:
        raise IngestError(f"{where}: encrypted zip member refused")
    try:
        with archive.open(info) as stream:
            shape, fortran, dtype = _read_header(stream, where)
            header_bytes = stream.tell()
        if dtype.hasobject or dtype.kind not in "biuf" or dtype.fields is not None:
            raise IngestError(f"{display}: member {key!r} refused (dtype {dtype}: only numeric "
                              f"arrays are read; an object array would need pickle)")
    except IngestError:
        raise
    except _ZIP_ERRORS as exc:
        raise IngestError(f"{where}: cannot read the .npy header ({_one_line(exc)})") from None
    member = NpyMember(path, display, key, shape, dtype, fortran, header_bytes, info.filename,
                       info.compress_type == zipfile.ZIP_STORED, _data_start(raw, info, where),
                       info.CRC)
    if info.file_size != header_bytes + member.nbytes:
        raise IngestError(f"{where}: holds {info.file_size - header_bytes} bytes of data, but its "
                          f"header (shape {shape}, dtype {dtype}) needs {member.nbytes}")
    return member


def _read_header(stream, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    """``(shape, fortran_order, dtype)`` of the ``.npy`` header at the stream's start."""
    fmt = np.lib.format
    try:
        major, _minor = fmt.read_magic(stream)
        if major not in (1, 2):
            raise ValueError(f".npy format version {major} is not read here")
        reader = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, fortran, dtype = reader(stream, max_header_size=_MAX_HEADER_BYTES)
    except (ValueError, TypeError, SyntaxError, OSError, EOFError, zlib.error) as exc:
        raise IngestError(f"{where}: not a .npy array ({_one_line(exc)})") from None
    if any(int(d) < 0 for d in shape):
        raise IngestError(f"{where}: bad shape {shape}")
    return tuple(int(d) for d in shape), bool(fortran), dtype


def _data_start(raw, info: zipfile.ZipInfo, where: str) -> int:
    """File offset of the entry's data: its local header's fixed part and names skipped."""
    raw.seek(info.header_offset)
    fixed = raw.read(_LOCAL_HEADER.size)
    if len(fixed) != _LOCAL_HEADER.size or fixed[:4] != b"PK\x03\x04":
        raise IngestError(f"{where}: bad zip local header")
    fields = _LOCAL_HEADER.unpack(fixed)
    return info.header_offset + _LOCAL_HEADER.size + fields[10] + fields[11]


# -- byte streams -----------------------------------------------------------------------------

class _MemberBytes:
    """The data bytes of a member from byte ``start`` on, read into caller buffers."""

    def __init__(self, member: NpyMember, start: int, piece_bytes: int = PIECE_BYTES):
        self.member, self.piece = member, max(1, int(piece_bytes))
        self.left = member.nbytes - start
        self._archive = self._stream = self._file = None
        self._crc: int | None = None
        try:
            if member.stored:
                self._file = open(member.archive, "rb")  # noqa: SIM115 - closed by close()
                if start == 0:  # read from its start: the CRC can be checked at the end
                    self._file.seek(member.data_start)
                    self._crc = zlib.crc32(self._file.read(member.header_bytes))
                self._file.seek(member.data_start + member.header_bytes + start)
            else:
                self._archive = zipfile.ZipFile(member.archive)
                self._stream = self._archive.open(member.entry)
                self._discard(member.header_bytes + start)
        except BaseException:
            self.close()
            raise

    def _fail(self, exc: BaseException | None = None) -> IngestError:
        done = self.member.nbytes - self.left
        why = f" ({_one_line(exc)})" if exc is not None else ""
        return IngestError(f"{self.member.where}: truncated or corrupt member: data ends or breaks "
                           f"after {done} of {self.member.nbytes} bytes{why}")

    def _discard(self, count: int) -> None:
        while count > 0:
            try:
                data = self._stream.read(min(count, self.piece))
            except _ZIP_ERRORS as exc:
                raise self._fail(exc) from None
            if not data:
                raise self._fail()
            count -= len(data)

    def readinto(self, out: memoryview) -> None:
        """Fill ``out`` (bytes) with the next ``len(out)`` bytes, or raise :class:`IngestError`."""
        pos, size = 0, len(out)
        try:
            while pos < size:
                take = min(self.piece, size - pos)
                if self._file is not None:
                    got = self._file.readinto(out[pos:pos + take])
                    if self._crc is not None and got:
                        self._crc = zlib.crc32(out[pos:pos + got], self._crc)
                else:
                    data = self._stream.read(take)
                    got = len(data)
                    out[pos:pos + got] = data
                if not got:
                    raise self._fail()
                pos += got
                self.left -= got
            if self.left == 0:
                self._check_end()
        except IngestError:
            raise
        except _ZIP_ERRORS as exc:
            raise self._fail(exc) from None

    def _check_end(self) -> None:
        """At the member's end: its CRC-32 (zipfile checks a compressed member's on EOF)."""
        if self._stream is not None:
            if self._stream.read(1):
                raise IngestError(f"{self.member.where}: more data than its header's shape")
        elif self._crc is not None and self._crc != self.member.crc:
            raise IngestError(f"{self.member.where}: CRC-32 mismatch (corrupt member)")

    def close(self) -> None:
        for handle in (self._stream, self._archive, self._file):
            if handle is not None:
                handle.close()


# -- rows -------------------------------------------------------------------------------------

def _native(block: np.ndarray) -> np.ndarray:
    return block if block.dtype.isnative else block.astype(block.dtype.newbyteorder("="))


def iter_row_blocks(member: NpyMember, block_bytes: int = DEFAULT_BLOCK_BYTES, *,
                    piece_bytes: int = PIECE_BYTES) -> Iterator[tuple[int, np.ndarray]]:
    """``(first_row, block)`` over the rows of ``member``: ``block`` is a fresh array of shape
    ``(k,) + shape[1:]`` (native byte order) of about ``block_bytes`` bytes, whole rows only.

    ``piece_bytes``: bytes inflated per read (need not divide a row)."""
    if member.fortran_order and member.row_elements > 1 and len(member.shape) > 1:
        raise IngestError(f"{member.where}: Fortran-ordered array of shape {member.shape} cannot be "
                          f"read in row blocks (save it in C order)")
    if not member.shape:
        raise IngestError(f"{member.where}: a scalar, expected an array of rows")
    n, row_shape = member.num_rows, member.shape[1:]
    row_bytes = member.row_elements * member.dtype.itemsize
    per_block = n if row_bytes == 0 else max(1, int(block_bytes) // row_bytes)
    if n == 0:
        return
    reader = _MemberBytes(member, 0, piece_bytes)
    try:
        for start in range(0, n, per_block):
            count = min(per_block, n - start)
            block = np.empty((count,) + row_shape, dtype=member.dtype)
            reader.readinto(memoryview(block.reshape(-1).view(np.uint8)))
            yield start, _native(block)
    finally:
        reader.close()


def read_whole(member: NpyMember, max_bytes: int = SMALL_MAX_BYTES) -> np.ndarray:
    """The whole (small) member as an array; :class:`IngestError` when it exceeds ``max_bytes``.

    >>> import tempfile, os
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "c.npz")
    >>> np.savez(path, num_nodes_list=np.array([5]))
    >>> read_whole(list_members(path)["num_nodes_list"]).tolist()
    [5]
    >>> tmp.cleanup()
    """
    if member.nbytes > max_bytes:
        raise IngestError(f"{member.where}: {member.nbytes} bytes, more than the {max_bytes} "
                          f"expected of this member")
    flat = np.empty(int(np.prod(member.shape, dtype=object)), dtype=member.dtype)
    reader = _MemberBytes(member, 0)
    try:
        reader.readinto(memoryview(flat.view(np.uint8)))
    finally:
        reader.close()
    if member.fortran_order:
        return _native(flat.reshape(member.shape[::-1]).T)
    return _native(flat.reshape(member.shape))


# -- edge index -------------------------------------------------------------------------------

DEFAULT_EDGE_BLOCK = 1 << 21
"""Edges per block of :func:`iter_edge_blocks` (16 MiB per int64 row)."""


def check_edge_index(member: NpyMember) -> int:
    """``E`` of a ``(2, E)`` integer ``edge_index``; :class:`IngestError` otherwise."""
    if len(member.shape) != 2 or member.shape[0] != 2:
        raise IngestError(f"{member.where}: edge_index must have shape (2, E), got {member.shape}")
    if member.dtype.kind not in "iu":
        raise IngestError(f"{member.where}: dtype {member.dtype}, expected integer node IDs")
    return int(member.shape[1])


def _ids(block: np.ndarray, member: NpyMember, first: int) -> np.ndarray:
    block = _native(block)
    if block.dtype == np.uint64 and block.size and int(block.max()) > np.iinfo(np.int64).max:
        bad = int(np.argmax(block > np.iinfo(np.int64).max))
        raise IngestError(f"{member.where}: edge {first + bad}: ID {block[bad]} does not fit in int64")
    return block.astype(np.int64, copy=False)


def iter_edge_blocks(member: NpyMember, block_edges: int = DEFAULT_EDGE_BLOCK, *,
                     piece_bytes: int = PIECE_BYTES) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """``(first_edge, src, dst)`` blocks (fresh int64 arrays of at most ``block_edges``) of a
    ``(2, E)`` ``edge_index`` member, never holding more than one block of each row."""
    num_edges = check_edge_index(member)
    block_edges = max(1, int(block_edges))
    if num_edges == 0:
        return
    if member.fortran_order:  # (src, dst) pairs, one after the other
        for first, pairs in iter_row_blocks(_as_pairs(member), block_edges * 2 * member.dtype.itemsize,
                                            piece_bytes=piece_bytes):
            pairs = _ids(pairs, member, first)
            yield first, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])
        return
    row_bytes = num_edges * member.dtype.itemsize
    held: list[_MemberBytes] = []

    def fill_dst(out: memoryview) -> None:
        if not held:  # positioning (inflating row 0 to discard it) overlaps the first src read
            held.append(_MemberBytes(member, row_bytes, piece_bytes))
        held[0].readinto(out)

    src_reader = _MemberBytes(member, 0, piece_bytes)
    pool = ThreadPoolExecutor(1, thread_name_prefix="npz-dst")
    try:
        for first in range(0, num_edges, block_edges):
            count = min(block_edges, num_edges - first)
            src = np.empty(count, dtype=member.dtype)
            dst = np.empty(count, dtype=member.dtype)
            job = pool.submit(fill_dst, memoryview(dst.view(np.uint8)))
            try:
                src_reader.readinto(memoryview(src.view(np.uint8)))
            except BaseException:
                job.cancel()
                wait([job])
                raise
            job.result()
            yield first, _ids(src, member, first), _ids(dst, member, first)
    finally:
        pool.shutdown(wait=True)
        for reader in [src_reader, *held]:
            reader.close()


def _as_pairs(member: NpyMember) -> NpyMember:
    """A Fortran-ordered ``(2, E)`` member seen as the C-ordered ``(E, 2)`` array it stores."""
    from dataclasses import replace

    return replace(member, shape=(member.shape[1], 2), fortran_order=False)
