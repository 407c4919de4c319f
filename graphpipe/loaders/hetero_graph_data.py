"""What :class:`graphpipe.loaders.HeteroNeighborLoader` reads: :class:`HeteroGraphData`, a
typed graph (node types with their own counts, features, labels and splits; one CSC by
destination per relation) resolved from a typed :class:`graphpipe.store.GraphStore` or
its path, a PyG ``HeteroData`` or plain dicts (:func:`resolve_hetero_data`).

It has the read face of a typed store (``node_types``, ``num_nodes_dict``,
``edge_types``, ``num_edges_dict``, ``target_type``, ``typed_csc``, ``typed_features``,
``typed_labels``, ``typed_split``, ``typed_split_names``), so code written against one
works on the other. Edge lists given as ``(src, dst)`` become CSCs with each
destination's sources sorted (PyG's ``is_sorted`` order); ``edge_order[etype][slot]``
keeps each CSC slot's position in the given edge list, which a batch's ``e_id`` reports.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.graph_data import coo_to_csc, numeric_array
from graphpipe.loaders.pyg_arrays import MASK_SPLITS
from graphpipe.ops.sampling.types import EdgeType, HeteroCSC, as_etype, etype_str

__all__ = ["HeteroGraphData", "add_reverse_relations", "is_typed_data", "resolve_hetero_data",
           "resolve_typed_input"]

@dataclass
class HeteroGraphData:
    """A typed graph as a loader reads it.

    Attributes:
        graph: the relations, checked once (:class:`graphpipe.ops.sampling.HeteroCSC`).
        features: ``{ntype: (N_t, D_t)}`` feature rows (arrays or memory maps); types
            without features are absent.
        labels: ``{ntype: (N_t,) or (N_t, tasks)}`` labels (``-1`` unlabelled).
        splits: ``{ntype: {name: int64 local IDs}}`` (``train`` / ``valid`` / ``test``).
        target_type: the type with labels and splits (``None`` when unknown).
        edge_features: ``{etype: (E, D)}`` edge features in CSC order (row ``k`` is CSC
            slot ``k``'s edge); relations without them are absent.
        edge_order: ``{etype: int64 (E,)}`` position of each CSC slot in the input edge
            list (``data[etype].edge_index`` of a HeteroData); absent: slots are reported.
        store: the typed :class:`graphpipe.store.GraphStore` when read from one.

    >>> import numpy as np
    >>> data = HeteroGraphData.from_dicts(
    ...     {"paper": 3, "author": 2},
    ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
    ...     x={"paper": np.eye(3, dtype=np.float32)}, y={"paper": np.array([1, 0, 1])},
    ...     splits={"paper": {"train": np.array([0, 2])}})
    >>> data.target_type, data.num_edges_dict
    ('paper', {('author', 'writes', 'paper'): 3})
    >>> [a.tolist() for a in data.typed_csc(("author", "writes", "paper"))]
    [[0, 2, 2, 3], [0, 1, 1]]
    >>> data.typed_split("paper", "train").tolist(), data.typed_features("author")
    ([0, 2], None)
    """

    graph: HeteroCSC
    features: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    splits: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    target_type: str | None = None
    edge_order: dict[EdgeType, np.ndarray] = field(default_factory=dict)
    edge_features: dict[EdgeType, Any] = field(default_factory=dict)
    store: Any = None

    # -- the typed store's read face ----------------------------------------------------------
    is_typed = True

    @property
    def node_types(self) -> list[str]:
        return list(self.graph.num_nodes)

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        return dict(self.graph.num_nodes)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.graph.edge_types)

    @property
    def num_edges_dict(self) -> dict[EdgeType, int]:
        return {et: self.graph.num_edges(et) for et in self.graph.edge_types}

    def typed_csc(self, etype: Any) -> tuple[np.ndarray, np.ndarray]:
        return self.graph.csc[as_etype(etype)]

    def typed_edge_features(self, etype: Any) -> Any:
        """``(E, D)`` features of ``etype``'s edges in CSC order, or None."""
        return self.edge_features.get(as_etype(etype))

    def typed_features(self, ntype: str) -> Any:
        return self.features.get(ntype)

    def typed_labels(self, ntype: str) -> np.ndarray | None:
        return self.labels.get(ntype)

    def typed_num_classes(self, ntype: str) -> int | None:
        """Classes of ``ntype``'s labels (the store's record, else ``max + 1``), or None."""
        if self.store is not None:
            return self.store.typed_num_classes(ntype)
        labels = self.labels.get(ntype)
        if labels is None or np.asarray(labels).size == 0:
            return None
        return int(np.asarray(labels).max()) + 1

    def typed_edge_ids(self, etype: Any) -> np.ndarray | None:
        """Input edge-list position of every CSC slot of ``etype`` (None: not known)."""
        return self.edge_order.get(as_etype(etype))

    def typed_node_time(self, ntype: str) -> np.ndarray | None:
        """Timestamps of ``ntype``'s nodes (a store's), or None."""
        return None if self.store is None else self.store.typed_node_time(ntype)

    def typed_edge_time(self, etype: Any) -> np.ndarray | None:
        """Timestamps of ``etype``'s edges in CSC order (a store's relations), or None."""
        et = as_etype(etype)
        if self.store is None or et not in self.store.edge_types:
            return None
        return self.store.typed_edge_time(et)

    def typed_split_names(self, ntype: str) -> list[str]:
        return list(self.splits.get(ntype, {}))

    def typed_split(self, ntype: str, name: str) -> np.ndarray:
        if name not in self.splits.get(ntype, {}):
            raise ValueError(f"node type {ntype!r} has no split {name!r} "
                             f"(known: {self.typed_split_names(ntype)})")
        return np.asarray(self.splits[ntype][name], dtype=np.int64)

    def in_degrees(self, ntype: str) -> np.ndarray:
        """int64 ``(N_t,)`` in-degree of every node of ``ntype`` summed over relations."""
        deg = np.zeros(self.graph.num_nodes[ntype], dtype=np.int64)
        for et in self.graph.edge_types:
            if et[2] == ntype:
                deg += np.diff(self.graph.csc[et][0])
        return deg

    def with_reverse_relations(self, prefix: str = "rev_", *, merge: bool = False) -> HeteroGraphData:
        """A copy with the reverse of every relation added after them: ``(d, prefix + r, s)``
        for each ``(s, r, d)``, as PyG's ``T.ToUndirected(merge=False)`` (so hops also reach
        the sources' types, e.g. papers -> authors). Each reverse CSC is the transpose of its
        relation (sources ascending per row); its ``e_id`` is the forward edge's.
        ``merge=True`` is PyG's default ``T.ToUndirected()`` instead: a relation within one
        type (``paper cites paper``) is made symmetric in place rather than reversed
        (:func:`add_reverse_relations`).

        >>> import numpy as np
        >>> data = HeteroGraphData.from_dicts({"paper": 2, "author": 2},
        ...     {("author", "writes", "paper"): (np.array([1, 0, 1]), np.array([0, 1, 1]))})
        >>> both = data.with_reverse_relations()
        >>> both.edge_types
        [('author', 'writes', 'paper'), ('paper', 'rev_writes', 'author')]
        >>> [a.tolist() for a in both.typed_csc(("paper", "rev_writes", "author"))]
        [[0, 1, 3], [1, 0, 1]]
        >>> both.edge_order[("paper", "rev_writes", "author")].tolist()
        [1, 0, 2]
        """
        if merge:
            merged = add_reverse_relations(self)
            # relations within one type were made symmetric (a new CSC): their rows no longer fit
            merged.edge_features = {et: f for et, f in self.edge_features.items() if et[0] != et[2]}
            return merged
        csc = dict(self.graph.csc)
        order, feats = dict(self.edge_order), dict(self.edge_features)
        for et in self.graph.edge_types:
            rev = (et[2], prefix + et[1], et[0])
            if rev in csc:
                raise ValueError(f"relation {etype_str(rev)!r} exists already; pick another 'prefix'")
            indptr, indices = self.graph.csc[et]
            indices = np.asarray(indices)
            num_src = self.graph.num_nodes[et[0]]
            slots = np.argsort(indices, kind="stable")       # by source, destinations ascending
            rev_indptr = np.zeros(num_src + 1, dtype=np.int64)
            np.cumsum(np.bincount(indices, minlength=num_src), out=rev_indptr[1:])
            dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))[slots]
            csc[rev] = (rev_indptr, dst.astype(indices.dtype if len(indptr) - 1 < 2**31 else np.int64))
            order[rev] = self.edge_order[et][slots] if et in self.edge_order else slots
            if et in self.edge_features:
                feats[rev] = np.asarray(self.edge_features[et])[slots]
        graph = HeteroCSC(num_nodes=dict(self.graph.num_nodes), edge_types=list(csc), csc=csc,
                          checked=self.graph.checked)  # transposes of checked relations
        return HeteroGraphData(graph=graph, features=self.features, labels=self.labels,
                               splits=self.splits, target_type=self.target_type, edge_order=order,
                               store=self.store, edge_features=feats)

    # -- construction --------------------------------------------------------------------------
    @classmethod
    def from_dicts(cls, num_nodes: Mapping[str, int], edges: Mapping[Any, tuple[Any, Any]], *,
                   x: Mapping[str, Any] | None = None, y: Mapping[str, Any] | None = None,
                   splits: Mapping[str, Mapping[str, Any]] | None = None,
                   target_type: str | None = None,
                   edge_attr: Mapping[Any, Any] | None = None) -> HeteroGraphData:
        """From ``{ntype: N_t}``, ``{etype: (src, dst)}`` edge lists (local IDs; tuple or
        ``"src___rel___dst"`` keys), ``x``/``y`` per type, ``{ntype: {name: ids}}`` splits
        and ``edge_attr`` ``{etype: (E, D)}`` in edge-list order. ``target_type`` defaults
        to the only labelled type."""
        counts = {t: int(n) for t, n in num_nodes.items()}
        csc, order = {}, {}
        for key, pair in edges.items():
            et = as_etype(key)
            if et[0] not in counts or et[2] not in counts:
                raise ValueError(f"relation {etype_str(et)!r} names a node type not in 'num_nodes'")
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise ValueError(f"relation {etype_str(et)!r} must be given as (src, dst)")
            ip, ind, order[et] = coo_to_csc(pair[0], pair[1], counts[et[0]], counts[et[2]],
                                           f"relation {etype_str(et)!r}")
            csc[et] = (ip, ind)
        data = cls(graph=HeteroCSC.from_arrays(counts, csc), edge_order=order)
        data._add_nodes(x or {}, y or {}, splits or {})
        data._add_edge_attr(edge_attr or {})
        data.target_type = target_type if target_type is not None else data._only_labelled()
        if data.target_type is not None and data.target_type not in counts:
            raise ValueError(f"'target_type' {data.target_type!r} is not a node type")
        return data

    def _add_nodes(self, x: Mapping[str, Any], y: Mapping[str, Any],
                   splits: Mapping[str, Mapping[str, Any]]) -> None:
        counts = self.graph.num_nodes
        for kind, given in (("x", x), ("y", y), ("splits", splits)):
            unknown = set(given) - set(counts)
            if unknown:
                raise ValueError(f"'{kind}' names unknown node types {sorted(unknown)}")
        for t, v in x.items():
            arr = numeric_array(v, f"x[{t!r}]")
            arr = arr.reshape(-1, 1) if arr.ndim == 1 else arr
            if arr.ndim != 2 or arr.shape[0] != counts[t]:
                raise ValueError(f"x[{t!r}] must have {counts[t]} rows (got shape {arr.shape})")
            self.features[t] = np.ascontiguousarray(arr)
        for t, v in y.items():
            arr = numeric_array(v, f"y[{t!r}]")
            if arr.shape[0] != counts[t]:
                raise ValueError(f"y[{t!r}] must have {counts[t]} rows (got shape {arr.shape})")
            self.labels[t] = arr
        for t, named in splits.items():
            self.splits[t] = {}
            for name, ids in named.items():
                ids = numeric_array(ids, f"splits[{t!r}][{name!r}]").astype(np.int64).ravel()
                if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= counts[t]):
                    raise ValueError(f"splits[{t!r}][{name!r}] must be IDs in [0, {counts[t]})")
                self.splits[t][name] = ids

    def _add_edge_attr(self, edge_attr: Mapping[Any, Any]) -> None:
        for key, value in edge_attr.items():
            et = as_etype(key)
            if et not in self.graph.csc:
                raise ValueError(f"'edge_attr' names an unknown relation {etype_str(et)!r}")
            arr = numeric_array(value, f"edge_attr[{etype_str(et)!r}]")
            if arr.shape[0] != self.graph.num_edges(et):
                raise ValueError(f"edge_attr[{etype_str(et)!r}] must have {self.graph.num_edges(et)} "
                                 f"rows (got shape {arr.shape})")
            self.edge_features[et] = np.ascontiguousarray(arr[self.edge_order[et]])  # CSC order

    def _only_labelled(self) -> str | None:
        labelled = list(self.labels) or list(self.splits)
        return labelled[0] if len(labelled) == 1 else None

    @classmethod
    def from_pyg(cls, data: Any) -> HeteroGraphData:
        """From a ``torch_geometric.data.HeteroData``: every node type (``num_nodes``, ``x``,
        ``y``, boolean ``train_mask``/``val_mask``/``test_mask`` as splits
        ``train``/``valid``/``test``) and every edge type's ``edge_index`` and ``edge_attr``."""
        from torch_geometric.data import HeteroData

        if not isinstance(data, HeteroData):
            raise ValueError(f"expected a torch_geometric HeteroData (got {type(data).__name__})")  # noqa: TRY004 - bad arguments are ValueError here
        counts = {t: int(data[t].num_nodes or 0) for t in data.node_types}
        edges = {}
        for et in data.edge_types:
            ei = data[et].get("edge_index")
            if ei is None or ei.dim() != 2 or ei.size(0) != 2:
                raise ValueError(f"HeteroData[{et}] needs a (2, E) edge_index")
            edges[et] = (ei[0], ei[1])
        x = {t: data[t].x for t in data.node_types if data[t].get("x") is not None}
        y = {t: data[t].y for t in data.node_types if data[t].get("y") is not None}
        splits = {}
        for t in data.node_types:
            named = {name: torch.nonzero(data[t][m]).view(-1) for m, name in MASK_SPLITS.items()
                     if isinstance(data[t].get(m), torch.Tensor) and data[t][m].dtype == torch.bool}
            if named:
                splits[t] = named
        edge_attr = {et: data[et].edge_attr for et in data.edge_types
                     if isinstance(data[et].get("edge_attr"), torch.Tensor)}
        return cls.from_dicts(counts, edges, x=x, y=y, splits=splits, edge_attr=edge_attr)

    @classmethod
    def open(cls, path: str | os.PathLike) -> HeteroGraphData:
        """The typed store at ``path`` (:meth:`from_store` of ``GraphStore.open(path)``)."""
        return resolve_hetero_data(os.fspath(path))

    @classmethod
    def from_store(cls, store: Any) -> HeteroGraphData:
        """From a typed :class:`graphpipe.store.GraphStore` (``store.is_typed``): its
        relations (:meth:`GraphStore.typed_csc` checks each once), feature memory maps,
        labels, splits and edge order (``csc/edge_id``: a batch's ``e_id`` is the position
        in the ingested edge list)."""
        if not getattr(store, "is_typed", False):
            raise ValueError(f"{getattr(store, 'path', 'the store')}: not a typed store "
                             "(no node_types in its manifest); use NeighborLoader")
        csc = {et: store.typed_csc(et) for et in store.edge_types}  # checked by the store, once
        graph = HeteroCSC(num_nodes=store.num_nodes_dict, edge_types=list(csc), csc=csc, checked=True)
        order = {et: store.typed_edge_ids(et) for et in csc}
        data = cls(graph=graph, store=store, target_type=store.target_type,
                   edge_order={et: o for et, o in order.items() if o is not None})
        for t in store.node_types:
            feat = store.typed_features(t)
            if feat is not None:
                data.features[t] = feat.reshape(-1, 1) if feat.ndim == 1 else feat
            label = store.typed_labels(t)
            if label is not None:
                data.labels[t] = label
            names = store.typed_split_names(t)
            if names:
                data.splits[t] = {n: np.asarray(store.typed_split(t, n), dtype=np.int64) for n in names}
        for et in csc:
            feat = store.typed_edge_features(et)
            if feat is not None:
                data.edge_features[et] = feat
        return data


# -- reverse relations (PyG's ``T.ToUndirected()``) ---------------------------------------------
# OGB ships each relation in one direction only (ogbn-mag: ``author -writes-> paper``, ...), so
# messages never flow from a paper's fields or its authors back to the paper.
# :func:`add_reverse_relations` returns the same graph with, for every relation ``(s, r, d)``
# between two types, a relation ``(d, "rev_" + r, s)`` holding the transposed edges, and every
# relation within one type made symmetric (both directions, duplicates dropped): PyG's
# ``ToUndirected(merge=True)`` on a ``HeteroData``. Built in memory (one ``(E,)`` index per new
# relation); features, labels and splits are shared, not copied. A reverse edge's ``e_id`` is its
# forward edge's (PyG's ``ToUndirected`` flips ``edge_index`` in place); a merged same-type
# relation reports CSC slots.


def _coo(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` int64 of a CSC by destination."""
    indptr = np.asarray(indptr, dtype=np.int64)
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return np.asarray(indices, dtype=np.int64), dst


def _symmetric(indptr: np.ndarray, indices: np.ndarray, n: int, where: str
               ) -> tuple[np.ndarray, np.ndarray]:
    src, dst = _coo(indptr, indices)
    pairs = np.unique(np.concatenate([dst * n + src, src * n + dst]))
    csc_indptr, csc_indices, _ = coo_to_csc(pairs % n, pairs // n, n, n, where)
    return csc_indptr, csc_indices


def add_reverse_relations(data: HeteroGraphData) -> HeteroGraphData:
    """``data`` with reverse relations added (see the module docstring).

    >>> import numpy as np
    >>> data = HeteroGraphData.from_dicts(
    ...     {"paper": 2, "author": 3},
    ...     {("author", "writes", "paper"): (np.array([0, 2]), np.array([1, 1])),
    ...      ("paper", "cites", "paper"): (np.array([0]), np.array([1]))})
    >>> both = add_reverse_relations(data)
    >>> both.edge_types
    [('author', 'writes', 'paper'), ('paper', 'cites', 'paper'), ('paper', 'rev_writes', 'author')]
    >>> [a.tolist() for a in both.typed_csc(("paper", "rev_writes", "author"))]
    [[0, 1, 1, 2], [1, 1]]
    >>> both.edge_order[("paper", "rev_writes", "author")].tolist()   # the forward edges' IDs
    [0, 1]
    >>> [a.tolist() for a in both.typed_csc(("paper", "cites", "paper"))]
    [[0, 1, 2], [1, 0]]
    """
    graph, counts = data.graph, data.graph.num_nodes
    csc = dict(graph.csc)
    order = dict(data.edge_order)
    names = set(graph.edge_types)
    for et in list(graph.edge_types):
        s, r, d = et
        if r.startswith("rev_") and (d, r[4:], s) in names:
            continue  # already a reverse (``graphpipe ingest --add-reverse-edges``)
        indptr, indices = graph.csc[et]
        where = "___".join(et)
        if s == d:
            csc[et] = _symmetric(indptr, indices, counts[s], where)
            order.pop(et, None)  # merged edges have no single input position
            continue
        rev = (d, "rev_" + r, s)
        if rev in names:
            continue
        src, dst = _coo(indptr, indices)
        rev_indptr, rev_indices, slots = coo_to_csc(dst, src, counts[d], counts[s], where)
        csc[rev] = (rev_indptr, rev_indices)
        # a reverse edge's e_id is its forward edge's (PyG flips edge_index in place)
        order[rev] = data.edge_order[et][slots] if et in data.edge_order else slots
    new_graph = HeteroCSC.from_arrays(counts, csc)
    return replace(data, graph=new_graph, edge_order=order)


def resolve_typed_input(data: HeteroGraphData, input_nodes: Any) -> tuple[str, np.ndarray, bool]:
    """``(node type, int64 seed IDs, input_id by node ID)`` of a typed loader's
    ``input_nodes``: ``(ntype, ids | mask | split name | None)``, a node type alone, or None
    (every node of ``data.target_type``); ``ValueError`` naming what is wrong.

    >>> data = HeteroGraphData.from_dicts({"paper": 3, "author": 2},
    ...     {("author", "writes", "paper"): (np.array([0, 1]), np.array([2, 0]))},
    ...     splits={"paper": {"train": np.array([0, 2])}})
    >>> [(t, ids.tolist(), by_node) for t, ids, by_node in
    ...  (resolve_typed_input(data, spec) for spec in (None, ("paper", "train"), "author"))]
    [('paper', [0, 1, 2], True), ('paper', [0, 2], False), ('author', [0, 1], True)]
    """
    if input_nodes is None:
        if data.target_type is None:
            raise ValueError("'input_nodes' is needed: the data names no target type")
        ntype, spec = data.target_type, None
    elif isinstance(input_nodes, str):
        ntype, spec = input_nodes, None
    elif isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 and isinstance(input_nodes[0], str):
        ntype, spec = input_nodes
    else:
        raise ValueError("'input_nodes' must be None, a node type, or (node type, IDs | mask | "
                         f"split name | None) (got {type(input_nodes).__name__})")
    if ntype not in data.num_nodes_dict:
        raise ValueError(f"'input_nodes' names an unknown node type {ntype!r} (known: {data.node_types})")
    n = data.num_nodes_dict[ntype]
    if spec is None:
        return ntype, np.arange(n, dtype=np.int64), True
    if isinstance(spec, str):
        return ntype, data.typed_split(ntype, spec), False
    ids = spec.detach().cpu().numpy() if isinstance(spec, torch.Tensor) else np.asarray(spec)
    if ids.dtype == np.bool_:
        if ids.shape != (n,):
            raise ValueError(f"'input_nodes' mask must have {n} entries (got {ids.shape})")
        return ntype, np.flatnonzero(ids).astype(np.int64), True
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'input_nodes' IDs must be a 1-D integer array (got {ids.dtype}, ndim {ids.ndim})")
    ids = ids.astype(np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise ValueError(f"'input_nodes' IDs of {ntype!r} must lie in [0, {n})")
    if np.unique(ids).shape[0] != ids.shape[0]:
        raise ValueError("'input_nodes' IDs must be distinct")
    return ntype, ids, False


def resolve_hetero_data(data: Any) -> HeteroGraphData:
    """A :class:`HeteroGraphData` from itself, a typed store or its path, or a PyG
    ``HeteroData``; ``ValueError`` otherwise."""
    if isinstance(data, HeteroGraphData):
        return data
    if isinstance(data, (str, os.PathLike)):
        if not Path(data).is_dir():
            raise ValueError(f"'data' is not a store directory (got {str(data)!r})")
        from graphpipe.store import GraphStore

        data = GraphStore.open(data)
    if type(data).__module__.split(".")[0] == "torch_geometric":
        return HeteroGraphData.from_pyg(data)
    if hasattr(data, "manifest") and hasattr(data, "path"):
        return HeteroGraphData.from_store(data)
    raise ValueError("'data' must be a HeteroGraphData, a typed GraphStore or its path, or a PyG "
                     f"HeteroData (got {type(data).__name__})")


def is_typed_data(data: Any) -> bool:
    """Whether ``data`` is a typed graph a :class:`HeteroNeighborLoader` reads: a
    :class:`HeteroGraphData`, a PyG ``HeteroData``, a typed store, or the path of a store
    whose manifest names node types (anything unreadable answers False)."""
    if isinstance(data, HeteroGraphData):
        return True
    kind = type(data)
    if kind.__name__ == "HeteroData" and kind.__module__.split(".")[0] == "torch_geometric":
        return True
    if isinstance(data, (str, os.PathLike)):
        try:
            with open(Path(data) / "manifest.json", encoding="utf-8") as fh:
                manifest = json.load(fh)
        except (OSError, ValueError):
            return False
        return isinstance(manifest, dict) and bool(manifest.get("node_types"))
    return hasattr(data, "manifest") and bool(getattr(data, "is_typed", False))
