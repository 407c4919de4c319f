"""A store as GraphBolt's on-disk dataset (DGL 2.1 ``dgl.graphbolt.OnDiskDataset``), the
layout :mod:`graphpipe.ingest.graphbolt` reads back: ``metadata.yaml``, ``edges.npy``
``(2, E)`` in the original edge order (so GraphBolt's edge IDs are the store's
``edge_id``), ``node_feat.npy``, ``node_label.npy``, ``edge_feat.npy`` and, per split, a
node-classification set (``seed_nodes``, ``labels``) under ``set/``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store import GraphStore, open_store
from graphpipe.store.errors import StoreError

__all__ = ["write_graphbolt"]

_SETS = {"train": "train_set", "valid": "validation_set", "test": "test_set"}


def _edges_in_original_order(store: GraphStore) -> np.ndarray:
    """int64 ``(2, E)``: edge ``e`` of the original list is column ``e`` (CSC order when the
    store keeps no ``csc/edge_id``: its edge IDs are then the CSC slots)."""
    indptr = np.asarray(store.indptr)
    dst_of_slot = np.repeat(np.arange(store.num_nodes, dtype=np.int64), np.diff(indptr))
    edges = np.empty((2, store.num_edges), dtype=np.int64)
    edge_id = np.asarray(store.edge_id) if store.has_edge_ids else slice(None)
    edges[0, edge_id] = store.indices
    edges[1, edge_id] = dst_of_slot
    return edges


def _entry(domain: str, name: str, path: str) -> dict[str, Any]:
    return {"domain": domain, "name": name, "format": "numpy", "in_memory": True, "path": path}


def _write_files(store: GraphStore, out: Path) -> dict[str, Any]:
    """Every array file under ``out``; returns the metadata document."""
    np.save(out / "edges.npy", _edges_in_original_order(store))
    meta: dict[str, Any] = {
        "dataset_name": store.name,
        "graph": {"nodes": [{"num": store.num_nodes}],
                  "edges": [{"format": "numpy", "path": "edges.npy"}]},
        "feature_data": [],
    }
    if store.has_features:
        np.save(out / "node_feat.npy", store.features())
        meta["feature_data"].append(_entry("node", "feat", "node_feat.npy"))
    if store.has_array("edge/feat"):
        np.save(out / "edge_feat.npy", np.asarray(store.edge_features))
        meta["feature_data"].append(_entry("edge", "feat", "edge_feat.npy"))
    labels = np.asarray(store.labels) if store.has_labels else None
    if labels is not None:
        np.save(out / "node_label.npy", labels)
        meta["feature_data"].append(_entry("node", "label", "node_label.npy"))
    task: dict[str, Any] = {"name": "node_classification"}
    num_classes = (store.manifest.get("labels") or {}).get("num_classes")
    if num_classes:
        task["num_classes"] = int(num_classes)
    (out / "set").mkdir()
    for split, key in _SETS.items():
        if split not in store.split_names:
            continue
        ids = store.split(split)
        np.save(out / "set" / f"{split}_seed_nodes.npy", ids)
        data = [{"name": "seed_nodes", "format": "numpy", "path": f"set/{split}_seed_nodes.npy"}]
        if labels is not None:
            np.save(out / "set" / f"{split}_labels.npy", labels[ids])
            data.append({"name": "labels", "format": "numpy", "path": f"set/{split}_labels.npy"})
        task[key] = [{"data": data}]
    if len(task) > 1:
        meta["tasks"] = [task]
    return meta


def write_graphbolt(store: GraphStore | str | os.PathLike, dest: str | os.PathLike) -> Path:
    """Write ``store`` as a GraphBolt on-disk dataset folder ``dest`` (which must not exist;
    written to a temporary folder beside it, then renamed). Returns ``dest``.

    >>> import os, tempfile
    >>> import numpy as np, yaml
    >>> from graphpipe.ingest import ingest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "ring.npz")
    >>> np.savez(npz, src=np.array([1, 2, 0]), dst=np.arange(3), x=np.eye(3, dtype=np.float32),
    ...          y=np.array([0, 1, 1]), train_idx=np.array([0, 1]))
    >>> store = ingest(npz, os.path.join(tmp.name, "store"))
    >>> out = write_graphbolt(store, os.path.join(tmp.name, "gb"))
    >>> meta = yaml.safe_load((out / "metadata.yaml").read_text())
    >>> meta["graph"], np.load(out / "edges.npy").tolist()
    ({'nodes': [{'num': 3}], 'edges': [{'format': 'numpy', 'path': 'edges.npy'}]}, [[1, 2, 0], [0, 1, 2]])
    >>> [f["name"] for f in meta["feature_data"]], np.load(out / "set/train_labels.npy").tolist()
    (['feat', 'label'], [0, 1])
    >>> tmp.cleanup()
    """
    import yaml

    if not isinstance(store, GraphStore):
        store = open_store(store)
    if store.is_typed:
        raise StoreError(f"{store.path}: a typed store ({len(store.node_types)} node types); export "
                         f"to graphbolt supports homogeneous stores only")
    dest = Path(dest)
    if dest.exists():
        raise ValueError(f"{dest}: already exists; export writes a new folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        meta = _write_files(store, tmp)
        (tmp / "metadata.yaml").write_text(yaml.safe_dump(meta, sort_keys=False), encoding="utf-8")
        tmp.rename(dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
