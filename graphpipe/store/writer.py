"""Writing a store: :class:`StoreWriter` builds a new store atomically,
:class:`StoreEditor` adds derived arrays and tables to an existing one."""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import zarr

from graphpipe._version import __version__
from graphpipe.store import arrays as _arrays
from graphpipe.store import checks as _checks
from graphpipe.store import tables as _tables
from graphpipe.store.atomic import (
    check_destination,
    commit_directory,
    fsync_tree,
    remove_stale_temps,
    temp_sibling,
)
from graphpipe.store.errors import StoreError
from graphpipe.store.manifest import new_manifest, read_manifest, write_manifest


class StoreWriter:
    """Builds a store in a temporary sibling of ``dest`` and renames it into place on :meth:`commit`.

    Use as a context manager: leaving the block with an exception (or without
    calling :meth:`commit`) deletes the temporary tree and leaves ``dest`` as it was::

        with StoreWriter(dest, name="arxiv", overwrite=False) as w:
            w.write_array("csc/indptr", indptr)
            ...
            w.manifest["num_nodes"] = n
            w.commit()
    """

    def __init__(self, dest: str | os.PathLike, *, name: str | None = None, overwrite: bool = False):
        self.dest = Path(dest)
        self.overwrite = overwrite
        check_destination(self.dest, overwrite=overwrite)
        remove_stale_temps(self.dest)
        self.path = temp_sibling(self.dest)
        zarr.open_group(str(self.path), mode="w")
        self.manifest: dict[str, Any] = new_manifest(name or self.dest.name)
        self._committed = False
        self._closed = False

    # -- arrays -------------------------------------------------------------------------------
    def create_array(self, key: str, shape: tuple[int, ...], dtype: Any, *,
                     chunk_rows: int | None = None, compression: str | None = None) -> zarr.Array:
        """Create array ``key`` to be filled through zarr (e.g. feature rows in blocks)."""
        return _arrays.create_array(self.path, key, shape, dtype, chunk_rows=chunk_rows,
                                    compression=compression)

    def create_raw_array(self, key: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        """Create uncompressed single-chunk array ``key``; returns a writable memory map of it."""
        return _arrays.create_raw_array(self.path, key, shape, dtype)

    def write_array(self, key: str, data: np.ndarray, *, chunk_rows: int | None = None,
                    compression: str | None = None) -> None:
        """Write the in-memory array ``data`` as ``key``."""
        data = np.ascontiguousarray(data)
        if compression is None and data.ndim == 1:
            out = self.create_raw_array(key, data.shape, data.dtype)
            if data.size:
                out[...] = data
                out.flush() if hasattr(out, "flush") else None
            del out
            return
        arr = self.create_array(key, data.shape, data.dtype, chunk_rows=chunk_rows,
                                compression=compression)
        if data.size:
            chunk_bytes = arr.chunks[0] * data.itemsize * int(np.prod(data.shape[1:], dtype=np.int64))
            step = arr.chunks[0] * max(1, (64 << 20) // max(1, chunk_bytes))
            for start in range(0, data.shape[0], step):
                arr[start:start + step] = data[start:start + step]

    # -- tables -------------------------------------------------------------------------------
    def write_table(self, key: str, table: pa.Table) -> None:
        """Write an Arrow table as Parquet at ``key`` (e.g. ``tables/nodes.parquet``)."""
        _tables.write_table(self.path, key, table)

    def write_splits(self, splits: dict[str, np.ndarray]) -> None:
        """Store the splits ``{name: dense node IDs}``."""
        self.write_table(_tables.SPLITS_TABLE, _tables.splits_table(splits))
        self.manifest["splits"] = {name: len(ids) for name, ids in splits.items()}

    def write_id_map(self, external_ids: pa.Array) -> None:
        """Store the external ID of every dense node (``external_ids[d]`` for node ``d``)."""
        external_ids = pa.array(external_ids) if not isinstance(external_ids, pa.Array) else external_ids
        if pa.types.is_integer(external_ids.type):
            external_ids = external_ids.cast(pa.int64())
            kind = "int64"
        elif pa.types.is_string(external_ids.type) or pa.types.is_large_string(external_ids.type):
            external_ids = external_ids.cast(pa.string())
            kind = "string"
        else:
            raise StoreError(f"external IDs must be integers or strings, got {external_ids.type}")
        table = pa.table({"external_id": external_ids,
                          "node_id": pa.array(np.arange(len(external_ids), dtype=np.int64))})
        self.write_table(_tables.ID_MAP_TABLE, table)
        self.manifest["id_map"] = {"external_type": kind}

    # -- commit -------------------------------------------------------------------------------
    def _finalise_manifest(self) -> None:
        m = self.manifest
        m["arrays"] = {key: _arrays.describe_array(self.path, key) for key in _list_arrays(self.path)}
        from graphpipe.store.schema import is_index_array

        for key in list(_checks.INDEX_ARRAYS) + [k for k in m["arrays"] if is_index_array(k)]:
            if key in m["arrays"]:  # readers check the node IDs against it (checks.py)
                m["arrays"][key]["range"] = _checks.index_range(_arrays.read_array(self.path, key))
        m["tables"] = {key: _describe_table(self.path, key) for key in _list_tables(self.path)}
        prov = m.setdefault("provenance", {})
        prov.setdefault("graphpipe_version", __version__)
        prov.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def commit(self) -> Path:
        """Checksum everything, write the manifest, fsync and rename into place."""
        if self._closed:
            raise StoreError(f"{self.dest}: writer already closed")
        self._finalise_manifest()
        write_manifest(self.path, self.manifest)
        commit_directory(self.path, self.dest, overwrite=self.overwrite)
        self._committed = self._closed = True
        return self.dest

    def abort(self) -> None:
        """Delete the temporary tree; ``dest`` is untouched."""
        if not self._closed:
            shutil.rmtree(self.path, ignore_errors=True)
            self._closed = True

    def __enter__(self) -> StoreWriter:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if not self._committed:
            self.abort()


class StoreEditor:
    """Adds derived arrays and tables to an existing store without touching what is there.

    New entries are written under a pending directory inside the store, then
    renamed into place and recorded in the manifest (itself replaced
    atomically) on :meth:`commit`. Keys that already exist are refused unless
    ``replace=True`` was given for them, so re-running a derivation with other
    parameters adds new keys and never corrupts old ones.
    """

    def __init__(self, store_path: str | os.PathLike):
        self.root = Path(store_path)
        self.manifest = read_manifest(self.root)
        self.pending = self.root / f".pending-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.pending.mkdir()
        zarr.open_group(str(self.pending), mode="w")
        self._arrays: list[str] = []
        self._tables: list[str] = []
        self._replace: set[str] = set()
        self._closed = False

    def _check_key(self, key: str, replace: bool) -> None:
        exists = key in self.manifest["arrays"] or key in self.manifest["tables"] or (self.root / key).exists()
        if exists and not replace:
            raise StoreError(f"{self.root}: {key!r} already exists in the store")
        if replace:
            self._replace.add(key)

    def write_array(self, key: str, data: np.ndarray, *, replace: bool = False) -> None:
        """Write derived array ``key`` (uncompressed)."""
        self._check_key(key, replace)
        data = np.ascontiguousarray(data)
        if data.ndim == 1:
            out = _arrays.create_raw_array(self.pending, key, data.shape, data.dtype)
            if data.size:
                out[...] = data
            del out
        else:
            arr = _arrays.create_array(self.pending, key, data.shape, data.dtype)
            if data.size:
                arr[...] = data
        self._arrays.append(key)

    def create_array(self, key: str, shape: tuple[int, ...], dtype: Any, *,
                     replace: bool = False) -> zarr.Array:
        """Create derived array ``key`` to be filled through zarr a block of rows at a time
        (arrays too large to hand over whole); committed like :meth:`write_array`'s."""
        self._check_key(key, replace)
        self._arrays.append(key)
        return _arrays.create_array(self.pending, key, shape, dtype)

    def write_table(self, key: str, table: pa.Table, *, replace: bool = False) -> None:
        """Write derived table ``key``."""
        self._check_key(key, replace)
        _tables.write_table(self.pending, key, table)
        self._tables.append(key)

    def commit(self) -> None:
        """Move the pending entries into the store and rewrite the manifest atomically."""
        fsync_tree(self.pending)
        for key in self._arrays + self._tables:
            src, dst = self.pending / key, self.root / key
            if key in self._arrays:
                self.manifest["arrays"][key] = _arrays.describe_array(self.pending, key)
            else:
                self.manifest["tables"][key] = _describe_table(self.pending, key)
            dst.parent.mkdir(parents=True, exist_ok=True)
            _ensure_zarr_groups(self.root, key)
            if dst.exists():
                trash = self.pending / ".replaced" / key
                trash.parent.mkdir(parents=True, exist_ok=True)
                os.rename(dst, trash)
            os.rename(src, dst)
        write_manifest(self.root, self.manifest)
        shutil.rmtree(self.pending, ignore_errors=True)
        self._closed = True

    def abort(self) -> None:
        if not self._closed:
            shutil.rmtree(self.pending, ignore_errors=True)
            self._closed = True

    def __enter__(self) -> StoreEditor:  # noqa: PYI034 - Python 3.10 has no typing.Self
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self._closed:
            self.abort()


def _ensure_zarr_groups(root: Path, key: str) -> None:
    """Make every parent of ``key`` a zarr group (``zarr.json``) so zarr tools see the array."""
    parts = key.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        group_dir = root.joinpath(*parts[:i])
        if not (group_dir / "zarr.json").exists() and parts[0] != "tables":
            zarr.open_group(str(group_dir), mode="a")


def _list_arrays(root: Path) -> list[str]:
    keys = []
    for dirpath, _dirs, files in os.walk(root):
        if "zarr.json" in files:
            rel = Path(dirpath).relative_to(root).as_posix()
            if rel != "." and not rel.startswith(".") and _array_or_group(root, rel):
                keys.append(rel)
    return sorted(keys)


def _array_or_group(root: Path, key: str) -> bool:
    import json
    return json.loads((root / key / "zarr.json").read_text()).get("node_type") == "array"


def _list_tables(root: Path) -> list[str]:
    tables_dir = root / "tables"
    if not tables_dir.is_dir():
        return []
    return sorted(p.relative_to(root).as_posix() for p in tables_dir.rglob("*.parquet"))


def _describe_table(root: Path, key: str) -> dict[str, Any]:
    import pyarrow.parquet as pq

    schema = pq.read_schema(root / key)
    meta = pq.read_metadata(root / key)
    return {
        "rows": int(meta.num_rows),
        "columns": {field.name: str(field.type) for field in schema},
        "checksum": _arrays.checksum_file(root / key),
    }
