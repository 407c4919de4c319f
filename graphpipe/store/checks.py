"""The invariants a reader verifies before trusting a store's bytes.

A store is untrusted input: it may be corrupt (a flipped byte, a truncated chunk) or
crafted. The Numba kernels that read it (sampling, gather) index arrays with values
taken from the store, so before any of them runs, a reader checks what makes every
such index in bounds. Three layers, each run once and as late as it can be:

``check_manifest`` (at :meth:`GraphStore.open`; pure Python on the parsed manifest, no
I/O beyond it, ``O(1)``: a few microseconds, a few percent of reading the manifest):
    counts are non-negative integers; the arrays the readers index with have the shapes
    and dtypes the counts imply (``csc/indptr`` ``(N+1,)`` int64, ``csc/indices`` and
    ``csc/edge_id`` ``(E,)`` integers, the same for ``csr/``; ``node/feat`` and
    ``node/label`` ``N`` rows of a numeric dtype, the feature width that of
    ``node_features``); the value range recorded at ingest for ``*/indices`` lies in
    ``[0, N)``. Other arrays (``derived/...``) are checked on their first read.

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
field. ``GRAPHPIPE_SKIP_STORE_CHECKS=1`` turns the checks off, for the benchmark that
measures their cost (``benchmarks/store_open.py``) and for debugging only; never in use.
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
# Runs on every open: plain dict and int work, dtype strings parsed once per process, paths
# built only for a message (a few microseconds for a store of ten arrays).
_DTYPES: dict[str, np.dtype] = {}


def _fail(path: str | os.PathLike, message: str) -> CorruptStoreError:
    return CorruptStoreError(f"{Path(path) / 'manifest.json'}: {message}")


def _dtype(value: Any) -> np.dtype | None:
    """The NumPy dtype named by ``value`` when it is a numeric little-endian one, else None."""
    if not isinstance(value, str):
        return None
    dtype = _DTYPES.get(value)
    if dtype is None:
        try:
            dtype = np.dtype(value)
        except TypeError:
            return None
        if dtype.kind not in "biuf" or dtype.byteorder == ">":
            return None
        _DTYPES[value] = dtype
    return dtype


_TOPOLOGY_KINDS = {"indptr": "i", "indices": "iu", "edge_id": "iu"}


def _known_entry(arrays: dict[str, Any], key: str, rows: int, kinds: str, ndim: int | None,
                 path: str | os.PathLike, counts: tuple[int, int]) -> tuple[list, np.dtype] | None:
    """``(shape, dtype)`` of array ``key`` when the manifest lists it, after checking that it
    has ``rows`` rows (and ``ndim`` dimensions) and a dtype of one of ``kinds``."""
    meta = arrays.get(key)
    if meta is None:
        return None
    shape = meta.get("shape") if isinstance(meta, dict) else None
    dtype = _dtype(meta.get("dtype")) if isinstance(meta, dict) else None
    if type(shape) is not list or not shape or type(shape[0]) is not int or shape[0] != rows \
            or (ndim is not None and len(shape) != ndim):
        raise _fail(path, f"array {key!r} has shape {shape!r}, but the manifest's num_nodes = "
                          f"{counts[0]} and num_edges = {counts[1]} give it {rows} rows")
    if dtype is None or dtype.kind not in kinds or (key.endswith("indptr") and dtype.itemsize != 8):
        raise _fail(path, f"array {key!r} has dtype {meta.get('dtype')!r}, which it cannot have")
    return shape, dtype


def check_range(arrays: dict[str, Any], key: str, n: int, e: int, path: str | os.PathLike,
                what: str | None = None) -> None:
    """The node-ID ``range`` recorded for array ``key`` (if any) is ``[min, max]`` within
    ``[0, n)`` (``what`` names those nodes in the error; default ``num_nodes = n``)."""
    recorded = arrays[key].get("range")
    if recorded is None:
        return
    if not (type(recorded) is list and len(recorded) == 2 and all(type(v) is int for v in recorded)):
        raise _fail(path, f"array {key!r} field 'range' must be [min, max] (got {recorded!r})")
    if e and (recorded[0] < 0 or recorded[1] >= n):
        raise _fail(path, f"array {key!r} holds node IDs in {recorded}, outside [0, {n}) for "
                          f"{what or f'num_nodes = {n}'}")


def check_manifest(manifest: dict[str, Any], path: str | os.PathLike) -> None:
    """Raise :class:`CorruptStoreError` unless the counts are valid and the arrays the
    readers index with (topology, features, labels) have the shapes and dtypes they imply.
    Other arrays are checked on their first read (:func:`check_array_metadata`)."""
    n, e = manifest.get("num_nodes"), manifest.get("num_edges")
    for field, value in (("num_nodes", n), ("num_edges", e)):
        if type(value) is not int or value < 0:
            raise _fail(path, f"field {field!r} must be an integer >= 0 (got {value!r})")
    arrays = manifest.get("arrays")
    if not isinstance(arrays, dict) or not isinstance(manifest.get("tables", {}), dict):
        raise _fail(path, "fields 'arrays' and 'tables' must be objects")
    for prefix in ("csc", "csr"):
        for name, kinds in _TOPOLOGY_KINDS.items():
            rows = n + 1 if name == "indptr" else e
            if _known_entry(arrays, f"{prefix}/{name}", rows, kinds, 1, path, (n, e)) \
                    and name == "indices":
                check_range(arrays, f"{prefix}/indices", n, e, path)
    _known_entry(arrays, "node/label", n, "biuf", None, path, (n, e))
    feat = _known_entry(arrays, "node/feat", n, "biuf", None, path, (n, e))
    dim = (manifest.get("node_features") or {}).get("dim") if feat else None
    if dim is not None and (feat[0][1:] or [1])[0] != dim:
        raise _fail(path, f"array 'node/feat' has shape {feat[0]}, but field 'node_features' "
                          f"says dim = {dim!r}")


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
    try:
        expected = {"shape": list(entry["shape"]), "dtype": str(np.dtype(entry["dtype"])),
                    "chunks": list(entry.get("chunks", chunks))}
    except (KeyError, TypeError, ValueError):
        raise _fail(path, f"array {key!r} has no valid 'shape' or 'dtype' (got {entry!r})") from None
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
