"""Writing a store: :class:`StoreWriter` builds a new store atomically,
:class:`StoreEditor` adds derived arrays and tables to an existing one.

One writer for every store. A homogeneous store is written by key (``csc/indptr``,
``node/feat``, ...; the ingest pipeline does this). A store with node types declares them
(:meth:`StoreWriter.add_node_type`) and adds relations (:meth:`StoreWriter.add_relation`):
each relation's edge list (local IDs) becomes its own CSC, sorted like the homogeneous
store's (neighbours ascending within a destination, ties by input position), and per-edge
arrays are stored in that CSC order. Key names: :mod:`graphpipe.store.schema`. Large
relations are built by the ingest's out-of-core builder instead:
:meth:`StoreWriter.relation_sink` is a writer-like object whose ``csc/...`` keys land under
the relation, and :meth:`StoreWriter.finish_relation` records it.
"""

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
from graphpipe.store import schema as ts
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

_PERMUTE_BLOCK = 1 << 22


def csc_order(src: np.ndarray, dst: np.ndarray, num_dst: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr (num_dst+1,) int64, order (E,) int64)``: CSC slot ``k`` holds input edge
    ``order[k]``; rows by destination, neighbours ascending, ties by input position.

    >>> indptr, order = csc_order(np.array([2, 0, 1, 0]), np.array([1, 1, 0, 1]), 2)
    >>> indptr.tolist(), order.tolist()
    ([0, 1, 4], [2, 1, 3, 0])
    """
    order = np.lexsort((np.arange(src.shape[0]), src, dst))
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, order


def indices_dtype(num_nodes: int) -> np.dtype:
    """int32 when ``num_nodes < 2**31``, else int64 (as the homogeneous store)."""
    return np.dtype(np.int32) if num_nodes < 2**31 else np.dtype(np.int64)


class RelationSink:
    """What a CSC builder writes into: a writer whose keys ``csc/...`` become
    ``rel/<etype>/csc/...`` (``path`` and ``manifest`` like a :class:`StoreWriter`'s)."""

    def __init__(self, writer: StoreWriter, etype: ts.EdgeType):
        self.writer, self.etype = writer, etype
        self.path = writer.path
        self.manifest: dict[str, Any] = {}

    def _key(self, key: str) -> str:
        return ts.rel_key(self.etype, key)

    def create_raw_array(self, key: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return self.writer.create_raw_array(self._key(key), shape, dtype)

    def create_array(self, key: str, shape: tuple[int, ...], dtype: Any, **kwargs: Any) -> Any:
        return self.writer.create_array(self._key(key), shape, dtype, **kwargs)

    def write_array(self, key: str, data: np.ndarray, **kwargs: Any) -> None:
        self.writer.write_array(self._key(key), data, **kwargs)


class StoreWriter:
    """Builds a store in a temporary sibling of ``dest`` and renames it into place on :meth:`commit`.

    Use as a context manager: leaving the block with an exception (or without
    calling :meth:`commit`) deletes the temporary tree and leaves ``dest`` as it was::

        with StoreWriter(dest, name="arxiv", overwrite=False) as w:
            w.write_array("csc/indptr", indptr)
            ...
            w.manifest["num_nodes"] = n
            w.commit()

    A paper-author graph (``writes``: author -> paper), paper features, labels and a split:

    >>> import os, tempfile
    >>> from graphpipe.store import GraphStore
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "mini")
    >>> with StoreWriter(path) as w:
    ...     w.add_node_type("paper", 3)
    ...     w.add_node_type("author", 2)
    ...     w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 0, 2]))
    ...     w.write_node_array("paper", "feat", np.eye(3, dtype=np.float32))
    ...     w.write_node_array("paper", "label", np.array([1, 0, 1]))
    ...     w.write_split("paper", "train", np.array([0, 2]))
    ...     _ = w.commit()
    >>> store = GraphStore.open(path)
    >>> store.node_types, store.target_type, store.num_edges_dict
    (['paper', 'author'], 'paper', {('author', 'writes', 'paper'): 3})
    >>> [a.tolist() for a in store.typed_csc(("author", "writes", "paper"))]
    [[0, 2, 2, 3], [0, 1, 1]]
    >>> tmp.cleanup()
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
        self.num_nodes_dict: dict[str, int] = {}
        self.num_edges_dict: dict[ts.EdgeType, int] = {}
        self.target_type: str | None = None
        """The type with labels and splits (default: the only labelled type, if one is)."""
        self.splits: dict[str, dict[str, np.ndarray]] = {}
        self.labels_meta: dict[str, dict[str, Any]] = {}
        self.reverse_of: dict[ts.EdgeType, ts.EdgeType] = {}

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

    # -- node types ---------------------------------------------------------------------------
    def add_node_type(self, ntype: str, count: int) -> None:
        """Declare node type ``ntype`` with ``count`` nodes (local IDs ``0 .. count - 1``); a
        store with node types is written in the typed layout."""
        if ntype in self.num_nodes_dict:
            raise StoreError(f"node type {ntype!r} added twice")
        self.num_nodes_dict[ntype] = _check_count(ntype, count)

    # -- relations ----------------------------------------------------------------------------
    def _new_relation(self, etype: Any) -> ts.EdgeType:
        etype = ts.as_etype(etype)
        for ntype in (etype[0], etype[2]):
            if ntype not in self.num_nodes_dict:
                raise StoreError(f"relation {ts.etype_key(etype)}: node type {ntype!r} is not one "
                                 f"of {sorted(self.num_nodes_dict)}")
        if etype in self.num_edges_dict:
            raise StoreError(f"relation {ts.etype_key(etype)} added twice")
        return etype

    def add_relation(self, etype: Any, src: np.ndarray, dst: np.ndarray, *,
                     edge_feat: np.ndarray | None = None, time: np.ndarray | None = None,
                     edge_ids: bool = True) -> None:
        """Add relation ``etype`` from its edge list ``src[i] -> dst[i]`` (local IDs of the
        source and destination types); ``edge_feat`` ``(E, D)`` and ``time`` ``(E,)`` are
        in edge-list order and stored in CSC order. ``edge_ids=False`` leaves out
        ``csc/edge_id``."""
        etype = self._new_relation(etype)
        src, dst = _edge_ids(src, "src", etype), _edge_ids(dst, "dst", etype)
        if src.shape != dst.shape:
            raise StoreError(f"relation {ts.etype_key(etype)}: {src.shape[0]} sources but "
                             f"{dst.shape[0]} destinations")
        n_src, n_dst = self.num_nodes_dict[etype[0]], self.num_nodes_dict[etype[2]]
        _check_range(src, n_src, f"relation {ts.etype_key(etype)}: source", etype[0])
        _check_range(dst, n_dst, f"relation {ts.etype_key(etype)}: destination", etype[2])
        indptr, order = csc_order(src, dst, n_dst)
        self.write_array(ts.rel_key(etype, "csc/indptr"), indptr)
        self.write_array(ts.rel_key(etype, "csc/indices"), src[order].astype(indices_dtype(n_src)))
        self.write_array(ts.rel_key(etype, "csc/edge_id"), order.astype(np.int64))
        self.num_edges_dict[etype] = int(src.shape[0])
        self.write_edge_arrays(etype, edge_feat=edge_feat, time=time)
        if not edge_ids:
            self.drop_edge_ids(etype)

    def relation_sink(self, etype: Any) -> RelationSink:
        """A writer-like target for a CSC builder (keys ``csc/...`` -> the relation's);
        build over ``max(N_src, N_dst)`` nodes, then call :meth:`finish_relation`."""
        return RelationSink(self, self._new_relation(etype))

    def finish_relation(self, etype: Any, num_edges: int) -> None:
        """Record a relation built through :meth:`relation_sink`: its ``indptr`` is cut to
        ``N_dst + 1`` entries (rows past ``N_dst`` must be empty)."""
        etype = ts.as_etype(etype)
        n_dst = self.num_nodes_dict[etype[2]]
        key = ts.rel_key(etype, "csc/indptr")
        indptr = _arrays.read_array(self.path, key)
        if indptr.shape[0] != n_dst + 1:
            if indptr.shape[0] < n_dst + 1 or np.any(indptr[n_dst:] != indptr[-1]):
                raise StoreError(f"relation {ts.etype_key(etype)}: rows past {n_dst} are not empty")
            indptr = np.array(indptr[:n_dst + 1])
            shutil.rmtree(Path(self.path) / key)
            self.write_array(key, indptr)
        self.num_edges_dict[etype] = int(num_edges)

    def write_edge_arrays(self, etype: Any, *, edge_feat: Any = None, time: Any = None) -> None:
        """Store ``edge_feat`` ``(E, D)`` / ``time`` ``(E,)`` (edge-list order, any array-like
        with row indexing: a memory map is read a block at a time) in the relation's CSC order."""
        etype = ts.as_etype(etype)
        num_edges = self.num_edges_dict[etype]
        for name, values in (("edge_feat", edge_feat), ("time", time)):
            if values is None:
                continue
            if values.shape[0] != num_edges or (name == "time" and len(values.shape) != 1):
                raise StoreError(f"relation {ts.etype_key(etype)}: {name} has shape "
                                 f"{tuple(values.shape)}, expected ({num_edges}{',)' if name == 'time' else ', D)'}")
            dtype = np.dtype(np.int64) if name == "time" else np.dtype(values.dtype)
            if (name == "time" and values.dtype.kind not in "iu") or dtype.kind not in "biuf":
                raise StoreError(f"relation {ts.etype_key(etype)}: {name} has dtype {values.dtype}")
            self._permuted(ts.rel_key(etype, name), values, etype, dtype)

    def _permuted(self, key: str, values: Any, etype: ts.EdgeType, dtype: np.dtype) -> None:
        eid = _arrays.read_array(self.path, ts.rel_key(etype, "csc/edge_id"))
        shape = tuple(values.shape)
        rows = _arrays.RowWriter(self.path, key, shape, dtype,
                                 chunk_rows=max(1, shape[0]) if len(shape) > 1 else None)
        for start in range(0, shape[0], _PERMUTE_BLOCK):
            ids = np.asarray(eid[start:start + _PERMUTE_BLOCK])
            order = np.argsort(ids, kind="stable")      # read the source in ascending order
            block = np.empty((ids.shape[0],) + shape[1:], dtype=dtype)
            block[order] = np.asarray(values[ids[order]])
            rows.write(block)
        rows.close()

    def drop_edge_ids(self, etype: Any) -> None:
        """Remove the relation's ``csc/edge_id`` (before :meth:`commit`)."""
        shutil.rmtree(Path(self.path) / ts.rel_key(etype, "csc/edge_id"), ignore_errors=True)

    # -- node arrays and splits ---------------------------------------------------------------
    def write_node_array(self, ntype: str, kind: str, array: np.ndarray) -> None:
        """Store ``feat`` ``(N_t, D_t)`` (float; integer features become float32), ``label``
        ``(N_t,)`` (integer classes, -1 = unlabelled) or ``time`` ``(N_t,)`` (int64) of ``ntype``."""
        n = self._count(ntype)
        array = np.asarray(array)
        if kind == "feat":
            if array.ndim != 2 or array.shape[0] != n or array.dtype.kind not in "biuf":
                raise StoreError(f"{ntype}: features of shape {array.shape} dtype {array.dtype}, "
                                 f"expected ({n}, D) numeric")
            if array.dtype.kind != "f":
                array = array.astype(np.float32)
            self.write_array(ts.node_key(ntype, "feat"), array, chunk_rows=max(1, n))
            return
        if kind not in ("label", "time"):
            raise StoreError(f"node array kind {kind!r} is not one of feat, label, time")
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.shape != (n,) or array.dtype.kind not in "iu":
            raise StoreError(f"{ntype}: {kind} of shape {array.shape} dtype {array.dtype}, "
                             f"expected ({n},) integers")
        array = array.astype(np.int64)
        if kind == "label":
            if array.size and array.min() < -1:
                raise StoreError(f"{ntype}: label {int(array.min())} (classes are >= 0, -1 = unlabelled)")
            self.labels_meta[ntype] = {"num_classes": int(array.max(initial=-1)) + 1,
                                       "task_type": "multiclass classification"}
        self.write_array(ts.node_key(ntype, kind), array)

    def feature_rows(self, ntype: str, dim: int, dtype: Any) -> _arrays.RowWriter:
        """A :class:`RowWriter` for ``ntype``'s features written a row block at a time (one
        chunk file, so the reader memory-maps it whole); call ``close()`` when done."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise StoreError(f"{ntype}: feature dtype {dtype} is not a float dtype")
        n = self._count(ntype)
        return _arrays.RowWriter(self.path, ts.node_key(ntype, "feat"), (n, int(dim)), dtype,
                                 chunk_rows=max(1, n))

    def write_split(self, ntype: str, name: str, ids: np.ndarray) -> None:
        """Store split ``name`` of ``ntype`` (local IDs in ``[0, N_t)``, each once; order kept)."""
        n = self._count(ntype)
        ids = np.asarray(ids)
        if ids.ndim == 2 and ids.shape[1] == 1:
            ids = ids[:, 0]
        if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
            raise StoreError(f"{ntype}: split {name!r} must be a 1-D array of integer IDs")
        ids = ids.astype(np.int64)
        _check_range(ids, n, f"{ntype}: split {name!r}", ntype)
        if np.unique(ids).size != ids.size:
            raise StoreError(f"{ntype}: split {name!r} lists a node twice")
        for other, other_ids in self.splits.get(ntype, {}).items():
            common = np.intersect1d(ids, other_ids)
            if common.size:
                raise StoreError(f"{ntype}: splits {other!r} and {name!r} share {common.size} node(s)")
        self.write_array(ts.split_key(ntype, name), ids)
        self.splits.setdefault(ntype, {})[name] = ids

    def write_typed_id_map(self, ntype: str, external_ids: Any) -> None:
        """Store the external ID (int64 or string) of every node of ``ntype`` (row = local ID)
        as the table ``typed/<ntype>/id_map.parquet``."""
        import pyarrow as pa

        n = self._count(ntype)
        ids = external_ids if isinstance(external_ids, pa.Array) else pa.array(external_ids)
        if len(ids) != n:
            raise StoreError(f"{ntype}: {len(ids)} external IDs, expected {n}")
        ids = ids.cast(pa.int64() if pa.types.is_integer(ids.type) else pa.string())
        table = pa.table({"external_id": ids, "node_id": pa.array(np.arange(n, dtype=np.int64))})
        self.write_table(ts.id_map_key(ntype), table)

    def _count(self, ntype: str) -> int:
        if ntype not in self.num_nodes_dict:
            raise StoreError(f"node type {ntype!r} is not one of {sorted(self.num_nodes_dict)}")
        return self.num_nodes_dict[ntype]

    # -- commit -------------------------------------------------------------------------------
    def _finalise_manifest(self) -> None:
        m = self.manifest
        m["arrays"] = {key: _arrays.describe_array(self.path, key) for key in _list_arrays(self.path)}
        for key in list(_checks.INDEX_ARRAYS) + [k for k in m["arrays"] if ts.is_index_array(k)]:
            if key in m["arrays"]:  # readers check the node IDs against it (checks.py)
                m["arrays"][key]["range"] = _checks.index_range(_arrays.read_array(self.path, key))
        m["tables"] = {key: _describe_table(self.path, key) for key in _list_tables(self.path)}
        for ntype in self.num_nodes_dict:  # typed ID maps live beside their type's arrays
            key = ts.id_map_key(ntype)
            if (Path(self.path) / key).is_file():
                m["tables"][key] = _describe_table(Path(self.path), key)
        prov = m.setdefault("provenance", {})
        prov.setdefault("graphpipe_version", __version__)
        prov.setdefault("created", _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def commit(self) -> Path:
        """Checksum everything, write the manifest (with the node types, relations and
        splits when types were added), fsync and rename into place."""
        if self._closed:
            raise StoreError(f"{self.dest}: writer already closed")
        if self.num_nodes_dict:
            self._record_types()
        self._finalise_manifest()
        write_manifest(self.path, self.manifest)
        commit_directory(self.path, self.dest, overwrite=self.overwrite)
        self._committed = self._closed = True
        return self.dest

    def _record_types(self) -> None:
        """Types, relations and splits into the manifest (:mod:`graphpipe.store.schema`)."""
        m = self.manifest
        m["num_nodes"] = int(sum(self.num_nodes_dict.values()))
        m["num_edges"] = int(sum(self.num_edges_dict.values()))
        m["node_types"] = dict(self.num_nodes_dict)
        m["edge_types"] = [list(e) for e in self.num_edges_dict]
        target = self.target_type
        if target is None and len(self.labels_meta) == 1:
            target = next(iter(self.labels_meta))
        m["target_type"] = target
        m["typed_splits"] = {t: {k: int(v.size) for k, v in s.items()} for t, s in self.splits.items()}
        m["typed_labels"] = self.labels_meta
        if self.reverse_of:  # relation -> the relation it reverses (ingest --add-reverse-edges)
            m["reverse_edge_types"] = {ts.etype_key(r): ts.etype_key(f) for r, f in self.reverse_of.items()}

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


class TypedStoreWriter(StoreWriter):
    """A :class:`StoreWriter` whose node types are given up front: ``num_nodes_dict``
    ``{ntype: N_t}`` (each :meth:`StoreWriter.add_node_type`), ``target_type`` the type with
    labels and splits.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with TypedStoreWriter(os.path.join(tmp.name, "s"), {"paper": 2}, target_type="paper") as w:
    ...     w.add_relation(("paper", "cites", "paper"), np.array([1]), np.array([0]))
    ...     path = w.commit()
    >>> from graphpipe.store import GraphStore
    >>> GraphStore.open(path).num_edges_dict
    {('paper', 'cites', 'paper'): 1}
    >>> tmp.cleanup()
    """

    def __init__(self, dest: str | os.PathLike, num_nodes_dict: dict[str, int], *,
                 name: str | None = None, overwrite: bool = False,
                 target_type: str | None = None):
        if not isinstance(num_nodes_dict, dict) or not num_nodes_dict:
            raise StoreError("num_nodes_dict must be a non-empty {node type: count}")
        if target_type is not None and target_type not in num_nodes_dict:
            raise StoreError(f"target_type {target_type!r} is not a node type ({sorted(num_nodes_dict)})")
        for ntype, count in num_nodes_dict.items():  # bad counts refused before any file exists
            _check_count(ntype, count)
        super().__init__(dest, name=name, overwrite=overwrite)
        for ntype, count in num_nodes_dict.items():
            self.add_node_type(ntype, count)
        self.target_type = target_type


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

    def row_writer(self, key: str, shape: tuple[int, ...], dtype: Any, *,
                   replace: bool = False) -> _arrays.RowWriter:
        """A :class:`RowWriter` for derived array ``key`` stored as one chunk (memory-mapped
        whole by readers, as typed features are), filled a block of rows at a time;
        ``close()`` it before :meth:`commit`."""
        self._check_key(key, replace)
        self._arrays.append(key)
        return _arrays.RowWriter(self.pending, key, shape, dtype, chunk_rows=max(1, int(shape[0])))

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


def _check_count(ntype: str, count: Any) -> int:
    ts.check_name(ntype, "node type")
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
        raise StoreError(f"node type {ntype!r}: count {count!r} must be an integer >= 0")
    return int(count)


def _edge_ids(values: np.ndarray, which: str, etype: ts.EdgeType) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise StoreError(f"relation {ts.etype_key(etype)}: {which} must be a 1-D integer array "
                         f"(got shape {values.shape}, dtype {values.dtype})")
    return values.astype(np.int64, copy=False)


def _check_range(ids: np.ndarray, n: int, what: str, ntype: str) -> None:
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        raise StoreError(f"{what} ID {int(ids[bad[0]])} at position {int(bad[0])} is outside "
                         f"[0, {n}) for node type {ntype!r}")
