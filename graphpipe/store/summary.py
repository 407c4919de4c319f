"""``summarize(store)``: counts, degree statistics, sizes on disk, splits and provenance."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store.reader import GraphStore
from graphpipe.store.text import text_summary


def _dir_size(path: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(dirpath, f)) for f in files)
    return total


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
    deg = store.in_degrees
    quantiles = [0.25, 0.5, 0.75, 0.9, 0.99]
    degree: dict[str, Any] = {"min": 0, "median": 0, "mean": 0.0, "max": 0, "quantiles": {}}
    if deg.size:
        qs = np.quantile(deg, quantiles)
        degree = {
            "min": int(deg.min()), "median": float(np.median(deg)), "mean": float(deg.mean()),
            "max": int(deg.max()), "isolated": int((deg == 0).sum()),
            "quantiles": {f"p{int(q * 100)}": float(v) for q, v in zip(quantiles, qs)},
        }
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
    """A typed store: totals, then one entry per node type and relation (typed_summary.py)."""
    from graphpipe.store.typed_summary import summarize_typed

    m = store.manifest
    sizes = {key: _dir_size(store.path / key) for key in m["arrays"]}
    return {
        "path": str(store.path), "name": store.name, "format_version": m["format_version"],
        "num_nodes": store.num_nodes, "num_edges": store.num_edges, **summarize_typed(store),
        "sizes_bytes": sizes, "total_bytes": _dir_size(store.path),
        "provenance": m.get("provenance", {}), "derived": m.get("derived", {}),
    }
