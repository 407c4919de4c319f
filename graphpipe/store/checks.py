"""The invariants a reader verifies before trusting a store's bytes.

A store is untrusted input: it may be corrupt (a flipped byte, a truncated chunk) or
crafted. The Numba kernels that read it (sampling, gather) index arrays with values
taken from the store, so before any of them runs, a reader checks what makes every
such index in bounds. Three layers, each run once and as late as it can be:

``check_manifest`` (at :meth:`GraphStore.open`; pure Python on the parsed manifest, no
I/O beyond it, ``O(number of arrays)``):
    counts are non-negative integers; every array entry has a shape and a NumPy dtype;
    the shapes of the known arrays agree with the counts (``csc/indptr`` is
    ``(N+1,)`` int64, ``csc/indices`` and ``csc/edge_id`` ``(E,)`` of an integer
    dtype, the same for ``csr/``; ``node/feat`` and ``node/label`` have ``N`` rows);
    the value range recorded at ingest for ``*/indices`` lies in ``[0, N)``.

``check_array_metadata`` (on the first read of an array; the array's ``zarr.json``,
which the read opens anyway, ``O(1)``):
    the shape, dtype and chunk shape in ``zarr.json`` are those of the manifest (chunk
    file sizes are then checked against them by the readers of :mod:`.arrays`).

``check_topology`` (on the first use of the topology by a kernel, cached by the
:class:`GraphStore`; one Numba pass, ``O(N + E)``, a sequential read at memory speed):
    ``indptr[0] == 0``, ``indptr`` non-decreasing, ``indptr[N] == len(indices)``,
    every index in ``[0, N)``, and when the manifest records the range of the indices,
    the actual minimum and maximum are the recorded ones.

Together they are the preconditions under which the CSC kernels stay in bounds. Every
failure raises :class:`~graphpipe.store.errors.CorruptStoreError` (a :class:`StoreError`;
exit code 2 in the CLI) with a one-line message naming the store path and the array or
field. ``GRAPHPIPE_SKIP_STORE_CHECKS=1`` turns the checks off, for the
benchmark that measures their cost and for debugging only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store.errors import CorruptStoreError

__all__ = [
    "INDEX_ARRAYS",
    "check_array_metadata",
    "check_manifest",
    "check_topology",
    "checks_enabled",
    "index_range",
]

SKIP_ENV = "GRAPHPIPE_SKIP_STORE_CHECKS"
INDEX_ARRAYS = ("csc/indices", "csr/indices")
"""Arrays whose values are node IDs: their ``[min, max]`` is recorded at ingest (``range``)."""


def checks_enabled() -> bool:
    """False only when ``GRAPHPIPE_SKIP_STORE_CHECKS`` is set to a non-empty value other than 0."""
    return os.environ.get(SKIP_ENV, "") in ("", "0")


# -- manifest ----------------------------------------------------------------------------------
def _count(manifest: dict[str, Any], field: str, where: Path) -> int:
    value = manifest.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise CorruptStoreError(f"{where}: field {field!r} must be an integer >= 0 (got {value!r})")
    return value


def _entry(manifest: dict[str, Any], key: str, where: Path) -> tuple[tuple[int, ...], np.dtype]:
    meta = manifest["arrays"][key]
    shape = meta.get("shape") if isinstance(meta, dict) else None
    if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool)
                                              and s >= 0 for s in shape):
        raise CorruptStoreError(f"{where}: array {key!r} has no valid 'shape' (got {shape!r})")
    try:
        dtype = np.dtype(meta.get("dtype"))
    except TypeError:
        raise CorruptStoreError(f"{where}: array {key!r} has no valid 'dtype' "
                         f"(got {meta.get('dtype')!r})") from None
    if dtype.kind not in "biuf" or dtype.byteorder == ">":
        raise CorruptStoreError(f"{where}: array {key!r} has dtype {dtype}, not a numeric little-endian dtype")
    return tuple(shape), dtype


def _expect_rows(key: str, shape: tuple[int, ...], rows: int, field: str, where: Path) -> None:
    if not shape or shape[0] != rows:
        raise CorruptStoreError(f"{where}: array {key!r} has shape {list(shape)}, but the manifest's "
                         f"{field} needs {rows} rows")


def _check_topology_entries(manifest: dict[str, Any], prefix: str, n: int, e: int, where: Path) -> None:
    arrays = manifest["arrays"]
    if f"{prefix}/indptr" in arrays:
        shape, dtype = _entry(manifest, f"{prefix}/indptr", where)
        if shape != (n + 1,) or dtype != np.int64:
            raise CorruptStoreError(f"{where}: array '{prefix}/indptr' is {list(shape)} {dtype}, expected "
                             f"[{n + 1}] int64 for num_nodes = {n}")
    for key in (f"{prefix}/indices", f"{prefix}/edge_id"):
        if key not in arrays:
            continue
        shape, dtype = _entry(manifest, key, where)
        if shape != (e,) or dtype.kind not in "iu":
            raise CorruptStoreError(f"{where}: array {key!r} is {list(shape)} {dtype}, expected [{e}] "
                             f"of an integer dtype for num_edges = {e}")
    key = f"{prefix}/indices"
    recorded = arrays.get(key, {}).get("range")
    if recorded is not None:
        if not (isinstance(recorded, list) and len(recorded) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in recorded)):
            raise CorruptStoreError(f"{where}: array {key!r} field 'range' must be [min, max] (got {recorded!r})")
        if e and (recorded[0] < 0 or recorded[1] >= n):
            raise CorruptStoreError(f"{where}: array {key!r} holds node IDs in {recorded}, outside "
                             f"[0, {n}) for num_nodes = {n}")


def check_manifest(manifest: dict[str, Any], path: str | os.PathLike) -> None:
    """Raise :class:`StoreError` unless the manifest's counts, shapes and dtypes agree."""
    where = Path(path) / "manifest.json"
    n, e = _count(manifest, "num_nodes", where), _count(manifest, "num_edges", where)
    if not isinstance(manifest.get("arrays"), dict) or not isinstance(manifest.get("tables", {}), dict):
        raise CorruptStoreError(f"{where}: fields 'arrays' and 'tables' must be objects")
    for key in manifest["arrays"]:
        _entry(manifest, key, where)
    for prefix in ("csc", "csr"):
        _check_topology_entries(manifest, prefix, n, e, where)
    arrays = manifest["arrays"]
    if "node/feat" in arrays:
        shape, _ = _entry(manifest, "node/feat", where)
        _expect_rows("node/feat", shape, n, "num_nodes", where)
        dim = (manifest.get("node_features") or {}).get("dim")
        if dim is not None and (shape[1:] or (1,))[0] != dim:
            raise CorruptStoreError(f"{where}: array 'node/feat' has shape {list(shape)}, but field "
                             f"'node_features' says dim = {dim!r}")
    if "node/label" in arrays:
        _expect_rows("node/label", _entry(manifest, "node/label", where)[0], n, "num_nodes", where)


# -- zarr.json against the manifest ------------------------------------------------------------
def check_array_metadata(path: str | os.PathLike, key: str, zarr_meta: dict[str, Any],
                         entry: dict[str, Any]) -> None:
    """Raise :class:`StoreError` unless ``key``'s ``zarr.json`` (``zarr_meta``) has the
    shape, dtype and chunk shape of its manifest ``entry``."""
    where = Path(path) / key / "zarr.json"
    try:
        shape = [int(s) for s in zarr_meta["shape"]]
        chunks = [int(c) for c in zarr_meta["chunk_grid"]["configuration"]["chunk_shape"]]
        dtype = np.dtype(zarr_meta["data_type"])
    except (KeyError, TypeError, ValueError):
        raise CorruptStoreError(f"{where}: fields 'shape', 'data_type' or 'chunk_grid' missing or "
                         f"invalid") from None
    if any(c < 1 for c in chunks) or len(chunks) != len(shape):
        raise CorruptStoreError(f"{where}: chunk shape {chunks} does not fit shape {shape}")
    expected = {"shape": list(entry.get("shape", [])), "dtype": str(np.dtype(entry["dtype"])),
                "chunks": list(entry.get("chunks", chunks))}
    actual = {"shape": shape, "dtype": str(dtype), "chunks": chunks}
    for field, value in actual.items():
        if value != expected[field]:
            raise CorruptStoreError(f"{where}: {field} {value} does not match the manifest's "
                             f"{expected[field]} for array {key!r}")


# -- topology ----------------------------------------------------------------------------------
def index_range(indices: np.ndarray) -> list[int] | None:
    """``[min, max]`` of an integer array (None when empty): what the writer records."""
    if indices.size == 0:
        return None
    return [int(indices.min()), int(indices.max())]


def check_topology(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, *,
                   name: str = "csc", recorded: list[int] | None = None, error: type = CorruptStoreError,
                   where: str = "") -> None:
    """Raise ``error`` unless ``indptr``/``indices`` form a CSC (or CSR) of ``num_nodes``
    nodes whose every slice and index is in bounds (see the module docstring).

    Args:
        indptr: ``(N+1,)`` int64 offsets; indices: ``(E,)`` integer node IDs.
        recorded: ``[min, max]`` of the indices recorded at ingest, checked when given.
        where: a prefix for the message (the store path).
    """
    prefix = f"{where}: " if where else ""
    if indptr.ndim != 1 or indptr.shape[0] != num_nodes + 1 or indptr.dtype != np.int64:
        raise error(f"{prefix}{name}/indptr is {list(indptr.shape)} {indptr.dtype}, expected "
                    f"[{num_nodes + 1}] int64")
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise error(f"{prefix}{name}/indices is {list(indices.shape)} {indices.dtype}, expected a "
                    f"one-dimensional integer array")
    if indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        indices = indices.astype(np.int64)
    from graphpipe.store._scan import scan_csc

    code, pos, lo, hi = scan_csc(indptr, indices, np.int64(num_nodes))
    messages = {
        1: f"{name}/indptr starts at {int(indptr[0])}, expected 0",
        2: f"{name}/indptr decreases at node {pos}",
        3: f"{name}/indptr ends at {int(indptr[-1])}, but {name}/indices has {indices.shape[0]} entries",
        4: f"{name}/indices entry {pos} = {int(indices[pos])} is outside [0, {num_nodes})",
    }
    if code:
        raise error(prefix + messages[code])
    if recorded is not None and indices.shape[0] and [int(lo), int(hi)] != list(recorded):
        raise error(f"{prefix}{name}/indices holds node IDs in [{int(lo)}, {int(hi)}], but the "
                    f"manifest records {list(recorded)}")
