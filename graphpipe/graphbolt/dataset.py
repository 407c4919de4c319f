"""GraphBolt's ``OnDiskDataset`` face over a graphpipe store: ``dataset.graph`` (a
:class:`SamplingGraph`), ``dataset.feature`` (a :class:`FeatureStore`), ``dataset.tasks``
(one node classification :class:`Task` with ``train_set`` / ``validation_set`` /
``test_set`` from the store's splits ``train`` / ``valid`` / ``test``, items named
``("seed_nodes", "labels")``, and ``metadata["num_classes"]``) and ``all_nodes_set``.

The path may be a store, or a GraphBolt on-disk dataset folder (``metadata.yaml``): that
one is ingested once into ``<folder>/graphpipe-store`` (as GraphBolt preprocesses into
``<folder>/preprocessed``) and read from there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.graphbolt.feature_store import FeatureStore
from graphpipe.graphbolt.itemset import ItemSet
from graphpipe.graphbolt.sampling_graph import SamplingGraph

__all__ = ["OnDiskDataset", "Task"]

_SPLITS = {"train_set": "train", "validation_set": "valid", "test_set": "test"}
STORE_DIR = "graphpipe-store"


@dataclass
class Task:
    """A node classification task: its item sets (None for a split the store lacks)."""

    metadata: dict[str, Any]
    train_set: ItemSet | None = None
    validation_set: ItemSet | None = None
    test_set: ItemSet | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return (f"Task(metadata={self.metadata}, train_set={self.train_set}, "
                f"validation_set={self.validation_set}, test_set={self.test_set})")


def _open_store(path: str | os.PathLike) -> Any:
    """The store at ``path``, or the store ingested from the GraphBolt folder ``path``."""
    from graphpipe.ingest.graphbolt import is_graphbolt_folder
    from graphpipe.store import GraphStore

    if is_graphbolt_folder(path):
        target = Path(path) / STORE_DIR
        if not target.is_dir():
            from graphpipe.ingest import ingest

            return ingest(path, target)
        path = target
    return GraphStore.open(path, in_memory="auto")


class OnDiskDataset:
    """A store as GraphBolt's dataset (module docstring); ``load()`` returns it.

    >>> import os, tempfile
    >>> from graphpipe.ingest import ingest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "ring.npz")
    >>> np.savez(npz, src=np.array([1, 2, 3, 0]), dst=np.arange(4), x=np.eye(4, dtype=np.float32),
    ...          y=np.array([0, 1, 2, 1]), train_idx=np.array([0, 1]), test_idx=np.array([3]))
    >>> _ = ingest(npz, os.path.join(tmp.name, "ring"))
    >>> dataset = OnDiskDataset(os.path.join(tmp.name, "ring")).load()
    >>> dataset.graph, dataset.tasks[0].metadata["num_classes"]
    (SamplingGraph(num_nodes=4, num_edges=4), 3)
    >>> dataset.tasks[0].train_set[:], dataset.tasks[0].validation_set
    ((tensor([0, 1]), tensor([0, 1])), None)
    >>> dataset.feature.size("node", None, "feat"), len(dataset.all_nodes_set)
    (torch.Size([4]), 4)
    >>> tmp.cleanup()
    """

    def __init__(self, path: str | os.PathLike, include_original_edge_id: bool = False,
                 force_preprocess: bool | None = None):
        self.path = path
        self._store: Any = None
        self._graph: SamplingGraph | None = None
        self._feature: FeatureStore | None = None

    def load(self, tasks: Any = None) -> OnDiskDataset:
        """Open the store (ingesting a GraphBolt folder the first time); returns self."""
        store = _open_store(self.path)
        if store.is_typed:  # typed stores: graphpipe.loaders.NeighborLoader, typed batches
            raise ValueError(f"{self.path}: a typed dataset ({len(store.node_types)} node types); "
                             f"graphpipe's GraphBolt face reads homogeneous ones")
        self._store = store
        self._graph, self._feature = None, None
        return self

    def _loaded(self) -> Any:
        if self._store is None:
            raise RuntimeError("call OnDiskDataset.load() first")
        return self._store

    @property
    def dataset_name(self) -> str:
        return str(self._loaded().manifest.get("name", Path(self.path).name))

    @property
    def graph(self) -> SamplingGraph:
        if self._graph is None:
            self._graph = SamplingGraph.from_store(self._loaded())
        return self._graph

    @property
    def feature(self) -> FeatureStore:
        if self._feature is None:
            self._feature = FeatureStore.from_store(self._loaded())
        return self._feature

    @property
    def tasks(self) -> list[Task]:
        store = self._loaded()
        labels = np.asarray(store.labels) if store.has_labels else None
        sets = {}
        for attr, split in _SPLITS.items():
            if split not in store.split_names:
                continue
            ids = np.asarray(store.split(split), dtype=np.int64)
            sets[attr] = (ItemSet(ids, names="seed_nodes") if labels is None else
                          ItemSet((ids, labels[ids]), names=("seed_nodes", "labels")))
        metadata = {"name": "node_classification", "num_classes": store.num_classes}
        return [Task(metadata, **sets)]

    @property
    def all_nodes_set(self) -> ItemSet:
        return ItemSet(self._loaded().num_nodes, names="seed_nodes")

    def __repr__(self) -> str:
        return f"OnDiskDataset(path={str(self.path)!r})"

