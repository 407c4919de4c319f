"""Writing a typed (heterogeneous) store: :class:`TypedStoreWriter`.

A :class:`~graphpipe.store.writer.StoreWriter` (same temporary sibling, checksums and
atomic rename) that knows node types and relations: each relation's edge list (local
IDs) becomes its own CSC, sorted like the homogeneous store's (neighbours ascending
within a destination, ties by input position), and per-edge arrays are stored in that
CSC order. Key names: :mod:`graphpipe.store.schema`.

Large relations can be built by the ingest's out-of-core builder instead of
:meth:`TypedStoreWriter.add_relation`: :meth:`TypedStoreWriter.relation_sink` is a
writer-like object whose ``csc/...`` keys land under the relation, and
:meth:`TypedStoreWriter.finish_relation` records it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store import arrays as _arrays
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError
from graphpipe.store.writer import StoreWriter

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

    def __init__(self, writer: TypedStoreWriter, etype: ts.EdgeType):
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


class TypedStoreWriter(StoreWriter):
    """Builds a typed store atomically (a context manager, like :class:`StoreWriter`).

    Args:
        dest: the store directory to create.
        num_nodes_dict: ``{ntype: N_t}``; node IDs of type ``t`` are ``0 .. N_t - 1``.
        target_type: the type with labels and splits (default: the only labelled type,
            if exactly one has labels).

    A paper-author graph (``writes``: author -> paper), paper features, labels and a split:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from graphpipe.store import GraphStore
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "mini")
    >>> with TypedStoreWriter(path, {"paper": 3, "author": 2}) as w:
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

    def __init__(self, dest: str | os.PathLike, num_nodes_dict: dict[str, int], *,
                 name: str | None = None, overwrite: bool = False,
                 target_type: str | None = None):
        counts = _check_counts(num_nodes_dict)
        if target_type is not None and target_type not in counts:
            raise StoreError(f"target_type {target_type!r} is not a node type ({sorted(counts)})")
        super().__init__(dest, name=name, overwrite=overwrite)
        self.num_nodes_dict = counts
        self.target_type = target_type
        self.num_edges_dict: dict[ts.EdgeType, int] = {}
        self.splits: dict[str, dict[str, np.ndarray]] = {}
        self.labels_meta: dict[str, dict[str, Any]] = {}
        self.reverse_of: dict[ts.EdgeType, ts.EdgeType] = {}

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

    def _finalise_manifest(self) -> None:
        super()._finalise_manifest()
        from graphpipe.store.writer import _describe_table

        for ntype in self.num_nodes_dict:
            key = ts.id_map_key(ntype)
            if (Path(self.path) / key).is_file():
                self.manifest["tables"][key] = _describe_table(Path(self.path), key)

    def _count(self, ntype: str) -> int:
        if ntype not in self.num_nodes_dict:
            raise StoreError(f"node type {ntype!r} is not one of {sorted(self.num_nodes_dict)}")
        return self.num_nodes_dict[ntype]

    # -- commit -------------------------------------------------------------------------------
    def commit(self) -> Path:
        """Record types, relations and splits in the manifest, then commit atomically."""
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
        return super().commit()


def _check_counts(num_nodes_dict: dict[str, int]) -> dict[str, int]:
    if not isinstance(num_nodes_dict, dict) or not num_nodes_dict:
        raise StoreError("num_nodes_dict must be a non-empty {node type: count}")
    counts = {}
    for ntype, count in num_nodes_dict.items():
        ts.check_name(ntype, "node type")
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise StoreError(f"node type {ntype!r}: count {count!r} must be an integer >= 0")
        counts[ntype] = int(count)
    return counts


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
