"""``summarize(store)``: counts, degree statistics, sizes on disk, splits and provenance
(what `graphpipe info` prints); a typed store: one entry per node type and per relation."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store import schema as ts
from graphpipe.store.reader import GraphStore
from graphpipe.store.text import text_summary


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


_QUANTILES = (0.25, 0.5, 0.75, 0.9, 0.99)


def _degree(deg: np.ndarray, quantiles: tuple[float, ...] = ()) -> dict[str, Any]:
    """In-degree statistics (and ``quantiles``, as ``p25``...) of ``deg``."""
    if not deg.size:
        return {"min": 0, "median": 0.0, "mean": 0.0, "max": 0, "isolated": 0,
                **({"quantiles": {}} if quantiles else {})}
    out = {"min": int(deg.min()), "median": float(np.median(deg)), "mean": float(deg.mean()),
           "max": int(deg.max()), "isolated": int((deg == 0).sum())}
    if quantiles:
        qs = np.quantile(deg, quantiles)
        out["quantiles"] = {f"p{int(q * 100)}": float(v) for q, v in zip(quantiles, qs)}
    return out


def _sizes(store: GraphStore) -> tuple[dict[str, int], int]:
    """Bytes of each array and table, and of the whole store (on object storage: one listing)."""
    from graphpipe.store.remote import RemoteGraphStore

    if isinstance(store, RemoteGraphStore):
        return store.remote_sizes()
    m = store.manifest
    sizes = {key: _dir_size(store.path / key) for key in m["arrays"]}
    sizes.update({key: os.path.getsize(store.path / key) for key in m["tables"]})
    return sizes, _dir_size(store.path)


def summarize(store: GraphStore) -> dict[str, Any]:
    """A JSON-ready description of ``store`` (what `graphpipe info` prints)."""
    m = store.manifest
    if store.is_typed:
        return _typed_summary(store)
    degree = _degree(store.in_degrees, _QUANTILES)
    sizes, total = _sizes(store)
    return {
        "path": store.location,
        "name": store.name,
        "format_version": m["format_version"],
        "num_nodes": store.num_nodes,
        "num_edges": store.num_edges,
        "graph": m["graph"],
        "in_degree": degree,
        "node_features": m.get("node_features"),
        "edge_features": m.get("edge_features"),
        "labels": m.get("labels"),
        "time": _time_summary(store),
        "splits": m.get("splits", {}),
        "link_splits": (m.get("link") or {}).get("splits", {}),
        "id_map": m.get("id_map"),
        "sizes_bytes": sizes,
        "total_bytes": total,
        "provenance": m.get("provenance", {}),
        "derived": m.get("derived", {}),
        "text": text_summary(m),
    }


def _time_summary(store: GraphStore) -> dict[str, Any] | None:
    """Which timestamps the store has and their range (``nodes/time``, ``csc/time``): from
    the manifest (recorded at ingest), else read from the arrays."""
    recorded = store.manifest.get("time") or {}
    out: dict[str, Any] = {}
    for key, field in (("nodes/time", "node_range"), ("csc/time", "edge_range")):
        if not store.has_array(key):
            continue
        span = recorded.get(field)
        if span is None:
            times = store.array(key)
            span = [int(times.min()), int(times.max())] if times.size else None
        out[key] = {"min": span[0], "max": span[1]} if span else {}
    return out or None


def _typed_summary(store: GraphStore) -> dict[str, Any]:
    """A typed store: totals, then one entry per node type and per relation."""
    m = store.manifest
    sizes, total = _sizes(store)
    return {
        "path": store.location, "name": store.name, "format_version": m["format_version"],
        "num_nodes": store.num_nodes, "num_edges": store.num_edges,
        "target_type": store.target_type,
        "node_types": {t: node_type_summary(store, t) for t in store.node_types},
        "edge_types": {ts.etype_key(e): relation_summary(store, e) for e in store.edge_types},
        "sizes_bytes": sizes, "total_bytes": total,
        "provenance": m.get("provenance", {}), "derived": m.get("derived", {}),
    }


def _shape_dtype(store: Any, key: str) -> dict[str, Any] | None:
    entry = store.manifest["arrays"].get(key)
    return None if entry is None else {"shape": entry["shape"], "dtype": entry["dtype"]}


def node_type_summary(store: Any, ntype: str) -> dict[str, Any]:
    """Count, features, labels, timestamps and splits of one node type."""
    feat = _shape_dtype(store, ts.node_key(ntype, "feat"))
    return {
        "num_nodes": store.num_nodes_dict[ntype],
        "features": None if feat is None else {"dim": feat["shape"][1], "dtype": feat["dtype"]},
        "labels": store.manifest.get("typed_labels", {}).get(ntype),
        "time": store.has_array(ts.node_key(ntype, "time")),
        "splits": dict(store.manifest.get("typed_splits", {}).get(ntype, {})),
    }


def relation_summary(store: Any, etype: tuple[str, str, str]) -> dict[str, Any]:
    """Edge count, destination in-degrees and per-edge arrays of one relation."""
    feat = _shape_dtype(store, ts.rel_key(etype, "edge_feat"))
    indptr, _ = store.typed_csc(etype)
    return {
        "num_edges": store.num_edges_dict[etype],
        "in_degree": _degree(np.diff(indptr)),
        "edge_ids": store.has_array(ts.rel_key(etype, "csc/edge_id")),
        "edge_features": None if feat is None else {"dim": (feat["shape"][1:] or [1])[0],
                                                    "dtype": feat["dtype"]},
        "time": store.has_array(ts.rel_key(etype, "time")),
    }
