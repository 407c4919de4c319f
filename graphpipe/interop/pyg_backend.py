"""A graphpipe store as PyG's *remote backend*: a ``torch_geometric.data.FeatureStore``
and a ``torch_geometric.data.GraphStore`` over the store's arrays, so PyG's own
``NeighborLoader((feature_store, graph_store), ...)``, ``LinkNeighborLoader`` and
samplers run on it unchanged (:func:`to_pyg_backend`, ``graphpipe.to_pyg_backend``).

Names: PyG's ``GraphStore`` (edge indices) is not graphpipe's
:class:`graphpipe.store.GraphStore` (the store); here they are :class:`StoreGraphStore`
(PyG's interface) over a graphpipe store.

What PyG sees:

* **Features** (:class:`StoreFeatureStore`), group ``None`` (or ``node_type``):
  ``x`` (``node/feat``) read through the loaders' row source
  (:func:`graphpipe.loaders.feature_tier.feature_source`: the store's memory maps or
  in-memory array, or the disk tier behind its CLOCK cache for features larger than
  memory), ``y`` (``node/label``), and every other ``node/<name>`` array as
  ``<name>``; rows are the stored bytes, bit for bit, gathered per request (nothing
  is loaded up front). Edge arrays (``edge/feat`` as ``edge_attr``, ``edge/<name>``)
  are indexed by original edge ID; they are not listed in
  :meth:`StoreFeatureStore.get_all_tensor_attrs`, because PyG's homogeneous remote
  filter indexes every listed tensor by the batch's node IDs: add them to batches
  with ``transform=backend.edge_transform`` (:class:`EdgeAttrs`, by ``batch.e_id``).
* **Edges** (:class:`StoreGraphStore`): one edge type (``None``, or ``(node_type,
  "to", node_type)``), stored as the store's CSC (``layout="csc"``, sorted by
  destination, ``size=(N, N)``), what PyG's ``NeighborSampler`` asks for. Its
  ``csc()``/``csr()``/``coo()`` return the store's ``csc/edge_id`` as the edge
  permutation, so ``batch.e_id`` are original edge-list positions, as for a ``Data`` (CSC slots when the store keeps no
  ``csc/edge_id``).
  PyG's sampler keeps an int64 copy of the CSC in memory (``8 (N + 1 + E)`` bytes).

A homogeneous store is one node type and one relation; ``node_type="paper"`` presents it
as a one-type heterogeneous graph (batches are ``HeteroData``). A store with node types is
served whole (:class:`TypedFeatureStore`, :class:`TypedGraphStore`): group ``<node type>``
holds ``x`` (``typed/<t>/feat``), ``y`` (``typed/<t>/label``) and every other
``typed/<t>/<name>``; every relation is one ``EdgeAttr(etype, "csc", is_sorted=True,
size=(N_src, N_dst))`` whose edge permutation is its ``csc/edge_id``, and its edge arrays
(``edge_attr``, ``<name>``) are indexed by original edge ID, so PyG's heterogeneous
``NeighborLoader`` gives the batches it gives on the ``HeteroData`` the store was written
from (``edge_transform`` adds the edge arrays). Typed features are read from the store's
memory maps (no disk tier per type here).

The backend is read-only: ``put_tensor``/``put_edge_index``/``remove_*`` raise
``TypeError`` (write a store with :class:`graphpipe.store.StoreWriter` or add arrays
with :meth:`graphpipe.store.GraphStore.add_derived`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, FeatureStore, HeteroData, TensorAttr
from torch_geometric.data import GraphStore as PyGGraphStore
from torch_geometric.data.graph_store import EdgeLayout

from graphpipe.loaders.rows import RowSource, check_ids
from graphpipe.store import schema as ts

__all__ = ["EdgeAttrs", "PygBackend", "StoreFeatureStore", "StoreGraphStore", "TypedFeatureStore",
           "TypedGraphStore", "TypedPygBackend", "to_pyg_backend"]

RELATION = "to"
"""The relation name of the one edge type when the store is presented as heterogeneous."""
_RENAMES = {"node/feat": "x", "node/label": "y", "edge/feat": "edge_attr"}
_READ_ONLY = ("the graphpipe PyG backend is read-only: write a store with StoreWriter or add "
              "arrays with GraphStore.add_derived")


def _attr_names(store: Any, prefix: str) -> dict[str, str]:
    """PyG attribute name -> store array key for every ``prefix/<name>`` array."""
    keys = sorted(k for k in store.manifest["arrays"] if k.startswith(prefix + "/"))
    return {_RENAMES.get(k, k.split("/", 1)[1]): k for k in keys}


def _index_to_ids(index: Any, num_rows: int) -> np.ndarray | None:
    """A PyG ``TensorAttr.index`` as int64 row IDs ``(k,)`` in ``[0, num_rows)``; None:
    all rows (``index`` None or the full slice)."""
    if index is None:
        return None
    if isinstance(index, slice):
        if index == slice(None):
            return None
        return np.arange(num_rows, dtype=np.int64)[index]
    if isinstance(index, torch.Tensor):
        index = index.detach().cpu()
        if index.dtype == torch.bool:
            if index.numel() != num_rows:
                raise ValueError(f"a boolean index must have {num_rows} entries (got {index.numel()})")
            index = index.nonzero().view(-1)
        index = index.numpy()
    ids = np.asarray(index)
    if ids.ndim == 0:
        ids = ids.reshape(1)
    return check_ids(ids, num_rows)


class StoreFeatureStore(FeatureStore):
    """PyG's ``FeatureStore`` over a graphpipe store's node and edge arrays (read-only).

    Args:
        store: a :class:`graphpipe.store.GraphStore`.
        features: the tier ``x`` rows are read from (``True``/``"auto"``, ``"memory"``,
            ``"disk"``, as :class:`graphpipe.loaders.NeighborLoader`'s ``features``).
        node_type: the group name of the node attributes (None: homogeneous).

    Tensors come back as new CPU tensors of the stored dtype: ``x[index]`` is
    ``(len(index), dim)``, ``y[index]`` is ``(len(index),)`` or ``(len(index), tasks)``.
    """

    def __init__(self, store: Any, *, features: bool | str = True, node_type: str | None = None):
        super().__init__()
        self.store, self.node_type = store, node_type
        self.edge_type = None if node_type is None else (node_type, RELATION, node_type)
        self._node_keys = _attr_names(store, "node")
        self._edge_keys = _attr_names(store, "edge")
        self._features = features
        self._rows: RowSource | None = None

    # -- reading -------------------------------------------------------------------------------
    @property
    def rows(self) -> RowSource:
        """The row source ``x`` is read from (built on first use)."""
        if self._rows is None:
            from graphpipe.loaders.feature_tier import feature_source
            from graphpipe.loaders.graph_data import resolve_graph_data

            self._rows = feature_source(resolve_graph_data(self.store), self._features)
        return self._rows

    def _key(self, attr: TensorAttr) -> tuple[str, int]:
        """The store array key of ``attr`` and its row count; KeyError if absent."""
        if attr.group_name == self.node_type and attr.attr_name in self._node_keys:
            return self._node_keys[attr.attr_name], self.store.num_nodes
        edge_groups = (None, self.edge_type) if self.node_type is None else (self.edge_type,)
        if attr.group_name in edge_groups and attr.attr_name in self._edge_keys:
            return self._edge_keys[attr.attr_name], self.store.num_edges
        raise KeyError(f"no tensor {attr.attr_name!r} in group {attr.group_name!r} of "
                       f"{self.store.path} (nodes: {sorted(self._node_keys)}, "
                       f"edges: {sorted(self._edge_keys)})")

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        key, num_rows = self._key(attr)
        ids = _index_to_ids(attr.index, num_rows)
        if key == "node/feat":  # through the loaders' row source (memory or disk tier)
            out = self.rows.gather(np.arange(num_rows, dtype=np.int64) if ids is None else ids)
            return torch.from_numpy(out.reshape((out.shape[0],) + self._shape(key)[1:]))
        array = self.store.array(key)
        out = np.array(array) if ids is None else np.take(array, ids, axis=0)
        return torch.from_numpy(np.ascontiguousarray(out))

    def _shape(self, key: str) -> tuple[int, ...]:
        return tuple(int(s) for s in self.store.manifest["arrays"][key]["shape"])

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        key, num_rows = self._key(attr)
        ids = _index_to_ids(attr.index, num_rows) if attr.is_set("index") else None
        shape = self._shape(key)
        return shape if ids is None else (int(ids.shape[0]),) + shape[1:]

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """The node attributes (what PyG's loaders gather for every batch's nodes)."""
        return [TensorAttr(self.node_type, name) for name in self._node_keys]

    def edge_tensor_attrs(self) -> list[TensorAttr]:
        """The edge attributes, indexed by original edge ID (``batch.e_id``)."""
        group = self.edge_type
        return [TensorAttr(group, name) for name in self._edge_keys]

    # -- writing: refused ----------------------------------------------------------------------
    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise TypeError(_READ_ONLY)

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise TypeError(_READ_ONLY)

    def __repr__(self) -> str:
        return (f"StoreFeatureStore({str(self.store.path)!r}, nodes={sorted(self._node_keys)}, "
                f"edges={sorted(self._edge_keys)})")


class StoreGraphStore(PyGGraphStore):
    """PyG's ``GraphStore`` over a graphpipe store's CSC: one edge attribute,
    ``EdgeAttr(edge_type, "csc", is_sorted=True, size=(N, N))``, served as
    ``(row, colptr)`` int64 tensors ``(E,)`` and ``(N + 1,)`` (built once, kept).
    Layout conversions (``csr()``, ``coo()``) and ``csc()`` return the store's
    ``csc/edge_id`` (composed with PyG's permutation) as the edge permutation, so
    sampled edge IDs are original edge-list positions."""

    def __init__(self, store: Any, *, edge_type: tuple[str, str, str] | None = None):
        super().__init__()
        self.store, self.edge_type = store, edge_type
        n = store.num_nodes
        self._attr = EdgeAttr(edge_type, EdgeLayout.CSC, is_sorted=True, size=(n, n))
        self._csc: tuple[torch.Tensor, torch.Tensor] | None = None
        self._edge_id: torch.Tensor | None = None

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[torch.Tensor, torch.Tensor] | None:
        if edge_attr.edge_type != self.edge_type or edge_attr.layout != EdgeLayout.CSC:
            return None
        if self._csc is None:
            indptr, indices = self.store.topology()  # invariants checked once
            self._csc = (torch.from_numpy(np.array(indices, dtype=np.int64)),
                         torch.from_numpy(np.array(indptr, dtype=np.int64)))
        return self._csc

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(self._attr.edge_type, self._attr.layout, self._attr.is_sorted,
                         self._attr.size)]

    @property
    def edge_id(self) -> torch.Tensor:
        """int64 ``(E,)``: original edge-list position of every CSC slot."""
        if self._edge_id is None:
            self._edge_id = torch.from_numpy(np.array(self.store.edge_id, dtype=np.int64))
        return self._edge_id

    def _with_edge_id(self, out: tuple) -> tuple:
        row, col, perm = out
        if not self.store.has_edge_ids:  # edge IDs are the CSC slots themselves
            return out
        if isinstance(perm, dict):  # heterogeneous: one entry per edge type
            perm = {k: self.edge_id if p is None else self.edge_id[p] for k, p in perm.items()}
        else:
            perm = self.edge_id if perm is None else self.edge_id[perm]
        return row, col, perm

    def csc(self, edge_types: list[Any] | None = None, store: bool = False) -> tuple:
        return self._with_edge_id(super().csc(edge_types, store))

    def csr(self, edge_types: list[Any] | None = None, store: bool = False) -> tuple:
        return self._with_edge_id(super().csr(edge_types, store))

    def coo(self, edge_types: list[Any] | None = None, store: bool = False) -> tuple:
        return self._with_edge_id(super().coo(edge_types, store))

    def _put_edge_index(self, edge_index: Any, edge_attr: EdgeAttr) -> bool:
        raise TypeError(_READ_ONLY)

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise TypeError(_READ_ONLY)

    def __repr__(self) -> str:
        return f"StoreGraphStore({str(self.store.path)!r}, edge_type={self.edge_type!r})"


class EdgeAttrs:
    """A PyG loader ``transform`` that adds the store's edge arrays to a batch, gathered
    by ``batch.e_id`` (original edge IDs): ``edge_attr`` ``(E_batch, dim)`` and any
    other ``edge/<name>``; a batch without ``e_id`` is returned unchanged."""

    def __init__(self, feature_store: StoreFeatureStore | TypedFeatureStore):
        self.feature_store = feature_store

    def __call__(self, batch: Any) -> Any:
        for attr in self.feature_store.edge_tensor_attrs():
            if isinstance(batch, HeteroData):
                if attr.group_name not in batch.edge_types:
                    continue
                target = batch[attr.group_name]
            else:
                target = batch
            if "e_id" in target:
                target[attr.attr_name] = self.feature_store.get_tensor(
                    attr.group_name, attr.attr_name, target.e_id)
        return batch


class PygBackend(tuple):
    """``(feature_store, graph_store)``: what PyG's loaders take as ``data``, with the
    whole-graph reads a script makes outside a loader (``data.x`` for layer-wise
    inference, ``data.y`` for evaluation) and the graph's sizes.

    Attributes:
        feature_store: the :class:`StoreFeatureStore`.
        graph_store: the :class:`StoreGraphStore`.
        edge_transform: an :class:`EdgeAttrs` for a loader's ``transform=``.
    """

    feature_store: StoreFeatureStore
    graph_store: StoreGraphStore

    def __new__(cls, feature_store: StoreFeatureStore,  # noqa: PYI034
                graph_store: StoreGraphStore) -> PygBackend:
        self = super().__new__(cls, (feature_store, graph_store))
        self.feature_store, self.graph_store = feature_store, graph_store
        self.edge_transform = EdgeAttrs(feature_store)
        return self

    def _all(self, name: str) -> torch.Tensor:
        return self.feature_store.get_tensor(self.feature_store.node_type, name, None)

    @property
    def x(self) -> torch.Tensor:
        """All node features ``(N, dim)`` (read from the store now)."""
        return self._all("x")

    @property
    def y(self) -> torch.Tensor:
        """All labels ``(N,)`` or ``(N, tasks)``."""
        return self._all("y")

    @property
    def num_nodes(self) -> int:
        return int(self.feature_store.store.num_nodes)

    @property
    def num_edges(self) -> int:
        return int(self.feature_store.store.num_edges)

    @property
    def num_features(self) -> int:
        return int(self.feature_store.store.feature_dim)

    @property
    def num_classes(self) -> int | None:
        """From the store's manifest (``labels.num_classes``); None when not recorded."""
        labels = self.feature_store.store.manifest.get("labels") or {}
        value = labels.get("num_classes")
        return None if value is None else int(value)


NODE_ID = "n_id"
"""The one attribute of a typed store's node type without arrays: the node IDs themselves."""


class TypedFeatureStore(FeatureStore):
    """PyG's ``FeatureStore`` over a typed store (read-only): group ``<node type>`` holds
    ``x`` ``(N_t, D_t)``, ``y`` ``(N_t,)`` and every other ``typed/<t>/<name>``; group
    ``(src, rel, dst)`` holds ``edge_attr`` and every other ``rel/<etype>/<name>``, indexed
    by original edge ID (the relation's ``edge_index`` column). Tensors come back as new
    CPU tensors of the stored dtype.

    >>> import tempfile, torch
    >>> from torch_geometric.data import HeteroData
    >>> import graphpipe
    >>> data = HeteroData()
    >>> data["paper"].x = torch.eye(3)
    >>> data["author"].num_nodes = 2
    >>> data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [2, 0, 1]])
    >>> data["author", "writes", "paper"].edge_attr = torch.tensor([0.5, 1.5, 2.5])
    >>> tmp = tempfile.TemporaryDirectory()
    >>> fs, gs = graphpipe.to_pyg_backend(graphpipe.from_pyg(data, tmp.name + "/h"))
    >>> fs["paper", "x", torch.tensor([2])].tolist(), fs["author", "n_id", None].tolist()
    ([[0.0, 0.0, 1.0]], [0, 1])
    >>> fs[("author", "writes", "paper"), "edge_attr", torch.tensor([0, 2])].tolist()
    [0.5, 2.5]
    >>> (attr,) = gs.get_all_edge_attrs(); attr.edge_type, attr.layout.value, attr.size
    (('author', 'writes', 'paper'), 'csc', (2, 3))
    >>> row, colptr = gs.get_edge_index(("author", "writes", "paper"), "csc")
    >>> row.tolist(), colptr.tolist()
    ([1, 1, 0], [0, 1, 2, 3])
    >>> tmp.cleanup()
    """

    def __init__(self, store: Any):
        super().__init__()
        self.store = store
        self._node_keys = {t: _typed_names(store, ts.NODE_ROOT + "/" + t, {"feat": "x", "label": "y"})
                           for t in store.node_types}
        self._edge_keys = {e: _typed_names(store, ts.rel_key(e, "")[:-1], {"edge_feat": "edge_attr"})
                           for e in store.edge_types}
        self._slots: dict[tuple[str, str, str], np.ndarray | None] = {}

    def _slot_of(self, etype: tuple[str, str, str], ids: np.ndarray | None) -> np.ndarray | None:
        """CSC slots of original edge IDs ``ids`` (None: all, in original order)."""
        if etype not in self._slots:
            edge_id = self.store.typed_edge_ids(etype)
            self._slots[etype] = None if edge_id is None else np.argsort(np.asarray(edge_id), kind="stable")
        inverse = self._slots[etype]
        if inverse is None:
            return ids
        return inverse if ids is None else inverse[ids]

    def _locate(self, attr: TensorAttr) -> tuple[str, np.ndarray | None]:
        """The array key of ``attr`` and the rows to read (None: all); KeyError if absent."""
        group, name = attr.group_name, attr.attr_name
        index = attr.index if attr.is_set("index") else None
        if isinstance(group, str) and name in self._node_keys.get(group, {}):
            return self._node_keys[group][name], _index_to_ids(index, self.store.num_nodes_dict[group])
        if name == NODE_ID and self._node_keys.get(group) == {}:
            return NODE_ID, _index_to_ids(index, self.store.num_nodes_dict[group])
        if isinstance(group, tuple) and name in self._edge_keys.get(group, {}):
            ids = _index_to_ids(index, self.store.num_edges_dict[group])
            return self._edge_keys[group][name], self._slot_of(group, ids)
        raise KeyError(f"no tensor {name!r} in group {group!r} of {self.store.path} "
                       f"(nodes: {self._node_keys}, edges: {self._edge_keys})")

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor:
        key, ids = self._locate(attr)
        if key == NODE_ID:
            n = self.store.num_nodes_dict[attr.group_name]
            return torch.from_numpy(np.arange(n, dtype=np.int64) if ids is None else ids.astype(np.int64))
        array = self.store.array(key)
        out = np.array(array) if ids is None else np.take(array, ids, axis=0)
        return torch.from_numpy(np.ascontiguousarray(out))

    def _get_tensor_size(self, attr: TensorAttr) -> tuple[int, ...]:
        key, ids = self._locate(attr)
        if key == NODE_ID:
            shape: tuple[int, ...] = (self.store.num_nodes_dict[attr.group_name],)
        else:
            shape = tuple(int(s) for s in self.store.manifest["arrays"][key]["shape"])
        return shape if ids is None else (int(ids.shape[0]),) + shape[1:]

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        """The node attributes of every type (what PyG's loaders gather for a batch's nodes);
        a type without arrays lists ``n_id`` (PyG's remote sampler knows a type by its
        attributes), which is the batch's own ``n_id``."""
        return [TensorAttr(t, name) for t, names in self._node_keys.items()
                for name in (names or [NODE_ID])]

    def edge_tensor_attrs(self) -> list[TensorAttr]:
        """The edge attributes of every relation, indexed by original edge ID (``e_id``)."""
        return [TensorAttr(e, name) for e, names in self._edge_keys.items() for name in names]

    def _put_tensor(self, tensor: Any, attr: TensorAttr) -> bool:
        raise TypeError(_READ_ONLY)

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise TypeError(_READ_ONLY)


def _typed_names(store: Any, prefix: str, renames: dict[str, str]) -> dict[str, str]:
    """PyG attribute name -> key of every array directly under ``prefix/`` (splits and the
    CSC left out)."""
    keys = sorted(k for k in store.manifest["arrays"]
                  if k.startswith(prefix + "/") and "/" not in k[len(prefix) + 1:])
    return {renames.get(k[len(prefix) + 1:], k[len(prefix) + 1:]): k for k in keys}


class TypedGraphStore(StoreGraphStore):
    """PyG's ``GraphStore`` over a typed store: one ``EdgeAttr(etype, "csc", is_sorted=True,
    size=(N_src, N_dst))`` per relation, served as ``(row, colptr)`` int64 tensors (built
    once, kept); ``csc()``/``csr()``/``coo()`` return each relation's ``csc/edge_id`` as its
    edge permutation, so sampled ``e_id`` are ``edge_index`` columns (layout conversions and
    the read-only refusals are :class:`StoreGraphStore`'s)."""

    def __init__(self, store: Any):
        PyGGraphStore.__init__(self)  # not StoreGraphStore.__init__ (one relation of a homogeneous store)
        self.store, self.edge_type = store, None
        n = store.num_nodes_dict
        self._attrs = {e: EdgeAttr(e, EdgeLayout.CSC, is_sorted=True, size=(n[e[0]], n[e[2]]))
                       for e in store.edge_types}
        self._csc: dict[tuple[str, str, str], tuple[torch.Tensor, torch.Tensor]] = {}

    def _get_edge_index(self, edge_attr: EdgeAttr) -> tuple[torch.Tensor, torch.Tensor] | None:
        etype = edge_attr.edge_type
        if etype not in self._attrs or edge_attr.layout != EdgeLayout.CSC:
            return None
        if etype not in self._csc:
            indptr, indices = self.store.typed_csc(etype)  # invariants checked once
            self._csc[etype] = (torch.from_numpy(np.array(indices, dtype=np.int64)),
                                torch.from_numpy(np.array(indptr, dtype=np.int64)))
        return self._csc[etype]

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(a.edge_type, a.layout, a.is_sorted, a.size) for a in self._attrs.values()]

    def _with_edge_id(self, out: tuple) -> tuple:
        row, col, perm = out
        mapped = {}
        for etype, p in perm.items():
            edge_id = self.store.typed_edge_ids(etype)
            edge_id = None if edge_id is None else torch.from_numpy(np.array(edge_id, dtype=np.int64))
            mapped[etype] = p if edge_id is None else (edge_id if p is None else edge_id[p])
        return row, col, mapped

    def __repr__(self) -> str:
        return f"TypedGraphStore({str(self.store.path)!r}, edge_types={list(self._attrs)!r})"


class TypedPygBackend(tuple):
    """``(feature_store, graph_store)`` of a typed store, what PyG's heterogeneous loaders
    take as ``data``; ``edge_transform`` (an :class:`EdgeAttrs`) adds every relation's edge
    arrays to a batch by ``e_id``."""

    feature_store: TypedFeatureStore
    graph_store: TypedGraphStore

    def __new__(cls, feature_store: TypedFeatureStore,  # noqa: PYI034
                graph_store: TypedGraphStore) -> TypedPygBackend:
        self = super().__new__(cls, (feature_store, graph_store))
        self.feature_store, self.graph_store = feature_store, graph_store
        self.edge_transform = EdgeAttrs(feature_store)
        return self

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """``(node types, edge types)``, as ``HeteroData.metadata()`` (for ``to_hetero``)."""
        store = self.feature_store.store
        return list(store.node_types), list(store.edge_types)


def to_pyg_backend(store: Any, *, features: bool | str = True,
                   node_type: str | None = None) -> PygBackend:
    """PyG's remote backend over ``store``: ``(feature_store, graph_store)``.

    Args:
        store: a :class:`graphpipe.store.GraphStore`.
        features: the tier node features are read from (``True``: memory when they fit,
            else the disk tier; ``"memory"``; ``"disk"``).
        node_type: None for a homogeneous graph (``Data`` batches); a name to present
            the store as a one-type heterogeneous graph (``HeteroData`` batches, edge
            type ``(node_type, "to", node_type)``).

    ``graphpipe.to_pyg_backend(store)`` is this function. PyG's own ``NeighborLoader``
    runs on the pair (``NeighborLoader((feature_store, graph_store), num_neighbors=[10],
    input_nodes=...)``; its sampler needs ``pyg-lib`` or ``torch-sparse``); the pair
    answers PyG's interfaces directly:

    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> import graphpipe
    >>> from graphpipe.ingest import ingest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz, path = os.path.join(tmp.name, "ring.npz"), os.path.join(tmp.name, "ring")
    >>> np.savez(npz, src=np.array([1, 2, 3, 4, 5, 0]), dst=np.arange(6),
    ...          x=np.arange(12, dtype=np.float32).reshape(6, 2), y=np.arange(6) % 2)
    >>> _ = ingest(npz, path)
    >>> feature_store, graph_store = graphpipe.to_pyg_backend(graphpipe.GraphStore.open(path))
    >>> feature_store.get_tensor(group_name=None, attr_name="x", index=torch.tensor([5, 0])).tolist()
    [[10.0, 11.0], [0.0, 1.0]]
    >>> graph_store.get_all_edge_attrs()[0].layout.value, graph_store.get_all_edge_attrs()[0].size
    ('csc', (6, 6))
    >>> row, colptr = graph_store.get_edge_index(edge_type=None, layout="csc")
    >>> row.tolist(), colptr.tolist()       # in-neighbours of node v: row[colptr[v]:colptr[v+1]]
    ([1, 2, 3, 4, 5, 0], [0, 1, 2, 3, 4, 5, 6])
    >>> tmp.cleanup()
    """
    if node_type is not None and (not isinstance(node_type, str) or not node_type):
        raise ValueError(f"'node_type' must be None or a non-empty string (got {node_type!r})")
    if getattr(store, "is_typed", False):
        if node_type is not None:
            raise ValueError(f"{store.location}: 'node_type' names the one type of a homogeneous "
                             f"store; this one has node types {store.node_types}")
        feature_store = TypedFeatureStore(store)
        return TypedPygBackend(feature_store, TypedGraphStore(store))
    feature_store = StoreFeatureStore(store, features=features, node_type=node_type)
    return PygBackend(feature_store, StoreGraphStore(store, edge_type=feature_store.edge_type))
