"""``summarize`` of a typed store: one entry per node type and per relation (what
`graphpipe info` prints for it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.store import schema as ts


def _degree(indptr: np.ndarray) -> dict[str, Any]:
    """In-degree statistics of a relation's destinations."""
    deg = np.diff(indptr)
    if not deg.size:
        return {"min": 0, "median": 0.0, "mean": 0.0, "max": 0, "isolated": 0}
    return {"min": int(deg.min()), "median": float(np.median(deg)), "mean": float(deg.mean()),
            "max": int(deg.max()), "isolated": int((deg == 0).sum())}


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
        "in_degree": _degree(indptr),
        "edge_ids": store.has_array(ts.rel_key(etype, "csc/edge_id")),
        "edge_features": None if feat is None else {"dim": (feat["shape"][1:] or [1])[0],
                                                    "dtype": feat["dtype"]},
        "time": store.has_array(ts.rel_key(etype, "time")),
    }


def summarize_typed(store: Any) -> dict[str, Any]:
    """The typed part of :func:`graphpipe.store.summary.summarize`."""
    return {
        "target_type": store.target_type,
        "node_types": {t: node_type_summary(store, t) for t in store.node_types},
        "edge_types": {ts.etype_key(e): relation_summary(store, e) for e in store.edge_types},
    }
