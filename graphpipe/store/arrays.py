"""Zarr v3 arrays of a store: creation, zero-copy views, checksums.

Uncompressed arrays are stored with zarr's plain ``bytes`` codec (little
endian), so each chunk file is the raw C-order bytes of that chunk. A reader
memory-maps those files instead of going through zarr: one-dimensional arrays
(topology, labels, permutations) are a single chunk, hence one zero-copy view;
feature matrices are chunked by rows and exposed as one view per chunk.
Compressed arrays (``compression="zstd"``) are read through zarr.
"""

from __future__ import annotations

import errno
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import xxhash
import zarr

from graphpipe.store import _fetch
from graphpipe.store.errors import CorruptStoreError, StoreError
from graphpipe.store.generation import confirm

CHUNK_TARGET_BYTES = 64 << 20
"""Target size of one feature chunk (bytes); rows per chunk follow from the row width."""
COMPRESSED_1D_CHUNK = 1 << 22
"""Elements per chunk of a compressed one-dimensional array."""
_HASH_BLOCK = 16 << 20


def default_chunk_rows(row_bytes: int, target_bytes: int = CHUNK_TARGET_BYTES) -> int:
    """Rows per chunk so that one chunk holds about ``target_bytes``."""
    return max(1, target_bytes // max(1, row_bytes))


def _compressors(compression: str | None) -> Any:
    if compression is None or compression == "none":
        return None
    if compression == "zstd":
        return zarr.codecs.ZstdCodec(level=3)
    raise StoreError(f"compression {compression!r} is not supported (use None or 'zstd')")


def create_array(
    root: str | os.PathLike,
    key: str,
    shape: tuple[int, ...],
    dtype: np.dtype | str,
    *,
    chunk_rows: int | None = None,
    compression: str | None = None,
) -> zarr.Array:
    """Create the zarr array ``key`` under ``root`` and return it for writing.

    Uncompressed one-dimensional arrays get one chunk (so they memory-map as one
    view); two-dimensional arrays are chunked by rows (``chunk_rows``, default
    about 64 MiB per chunk). Empty chunks are always written, so every chunk file
    exists and can be memory-mapped.
    """
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    row_bytes = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else dtype.itemsize
    if chunk_rows is None:
        if len(shape) == 1:
            chunk_rows = shape[0] if compression is None else COMPRESSED_1D_CHUNK
        else:
            chunk_rows = default_chunk_rows(row_bytes)
    chunk_rows = max(1, min(int(chunk_rows), max(1, shape[0])))
    chunks = (chunk_rows,) + tuple(max(1, s) for s in shape[1:])
    group = zarr.open_group(str(root), mode="a")
    return group.create_array(
        key,
        shape=shape,
        dtype=dtype,
        chunks=chunks,
        compressors=_compressors(compression),
        fill_value=0,
        config={"write_empty_chunks": True},
        overwrite=True,
    )


def create_raw_array(
    root: str | os.PathLike, key: str, shape: tuple[int, ...], dtype: np.dtype | str
) -> np.memmap | np.ndarray:
    """Create an uncompressed single-chunk array and return a writable memory map of its chunk.

    Used by out-of-core builders that scatter into an array larger than memory:
    the memory map *is* the zarr chunk file, so no copy is made at commit.
    """
    dtype = np.dtype(dtype)
    shape = tuple(int(s) for s in shape)
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little endian
        raise StoreError("raw arrays need a little-endian machine")
    create_array(root, key, shape, dtype, chunk_rows=max(1, shape[0]))
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=dtype)
    path = chunk_paths(root, key, shape, (max(1, shape[0]),) + shape[1:])[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    _reserve(path, math.prod(shape) * dtype.itemsize)
    return np.memmap(path, dtype=dtype, mode="r+", shape=shape)


def _reserve(path: Path, nbytes: int) -> None:
    """Create ``path`` with ``nbytes`` allocated on disk, so a full disk is an ``OSError``
    (ENOSPC) here rather than a SIGBUS when a page of the memory map is first written."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, nbytes)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.ftruncate(fd, nbytes)      # no fallocate on this filesystem: a sparse file
    finally:
        os.close(fd)


def chunk_grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> list[tuple[int, ...]]:
    """Chunk coordinates of an array in C order."""
    counts = [math.ceil(s / c) if s else 0 for s, c in zip(shape, chunks)]
    return [tuple(idx) for idx in np.ndindex(*counts)] if all(counts) else []


def chunk_paths(
    root: str | os.PathLike, key: str, shape: tuple[int, ...], chunks: tuple[int, ...]
) -> list[Path]:
    """Paths of the chunk files of array ``key`` (zarr v3 default key encoding), C order."""
    base = Path(root) / key / "c"
    return [base.joinpath(*map(str, coords)) for coords in chunk_grid(shape, chunks)]


def array_metadata(root: str | os.PathLike, key: str) -> dict[str, Any]:
    """The zarr v3 metadata (``zarr.json``) of array ``key``."""
    _fetch.ensure_file(root, f"{key}/zarr.json")
    path = Path(root) / key / "zarr.json"
    try:
        meta = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise CorruptStoreError(f"{path}: missing (array {key!r} is listed but not present)") from exc
    except (ValueError, OSError) as exc:  # not JSON, not UTF-8, not a file
        detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise CorruptStoreError(f"{path}: cannot be read as JSON ({detail})") from None
    confirm(root)  # read from the store this reader opened, not one that replaced it
    if not isinstance(meta, dict) or meta.get("node_type") != "array":
        raise CorruptStoreError(f"{path}: not a zarr array")
    return meta


def _is_plain_bytes(meta: dict[str, Any]) -> bool:
    codecs = meta.get("codecs", [])
    return (
        len(codecs) == 1
        and codecs[0].get("name") == "bytes"
        and codecs[0].get("configuration", {}).get("endian", "little") == "little"
        and sys.byteorder == "little"
        and meta.get("chunk_key_encoding", {}).get("name") == "default"
        and meta.get("chunk_key_encoding", {}).get("configuration", {}).get("separator", "/") == "/"
    )


def _shape_chunks(meta: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    shape = tuple(meta["shape"])
    chunks = tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])
    return shape, chunks


def open_chunk_views(root: str | os.PathLike, key: str) -> tuple[list[np.ndarray], int] | None:
    """Read-only memory maps of each chunk of an uncompressed array, cut to the array's extent.

    Returns ``(views, chunk_rows)`` where ``views[i]`` holds rows
    ``[i*chunk_rows, min((i+1)*chunk_rows, n))``, or ``None`` when the array is
    compressed (then read it with :func:`read_array`).
    """
    _fetch.ensure_array(root, key)
    meta = array_metadata(root, key)
    if not _is_plain_bytes(meta):
        return None
    shape, chunks = _shape_chunks(meta)
    dtype = np.dtype(meta["data_type"])
    if len(shape) > 1 and tuple(chunks[1:]) != tuple(shape[1:]):
        return None  # chunked along columns too: not a row-chunk layout
    views = []
    paths = chunk_paths(root, key, shape, chunks)
    for i, path in enumerate(paths):
        if not path.is_file():
            confirm(root)  # the store replaced under this reader, or damaged
            raise CorruptStoreError(f"{path}: chunk file missing for array {key!r}")
        expected = math.prod(chunks) * dtype.itemsize
        if path.stat().st_size != expected:
            confirm(root)
            raise CorruptStoreError(
                f"{path}: chunk of array {key!r} has {path.stat().st_size} bytes, expected {expected}"
            )
        mm = np.memmap(path, dtype=dtype, mode="r", shape=chunks)
        rows = min(chunks[0], shape[0] - i * chunks[0])
        views.append(mm[:rows].view(np.ndarray))
    confirm(root)
    return views, int(chunks[0])


def raw_chunk_files(root: str | os.PathLike, key: str
                    ) -> tuple[list[Path], int, tuple[int, ...], np.dtype] | None:
    """``(paths, chunk_rows, shape, dtype)`` of an uncompressed row-chunked array, whose
    row ``r`` is at byte ``(r % chunk_rows) * row_bytes`` of ``paths[r // chunk_rows]``
    (what the disk tier reads with ``pread``); None when compressed or column-chunked.
    File sizes are checked as :func:`open_chunk_views` does."""
    _fetch.ensure_array(root, key)
    meta = array_metadata(root, key)
    if not _is_plain_bytes(meta):
        return None
    shape, chunks = _shape_chunks(meta)
    if len(shape) > 1 and tuple(chunks[1:]) != tuple(shape[1:]):
        return None
    dtype = np.dtype(meta["data_type"])
    paths = chunk_paths(root, key, shape, chunks)
    expected = math.prod(chunks) * dtype.itemsize
    for path in paths:
        size = path.stat().st_size if path.is_file() else -1
        if size != expected:
            confirm(root)
            raise CorruptStoreError(f"{path}: chunk of array {key!r} has "
                                    f"{'no file' if size < 0 else f'{size} bytes'}, expected {expected}")
    return paths, int(chunks[0]), shape, dtype


def read_array(root: str | os.PathLike, key: str, *, in_memory: bool = False) -> np.ndarray:
    """The whole array ``key``: a zero-copy memory map when it is one uncompressed chunk,
    otherwise a NumPy array read through zarr (concatenating chunk views when uncompressed).

    With ``in_memory`` an uncompressed array is read into process memory instead
    (:func:`load_array`): no page faults on first touch, and NumPy backs it with
    transparent huge pages, so random row reads miss the TLB far less often.
    """
    _fetch.ensure_array(root, key)
    meta = array_metadata(root, key)
    shape, _chunks = _shape_chunks(meta)
    dtype = np.dtype(meta["data_type"])
    if math.prod(shape) == 0:
        return np.zeros(shape, dtype=dtype)
    if in_memory and _is_plain_bytes(meta):
        return load_array(root, key)
    opened = open_chunk_views(root, key)
    if opened is not None:
        views, _ = opened
        if len(views) == 1:
            return views[0]
        return np.concatenate(views, axis=0)
    try:  # zarr v3 metadata only: a v2 ``.zarray`` could name numcodecs' pickle codec
        data = zarr.open_array(str(Path(root) / key), mode="r", zarr_format=3)[...]
    except Exception as exc:  # noqa: BLE001 - a chunk zarr cannot decode: name the array
        confirm(root)
        detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise CorruptStoreError(f"{Path(root) / key}: array {key!r} cannot be read ({detail})") from None
    confirm(root)
    return data


def array_nbytes(root: str | os.PathLike, key: str) -> int:
    """Bytes the array ``key`` takes in memory (shape × item size)."""
    meta = array_metadata(root, key)
    shape, _chunks = _shape_chunks(meta)
    return math.prod(shape) * np.dtype(meta["data_type"]).itemsize


def load_array(root: str | os.PathLike, key: str) -> np.ndarray:
    """An uncompressed array read whole into process memory, chunk file by chunk file.

    The destination is one ``np.empty`` allocation: NumPy advises the kernel to back
    allocations of 4 MiB and more with transparent huge pages (``MADV_HUGEPAGE``), which
    is what makes random row gathers from it faster than from a memory map of the files
    (4 KiB pages: a TLB miss, and on first touch a page fault, per random row).
    """
    _fetch.ensure_array(root, key)
    meta = array_metadata(root, key)
    if not _is_plain_bytes(meta):
        raise StoreError(f"{Path(root) / key}: array {key!r} is compressed; read it with read_array")
    shape, chunks = _shape_chunks(meta)
    dtype = np.dtype(meta["data_type"])
    out = np.empty(shape, dtype=dtype)
    if out.size == 0:
        return out
    flat_rows = out.reshape(shape[0], -1) if len(shape) > 1 else out.reshape(-1, 1)
    row_bytes = flat_rows.shape[1] * dtype.itemsize
    expected = math.prod(chunks) * dtype.itemsize
    for i, path in enumerate(chunk_paths(root, key, shape, chunks)):
        lo = i * chunks[0]
        rows = min(chunks[0], shape[0] - lo)
        target = memoryview(flat_rows[lo:lo + rows]).cast("B")
        try:
            with open(path, "rb", buffering=0) as fh:
                size = os.fstat(fh.fileno()).st_size
                if size != expected:
                    confirm(root)
                    raise CorruptStoreError(f"{path}: chunk of array {key!r} has {size} bytes, "
                                     f"expected {expected}")
                done = 0
                while done < rows * row_bytes:
                    got = fh.readinto(target[done:])
                    if not got:
                        raise CorruptStoreError(f"{path}: chunk of array {key!r} ended after {done} bytes")
                    done += got
        except FileNotFoundError:
            confirm(root)
            raise CorruptStoreError(f"{path}: chunk file missing for array {key!r}") from None
    confirm(root)
    out.setflags(write=False)  # like the memory maps: a store's arrays are read-only
    return out


def checksum_array(root: str | os.PathLike, key: str) -> str:
    """``xxh3_128:<hex>`` over the bytes of every chunk file of ``key`` in chunk order."""
    _fetch.ensure_array(root, key)
    meta = array_metadata(root, key)
    shape, chunks = _shape_chunks(meta)
    hasher = xxhash.xxh3_128()
    for path in chunk_paths(root, key, shape, chunks):
        if not path.is_file():
            raise CorruptStoreError(f"{path}: chunk file missing for array {key!r}")
        _hash_file_into(path, hasher)
    return "xxh3_128:" + hasher.hexdigest()


def checksum_file(path: str | os.PathLike) -> str:
    """``xxh3_128:<hex>`` over a whole file."""
    hasher = xxhash.xxh3_128()
    _hash_file_into(Path(path), hasher)
    return "xxh3_128:" + hasher.hexdigest()


def _hash_file_into(path: Path, hasher: Any) -> None:
    with open(path, "rb", buffering=0) as fh:
        while True:
            block = fh.read(_HASH_BLOCK)
            if not block:
                break
            hasher.update(block)


def describe_array(root: str | os.PathLike, key: str) -> dict[str, Any]:
    """The manifest entry of array ``key``: shape, dtype, chunks, compression and checksum."""
    meta = array_metadata(root, key)
    shape, chunks = _shape_chunks(meta)
    compression = None if _is_plain_bytes(meta) else "zstd"
    return {
        "shape": list(shape),
        "dtype": str(np.dtype(meta["data_type"])),
        "chunks": list(chunks),
        "compression": compression,
        "checksum": checksum_array(root, key),
    }


class RowWriter:
    """Writes a row-chunked array sequentially, one block of rows at a time.

    Uncompressed arrays are written straight into their chunk files with plain
    sequential writes (no read-modify-write, nothing held in memory beyond the
    block given); compressed ones buffer one chunk and hand it to zarr. Rows must
    arrive in order; :meth:`close` checks that exactly ``shape[0]`` arrived and
    pads the last chunk as zarr expects.
    """

    def __init__(self, root: str | os.PathLike, key: str, shape: tuple[int, ...], dtype: Any, *,
                 chunk_rows: int | None = None, compression: str | None = None):
        self.root, self.key = Path(root), key
        self.shape, self.dtype = tuple(int(s) for s in shape), np.dtype(dtype)
        self.array = create_array(root, key, self.shape, self.dtype, chunk_rows=chunk_rows,
                                  compression=compression)
        self.chunk_rows = int(self.array.chunks[0])
        self.row_shape = self.shape[1:]
        self.plain = _is_plain_bytes(array_metadata(root, key))
        self.rows_written = 0
        self._buffer = np.zeros((self.chunk_rows,) + self.row_shape, dtype=self.dtype)
        self._buffered = 0
        self._chunk_start = 0
        self._file = None

    def write(self, rows: np.ndarray) -> None:
        """Append ``rows`` (``(k,) + shape[1:]``), cast to the array's dtype."""
        rows = np.asarray(rows)
        if rows.shape[1:] != self.row_shape:
            raise StoreError(f"{self.key}: rows of shape {rows.shape[1:]}, expected {self.row_shape}")
        if self.rows_written + rows.shape[0] > self.shape[0]:
            raise StoreError(f"{self.key}: more than {self.shape[0]} rows written")
        pos = 0
        while pos < rows.shape[0]:
            take = min(rows.shape[0] - pos, self.chunk_rows - self._buffered)
            part = rows[pos:pos + take]
            if self.plain:
                self._write_plain(part)
            else:
                self._buffer[self._buffered:self._buffered + take] = part
                self._buffered += take
                if self._buffered == self.chunk_rows:
                    self._flush_compressed()
            pos += take
            self.rows_written += take

    def _write_plain(self, part: np.ndarray) -> None:
        if self._file is None:
            chunk = self.rows_written // self.chunk_rows
            path = self.root / self.key / "c" / str(chunk)
            for _ in self.row_shape:
                path = path / "0"
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "wb")  # noqa: SIM115 - held across calls, closed by close()
        np.ascontiguousarray(part, dtype=self.dtype).tofile(self._file)
        self._buffered += part.shape[0]
        if self._buffered == self.chunk_rows:
            self._finish_file()

    def _finish_file(self) -> None:
        """Close the current chunk file, starting its write-back now so the commit's fsync
        finds little left to do (the writer usually runs beside other CPU-bound stages)."""
        self._file.flush()
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(self._file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        self._file.close()
        self._file, self._buffered = None, 0

    def _flush_compressed(self) -> None:
        start = self._chunk_start
        stop = min(start + self.chunk_rows, self.shape[0])
        self.array[start:stop] = self._buffer[: stop - start]
        self._chunk_start += self.chunk_rows
        self._buffered = 0

    def close(self) -> None:
        """Finish the last chunk; raises :class:`StoreError` if rows are missing."""
        if self.rows_written != self.shape[0]:
            raise StoreError(f"{self.key}: {self.rows_written} rows written, expected {self.shape[0]}")
        if self.plain and self._file is not None:
            pad = self.chunk_rows - self._buffered
            np.zeros((pad,) + self.row_shape, dtype=self.dtype).tofile(self._file)
            self._finish_file()
        elif not self.plain and self._buffered:
            self._flush_compressed()

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
