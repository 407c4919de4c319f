"""Reading a store: :class:`GraphStore`."""

from __future__ import annotations

import os
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphpipe.store import arrays as _arrays
from graphpipe.store import checks as _checks
from graphpipe.store import generation as _generation
from graphpipe.store import tables as _tables
from graphpipe.store.dataset import DatasetFace
from graphpipe.store.errors import CorruptStoreError, StoreError
from graphpipe.store.manifest import read_manifest
from graphpipe.store.object_store import is_remote
from graphpipe.store.schema import is_typed
from graphpipe.store.types import TypedFace

_GATHER_THREADS = max(1, min(8, os.cpu_count() or 1))
_PARALLEL_MIN_ROWS = 4096


class GraphStore(TypedFace, DatasetFace):
    """Read access to a graphpipe store directory.

    Topology is CSC by destination: the in-neighbours of node ``v`` are
    ``indices[indptr[v]:indptr[v+1]]`` (dense node IDs), and ``edge_id`` (when stored)
    gives each CSC slot's position in the original edge list. Arrays are zero-copy
    read-only memory maps when stored uncompressed, in-memory arrays otherwise.

    Open with :meth:`open`; create with :class:`graphpipe.store.StoreWriter`
    (or ``graphpipe ingest``).

    A store is untrusted input: :meth:`open` checks the manifest, the first read of an
    array checks its ``zarr.json`` and chunk sizes, and :meth:`topology` (what the
    sampling kernels must be given) checks the CSC invariants once
    (:mod:`graphpipe.store.checks`); each failure is a one-line :class:`StoreError`.

    A typed (heterogeneous) store has node types and one CSC per relation; its face
    (:class:`graphpipe.store.types.TypedFace`: ``is_typed``, ``node_types``,
    ``edge_types``, ``typed_csc(etype)``, ``typed_features(ntype)``, ...) is memory-mapped too.

    A store is also a one-graph OGB / PyG dataset (:class:`graphpipe.store.dataset.DatasetFace`):
    ``get_idx_split()``, ``store[0]`` (the store), ``num_features``, ``x``, ``y``.
    """

    def __init__(self, path: str | os.PathLike, manifest: dict[str, Any],
                 in_memory: frozenset[str] = frozenset()):
        self.path = path if isinstance(path, _generation.PinnedPath) else Path(path)
        self.manifest = manifest
        self._cache: dict[str, np.ndarray] = {}
        self._in_memory = in_memory
        self._topology: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def open(cls, path: str | os.PathLike,
             in_memory: bool | str | Iterable[str] = False, *,
             cache_dir: str | os.PathLike | None = None) -> GraphStore:
        """Open the local store at ``path``; refuses unknown manifest versions.
        ``graphpipe.store.open(path_or_url)`` (:func:`graphpipe.store.open.open_store`) opens
        an ``s3://bucket/prefix`` too.

        Args:
            in_memory: where array bytes live once read.

                * ``False`` (default): uncompressed arrays are zero-copy read-only memory
                  maps of the chunk files; nothing is read until touched, and a store
                  larger than memory works.
                * ``True``: every array is read into process memory on first access
                  (huge-page backed; no page faults or 4 KiB TLB misses on random rows).
                * ``"auto"``: the arrays the loaders read (:data:`LOADER_ARRAYS`: CSC
                  topology, features, labels) go into memory when together they take at
                  most half of the memory this process may use now (free RAM bounded by its
                  cgroup limit: :func:`graphpipe.memory.usable_memory`); otherwise all stay
                  memory maps.
                * a collection of array keys (``{"node/feat"}``): those in memory.

        Raises :class:`StoreError` when the manifest's counts, shapes and dtypes disagree
        (:func:`graphpipe.store.checks.check_manifest`).

        A six-node ring ``i+1 -> i`` ingested from an ``.npz``, then opened:

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz, path = os.path.join(tmp.name, "ring.npz"), os.path.join(tmp.name, "ring")
        >>> np.savez(npz, src=np.array([1, 2, 3, 4, 5, 0]), dst=np.arange(6),
        ...          x=np.arange(12, dtype=np.float32).reshape(6, 2), y=np.arange(6) % 2,
        ...          train_idx=np.array([0, 1, 2, 3]))
        >>> _ = ingest(npz, path)
        >>> store = GraphStore.open(path)
        >>> store.num_nodes, store.num_edges, store.split_names
        (6, 6, ['train'])
        >>> store.indptr.tolist(), store.indices.tolist()     # in-neighbours, CSC
        ([0, 1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 0])
        >>> store.features(np.array([5, 0]))
        array([[10., 11.],
               [ 0.,  1.]], dtype=float32)
        >>> tmp.cleanup()
        """
        if is_remote(path):
            raise StoreError(f"{path}: GraphStore.open reads local stores; open a URL with "
                             f"graphpipe.store.open({str(path)!r})")
        root = _generation.pin(path)  # a later ingest --overwrite: this object never reads the new files
        manifest = read_manifest(root)
        _generation.confirm(root)
        check_opened(manifest, root)
        return cls(root, manifest, _resolve_in_memory(root, manifest, in_memory))

    @property
    def location(self) -> str:
        """Where the store lives, as the user named it: its path (or ``s3://`` URL)."""
        return str(self.path)

    @property
    def in_memory_arrays(self) -> list[str]:
        """Keys of the arrays this store object reads into memory (not memory-mapped)."""
        return sorted(self._in_memory)

    # -- basic facts ---------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.manifest["name"]

    @property
    def num_nodes(self) -> int:
        return int(self.manifest["num_nodes"])

    @property
    def num_edges(self) -> int:
        return int(self.manifest["num_edges"])

    def has_array(self, key: str) -> bool:
        return key in self.manifest["arrays"]

    def array(self, key: str) -> np.ndarray:
        """The array ``key`` (e.g. ``"csc/indptr"``) as a NumPy array (zero-copy when uncompressed)."""
        if key not in self.manifest["arrays"]:
            raise StoreError(f"{self.path}: no array {key!r} in this store")
        if key not in self._cache:
            self._check_metadata(key)
            self._cache[key] = _arrays.read_array(self.path, key, in_memory=key in self._in_memory)
        return self._cache[key]

    def _check_metadata(self, key: str) -> None:
        """The array's ``zarr.json`` against its manifest entry (before its first read)."""
        if _checks.checks_enabled():
            _checks.check_array_metadata(self.path, key, _arrays.array_metadata(self.path, key),
                                         self.manifest["arrays"][key])

    # -- topology ------------------------------------------------------------------------------
    @property
    def indptr(self) -> np.ndarray:
        """CSC offsets, int64, shape ``(num_nodes + 1,)``."""
        return self.array("csc/indptr")

    @property
    def indices(self) -> np.ndarray:
        """CSC source node of every in-edge, int32 (int64 when N >= 2**31), shape ``(num_edges,)``."""
        return self.array("csc/indices")

    @property
    def has_edge_ids(self) -> bool:
        """Whether the store keeps ``csc/edge_id`` (``graphpipe ingest --edge-ids``: by default
        only stores with edge features do)."""
        return self.has_array("csc/edge_id")

    @property
    def edge_id(self) -> np.ndarray:
        """Original edge-list position of every CSC slot, int64, shape ``(num_edges,)``.

        Raises :class:`StoreError` when the store was ingested without edge IDs."""
        if not self.has_edge_ids:
            raise StoreError(f"{self.path}: this store has no csc/edge_id (the map from a CSC slot "
                             f"to its input edge is stored only for datasets with edge features, "
                             f"or with graphpipe ingest --edge-ids always); re-ingest with "
                             f"--edge-ids always to get it")
        return self.array("csc/edge_id")

    def topology(self, prefix: str = "csc") -> tuple[np.ndarray, np.ndarray]:
        """``(indptr, indices)`` of ``prefix`` (``"csc"`` or ``"csr"``) once their invariants
        hold: ``indptr`` int64 ``(N+1,)`` from 0, non-decreasing, ending at ``len(indices)``,
        every index in ``[0, N)`` (one ``O(N + E)`` Numba pass on the first call, cached).
        Hand these, not :attr:`indptr`/:attr:`indices`, to kernels that index with them."""
        if prefix not in self._topology:
            indptr, indices = self.array(f"{prefix}/indptr"), self.array(f"{prefix}/indices")
            if _checks.checks_enabled():
                recorded = self.manifest["arrays"][f"{prefix}/indices"].get("range")
                _checks.check_topology(indptr, indices, self.num_nodes, name=prefix,
                                       recorded=recorded, where=str(self.path))
            self._topology[prefix] = (indptr, indices)
        return self._topology[prefix]

    @property
    def in_degrees(self) -> np.ndarray:
        """In-degree of every node, int64, shape ``(num_nodes,)``."""
        return np.diff(self.indptr)

    @property
    def has_csr(self) -> bool:
        return self.has_array("csr/indptr")

    @property
    def csr_indptr(self) -> np.ndarray:
        return self.array("csr/indptr")

    @property
    def csr_indices(self) -> np.ndarray:
        return self.array("csr/indices")

    # -- features and labels -------------------------------------------------------------------
    @property
    def has_features(self) -> bool:
        return self.has_array("node/feat")

    @property
    def feature_dim(self) -> int:
        meta = self.manifest.get("node_features")
        if not meta:
            raise StoreError(f"{self.path}: store has no node features")
        return int(meta["dim"])

    @cached_property
    def _feature_chunks(self) -> tuple[list[np.ndarray], int] | None:
        if "node/feat" in self._in_memory:
            return None  # one in-memory array (feature_chunks reads it through array())
        self._check_metadata("node/feat")
        return _arrays.open_chunk_views(self.path, "node/feat")

    def feature_chunks(self) -> tuple[list[np.ndarray], int]:
        """Feature rows as ``(views, chunk_rows)``: ``views[i]`` holds rows
        ``i*chunk_rows ...`` (zero-copy memory maps when uncompressed; one in-memory
        array when compressed or opened with ``node/feat`` in memory)."""
        if not self.has_features:
            raise StoreError(f"{self.path}: store has no node features ('node/feat')")
        chunks = self._feature_chunks
        if chunks is None:
            full = self.array("node/feat")
            return [full], max(1, full.shape[0])
        return chunks

    @property
    def feat(self) -> np.ndarray:
        """All node features, shape ``(num_nodes, dim)``; zero-copy when stored in one
        uncompressed chunk, otherwise materialised in memory (prefer :meth:`features`)."""
        views, _ = self.feature_chunks()
        return views[0] if len(views) == 1 else np.concatenate(views, axis=0)

    def features(self, ids: np.ndarray | None = None, *, out: np.ndarray | None = None) -> np.ndarray:
        """Feature rows of dense node IDs ``ids`` (any order, repeats allowed) as a
        contiguous ``(len(ids), dim)`` array; all rows when ``ids`` is None.

        Rows are gathered in parallel threads (NumPy's ``take`` releases the GIL).
        """
        views, chunk_rows = self.feature_chunks()
        if ids is None:
            return np.ascontiguousarray(self.feat)
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise StoreError(f"feature ids must be integers, got dtype {ids.dtype}")
        ids = ids.astype(np.int64, copy=False).ravel()
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_nodes):
            raise IndexError(f"node id out of range [0, {self.num_nodes}) in features()")
        dim = views[0].shape[1] if views[0].ndim > 1 else 1
        if out is None:
            out = np.empty((len(ids),) + views[0].shape[1:], dtype=views[0].dtype)
        if len(views) == 1:
            _parallel_take(views[0], ids, out)
        else:
            chunk_of = ids // chunk_rows
            for c in np.unique(chunk_of):
                pos = np.flatnonzero(chunk_of == c)
                out[pos] = views[int(c)][ids[pos] - int(c) * chunk_rows]
        del dim
        return out

    @property
    def has_labels(self) -> bool:
        return self.has_array("node/label")

    @property
    def labels(self) -> np.ndarray:
        """Node labels, shape ``(num_nodes,)`` or ``(num_nodes, tasks)``."""
        if not self.has_labels:
            raise StoreError(f"{self.path}: store has no labels ('node/label')")
        return self.array("node/label")

    @property
    def num_classes(self) -> int | None:
        """Number of classes of a multiclass store (labels ``0..C-1``; unlabelled nodes are -1),
        as the manifest records it; None for regression, multi-task or unlabelled stores.

        >>> import os, tempfile
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]))
        >>> ingest(npz, os.path.join(tmp.name, "tri")).num_classes
        3
        >>> tmp.cleanup()
        """
        meta = self.manifest.get("labels") or {}
        if meta.get("task_type") != "multiclass classification":
            return None
        value = meta.get("num_classes")
        return int(value) if value is not None else int(np.max(self.labels, initial=-1)) + 1

    def labels_for_evaluator(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Labels of dense node ``ids`` (default all) as ``ogb.nodeproppred.Evaluator`` wants
        ``y_true``: a new writable ``(len(ids), tasks)`` array, ``(n, 1)`` int64 classes for a
        multiclass store (compare with ``y_pred = logits.argmax(-1, keepdim=True)``).

        >>> import os, tempfile
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]),
        ...          test_idx=np.array([1, 2]))
        >>> store = ingest(npz, os.path.join(tmp.name, "tri"))
        >>> store.labels_for_evaluator(store.split("test")).tolist()
        [[2], [1]]
        >>> tmp.cleanup()
        """
        labels = self.labels if ids is None else self.labels[np.asarray(ids, dtype=np.int64)]
        labels = np.array(labels)  # a copy, writable
        return labels.reshape(len(labels), -1)

    @property
    def edge_features(self) -> np.ndarray:
        """Edge features in original edge order, shape ``(num_input_edges, dim)``; the features
        of CSC slot ``s`` are ``edge_features[edge_id[s] % num_input_edges]``."""
        return self.array("edge/feat")

    # -- timestamps (temporal sampling) ---------------------------------------------------------
    def node_time(self) -> np.ndarray | None:
        """Timestamp of every node (``nodes/time``), int64 ``(num_nodes,)``, or None when the
        store has none (e.g. OGB's ``node_year``).

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "g.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
        ...          node_year=np.array([2001, 2005, 2003]), edge_time=np.array([7, 8, 9]))
        >>> store = ingest(npz, os.path.join(tmp.name, "g"))
        >>> store.node_time().tolist(), store.edge_time().tolist()  # edge times in CSC order
        ([2001, 2005, 2003], [9, 7, 8])
        >>> tmp.cleanup()
        """
        return self.array("nodes/time") if self.has_array("nodes/time") else None

    def edge_time(self) -> np.ndarray | None:
        """Timestamp of every CSC slot (``csc/time``, CSC order like ``indices``), int64
        ``(num_edges,)``, or None when the store has none (see :meth:`node_time`)."""
        return self.array("csc/time") if self.has_array("csc/time") else None

    # -- tables --------------------------------------------------------------------------------
    @property
    def split_names(self) -> list[str]:
        return list(self.manifest.get("splits", {}))

    def split(self, name: str) -> np.ndarray:
        """Sorted dense node IDs (int64) of split ``name`` (``"train"``, ``"valid"``, ``"test"``)."""
        if name not in self.manifest.get("splits", {}):
            raise KeyError(f"unknown split {name!r}; this store has {self.split_names}")
        try:
            return _tables.read_split_ids(self.path, _tables.SPLITS_TABLE, name)
        except (pa.ArrowException, IndexError, KeyError, ValueError) as exc:  # a damaged table
            detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
            raise CorruptStoreError(f"{self.path / _tables.SPLITS_TABLE}: split {name!r} cannot be "
                                    f"read ({detail})") from None

    @cached_property
    def id_map(self) -> _tables.IdMap:
        """External ↔ dense ID translation (identity when the store has no ID map)."""
        if not self.manifest.get("id_map"):
            return _tables.IdMap(None, self.num_nodes)
        table = _tables.read_table(self.path, _tables.ID_MAP_TABLE)
        return _tables.IdMap(table.column("external_id").combine_chunks(), self.num_nodes)

    def table(self, key: str) -> pa.Table:
        """Any table of the store by key, e.g. ``"tables/nodes.parquet"``."""
        if key not in self.manifest["tables"]:
            raise StoreError(f"{self.path}: no table {key!r} in this store")
        return _tables.read_table(self.path, key)

    def edit(self) -> Any:
        """A :class:`StoreEditor` to add derived arrays/tables to this store."""
        from graphpipe.store.writer import StoreEditor

        return StoreEditor(self.path)

    def add_derived(self, name: str, arrays: dict[str, np.ndarray], entry: dict[str, Any], *,
                    replace: bool = False) -> dict[str, Any]:
        """Add derived ``arrays`` (key -> array) and ``manifest["derived"][name] = entry``
        atomically (:func:`graphpipe.store.derived.write_derived`); this handle sees the new
        manifest and arrays at once. Returns ``entry``."""
        from graphpipe.store.derived import write_derived

        self.manifest = write_derived(self.path, name, arrays, entry, replace=replace)
        for key in arrays:
            self._cache.pop(key, None)
        return entry

    def __repr__(self) -> str:
        return f"GraphStore({str(self.path)!r}, nodes={self.num_nodes}, edges={self.num_edges})"


def check_opened(manifest: dict[str, Any], where: str | os.PathLike) -> None:
    """The checks of a manifest at open (every opener calls this): the counts, shapes and dtypes
    of the arrays the readers index with (:func:`graphpipe.store.checks.check_manifest`), and a
    typed store's types and relations (:func:`graphpipe.store.checks.check_typed_manifest`)."""
    if _checks.checks_enabled():
        _checks.check_manifest(manifest, where)
        if is_typed(manifest):
            _checks.check_typed_manifest(manifest, where)


LOADER_ARRAYS = ("csc/indptr", "csc/indices", "node/feat", "node/label")
"""The arrays a neighbour loader reads on every batch (what ``in_memory="auto"`` loads)."""
AUTO_MEMORY_FRACTION = 0.5
"""``in_memory="auto"`` loads when the loader arrays take at most this share of the
memory this process may use at open time (free RAM bounded by its cgroup limit,
:func:`graphpipe.memory.usable_memory`)."""


def _resolve_in_memory(path: str | os.PathLike, manifest: dict[str, Any],
                       in_memory: bool | str | Iterable[str]) -> frozenset[str]:
    """The keys of the arrays to read into memory (see :meth:`GraphStore.open`)."""
    if isinstance(in_memory, bool):
        return frozenset(manifest["arrays"]) if in_memory else frozenset()
    if isinstance(in_memory, str):
        if in_memory != "auto":
            raise ValueError(f"'in_memory' must be True, False, 'auto' or a collection of array keys "
                             f"(got {in_memory!r})")
        from graphpipe.memory import usable_memory

        keys = [k for k in LOADER_ARRAYS if k in manifest["arrays"]]
        need = sum(_arrays.array_nbytes(path, k) for k in keys)
        budget = AUTO_MEMORY_FRACTION * usable_memory()
        return frozenset(keys) if need <= budget else frozenset()
    try:
        keys = frozenset(str(k) for k in in_memory)
    except TypeError:
        raise ValueError(f"'in_memory' must be True, False, 'auto' or a collection of array keys "
                         f"(got {in_memory!r})") from None
    unknown = sorted(keys - set(manifest["arrays"]))
    if unknown:
        raise ValueError(f"'in_memory' names arrays this store does not have: {unknown}; "
                         f"it has {sorted(manifest['arrays'])}")
    return keys


def _parallel_take(source: np.ndarray, ids: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = source[ids]`` in a few threads."""
    n = len(ids)
    if n < _PARALLEL_MIN_ROWS or _GATHER_THREADS == 1:
        np.take(source, ids, axis=0, out=out)
        return
    bounds = np.linspace(0, n, _GATHER_THREADS + 1).astype(np.int64)

    def work(i: int) -> None:
        lo, hi = bounds[i], bounds[i + 1]
        np.take(source, ids[lo:hi], axis=0, out=out[lo:hi])

    with ThreadPoolExecutor(_GATHER_THREADS) as pool:
        list(pool.map(work, range(_GATHER_THREADS)))
