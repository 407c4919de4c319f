"""What every reader produces: a source the store builder turns into a store.

A homogeneous reader (OGB raw folder, edge-list files, npz, ...) returns a
:class:`DatasetSource`, a typed one (OGB's heterogeneous folder, MAG240M, typed edge
lists) a :class:`TypedSource`: node types with their counts and per-type providers,
relations with their edge streams. A reader validates what it can up front (files
present, counts) and then *streams*: edges as :class:`EdgeChunk` runs in edge-list
order, features as row blocks in node order, so the builder
(:func:`graphpipe.ingest.pipeline.build_store`) can stay within a memory limit. Every
error is an :class:`IngestError` whose message names the file and the line, row or field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from graphpipe.ingest.chunks import EdgeChunk


@dataclass
class RowBlock:
    """A run of consecutive rows of a per-node (or per-edge) matrix.

    Attributes:
        first_row: dense ID of the first row (node ID, or edge-list position for edge features).
        values: ``(rows, dim)`` array (float32/float64/int64 as parsed).
        source: file the rows came from (for error messages).
        first_line: 1-based line/row number of ``values[0]`` in ``source``.
    """

    first_row: int
    values: np.ndarray
    source: str
    first_line: int


@dataclass
class DatasetSource:
    """A dataset ready to be streamed into a store.

    Attributes:
        name: dataset name (goes into the manifest).
        source_format: e.g. ``"ogb-raw"``, ``"ogb-raw-npz"``, ``"ogb-processed"``, ``"edge-list"``, ``"npz"``.
        source_path: where it was read from.
        num_nodes: N; node IDs are dense ``0..N-1`` after any ID mapping.
        num_input_edges: number of edges in the edge list if known up front, else None.
        edge_chunks: callable returning a fresh iterator of :class:`EdgeChunk` (dense IDs, edge-list order).
        node_features: callable returning an iterator of :class:`RowBlock` covering rows ``0..N-1``
            in order, or None when the dataset has no node features.
        feature_dim: width of the node features (None when absent).
        edge_features: like ``node_features`` but over edge-list positions, or None.
        edge_feature_dim: width of edge features.
        edge_feature_dtype: their dtype as the source has it (int64 integer weights, say);
            None: float32.
        labels: ``(N,)`` or ``(N, tasks)`` array, or None.
        task_type: e.g. ``"multiclass classification"``, ``"binary classification"``, ``"regression"``.
        num_classes: for classification tasks.
        splits: ``{name: dense node IDs}`` (``train``/``valid``/``test``), possibly empty.
        split_sources: ``{name: file}`` used in error messages about splits.
        external_ids: external ID of every dense node (int64 or string Arrow array) when
            the source had non-dense IDs, else None.
        node_table: extra per-node columns (one row per dense ID), or None.
        node_time: ``(N,)`` int64 node timestamps (e.g. OGB's ``node_year``), or None;
            ``extra["node_time_file"]`` names where they came from.
        edge_time: like ``edge_features`` with one integer column: the timestamp of each
            edge in edge-list order (stored as ``csc/time`` in CSC order), or None;
            ``extra["edge_time_file"]`` names where they come from.
        num_nodes_backed: True when per-node data read up front (a node table, feature
            rows, labels) has ``num_nodes`` rows; False when N is only declared (or the
            largest ID + 1), which the pipeline bounds by the number of edges.
        extra: anything else worth recording in the manifest's provenance (``label_file``
            names the labels' file in error messages).
        needs_edge_ids: store ``csc/edge_id`` whatever ``--edge-ids auto`` decides (the
            reader's ``finish`` maps per-edge data through it).
        finish: called with the :class:`~graphpipe.store.StoreWriter` after every stage and
            before the commit, to write what only this reader knows (link splits:
            :mod:`graphpipe.ingest.ogb_link`); None: nothing more.
    """

    name: str
    source_format: str
    source_path: str
    num_nodes: int
    edge_chunks: Callable[[], Iterator[EdgeChunk]]
    num_input_edges: int | None = None
    node_features: Callable[[], Iterator[RowBlock]] | None = None
    feature_dim: int | None = None
    edge_features: Callable[[], Iterator[RowBlock]] | None = None
    edge_feature_dim: int | None = None
    edge_feature_dtype: np.dtype | None = None
    labels: np.ndarray | None = None
    task_type: str | None = None
    num_classes: int | None = None
    splits: dict[str, np.ndarray] = field(default_factory=dict)
    split_sources: dict[str, str] = field(default_factory=dict)
    external_ids: pa.Array | None = None
    node_table: pa.Table | None = None
    node_time: np.ndarray | None = None
    edge_time: Callable[[], Iterator[RowBlock]] | None = None
    num_nodes_backed: bool = False
    extra: dict = field(default_factory=dict)
    needs_edge_ids: bool = False
    finish: Callable[[Any], None] | None = None


@dataclass
class TypedNodes:
    """One node type of a :class:`TypedSource`; every provider is called once, when the
    builder gets to it (so nothing large is read before it is written).

    Attributes:
        count: ``N_t``; local IDs ``0 .. N_t - 1``.
        where: the file named when this type's data is refused.
        features: callable returning :class:`RowBlock` runs covering rows ``0 .. N_t - 1``
            in order, or None.
        feature_dim: their width when known up front.
        float16: the source's features are float16 (MAG240M): stored as float16 whatever
            ``--feature-dtype`` says.
        labels: callable returning ``(N_t,)`` integer classes (-1: unlabelled), or None.
        num_classes: classes declared by the source (the stored count is at least this).
        time: callable returning ``(N_t,)`` integer timestamps, or None.
        splits: callable returning ``(name, local IDs, file)`` triples, or None.
        id_map: the external ID (int64 or string) of every node (row = local ID), or None.
    """

    count: int
    where: str = ""
    features: Callable[[], Iterator[RowBlock]] | None = None
    feature_dim: int | None = None
    float16: bool = False
    labels: Callable[[], np.ndarray] | None = None
    num_classes: int | None = None
    time: Callable[[], np.ndarray] | None = None
    splits: Callable[[], Iterator[tuple[str, np.ndarray, str]]] | None = None
    id_map: pa.Array | None = None


@dataclass
class TypedRelation:
    """One relation ``(src, rel, dst)`` of a :class:`TypedSource`.

    Attributes:
        etype: the relation.
        edges: callable returning a fresh iterator of :class:`EdgeChunk` (local IDs of the
            source and destination types, edge-list order); called twice for a reverse.
        num_edges: the count the source declares (checked against the edges read), or None.
        num_edges_from: the file that declares it.
        edge_features: callable returning ``(E, D)`` (edge-list order; a memory map is read
            a block at a time), or None; ``edge_features_from`` names its file.
        edge_time: callable returning ``(E,)`` integer timestamps in edge-list order, or None.
    """

    etype: tuple[str, str, str]
    edges: Callable[[], Iterator[EdgeChunk]]
    num_edges: int | None = None
    num_edges_from: str = ""
    edge_features: Callable[[], Any] | None = None
    edge_features_from: str = ""
    edge_time: Callable[[], np.ndarray] | None = None


@dataclass
class TypedSource:
    """A typed (heterogeneous) dataset ready to be streamed into a typed store.

    Attributes:
        name: dataset name (goes into the manifest).
        source_format: e.g. ``"ogb-hetero-raw"``, ``"mag240m"``, ``"typed-edge-list"``.
        source_path: where it was read from.
        node_types: ``{ntype: TypedNodes}`` in the store's type order.
        relations: the relations, in the store's order.
        target_type: the type with labels and splits (None: the only labelled type, if one is).
        extra: more provenance for the manifest (strings and numbers).

    >>> from graphpipe.ingest.chunks import EdgeChunk
    >>> edges = lambda: iter([EdgeChunk(np.array([0, 1]), np.array([0, 0]), 0, "w.csv", 2)])
    >>> source = TypedSource("mini", "typed-edge-list", "mini", {"author": TypedNodes(2),
    ...                      "paper": TypedNodes(1)}, [TypedRelation(("author", "writes", "paper"), edges)])
    >>> {t: n.count for t, n in source.node_types.items()}, source.relations[0].etype
    ({'author': 2, 'paper': 1}, ('author', 'writes', 'paper'))
    """

    name: str
    source_format: str
    source_path: str
    node_types: dict[str, TypedNodes]
    relations: list[TypedRelation]
    target_type: str | None = None
    extra: dict = field(default_factory=dict)
