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

from graphpipe.store.errors import CorruptStoreError, StoreError
from graphpipe.store.schema import (
    EdgeType,
    as_etype,
    check_name,
    etype_key,
    node_key,
    rel_key,
    split_key,
)

__all__ = [
    "INDEX_ARRAYS",
    "check_array_metadata",
    "check_manifest",
    "check_relation",
    "check_topology",
    "check_typed_manifest",
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


def _known_entry(arrays: dict[str, Any], key: str, rows: int | None, kinds: str, ndim: int | None,
                 path: str | os.PathLike,
                 counts: tuple[int, int] | None = None) -> tuple[list, np.dtype] | None:
    """``(shape, dtype)`` of array ``key`` when the manifest lists it, after checking that it
    has ``rows`` rows (any when None; ``counts``: the homogeneous ``(num_nodes, num_edges)``
    they come from, for the message), ``ndim`` dimensions and a dtype of one of ``kinds``."""
    meta = arrays.get(key)
    if meta is None:
        return None
    shape = meta.get("shape") if isinstance(meta, dict) else None
    dtype = _dtype(meta.get("dtype")) if isinstance(meta, dict) else None
    if type(shape) is not list or not shape or not all(type(s) is int and s >= 0 for s in shape) \
            or (rows is not None and shape[0] != rows) or (ndim is not None and len(shape) != ndim):
        if counts is not None:
            raise _fail(path, f"array {key!r} has shape {shape!r}, but the manifest's num_nodes = "
                              f"{counts[0]} and num_edges = {counts[1]} give it {rows} rows")
        raise _fail(path, f"array {key!r} has shape {shape!r}, expected {rows} rows"
                          + (f" and {ndim} dimension(s)" if ndim else ""))
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


# -- a typed manifest: node types and relations (key names: schema.py) -------------------------
def _counts(manifest: dict[str, Any], path: str | os.PathLike) -> dict[str, int]:
    node_types = manifest.get("node_types")
    if not isinstance(node_types, dict) or not node_types:
        raise _fail(path, "field 'node_types' must be a non-empty object {type: count}")
    for ntype, count in node_types.items():
        try:
            check_name(ntype, "node type")
        except StoreError as exc:
            raise _fail(path, f"field 'node_types': {exc}") from None
        if type(count) is not int or count < 0:
            raise _fail(path, f"field 'node_types': count of {ntype!r} must be an integer >= 0 "
                              f"(got {count!r})")
    return node_types


def _etypes(manifest: dict[str, Any], counts: dict[str, int],
            path: str | os.PathLike) -> list[EdgeType]:
    raw = manifest.get("edge_types")
    if not isinstance(raw, list):
        raise _fail(path, "field 'edge_types' must be a list of [src, rel, dst]")
    etypes = []
    for item in raw:
        try:
            etype = as_etype(item)
        except StoreError as exc:
            raise _fail(path, f"field 'edge_types': {exc}") from None
        if etype[0] not in counts or etype[2] not in counts:
            raise _fail(path, f"field 'edge_types': {list(etype)} names a node type not in "
                              f"'node_types'")
        etypes.append(etype)
    if len(set(etypes)) != len(etypes):
        raise _fail(path, "field 'edge_types' lists a relation twice")
    return etypes


def _check_relation_arrays(arrays: dict[str, Any], etype: EdgeType, counts: dict[str, int],
                    path: str | os.PathLike) -> None:
    n_src, n_dst = counts[etype[0]], counts[etype[2]]
    if rel_key(etype, "csc/indptr") not in arrays or rel_key(etype, "csc/indices") not in arrays:
        raise _fail(path, f"relation {etype_key(etype)!r} has no csc/indptr or csc/indices")
    _known_entry(arrays, rel_key(etype, "csc/indptr"), n_dst + 1, "i", 1, path)
    num_edges = _known_entry(arrays, rel_key(etype, "csc/indices"), None, "iu", 1, path)[0][0]
    _known_entry(arrays, rel_key(etype, "csc/edge_id"), num_edges, "iu", 1, path)
    _known_entry(arrays, rel_key(etype, "time"), num_edges, "iu", 1, path)
    _known_entry(arrays, rel_key(etype, "edge_feat"), num_edges, "biuf", None, path)
    check_range(arrays, rel_key(etype, "csc/indices"), n_src, num_edges, path, repr(etype[0]))


def check_typed_manifest(manifest: dict[str, Any], path: str | os.PathLike) -> None:
    """Raise :class:`CorruptStoreError` unless the typed fields are consistent: type counts
    are integers >= 0, every relation names known types and has a CSC whose ``indptr`` has
    ``N_dst + 1`` int64 entries and whose recorded index range lies in ``[0, N_src)``, and the
    per-type arrays have ``N_t`` rows."""
    counts = _counts(manifest, path)
    arrays = manifest["arrays"]
    for etype in _etypes(manifest, counts, path):
        _check_relation_arrays(arrays, etype, counts, path)
    for ntype, n in counts.items():
        _known_entry(arrays, node_key(ntype, "feat"), n, "f", 2, path)
        _known_entry(arrays, node_key(ntype, "label"), n, "iu", 1, path)
        _known_entry(arrays, node_key(ntype, "time"), n, "iu", 1, path)
    target = manifest.get("target_type")
    if target is not None and target not in counts:
        raise _fail(path, f"field 'target_type' is {target!r}, not one of {sorted(counts)}")
    splits = manifest.get("typed_splits", {})
    if not isinstance(splits, dict) or any(t not in counts or not isinstance(s, dict)
                                           for t, s in splits.items()):
        raise _fail(path, "field 'typed_splits' must be {node type: {split: count}}")
    for ntype, names in splits.items():
        for name in names:
            _known_entry(arrays, split_key(ntype, name), names[name], "iu", 1, path)


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
                   where: str = "", num_sources: int | None = None) -> None:
    """Raise ``error`` unless ``indptr``/``indices`` form a CSC (or CSR) of ``num_nodes``
    nodes whose every slice and index is in bounds (see the module docstring).

    Args:
        indptr: ``(N+1,)`` int64 offsets; indices: ``(E,)`` integer node IDs.
        recorded: ``[min, max]`` of the indices recorded at ingest, checked when given.
        where: a prefix for the message (the store path).
        num_sources: the bound of the indices when it is not ``num_nodes`` (a relation
            between two node types: ``num_nodes`` destinations, sources in ``[0, num_sources)``).
    """
    prefix = f"{where}: " if where else ""
    n_src = num_nodes if num_sources is None else num_sources
    if indptr.ndim != 1 or indptr.shape[0] != num_nodes + 1 or indptr.dtype != np.int64:
        raise error(f"{prefix}{name}/indptr is {list(indptr.shape)} {indptr.dtype}, expected "
                    f"[{num_nodes + 1}] int64")
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise error(f"{prefix}{name}/indices is {list(indices.shape)} {indices.dtype}, expected a "
                    f"one-dimensional integer array")
    if indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        indices = indices.astype(np.int64)
    from graphpipe.store._scan import scan_csc

    code, pos, lo, hi = scan_csc(indptr, indices, np.int64(n_src))
    if code:
        messages = {
            1: lambda: f"{name}/indptr starts at {int(indptr[0])}, expected 0",
            2: lambda: f"{name}/indptr decreases at node {pos}",
            3: lambda: f"{name}/indptr ends at {int(indptr[-1])}, but {name}/indices has "
                       f"{indices.shape[0]} entries",
            4: lambda: f"{name}/indices entry {pos} = {int(indices[pos])} is outside [0, {n_src})",
        }
        raise error(prefix + messages[code]())
    if recorded is not None and indices.shape[0] and [int(lo), int(hi)] != list(recorded):
        raise error(f"{prefix}{name}/indices holds node IDs in [{int(lo)}, {int(hi)}], but the "
                    f"manifest records {list(recorded)}")


def check_relation(indptr: np.ndarray, indices: np.ndarray, etype: EdgeType,
                   counts: dict[str, int], recorded: list[int] | None, *, where: str = "") -> None:
    """Raise :class:`CorruptStoreError` unless ``(indptr, indices)`` is a CSC of ``counts[dst]``
    destinations over sources in ``[0, counts[src])`` (and its range is ``recorded``)."""
    check_topology(indptr, indices, counts[etype[2]], name=f"rel/{etype_key(etype)}/csc",
                   recorded=recorded, where=where, num_sources=counts[etype[0]])
