"""The face every :class:`~graphpipe.store.GraphStore` answers: node types, relations and
their per-type arrays (:class:`TypedFace`, a mixin).

A homogeneous store is one node type and one relation, ``_N`` and ``("_N", "_E", "_N")``
as in DGL, read from its own keys (:func:`graphpipe.store.schema.node_array_key`): code
written against this face reads every store.

Everything is read lazily through :meth:`GraphStore.array`: uncompressed arrays are
zero-copy read-only memory maps (features are one chunk per type, so one map), and
nothing is read whole. :meth:`TypedFace.typed_csc` checks a relation's CSC once (one
Numba pass: ``indptr`` ``(N_dst+1,)`` from 0, non-decreasing, ending at ``E``; every
index in ``[0, N_src)``; the range recorded at commit) before handing it out, as
:meth:`GraphStore.topology` does for the homogeneous CSC. Edge types may be given as
``(src, rel, dst)`` tuples or ``"src___rel___dst"`` strings.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.store import checks as _checks
from graphpipe.store import schema as ts
from graphpipe.store.errors import CorruptStoreError

__all__ = ["TypedFace"]


class TypedFace:
    """Node types, relations and per-type arrays of a store (mixed into ``GraphStore``).

    ``is_typed`` tells whether the store uses the typed layout (several types may be stored);
    a homogeneous store answers with its one type and relation:

    >>> import os, tempfile
    >>> from graphpipe.ingest import ingest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "tri.npz")
    >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), x=np.eye(3, dtype=np.float32),
    ...          y=np.array([0, 1, 1]), train_idx=np.array([2, 0]))
    >>> homo = ingest(npz, os.path.join(tmp.name, "tri"))
    >>> homo.is_typed, homo.num_nodes_dict, homo.edge_types, homo.target_type
    (False, {'_N': 3}, [('_N', '_E', '_N')], '_N')
    >>> [a.tolist() for a in homo.typed_csc(("_N", "_E", "_N"))], homo.typed_split("_N", "train").tolist()
    ([[0, 1, 2, 3], [2, 0, 1]], [0, 2])
    >>> homo.typed_labels("_N").tolist(), homo.typed_num_classes("_N")
    ([0, 1, 1], 2)
    >>> tmp.cleanup()

    A typed store:

    >>> from graphpipe.store import GraphStore
    >>> from graphpipe.store.writer import TypedStoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "mini")
    >>> with TypedStoreWriter(path, {"paper": 3, "author": 2}) as w:
    ...     w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 0, 2]),
    ...                    time=np.array([2010, 2011, 2012]))
    ...     w.add_relation(("paper", "cites", "paper"), np.array([1, 2]), np.array([0, 0]))
    ...     w.write_node_array("paper", "feat", np.arange(6, dtype=np.float32).reshape(3, 2))
    ...     w.write_node_array("paper", "label", np.array([1, -1, 0]))
    ...     w.write_split("paper", "train", np.array([2, 0]))
    ...     _ = w.commit()
    >>> store = GraphStore.open(path)
    >>> store.is_typed, store.num_nodes_dict, store.edge_types
    (True, {'paper': 3, 'author': 2}, [('author', 'writes', 'paper'), ('paper', 'cites', 'paper')])
    >>> store.typed_features("paper")[2].tolist(), store.typed_features("author")
    ([4.0, 5.0], None)
    >>> store.typed_labels("paper").tolist(), store.typed_split("paper", "train").tolist()
    ([1, -1, 0], [2, 0])
    >>> store.typed_edge_time("author___writes___paper").tolist()      # CSC order
    [2010, 2011, 2012]
    >>> tmp.cleanup()
    """

    manifest: dict[str, Any]

    @property
    def is_typed(self) -> bool:
        """Whether the store uses the typed layout (``node_types`` in the manifest)."""
        return ts.is_typed(self.manifest)

    @property
    def node_types(self) -> list[str]:
        """Node type names in the manifest's order (``["_N"]`` for a homogeneous store)."""
        return list(self.num_nodes_dict)

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        """``{ntype: N_t}``."""
        if not self.is_typed:
            return {ts.HOMOGENEOUS_NTYPE: int(self.manifest["num_nodes"])}
        return {t: int(n) for t, n in self.manifest["node_types"].items()}

    @property
    def edge_types(self) -> list[tuple[str, str, str]]:
        """``[(src, rel, dst), ...]`` in the manifest's order (``[("_N", "_E", "_N")]`` for a
        homogeneous store)."""
        if not self.is_typed:
            return [ts.HOMOGENEOUS_ETYPE]
        return [tuple(e) for e in self.manifest.get("edge_types", [])]

    @property
    def num_edges_dict(self) -> dict[tuple[str, str, str], int]:
        """``{(src, rel, dst): E}``."""
        arrays = self.manifest["arrays"]
        return {e: int(arrays[self._rel_key(e, "csc/indices")]["shape"][0]) if self.is_typed
                else int(self.manifest["num_edges"]) for e in self.edge_types}

    @property
    def target_type(self) -> str | None:
        """The type with labels and splits (None when none was recorded; ``_N`` for a
        homogeneous store)."""
        return self.manifest.get("target_type") if self.is_typed else ts.HOMOGENEOUS_NTYPE

    def _etype(self, etype: Any) -> tuple[str, str, str]:
        etype = ts.as_etype(etype)
        if etype not in self.edge_types:
            raise KeyError(f"unknown edge type {ts.etype_key(etype)!r}; this store has "
                           f"{[ts.etype_key(e) for e in self.edge_types]}")
        return etype

    def _ntype(self, ntype: str) -> str:
        if ntype not in self.num_nodes_dict:
            raise KeyError(f"unknown node type {ntype!r}; this store has {self.node_types}")
        return ntype

    def _node_key(self, ntype: str, kind: str) -> str:
        return ts.node_array_key(self.manifest, self._ntype(ntype), kind)

    def _rel_key(self, etype: Any, name: str) -> str | None:
        return ts.rel_array_key(self.manifest, etype, name)

    def _optional(self, key: str | None) -> np.ndarray | None:
        return self.array(key) if key is not None and self.has_array(key) else None

    # -- topology -----------------------------------------------------------------------------
    def typed_csc(self, etype: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr (N_dst+1,) int64, indices (E,) int32|int64)`` of relation ``etype``: the
        in-neighbours (local source IDs) of destination ``v`` are
        ``indices[indptr[v]:indptr[v+1]]``. Checked once (module docstring), then cached."""
        etype = self._etype(etype)
        if not self.is_typed:
            return self.topology()
        cache = self.__dict__.setdefault("_typed_topology", {})
        if etype not in cache:
            key = self._rel_key(etype, "csc/indices")
            indptr, indices = self.array(self._rel_key(etype, "csc/indptr")), self.array(key)
            if _checks.checks_enabled():
                _checks.check_relation(indptr, indices, etype, self.num_nodes_dict,
                                       self.manifest["arrays"][key].get("range"), where=str(self.path))
            cache[etype] = (indptr, indices)
        return cache[etype]

    def typed_edge_ids(self, etype: Any) -> np.ndarray | None:
        """Input edge-list position of every CSC slot of ``etype``, int64 ``(E,)`` (None when
        not stored)."""
        return self._optional(self._rel_key(self._etype(etype), "csc/edge_id"))

    def typed_edge_time(self, etype: Any) -> np.ndarray | None:
        """Timestamps of ``etype``'s edges in CSC order, int64 ``(E,)``, or None."""
        return self._optional(self._rel_key(self._etype(etype), "time"))

    def typed_edge_features(self, etype: Any) -> np.ndarray | None:
        """Features of ``etype``'s edges in CSC order, ``(E, D)``, or None. A homogeneous
        store keeps ``edge/feat`` in input edge order: gathered here in CSC order (a copy)."""
        etype = self._etype(etype)
        if self.is_typed:
            return self._optional(self._rel_key(etype, "edge_feat"))
        if not self.has_array("edge/feat") or not self.has_edge_ids:
            return None
        feat = self.edge_features
        return np.asarray(feat)[self.edge_id % max(1, feat.shape[0])]

    # -- node arrays --------------------------------------------------------------------------
    def typed_features(self, ntype: str) -> np.ndarray | None:
        """Features of ``ntype``, ``(N_t, D_t)`` (a read-only memory map), or None."""
        return self._optional(self._node_key(ntype, "feat"))

    def typed_labels(self, ntype: str) -> np.ndarray | None:
        """Labels of ``ntype``, int64 ``(N_t,)`` (-1 = unlabelled), or None."""
        return self._optional(self._node_key(ntype, "label"))

    def typed_num_classes(self, ntype: str) -> int | None:
        """Number of classes of ``ntype``'s labels (None when it has none)."""
        ntype = self._ntype(ntype)
        if not self.is_typed:
            return self.num_classes
        meta = self.manifest.get("typed_labels", {}).get(ntype)
        return None if not meta else int(meta["num_classes"])

    def typed_node_time(self, ntype: str) -> np.ndarray | None:
        """Timestamps of ``ntype``'s nodes, int64 ``(N_t,)``, or None."""
        return self._optional(self._node_key(ntype, "time"))

    def typed_id_map(self, ntype: str) -> Any:
        """External <-> local ID translation of ``ntype``
        (:class:`graphpipe.store.tables.IdMap`; the identity when the type has no ID map)."""
        from graphpipe.store import tables as _tables

        n = self.num_nodes_dict[self._ntype(ntype)]
        if not self.is_typed:
            return self.id_map
        key = ts.id_map_key(ntype)
        if key not in self.manifest["tables"]:
            return _tables.IdMap(None, n)
        return _tables.IdMap(self.table(key).column("external_id").combine_chunks(), n)

    def typed_split_names(self, ntype: str) -> list[str]:
        """Split names of ``ntype`` in the order written (``[]`` when it has none)."""
        ntype = self._ntype(ntype)
        if not self.is_typed:
            return self.split_names
        return list(self.manifest.get("typed_splits", {}).get(ntype, {}))

    def typed_split(self, ntype: str, name: str) -> np.ndarray:
        """Local IDs (int64) of split ``name`` of ``ntype``, in the order ingested (sorted for
        a homogeneous store)."""
        if name not in self.typed_split_names(ntype):
            raise KeyError(f"unknown split {name!r} of {ntype!r}; it has {self.typed_split_names(ntype)}")
        if not self.is_typed:
            return self.split(name)
        ids = self.array(ts.split_key(ntype, name))
        if _checks.checks_enabled() and ids.size and (ids.min() < 0 or ids.max() >= self.num_nodes_dict[ntype]):
            raise CorruptStoreError(f"{self.path}: split {name!r} of {ntype!r} holds IDs outside "
                                    f"[0, {self.num_nodes_dict[ntype]})")
        return ids
