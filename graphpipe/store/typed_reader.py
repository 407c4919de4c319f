"""The typed face of :class:`~graphpipe.store.GraphStore`: node types, relations and their
per-type arrays (:class:`TypedFace`, a mixin).

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
from graphpipe.store import typed_schema as ts
from graphpipe.store.errors import CorruptStoreError

__all__ = ["TypedFace"]


class TypedFace:
    """Node types, relations and per-type arrays of a typed store (mixed into ``GraphStore``).

    A homogeneous store answers ``is_typed`` with False and has no types.

    >>> import os, tempfile
    >>> import numpy as np
    >>> from graphpipe.store import GraphStore
    >>> from graphpipe.store.typed_writer import TypedStoreWriter
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
        """Whether the store has node types and relations (``node_types`` in the manifest)."""
        return ts.is_typed(self.manifest)

    @property
    def node_types(self) -> list[str]:
        """Node type names in the manifest's order (empty for a homogeneous store)."""
        return list(self.manifest.get("node_types", {}))

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        """``{ntype: N_t}``."""
        return {t: int(n) for t, n in self.manifest.get("node_types", {}).items()}

    @property
    def edge_types(self) -> list[tuple[str, str, str]]:
        """``[(src, rel, dst), ...]`` in the manifest's order."""
        return [tuple(e) for e in self.manifest.get("edge_types", [])]

    @property
    def num_edges_dict(self) -> dict[tuple[str, str, str], int]:
        """``{(src, rel, dst): E}``."""
        arrays = self.manifest["arrays"]
        return {e: int(arrays[ts.rel_key(e, "csc/indices")]["shape"][0]) for e in self.edge_types}

    @property
    def target_type(self) -> str | None:
        """The type with labels and splits (None when none was recorded)."""
        return self.manifest.get("target_type")

    def _etype(self, etype: Any) -> tuple[str, str, str]:
        etype = ts.as_etype(etype)
        if etype not in self.edge_types:
            raise KeyError(f"unknown edge type {ts.etype_key(etype)!r}; this store has "
                           f"{[ts.etype_key(e) for e in self.edge_types]}")
        return etype

    def _ntype(self, ntype: str) -> str:
        if ntype not in self.manifest.get("node_types", {}):
            raise KeyError(f"unknown node type {ntype!r}; this store has {self.node_types}")
        return ntype

    def _optional(self, key: str) -> np.ndarray | None:
        return self.array(key) if self.has_array(key) else None

    # -- topology -----------------------------------------------------------------------------
    def typed_csc(self, etype: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(indptr (N_dst+1,) int64, indices (E,) int32|int64)`` of relation ``etype``: the
        in-neighbours (local source IDs) of destination ``v`` are
        ``indices[indptr[v]:indptr[v+1]]``. Checked once (module docstring), then cached."""
        etype = self._etype(etype)
        cache = self.__dict__.setdefault("_typed_topology", {})
        if etype not in cache:
            indptr = self.array(ts.rel_key(etype, "csc/indptr"))
            indices = self.array(ts.rel_key(etype, "csc/indices"))
            if _checks.checks_enabled():
                check_relation(indptr, indices, etype, self.num_nodes_dict,
                               self.manifest["arrays"][ts.rel_key(etype, "csc/indices")].get("range"),
                               where=str(self.path))
            cache[etype] = (indptr, indices)
        return cache[etype]

    def typed_edge_ids(self, etype: Any) -> np.ndarray | None:
        """Input edge-list position of every CSC slot of ``etype``, int64 ``(E,)`` (None when
        not stored)."""
        return self._optional(ts.rel_key(self._etype(etype), "csc/edge_id"))

    def typed_edge_time(self, etype: Any) -> np.ndarray | None:
        """Timestamps of ``etype``'s edges in CSC order, int64 ``(E,)``, or None."""
        return self._optional(ts.rel_key(self._etype(etype), "time"))

    def typed_edge_features(self, etype: Any) -> np.ndarray | None:
        """Features of ``etype``'s edges in CSC order, ``(E, D)``, or None."""
        return self._optional(ts.rel_key(self._etype(etype), "edge_feat"))

    # -- node arrays --------------------------------------------------------------------------
    def typed_features(self, ntype: str) -> np.ndarray | None:
        """Features of ``ntype``, ``(N_t, D_t)`` (a read-only memory map), or None."""
        return self._optional(ts.node_key(self._ntype(ntype), "feat"))

    def typed_labels(self, ntype: str) -> np.ndarray | None:
        """Labels of ``ntype``, int64 ``(N_t,)`` (-1 = unlabelled), or None."""
        return self._optional(ts.node_key(self._ntype(ntype), "label"))

    def typed_num_classes(self, ntype: str) -> int | None:
        """Number of classes of ``ntype``'s labels (None when it has none)."""
        meta = self.manifest.get("typed_labels", {}).get(self._ntype(ntype))
        return None if not meta else int(meta["num_classes"])

    def typed_node_time(self, ntype: str) -> np.ndarray | None:
        """Timestamps of ``ntype``'s nodes, int64 ``(N_t,)``, or None."""
        return self._optional(ts.node_key(self._ntype(ntype), "time"))

    def typed_id_map(self, ntype: str) -> Any:
        """External <-> local ID translation of ``ntype``
        (:class:`graphpipe.store.tables.IdMap`; the identity when the type has no ID map)."""
        from graphpipe.store import tables as _tables

        n, key = self.num_nodes_dict[self._ntype(ntype)], ts.id_map_key(ntype)
        if key not in self.manifest["tables"]:
            return _tables.IdMap(None, n)
        return _tables.IdMap(self.table(key).column("external_id").combine_chunks(), n)

    def typed_split_names(self, ntype: str) -> list[str]:
        """Split names of ``ntype`` in the order written (``[]`` when it has none)."""
        return list(self.manifest.get("typed_splits", {}).get(self._ntype(ntype), {}))

    def typed_split(self, ntype: str, name: str) -> np.ndarray:
        """Local IDs (int64) of split ``name`` of ``ntype``, in the order ingested."""
        if name not in self.typed_split_names(ntype):
            raise KeyError(f"unknown split {name!r} of {ntype!r}; it has {self.typed_split_names(ntype)}")
        ids = self.array(ts.split_key(ntype, name))
        if _checks.checks_enabled() and ids.size and (ids.min() < 0 or ids.max() >= self.num_nodes_dict[ntype]):
            raise CorruptStoreError(f"{self.path}: split {name!r} of {ntype!r} holds IDs outside "
                                    f"[0, {self.num_nodes_dict[ntype]})")
        return ids


def check_relation(indptr: np.ndarray, indices: np.ndarray, etype: tuple[str, str, str],
                   counts: dict[str, int], recorded: list[int] | None, *, where: str = "") -> None:
    """Raise :class:`CorruptStoreError` unless ``(indptr, indices)`` is a CSC of ``counts[dst]``
    destinations over sources in ``[0, counts[src])`` (and its range is ``recorded``)."""
    name = f"{ts.REL_ROOT}/{ts.etype_key(etype)}/csc"
    n_src, n_dst = counts[etype[0]], counts[etype[2]]
    prefix = f"{where}: " if where else ""
    if indptr.ndim != 1 or indptr.shape[0] != n_dst + 1 or indptr.dtype != np.int64:
        raise CorruptStoreError(f"{prefix}{name}/indptr is {list(indptr.shape)} {indptr.dtype}, "
                                f"expected [{n_dst + 1}] int64")
    if indices.ndim != 1 or indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise CorruptStoreError(f"{prefix}{name}/indices is {list(indices.shape)} {indices.dtype}, "
                                f"expected a one-dimensional int32 or int64 array")
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
        raise CorruptStoreError(prefix + messages[code]())
    if recorded is not None and indices.shape[0] and [int(lo), int(hi)] != list(recorded):
        raise CorruptStoreError(f"{prefix}{name}/indices holds node IDs in [{int(lo)}, {int(hi)}], "
                                f"but the manifest records {list(recorded)}")
