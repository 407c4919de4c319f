"""Write a ``.npz`` archive member by member, each member from blocks of rows.

``np.savez_compressed`` needs every array whole in memory; :class:`NpzStreamWriter`
writes the same file (a ZIP64 archive of deflated ``<name>.npy`` members, as
``np.savez_compressed`` opens them: ``ZipFile(mode="w", compression=ZIP_DEFLATED,
allowZip64=True)`` and ``zf.open(name, "w", force_zip64=True)``) while holding one
block at a time, so a 57 GB feature matrix is written in a few MB of memory.
``np.load`` and OGB's readers open the result unchanged.

Members are deflated by ISA-L (``isal``, a graphpipe dependency: ~30x zlib's speed
on float data, the same DEFLATE format) at level ``min(compresslevel, 3)``.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import numpy as np
from isal import isal_zlib


class NpzStreamWriter:
    """A ``.npz`` file written one member at a time (a context manager).

    ``compresslevel``: 1 fastest .. 9 smallest (ISA-L has levels 1..3: 3 is used above
    3); ``compress=False`` stores members as ``np.savez`` does.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "a.npz"
    >>> with NpzStreamWriter(path) as npz:
    ...     npz.write_blocks("x", (4, 2), np.float32,
    ...                      [np.zeros((3, 2), np.float32), np.ones((1, 2), np.float32)])
    ...     npz.write("n", np.array([4]))
    >>> with np.load(path) as data:
    ...     data["x"].tolist(), data["n"].tolist()
    ([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0]], [4])
    """

    def __init__(self, path: str | os.PathLike, *, compress: bool = True,
                 compresslevel: int = 1):
        if not 1 <= compresslevel <= 9:
            raise ValueError(f"'compresslevel' must be in 1..9 (got {compresslevel})")
        self.path = Path(path)
        self.compress = compress
        self.compresslevel = compresslevel
        self._zip = zipfile.ZipFile(
            self.path, mode="w",
            compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
            allowZip64=True)

    def write(self, name: str, array: np.ndarray) -> None:
        """Member ``name`` holding ``array`` (a small array, written whole)."""
        array = np.ascontiguousarray(array)
        self.write_blocks(name, array.shape, array.dtype, [array])

    def write_blocks(self, name: str, shape: tuple[int, ...], dtype: np.dtype | type,
                     blocks: Iterable[np.ndarray]) -> None:
        """Member ``name``: a C-order array of ``shape`` and ``dtype`` whose bytes are the
        concatenation of ``blocks`` (any shapes; their total size must be ``prod(shape)``)."""
        dtype = np.dtype(dtype)
        if dtype.hasobject:
            raise ValueError(f"{name}: object arrays cannot be written (dtype {dtype})")
        header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False,
                  "shape": tuple(int(n) for n in shape)}
        expected = int(np.prod(header["shape"], dtype=np.int64))
        written = 0
        with self._zip.open(f"{name}.npy", "w", force_zip64=True) as member:
            if self.compress:  # zipfile's own deflate is zlib; ISA-L writes the same format
                member._compressor = isal_zlib.compressobj(
                    min(max(self.compresslevel, 1), 3), isal_zlib.DEFLATED, -15)
            np.lib.format.write_array_header_2_0(member, header) if _header_too_big(header) \
                else np.lib.format.write_array_header_1_0(member, header)
            for block in blocks:
                block = np.ascontiguousarray(block, dtype=dtype)
                written += block.size
                if written > expected:
                    raise ValueError(f"{name}: blocks hold more than the {expected} values of "
                                     f"shape {header['shape']}")
                member.write(memoryview(block.reshape(-1)).cast("B"))
        if written != expected:
            raise ValueError(f"{name}: blocks hold {written} values, shape {header['shape']} "
                             f"needs {expected}")

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _header_too_big(header: dict) -> bool:
    # format 1.0 stores the header length in 2 bytes; 2.0 in 4 (numpy picks the same way)
    return len(repr(header)) > 65000
