"""A store as GraphBolt's on-disk dataset (DGL 2.1 ``dgl.graphbolt.OnDiskDataset``), the
layout :mod:`graphpipe.ingest.graphbolt` reads back: ``metadata.yaml``, ``edges.npy``
``(2, E)`` in the original edge order (so GraphBolt's edge IDs are the store's
``edge_id``), ``node_feat.npy``, ``node_label.npy``, ``edge_feat.npy`` and, per split, a
node-classification set (``seed_nodes``, ``labels``) under ``set/``.

A typed store is written through the same typed face every store answers, with a
``type`` in every entry as GraphBolt's typed datasets have it (node types, relations as
``"src:rel:dst"``): ``edges/<src>___<rel>___<dst>.npy`` (local IDs) and ``_feat.npy``,
``nodes/<type>/{feat,label}.npy``, and per split one set item per node type that has it,
under ``set/<type>/``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store import GraphStore, open_store
from graphpipe.store import schema as ts

__all__ = ["write_graphbolt"]

_SETS = {"train": "train_set", "valid": "validation_set", "test": "test_set"}


def _relation(store: GraphStore, etype: tuple[str, str, str]) -> tuple[np.ndarray, np.ndarray | None]:
    """``(edges, edge features)``: int64 ``(2, E)`` with edge ``e`` of the original list in
    column ``e`` (CSC order when the store keeps no edge IDs: they are then the CSC slots),
    and the features in that order (or None)."""
    indptr, indices = (np.asarray(a) for a in store.typed_csc(etype))
    edge_id = store.typed_edge_ids(etype)
    order = np.asarray(edge_id) if edge_id is not None else slice(None)
    edges = np.empty((2, indices.shape[0]), dtype=np.int64)
    edges[0, order] = indices
    edges[1, order] = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    feat = store.typed_edge_features(etype)
    if feat is None and not store.is_typed and store.has_array("edge/feat"):
        return edges, np.asarray(store.edge_features)  # input order already
    if feat is not None:
        out = np.empty_like(np.asarray(feat))
        out[order] = feat
        feat = out
    return edges, feat


def _entry(domain: str, name: str, path: str, kind: str | None) -> dict[str, Any]:
    entry = {"domain": domain, "name": name, "format": "numpy", "in_memory": True, "path": path}
    return entry if kind is None else {"domain": domain, "type": kind, **{k: v for k, v in entry.items()
                                                                          if k != "domain"}}


def _typed(entry: dict[str, Any], kind: str | None) -> dict[str, Any]:
    return entry if kind is None else {"type": kind, **entry}


def _save(out: Path, rel: str, values: np.ndarray) -> str:
    (out / rel).parent.mkdir(parents=True, exist_ok=True)
    np.save(out / rel, np.asarray(values))
    return rel


def _write_files(store: GraphStore, out: Path) -> dict[str, Any]:
    """Every array file under ``out``; returns the metadata document."""
    typed = store.is_typed
    graph: dict[str, Any] = {"nodes": [], "edges": []}
    meta: dict[str, Any] = {"dataset_name": store.name, "graph": graph, "feature_data": []}
    node_files = {t: ("node_feat.npy", "node_label.npy") if not typed else
                  (f"nodes/{t}/feat.npy", f"nodes/{t}/label.npy") for t in store.node_types}
    for ntype in store.node_types:
        graph["nodes"].append(_typed({"num": store.num_nodes_dict[ntype]}, ntype if typed else None))
        feat = store.typed_features(ntype)
        if feat is not None:
            path = _save(out, node_files[ntype][0], feat)
            meta["feature_data"].append(_entry("node", "feat", path, ntype if typed else None))
    for etype in store.edge_types:
        kind, key = (":".join(etype), ts.etype_key(etype)) if typed else (None, "edges")
        edges, feat = _relation(store, etype)
        path = _save(out, f"edges/{key}.npy" if typed else "edges.npy", edges)
        graph["edges"].append(_typed({"format": "numpy", "path": path}, kind))
        if feat is not None:
            path = _save(out, f"edges/{key}_feat.npy" if typed else "edge_feat.npy", feat)
            meta["feature_data"].append(_entry("edge", "feat", path, kind))
    labels = {t: store.typed_labels(t) for t in store.node_types}
    for ntype, values in labels.items():
        if values is not None:
            path = _save(out, node_files[ntype][1], values)
            meta["feature_data"].append(_entry("node", "label", path, ntype if typed else None))
    task = _task(store, out, labels)
    if any(key in task for key in _SETS.values()) or "num_classes" in task:
        meta["tasks"] = [task]
    return meta


def _task(store: GraphStore, out: Path, labels: dict[str, np.ndarray | None]) -> dict[str, Any]:
    """The node-classification task: per split, a set item per node type that has it."""
    typed = store.is_typed
    task: dict[str, Any] = {"name": "node_classification"}
    if typed and store.target_type is not None:
        task["target_type"] = store.target_type  # GraphBolt keeps it in the task's metadata
    num_classes = store.typed_num_classes(store.target_type) if typed and store.target_type else (
        None if typed else (store.manifest.get("labels") or {}).get("num_classes"))
    if num_classes:
        task["num_classes"] = int(num_classes)
    (out / "set").mkdir()
    for split, key in _SETS.items():
        items = []
        for ntype in store.node_types:
            if split not in store.typed_split_names(ntype):
                continue
            ids = np.asarray(store.typed_split(ntype, split))
            prefix = f"set/{ntype}/{split}" if typed else f"set/{split}"
            data = [{"name": "seed_nodes", "format": "numpy", "path": _save(out, f"{prefix}_seed_nodes.npy", ids)}]
            if labels[ntype] is not None:
                path = _save(out, f"{prefix}_labels.npy", np.asarray(labels[ntype])[ids])
                data.append({"name": "labels", "format": "numpy", "path": path})
            items.append(_typed({"data": data}, ntype if typed else None))
        if items:
            task[key] = items
    return task


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
