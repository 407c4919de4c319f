"""The typed half of ``validate(path)``: every node type and relation of a typed store.

Per relation: ``indptr`` ``(N_dst+1,)`` int64 from 0, non-decreasing, ending at ``E``;
every index in ``[0, N_src)`` and the recorded range the actual one; ``edge_id``,
``time`` and ``edge_feat`` have ``E`` rows; ``edge_id`` is a permutation of ``0..E-1``.
Per type: ``feat`` / ``label`` / ``time`` (and the ID map table) have ``N_t`` rows,
labels are ``>= -1``; split
IDs in ``[0, N_t)``, each once, splits pairwise disjoint and of the recorded sizes.
Checksums of every array are the generic part of :func:`graphpipe.store.validate.validate`.
Arrays are scanned a block at a time (memory maps), never read whole into memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.store import schema as ts
from graphpipe.store.checks import check_relation
from graphpipe.store.errors import StoreError

_BLOCK = 1 << 24


def typed_problems(store: Any) -> list[str]:
    """Every finding about ``store``'s types and relations (empty: none)."""
    problems: list[str] = []
    for etype in store.edge_types:
        problems += _guard(_relation_problems, store, etype)
    for ntype in store.node_types:
        problems += _guard(_node_problems, store, ntype)
        problems += _guard(_split_problems, store, ntype)
    return problems


def _guard(section: Any, store: Any, what: Any) -> list[str]:
    try:
        return section(store, what)
    except (StoreError, OSError, ValueError) as exc:
        return [str(exc).splitlines()[0]]


def _relation_problems(store: Any, etype: tuple[str, str, str]) -> list[str]:
    name = ts.etype_key(etype)
    indptr = store.array(ts.rel_key(etype, "csc/indptr"))
    indices = store.array(ts.rel_key(etype, "csc/indices"))
    recorded = store.manifest["arrays"][ts.rel_key(etype, "csc/indices")].get("range")
    try:
        check_relation(indptr, indices, etype, store.num_nodes_dict, recorded)
    except StoreError as exc:
        return [str(exc)]
    problems, num_edges = [], indices.shape[0]
    for kind in ("csc/edge_id", "time", "edge_feat"):
        key = ts.rel_key(etype, kind)
        if store.has_array(key) and store.array(key).shape[0] != num_edges:
            problems.append(f"{key}: {store.array(key).shape[0]} rows, expected {num_edges}")
    eid_key = ts.rel_key(etype, "csc/edge_id")
    if not problems and store.has_array(eid_key) and not _is_permutation(store.array(eid_key)):
        problems.append(f"{eid_key}: not a permutation of 0..{num_edges - 1} (relation {name})")
    return problems


def _is_permutation(eid: np.ndarray) -> bool:
    seen = np.zeros(eid.shape[0], dtype=bool)
    for start in range(0, eid.shape[0], _BLOCK):
        block = np.asarray(eid[start:start + _BLOCK])
        if block.size and (block.min() < 0 or block.max() >= eid.shape[0]):
            return False
        seen[block] = True
    return bool(seen.all())


def _node_problems(store: Any, ntype: str) -> list[str]:
    problems, n = [], store.num_nodes_dict[ntype]
    for kind in ts.NODE_ARRAYS:
        key = ts.node_key(ntype, kind)
        if not store.has_array(key):
            continue
        rows = store.array(key).shape[0]
        if rows != n:
            problems.append(f"{key}: {rows} rows, expected {n} ({ntype!r} nodes)")
        elif kind == "label" and rows and _block_min(store.array(key)) < -1:
            problems.append(f"{key}: labels below -1 (-1 marks an unlabelled node)")
    key = ts.id_map_key(ntype)
    entry = store.manifest["tables"].get(key)
    if entry is not None and entry.get("rows") != n:
        problems.append(f"{key}: {entry.get('rows')} rows, expected {n} ({ntype!r} nodes)")
    return problems


def _block_min(values: np.ndarray) -> int:
    return min(int(values[s:s + _BLOCK].min()) for s in range(0, values.shape[0], _BLOCK))


def _split_problems(store: Any, ntype: str) -> list[str]:
    problems, n = [], store.num_nodes_dict[ntype]
    seen: dict[str, np.ndarray] = {}
    recorded = store.manifest.get("typed_splits", {}).get(ntype, {})
    for name in store.typed_split_names(ntype):
        ids = np.asarray(store.array(ts.split_key(ntype, name)))
        where = f"split {name!r} of {ntype!r}"
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            problems.append(f"{where}: node IDs outside [0, {n})")
        if np.unique(ids).size != ids.size:
            problems.append(f"{where}: repeated node IDs")
        if recorded.get(name) != ids.size:
            problems.append(f"{where}: {ids.size} IDs, the manifest says {recorded.get(name)}")
        for other, other_ids in seen.items():
            common = np.intersect1d(ids, other_ids)
            if common.size:
                problems.append(f"splits {other!r} and {name!r} of {ntype!r} share {common.size} node(s)")
        seen[name] = ids
    return problems
