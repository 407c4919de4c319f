"""Write a ``.npz`` archive member by member, each member from blocks of rows.

``np.savez_compressed`` needs every array whole in memory; :class:`NpzStreamWriter`
writes the same file (a ZIP64 archive of deflated ``<name>.npy`` members, as
``np.savez_compressed`` opens them: ``ZipFile(mode="w", compression=ZIP_DEFLATED,
allowZip64=True)`` and ``zf.open(name, "w", force_zip64=True)``) while holding one
block at a time, so a 57 GB feature matrix is written in a few MB of memory.
``np.load`` and OGB's readers open the result unchanged.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Self

import numpy as np


class NpzStreamWriter:
    """A ``.npz`` file written one member at a time (a context manager).

    ``compresslevel`` is zlib's (1 fastest .. 9 smallest; None = zlib's default 6,
    what ``np.savez_compressed`` uses); ``compress=False`` stores members as
    ``np.savez`` does.

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
                 compresslevel: int | None = None):
        self.path = Path(path)
        self._zip = zipfile.ZipFile(
            self.path, mode="w",
            compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
            compresslevel=compresslevel if compress else None, allowZip64=True)

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
