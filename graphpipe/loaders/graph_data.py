"""What a loader reads, whatever it was given: one :class:`GraphData` for every graph.

A graph is node types (each with its count, feature rows, labels and splits) and relations
(one CSC by destination each), as PyG's ``HeteroData`` and the store's typed face
(:mod:`graphpipe.store.types`) see it. A homogeneous graph is the one-type case: type
``_N``, relation ``("_N", "_E", "_N")`` (DGL's names), and answers the homogeneous face too
(``indptr``, ``indices``, ``num_nodes``, ``feature_chunks``, ``split(name)``, ``attrs``).
``is_typed`` records which face the caller gave: a ``Data``, a homogeneous store or arrays
give ``False`` (loaders yield :class:`~graphpipe.loaders.minibatch.MiniBatch` es); a
``HeteroData``, a typed store or :meth:`GraphData.from_dicts` give ``True`` (typed batches),
whatever the number of types, as PyG's loaders answer ``Data`` and ``HeteroData``.

Built in memory (no store written) by :meth:`GraphData.from_pyg` (``Data`` and
``HeteroData``), :meth:`GraphData.from_dicts` and :meth:`GraphData.from_arrays`, or read
from a store (:meth:`GraphData.from_store`, :meth:`GraphData.open`);
:func:`resolve_graph_data` picks the right one. Edge lists given as ``(src, dst)`` become
CSCs with each destination's sources sorted (PyG's ``is_sorted`` order);
``edge_order[etype][slot]`` keeps each CSC slot's position in the given edge list, which a
batch's ``e_id`` reports. ``HeteroGraphData`` is the former name of the typed case, kept
as an alias of :class:`GraphData`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.from_sample import BatchAttrs
from graphpipe.loaders.pyg_arrays import mask_splits, pyg_parts, pyg_typed_parts
from graphpipe.loaders.rows import ChunkedRows
from graphpipe.ops.sampling.types import (
    DEFAULT_ETYPE,
    DEFAULT_NTYPE,
    EdgeType,
    HeteroCSC,
    as_etype,
    etype_str,
)
from graphpipe.store.checks import check_topology

__all__ = [
    "GraphData",
    "HeteroGraphData",
    "add_reverse_relations",
    "coo_to_csc",
    "is_mask",
    "is_typed_data",
    "node_ids",
    "numeric_array",
    "resolve_graph_data",
    "resolve_typed_input",
]


@dataclass
class GraphData:
    """A graph as a loader reads it: node types and relations (module docstring).

    Attributes:
        graph: the relations, checked once (:class:`graphpipe.ops.sampling.HeteroCSC`).
        features: ``{ntype: (N_t, D_t)}`` feature rows (arrays or memory maps); types
            without features are absent.
        labels: ``{ntype: (N_t,) or (N_t, tasks)}`` labels (``-1`` unlabelled).
        splits: ``{ntype: {name: int64 local IDs}}`` (``train`` / ``valid`` / ``test``).
        target_type: the type with labels and splits (``None`` when unknown; ``_N`` for a
            homogeneous graph).
        edge_order: ``{etype: int64 (E,)}`` position of each CSC slot in the input edge
            list (``edge_index`` of a ``Data`` / ``HeteroData``, a store's ``csc/edge_id``);
            absent: slots are reported.
        edge_features: ``{etype: (E, D)}`` edge features in CSC order (row ``k`` is CSC
            slot ``k``'s edge); relations without them are absent.
        store: the :class:`graphpipe.store.GraphStore` when read from one.
        is_typed: which batches loaders yield (module docstring).
        attrs: what homogeneous batches carry besides ``x`` and ``y`` (edge order in input
            order, ``edge_attr``, other node and edge arrays;
            :class:`graphpipe.loaders.from_sample.BatchAttrs`).
        chunks: ``{ntype: (views, rows per view)}`` for a type whose rows a store keeps as
            several chunk views (a homogeneous store's ``node/feat``); such a type has no
            ``features`` entry (:meth:`feature_rows` reads both).

    >>> import numpy as np
    >>> data = GraphData.from_dicts(
    ...     {"paper": 3, "author": 2},
    ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
    ...     x={"paper": np.eye(3, dtype=np.float32)}, y={"paper": np.array([1, 0, 1])},
    ...     splits={"paper": {"train": np.array([0, 2])}})
    >>> data.target_type, data.num_edges_dict, data.is_typed
    ('paper', {('author', 'writes', 'paper'): 3}, True)
    >>> [a.tolist() for a in data.typed_csc(("author", "writes", "paper"))]
    [[0, 2, 2, 3], [0, 1, 1]]
    >>> data.typed_split("paper", "train").tolist(), data.typed_features("author")
    ([0, 2], None)

    The one-type case, from CSC arrays (the homogeneous face answers too):

    >>> ring = GraphData.from_arrays({"indptr": [0, 1, 2, 3], "indices": [2, 0, 1],
    ...                               "y": [0, 1, 1], "splits": {"train": [0, 2]}})
    >>> ring.node_types, ring.edge_types, ring.is_typed
    (['_N'], [('_N', '_E', '_N')], False)
    >>> ring.num_nodes, ring.indptr.tolist(), ring.split("train").tolist(), ring.typed_labels("_N").tolist()
    (3, [0, 1, 2, 3], [0, 2], [0, 1, 1])
    """

    graph: HeteroCSC
    features: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, np.ndarray] = field(default_factory=dict)
    splits: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    target_type: str | None = None
    edge_order: dict[EdgeType, np.ndarray] = field(default_factory=dict)
    edge_features: dict[EdgeType, Any] = field(default_factory=dict)
    store: Any = None
    is_typed: bool = True
    attrs: BatchAttrs = field(default_factory=BatchAttrs)
    chunks: dict[str, tuple[list[np.ndarray], int]] = field(default_factory=dict)
    _rows: dict[str, ChunkedRows] = field(default_factory=dict, repr=False)

    # -- the typed read face (a typed store's) -------------------------------------------------
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
        """``(indptr, indices)`` of relation ``etype`` (``ValueError`` for an unknown one).

        >>> from torch_geometric.data import Data
        >>> graph = GraphData.from_pyg(Data(edge_index=torch.tensor([[1], [0]]), num_nodes=2))
        >>> graph.node_types, graph.edge_types, [a.tolist() for a in graph.typed_csc(graph.edge_types[0])]
        (['_N'], [('_N', '_E', '_N')], [[0, 1, 1], [1]])
        """
        et = as_etype(etype)
        if et not in self.graph.csc:
            raise ValueError(f"the graph has no relation {etype!r} (relations: {self.edge_types})")
        return self.graph.csc[et]

    def typed_edge_features(self, etype: Any) -> Any:
        """``(E, D)`` features of ``etype``'s edges in CSC order, or None."""
        return self.edge_features.get(as_etype(etype))

    def feature_types(self) -> list[str]:
        """The node types that have feature rows."""
        return [t for t in self.graph.num_nodes if t in self.features or t in self.chunks]

    def typed_features(self, ntype: str) -> Any:
        """``(N_t, D_t)`` features of ``ntype`` (one array; a store's chunked rows are read
        from the store), or None."""
        self._known(ntype)
        if ntype in self.chunks:
            views = self.chunks[ntype][0]
            return views[0] if len(views) == 1 or self.store is None else self.store.typed_features(ntype)
        return self.features.get(ntype)

    def feature_rows(self, ntype: str | None = None) -> ChunkedRows:
        """``ntype``'s feature rows (the one type's when None) as a row source over the
        arrays or chunk views (built once, not copied)."""
        ntype = self._one_type() if ntype is None else self._known(ntype)
        if ntype not in self._rows:
            views = self._views(ntype)
            if views is None:
                raise ValueError(f"node type {ntype!r} has no features")
            self._rows[ntype] = ChunkedRows(*views)
        return self._rows[ntype]

    def _views(self, ntype: str) -> tuple[list[np.ndarray], int] | None:
        """``(chunk views, rows per view)`` of ``ntype``'s features, or None."""
        if ntype in self.chunks:
            return self.chunks[ntype]
        feat = self.features.get(ntype)
        return None if feat is None else ([feat], max(1, feat.shape[0]))

    def typed_labels(self, ntype: str) -> np.ndarray | None:
        return self.labels.get(self._known(ntype))

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
        if self._known(ntype) not in self.splits and self.store is not None:
            return list(self.store.typed_split_names(ntype))   # a store's, read when asked
        return list(self.splits.get(ntype, {}))

    def typed_split(self, ntype: str, name: str) -> np.ndarray:
        if name not in self.typed_split_names(ntype):
            raise ValueError(f"node type {ntype!r} has no split {name!r} "
                             f"(known: {self.typed_split_names(ntype)})")
        if ntype not in self.splits:
            return np.asarray(self.store.typed_split(ntype, name), dtype=np.int64)
        return np.asarray(self.splits[ntype][name], dtype=np.int64)

    def in_degrees(self, ntype: str) -> np.ndarray:
        """int64 ``(N_t,)`` in-degree of every node of ``ntype`` summed over relations."""
        deg = np.zeros(self.graph.num_nodes[ntype], dtype=np.int64)
        for et in self.graph.edge_types:
            if et[2] == ntype:
                deg += np.diff(self.graph.csc[et][0])
        return deg

    def _known(self, ntype: str) -> str:
        if ntype not in self.graph.num_nodes:
            raise ValueError(f"the graph has no type {ntype!r} (types: {self.node_types})")
        return ntype

    # -- the homogeneous face: the one node type and the one relation --------------------------
    def _one_type(self) -> str:
        if len(self.graph.num_nodes) != 1:
            raise ValueError(f"a graph of several node types ({self.node_types}) has no single "
                             "node array: name the type (typed_features, typed_split, ...)")
        return next(iter(self.graph.num_nodes))

    def _one_relation(self) -> EdgeType:
        if len(self.graph.edge_types) != 1:
            raise ValueError(f"a graph of {len(self.graph.edge_types)} relations has no single CSC: "
                             "name the relation (typed_csc)")
        return self.graph.edge_types[0]

    @property
    def indptr(self) -> np.ndarray:
        """int64 ``(N+1,)`` CSC offsets by destination of the one relation."""
        return self.graph.csc[self._one_relation()][0]

    @property
    def indices(self) -> np.ndarray:
        """int32/int64 ``(E,)`` in-neighbour IDs of the one relation."""
        return self.graph.csc[self._one_relation()][1]

    @property
    def num_nodes(self) -> int:
        """Nodes of every type together (``N`` of a homogeneous graph)."""
        return sum(self.graph.num_nodes.values())

    @property
    def feature_chunks(self) -> list[np.ndarray] | None:
        """The one type's feature rows as chunk views (``chunks[c]`` holds rows
        ``c * chunk_rows ...``), or None without features."""
        views = self._views(self._one_type())
        return None if views is None else views[0]

    @property
    def chunk_rows(self) -> int:
        """Rows per chunk view of the one type's features (1 without features)."""
        views = self._views(self._one_type())
        return 1 if views is None else views[1]

    def feature_dim(self) -> int:
        return int(self.feature_rows().dim)

    @property
    def split_names(self) -> list[str]:
        return self.typed_split_names(self._one_type())

    def split(self, name: str) -> np.ndarray:
        """int64 IDs of the one type's split ``name`` (``ValueError`` naming the known ones)."""
        if name not in self.split_names:
            raise ValueError(f"'input_nodes' names an unknown split {name!r}; "
                             f"known splits: {self.split_names}")
        return self.typed_split(self._one_type(), name)

    # -- transforms ------------------------------------------------------------------------------
    def with_reverse_relations(self, prefix: str = "rev_", *, merge: bool = False) -> GraphData:
        """A copy with the reverse of every relation added after them: ``(d, prefix + r, s)``
        for each ``(s, r, d)``, as PyG's ``T.ToUndirected(merge=False)`` (so hops also reach
        the sources' types, e.g. papers -> authors). Each reverse CSC is the transpose of its
        relation (sources ascending per row); its ``e_id`` is the forward edge's.
        ``merge=True`` is PyG's default ``T.ToUndirected()`` instead: a relation within one
        type (``paper cites paper``) is made symmetric in place rather than reversed
        (:func:`add_reverse_relations`).

        >>> import numpy as np
        >>> data = GraphData.from_dicts({"paper": 2, "author": 2},
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
        return replace(self, graph=graph, edge_order=order, edge_features=feats, is_typed=True, _rows={})

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def homogeneous(cls, indptr: np.ndarray, indices: np.ndarray, *, x: np.ndarray | None = None,
                    y: np.ndarray | None = None, splits: Mapping[str, np.ndarray] | None = None,
                    attrs: BatchAttrs | None = None, store: Any = None,
                    chunks: tuple[list[np.ndarray], int] | None = None) -> GraphData:
        """The one-type graph over a CSC its caller checked (``is_typed=False``): type
        ``_N``, relation ``(_N, _E, _N)``; ``x`` ``(N, D)`` (or ``chunks``: a store's
        ``(views, rows per view)``), ``y``, ``{name: int64 IDs}`` splits, batch ``attrs``."""
        n = int(indptr.shape[0]) - 1
        graph = HeteroCSC(num_nodes={DEFAULT_NTYPE: n}, edge_types=[DEFAULT_ETYPE],
                          csc={DEFAULT_ETYPE: (indptr, indices)}, checked=True)
        attrs = attrs if attrs is not None else BatchAttrs()
        return cls(graph=graph, features={} if x is None else {DEFAULT_NTYPE: x},
                   labels={} if y is None else {DEFAULT_NTYPE: y},
                   splits={DEFAULT_NTYPE: dict(splits)} if splits else {}, target_type=DEFAULT_NTYPE,
                   edge_order={} if attrs.edge_order is None else {DEFAULT_ETYPE: attrs.edge_order},
                   store=store, is_typed=False, attrs=attrs,
                   chunks={} if chunks is None else {DEFAULT_NTYPE: chunks})

    @classmethod
    def from_dicts(cls, num_nodes: Mapping[str, int], edges: Mapping[Any, tuple[Any, Any]], *,
                   x: Mapping[str, Any] | None = None, y: Mapping[str, Any] | None = None,
                   splits: Mapping[str, Mapping[str, Any]] | None = None,
                   target_type: str | None = None,
                   edge_attr: Mapping[Any, Any] | None = None) -> GraphData:
        """A typed graph from ``{ntype: N_t}``, ``{etype: (src, dst)}`` edge lists (local IDs;
        tuple or ``"src___rel___dst"`` keys), ``x``/``y`` per type, ``{ntype: {name: ids}}``
        splits and ``edge_attr`` ``{etype: (E, D)}`` in edge-list order. ``target_type``
        defaults to the only labelled type."""
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
    def from_pyg(cls, data: Any) -> GraphData:
        """A PyG ``Data`` or ``HeteroData`` read in memory (no store written).

        A ``Data`` gives the one-type graph (``is_typed=False``): the CSC by destination
        (each row's sources ascending; ``attrs.edge_order`` maps a slot to its column of
        ``data.edge_index``, so a batch's ``e_id`` indexes it as PyG's does), ``x`` / ``y``
        / ``edge_attr`` and the other node and edge tensors viewed without copies
        (:func:`graphpipe.loaders.pyg_arrays.pyg_parts`), splits from the boolean masks.
        A ``HeteroData`` gives a typed graph: every node type (``num_nodes``, ``x``, ``y``,
        mask splits) and every relation's ``edge_index`` and ``edge_attr``
        (:func:`graphpipe.loaders.pyg_arrays.pyg_typed_parts`).

        >>> import torch
        >>> from torch_geometric.data import Data, HeteroData
        >>> data = Data(x=torch.eye(3), edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
        ...             train_mask=torch.tensor([True, True, False]))
        >>> graph = GraphData.from_pyg(data)
        >>> graph.indptr.tolist(), graph.indices.tolist(), graph.attrs.edge_order.tolist()
        ([0, 1, 2, 3], [2, 0, 1], [2, 0, 1])
        >>> graph.split("train").tolist(), graph.feature_chunks[0] is not None
        ([0, 1], True)
        >>> hetero = HeteroData()
        >>> hetero["paper"].x = torch.eye(2)
        >>> hetero["paper"].train_mask = torch.tensor([False, True])
        >>> hetero["author", "writes", "paper"].edge_index = torch.tensor([[0, 0], [1, 0]])
        >>> hetero["author"].num_nodes = 1
        >>> typed = GraphData.from_pyg(hetero)
        >>> typed.is_typed, typed.num_nodes_dict, typed.typed_split("paper", "train").tolist()
        (True, {'paper': 2, 'author': 1}, [1])
        """
        if type(data).__name__ == "HeteroData":
            nodes, edges = pyg_typed_parts(data)
            return cls.from_dicts(
                {t: int(a["num_nodes"]) for t, (a, _) in nodes.items()},
                {et: tuple(a["edge_index"]) for et, (a, _) in edges.items()},
                x={t: a["x"] for t, (a, _) in nodes.items() if "x" in a},
                y={t: a["y"] for t, (a, _) in nodes.items() if "y" in a},
                splits={t: s for t, (a, _) in nodes.items() if (s := mask_splits(a))},
                edge_attr={et: a["edge_attr"] for et, (a, _) in edges.items() if "edge_attr" in a})
        return _from_pyg(data)

    @classmethod
    def from_arrays(cls, arrays: Any) -> GraphData:
        """The one-type graph of a dict ``{"indptr", "indices"[, "x", "y", "splits"]}`` or a
        tuple ``(indptr, indices[, x, y])`` (CSC by destination), checked once."""
        return _from_arrays(arrays)

    @classmethod
    def open(cls, path: str | os.PathLike) -> GraphData:
        """The store at ``path`` (:func:`resolve_graph_data`)."""
        return resolve_graph_data(os.fspath(path))

    @classmethod
    def from_store(cls, store: Any) -> GraphData:
        """A :class:`graphpipe.store.GraphStore` read through the face every store answers:
        its relations (:meth:`GraphStore.typed_csc` checks each once), feature rows (memory
        maps; a homogeneous store's chunk views), labels, edge order (``csc/edge_id``: a
        batch's ``e_id`` is the position in the ingested edge list) and edge features;
        splits are read from the store when asked. ``is_typed`` is the store's."""
        if not store.is_typed:
            return _from_homogeneous_store(store)
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


HeteroGraphData = GraphData
"""The former name of a typed :class:`GraphData`, kept as an alias for existing code."""


def numeric_array(value: Any, where: str) -> np.ndarray:
    """``value`` (a tensor, viewed when on the CPU, or anything ``np.asarray`` reads) as
    NumPy; ``ValueError`` naming ``where`` when it is not numeric."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"{where} is not a numeric array (got {type(value).__name__})")
    return arr


def _to_numpy(value: Any, name: str) -> np.ndarray | None:
    return None if value is None else numeric_array(value, f"'data' entry {name!r}")


def coo_to_csc(src: Any, dst: Any, num_src: int, num_dst: int, where: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, edge_order)`` of the edge list ``src -> dst`` (local IDs), built
    in memory: CSC by destination, each row's sources ascending (ties in list order, as
    graphpipe's ingest builder sorts them), ``edge_order[slot]`` the edge's position in
    the list; ``indices`` int32 below ``2**31`` sources. ``ValueError`` naming ``where``
    for IDs out of range.

    >>> indptr, indices, order = coo_to_csc([2, 0, 1, 0], [1, 1, 0, 1], 3, 3, "edges")
    >>> indptr.tolist(), indices.tolist(), order.tolist()
    ([0, 1, 4, 4], [1, 0, 0, 2], [2, 1, 3, 0])
    """
    src = numeric_array(src, where).astype(np.int64).ravel()
    dst = numeric_array(dst, where).astype(np.int64).ravel()
    if src.shape != dst.shape:
        raise ValueError(f"{where}: src and dst differ in length ({src.shape[0]} vs {dst.shape[0]})")
    for name, ids, n in (("src", src, num_src), ("dst", dst, num_dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"{where}: {name} IDs must lie in [0, {n})")
    order = np.argsort(dst * max(num_src, 1) + src, kind="stable")
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    indices = src[order]
    return indptr, indices.astype(np.int32) if num_src < 2**31 else indices, order


def _from_pyg(data: Any) -> GraphData:
    """A PyG ``Data`` read in memory: the CSC by :func:`coo_to_csc`, ``x`` / ``y`` / edge
    and other arrays viewed from the tensors (no copies); splits from the masks."""
    arrays, node_extra, edge_extra = pyg_parts(data)
    num_nodes = int(arrays["num_nodes"])
    src, dst = arrays["edge_index"]
    indptr, indices, edge_order = coo_to_csc(src, dst, num_nodes, num_nodes, "Data.edge_index")
    x = arrays.get("x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
    attrs = BatchAttrs(edge_order=edge_order, num_input_edges=int(arrays["edge_index"].shape[1]),
                       edge_attr=arrays.get("edge_attr"), node_attrs=node_extra, edge_attrs=edge_extra)
    return GraphData.homogeneous(indptr, indices, x=x, y=arrays.get("y"), splits=mask_splits(arrays),
                                 attrs=attrs)


def _from_homogeneous_store(store: Any) -> GraphData:
    chunks = None
    if store.has_features:
        views, chunk_rows = store.feature_chunks()
        chunks = ([c.reshape(-1, 1) if c.ndim == 1 else c for c in views], int(chunk_rows))
    indptr, indices = store.topology()  # checked once: the sampling kernels trust it
    return GraphData.homogeneous(np.asarray(indptr), np.asarray(indices), chunks=chunks,
                                 y=np.asarray(store.labels) if store.has_labels else None,
                                 store=store, attrs=_store_attrs(store))


def _store_attrs(store: Any) -> BatchAttrs:
    """The store's edge order (``csc/edge_id``), edge features, other ``node/*`` /
    ``edge/*`` arrays and timestamps (``nodes/time`` as ``time``, ``csc/time`` as
    ``edge_time``), memory maps until read."""
    keys = list(store.manifest.get("arrays", {}))
    num_input = int(store.manifest.get("graph", {}).get("num_input_edges", store.num_edges))
    attrs = BatchAttrs(
        edge_order=store.edge_id if "csc/edge_id" in keys else None, num_input_edges=num_input,
        edge_attr=store.edge_features if "edge/feat" in keys else None,
        node_attrs={k.split("/", 1)[1]: store.array(k) for k in keys
                    if k.startswith("node/") and k not in ("node/feat", "node/label")},
        edge_attrs={k.split("/", 1)[1]: store.array(k) for k in keys
                    if k.startswith("edge/") and k != "edge/feat"})
    if "nodes/time" in keys:
        attrs.node_attrs.setdefault("time", store.array("nodes/time"))
    if "csc/time" in keys:
        attrs.slot_attrs["edge_time"] = store.array("csc/time")
    return attrs


def _parts_of(store_or_arrays: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The named arrays of a dict or tuple input, and its splits."""
    if isinstance(store_or_arrays, dict):
        unknown = set(store_or_arrays) - {"indptr", "indices", "x", "y", "splits"}
        if unknown or not {"indptr", "indices"} <= set(store_or_arrays):
            raise ValueError("'data' as a dict needs keys 'indptr', 'indices' and optionally "
                             f"'x', 'y', 'splits' (got {sorted(store_or_arrays)})")
        splits = {k: np.asarray(_to_numpy(v, k), dtype=np.int64)
                  for k, v in (store_or_arrays.get("splits") or {}).items()}
        return store_or_arrays, splits
    if isinstance(store_or_arrays, (tuple, list)) and 2 <= len(store_or_arrays) <= 4:
        return dict(zip(("indptr", "indices", "x", "y"), store_or_arrays)), {}
    raise ValueError("'data' must be a PyG Data, a GraphStore, a store path, a dict or a tuple "
                     f"(indptr, indices, x, y) (got {type(store_or_arrays).__name__})")


def _from_arrays(store_or_arrays: Any) -> GraphData:
    parts, splits = _parts_of(store_or_arrays)
    indptr = _to_numpy(parts["indptr"], "indptr")
    indices = _to_numpy(parts["indices"], "indices")
    if indptr is None or indptr.ndim != 1 or len(indptr) < 1:
        raise ValueError("'data' indptr must be a 1-D array of N+1 offsets")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    num_nodes = len(indptr) - 1
    check_topology(indptr, indices, num_nodes, error=ValueError, where="'data'")
    x = _to_numpy(parts.get("x"), "x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
        if x.shape[0] != num_nodes:
            raise ValueError(f"'data' x has {x.shape[0]} rows for {num_nodes} nodes")
    y = _to_numpy(parts.get("y"), "y")
    if y is not None and y.shape[0] != num_nodes:
        raise ValueError(f"'data' y has {y.shape[0]} rows for {num_nodes} nodes")
    return GraphData.homogeneous(indptr, indices, x=x, y=y, splits=splits)


def resolve_graph_data(data: Any) -> GraphData:
    """A :class:`GraphData` from itself, a GraphStore (typed or not) or its path, a PyG
    ``Data`` or ``HeteroData`` (:meth:`GraphData.from_pyg`), a dict with keys
    ``indptr, indices[, x, y, splits]`` or a tuple ``(indptr, indices, x, y)``;
    ``ValueError`` otherwise.

    The topology handed on is checked (once, ``O(N + E)``) to be a CSC whose every
    slice and index is in bounds: :meth:`GraphStore.typed_csc` for a store, the same
    check (raising ``ValueError``) for arrays given directly."""
    from graphpipe.store import GraphStore, open_store

    if isinstance(data, GraphData):
        return data
    if isinstance(data, (str, os.PathLike)):
        if not Path(data).is_dir():
            raise ValueError(f"'data' is not a store directory (got {str(data)!r})")
        data = GraphStore.open(data) if is_typed_data(data) else open_store(data, in_memory="auto")
    if isinstance(data, GraphStore):
        return GraphData.from_store(data)
    if type(data).__module__.split(".")[0] == "torch_geometric":
        return GraphData.from_pyg(data)
    return _from_arrays(data)


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


def add_reverse_relations(data: GraphData) -> GraphData:
    """``data`` with reverse relations added (see the module docstring).

    >>> import numpy as np
    >>> data = GraphData.from_dicts(
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
    # a homogeneous graph made symmetric stays one relation; node arrays still fit, edge arrays not
    return replace(data, graph=new_graph, edge_order=order, is_typed=data.is_typed or len(csc) > 1,
                   attrs=BatchAttrs(node_attrs=data.attrs.node_attrs), _rows={})


def is_mask(input_nodes: Any) -> bool:
    """Whether ``input_nodes`` is a boolean mask (its ``input_id`` is then the node ID)."""
    if isinstance(input_nodes, torch.Tensor):
        return input_nodes.dtype == torch.bool
    return not isinstance(input_nodes, str) and np.asarray(input_nodes).dtype == bool


def node_ids(spec: Any, num_nodes: int, split: Any, repeats: bool = False) -> np.ndarray:
    """int64 IDs of a loader's ``input_nodes`` of one node type: None (every node), a split
    name (``split(name)``), a boolean mask of ``num_nodes`` entries, or int IDs in
    ``[0, num_nodes)`` (distinct unless ``repeats``); ``ValueError`` naming what is wrong.

    >>> node_ids(np.array([True, False, True]), 3, None).tolist(), node_ids([2, 0], 3, None).tolist()
    ([0, 2], [2, 0])
    >>> node_ids([1, 1], 3, None)
    Traceback (most recent call last):
    ValueError: 'input_nodes' must not repeat a node: IDs must be distinct (got duplicates)
    """
    if spec is None:
        return np.arange(num_nodes, dtype=np.int64)
    if isinstance(spec, str):
        return np.asarray(split(spec), dtype=np.int64)
    ids = spec.detach().cpu().numpy() if isinstance(spec, torch.Tensor) else np.asarray(spec)
    if ids.dtype == bool:
        if ids.shape != (num_nodes,):
            raise ValueError(f"'input_nodes' as a mask must have shape ({num_nodes},), {num_nodes} "
                             f"entries (got {ids.shape})")
        return np.flatnonzero(ids).astype(np.int64)
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'input_nodes' must be a split name, a 1-D integer array or a boolean mask "
                         f"(got dtype {ids.dtype}, shape {ids.shape})")
    ids = ids.astype(np.int64, copy=False)
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"'input_nodes' must be node IDs in [0, {num_nodes}) "
                             f"(got {lo if lo < 0 else hi})")
        if not repeats and np.unique(ids).shape[0] != ids.shape[0]:
            raise ValueError("'input_nodes' must not repeat a node: IDs must be distinct (got duplicates)")
    return ids


def resolve_typed_input(data: GraphData, input_nodes: Any, repeats: bool = False) -> tuple[str, np.ndarray, bool]:
    """``(node type, int64 seed IDs, input_id by node ID)`` of a typed loader's
    ``input_nodes``: ``(ntype, ids | mask | split name | None)``, a node type alone, or None
    (every node of ``data.target_type``); IDs may repeat with ``repeats`` (temporal
    sampling: one tree per occurrence); ``ValueError`` naming what is wrong.

    >>> data = GraphData.from_dicts({"paper": 3, "author": 2},
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
    ids = node_ids(spec, data.num_nodes_dict[ntype], partial(data.typed_split, ntype), repeats)
    return ntype, ids, spec is None or is_mask(spec)


def is_typed_data(data: Any) -> bool:
    """Whether ``data`` is a typed graph (loaders yield typed batches): a typed
    :class:`GraphData`, a PyG ``HeteroData``, a typed store, or the path of a store whose
    manifest names node types (anything unreadable answers False)."""
    if isinstance(data, GraphData):
        return data.is_typed
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
