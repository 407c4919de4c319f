"""Synthetic graph-level datasets (many small graphs, one label per graph) and their store.

Graph-level store layout (read by :class:`graphpipe.loaders.ClusterLoader`): the
graphs are the connected pieces of one big disjoint-union graph whose nodes are
numbered graph by graph, plus two arrays:

- ``graph/ptr``: int64 ``(G + 1,)``; graph ``g`` owns nodes ``[ptr[g], ptr[g + 1])``
  and only edges among them;
- ``graph/label``: int64 ``(G,)`` the class of every graph;

and the manifest entry ``"graph_level"`` (``num_graphs``, ``num_classes``). In such
a store the **split tables hold graph IDs**, not node IDs (``store.split("train")``
are the training graphs). Node features are ``node/feat``; there are no node labels.

:func:`community_count_graphs` makes graphs whose label is a structural property:
graph ``g`` with label ``c`` consists of ``c + 1`` dense communities joined by a few
bridges (the node order inside a graph is shuffled, and the features are noise, so
only the topology tells the classes apart). :func:`write_graph_level_store` ingests
it through the ordinary pipeline and adds the graph arrays with a
:class:`graphpipe.store.writer.StoreEditor`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphpipe.ingest.api import ingest
from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.options import IngestOptions
from graphpipe.ingest.source import DatasetSource, RowBlock
from graphpipe.store import GraphStore

__all__ = ["GRAPH_LABEL_KEY", "GRAPH_PTR_KEY", "GraphLevelDataset", "community_count_graphs",
           "write_graph_level_store"]

GRAPH_PTR_KEY = "graph/ptr"
GRAPH_LABEL_KEY = "graph/label"


@dataclass
class GraphLevelDataset:
    """Many small graphs as one disjoint union.

    Attributes:
        src, dst: int64 ``(E,)`` edges (global node IDs; every undirected edge both ways).
        features: float32 ``(N, F)`` node features.
        graph_ptr: int64 ``(G + 1,)`` node range of every graph.
        graph_labels: int64 ``(G,)`` class of every graph.
        splits: ``{"train", "valid", "test"}`` -> sorted int64 graph IDs.
        num_classes: number of graph classes.
        params: the generator and its arguments.
    """

    src: np.ndarray
    dst: np.ndarray
    features: np.ndarray
    graph_ptr: np.ndarray
    graph_labels: np.ndarray
    splits: dict[str, np.ndarray]
    num_classes: int
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return int(self.graph_ptr[-1])

    @property
    def num_graphs(self) -> int:
        return int(self.graph_ptr.shape[0]) - 1


def _community_graph(n: int, communities: int, p_in: float, bridges: int,
                     rng: np.random.Generator) -> np.ndarray:
    """Undirected edges ``(M, 2)`` (``u < v``) of ``communities`` dense groups of a graph
    of ``n`` nodes, joined in a chain by ``bridges`` edges per neighbouring pair; node
    order shuffled."""
    sizes = np.full(communities, n // communities)
    sizes[: n % communities] += 1
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    edges = []
    for c in range(communities):
        lo, hi = int(bounds[c]), int(bounds[c + 1])
        members = np.arange(lo, hi)
        edges.append(np.stack([members, np.roll(members, -1)], 1))        # a ring: connected
        iu, ju = np.triu_indices(hi - lo, 2)
        keep = rng.random(iu.shape[0]) < p_in
        edges.append(np.stack([lo + iu[keep], lo + ju[keep]], 1))
        if c + 1 < communities:
            nxt = (int(bounds[c + 1]), int(bounds[c + 2]))
            edges.append(np.stack([rng.integers(lo, hi, bridges), rng.integers(*nxt, bridges)], 1))
    pairs = np.concatenate(edges).astype(np.int64)
    shuffle = rng.permutation(n)
    pairs = shuffle[pairs]
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    return np.unique(np.sort(pairs, axis=1), axis=0)


def community_count_graphs(num_graphs: int, *, min_nodes: int = 10, max_nodes: int = 60,
                           num_classes: int = 3, feature_dim: int = 8, p_in: float = 0.5,
                           bridges: int = 1, seed: int = 0) -> GraphLevelDataset:
    """Graphs whose class is their number of communities minus one.

    Args:
        num_graphs: G >= 1.
        min_nodes, max_nodes: node count of every graph, uniform in the range (inclusive);
            ``min_nodes >= 3 * num_classes`` so every community has 3 nodes or more.
        num_classes: classes (1 .. num_classes communities), balanced at random.
        feature_dim: width of the (pure noise, float32) node features.
        p_in: edge probability inside a community (on top of a ring).
        bridges: edges between neighbouring communities.
        seed: same seed, same dataset.

    Returns:
        A :class:`GraphLevelDataset` with random 60/20/20 graph splits.
    """
    for name, value, low in (("num_graphs", num_graphs, 1), ("num_classes", num_classes, 1),
                             ("feature_dim", feature_dim, 1), ("bridges", bridges, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"'{name}' must be an integer >= {low} (got {value!r})")
    if not 3 * num_classes <= min_nodes <= max_nodes:
        raise ValueError(f"'min_nodes' must be in [3 * num_classes, max_nodes] = "
                         f"[{3 * num_classes}, {max_nodes}] (got {min_nodes})")
    if not 0.0 <= p_in <= 1.0:
        raise ValueError(f"'p_in' must be a probability (got {p_in!r})")
    rng = np.random.default_rng([seed, 7])
    sizes = rng.integers(min_nodes, max_nodes + 1, num_graphs).astype(np.int64)
    labels = rng.integers(0, num_classes, num_graphs).astype(np.int64)
    ptr = np.zeros(num_graphs + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptr[1:])
    src, dst = [], []
    for g in range(num_graphs):
        pairs = _community_graph(int(sizes[g]), int(labels[g]) + 1, p_in, bridges, rng) + ptr[g]
        src += [pairs[:, 0], pairs[:, 1]]
        dst += [pairs[:, 1], pairs[:, 0]]
    features = rng.standard_normal((int(ptr[-1]), feature_dim)).astype(np.float32)
    order = rng.permutation(num_graphs)
    n_train, n_valid = int(0.6 * num_graphs), int(0.2 * num_graphs)
    splits = {"train": np.sort(order[:n_train]), "valid": np.sort(order[n_train:n_train + n_valid]),
              "test": np.sort(order[n_train + n_valid:])}
    params = {"generator": "community_count_graphs", "num_graphs": num_graphs,
              "min_nodes": min_nodes, "max_nodes": max_nodes, "num_classes": num_classes,
              "feature_dim": feature_dim, "p_in": p_in, "bridges": bridges, "seed": seed}
    return GraphLevelDataset(src=np.concatenate(src), dst=np.concatenate(dst), features=features,
                             graph_ptr=ptr, graph_labels=labels, splits=splits,
                             num_classes=num_classes, params=params)


def _source(dataset: GraphLevelDataset, name: str) -> DatasetSource:
    """The dataset as a :class:`DatasetSource` (splits are graph IDs)."""

    def edge_chunks():
        yield EdgeChunk(src=dataset.src.copy(), dst=dataset.dst.copy(), first_row=0,
                        source=f"{name}:edges", first_line=1)

    def node_features():
        yield RowBlock(first_row=0, values=dataset.features, source=f"{name}:features", first_line=1)

    return DatasetSource(
        name=name, source_format="synthetic-graph-level", source_path=name,
        num_nodes=dataset.num_nodes, edge_chunks=edge_chunks,
        num_input_edges=int(dataset.src.shape[0]), node_features=node_features,
        feature_dim=int(dataset.features.shape[1]), splits=dict(dataset.splits),
        split_sources={k: f"{name}: graph split {k!r}" for k in dataset.splits},
        extra={"generator": str(dataset.params.get("generator", "")), "split_ids": "graph"})


def write_graph_level_store(dataset: GraphLevelDataset, dest: str | os.PathLike, *,
                            overwrite: bool = False, name: str | None = None) -> GraphStore:
    """Ingest ``dataset`` into a new store at ``dest`` and add ``graph/ptr``,
    ``graph/label`` and the manifest's ``"graph_level"`` entry.

    Returns:
        The opened :class:`graphpipe.store.GraphStore` (its splits are graph IDs).
    """
    name = name or str(dataset.params.get("generator", "graph-level"))
    store = ingest(_source(dataset, name), dest, IngestOptions(overwrite=overwrite, name=name))
    with store.edit() as editor:
        editor.write_array(GRAPH_PTR_KEY, np.asarray(dataset.graph_ptr, dtype=np.int64))
        editor.write_array(GRAPH_LABEL_KEY, np.asarray(dataset.graph_labels, dtype=np.int64))
        editor.manifest["graph_level"] = {
            "num_graphs": dataset.num_graphs, "num_classes": int(dataset.num_classes),
            "split_ids": "graph", "arrays": {"ptr": GRAPH_PTR_KEY, "label": GRAPH_LABEL_KEY},
            "params": dict(dataset.params)}
        editor.commit()
    return GraphStore.open(dest)
