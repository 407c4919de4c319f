"""``validate(path)``: check a store against its manifest and the format's invariants."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphpipe.store import _fetch
from graphpipe.store import arrays as _arrays
from graphpipe.store import checks as _checks
from graphpipe.store import schema as ts
from graphpipe.store.errors import CorruptStoreError, ObjectStorageError, StoreError
from graphpipe.store.open import open_store
from graphpipe.store.reader import GraphStore
from graphpipe.store.remote import RemoteGraphStore

_SCAN_BLOCK = 1 << 24


def validate(path: str | os.PathLike, *, checksums: bool = True) -> list[str]:
    """Everything wrong with the store at ``path``, as messages (empty list: valid).

    Checks: manifest readable, of a known version, its counts/shapes/dtypes consistent;
    every array's ``zarr.json`` agrees with the manifest (shape, dtype, chunks); every
    listed array and table present with its recorded checksum; ``indptr`` starts at 0,
    is non-decreasing and ends at ``len(indices)``; every index in ``[0, N)``;
    ``edge_id`` length (and present when ``edge/feat`` is); feature/label row counts;
    timestamps (``nodes/time``, ``csc/time``: int64, one per node / CSC slot); split
    IDs in range and pairwise disjoint; for a typed store the same for every node type and
    relation (:func:`_typed_problems`). Arrays are scanned a block at a time (memory maps),
    never read whole into memory. A missing, truncated or unreadable file
    is a finding like any other. A store on object storage is downloaded into its cache
    first; a request that fails after its bounded retries raises :class:`ObjectStorageError`
    (the store could not be read: not a finding about it).
    """
    try:
        store = open_store(path)
    except ObjectStorageError:
        raise
    except StoreError as exc:
        return [str(exc)]
    _download(store)
    problems = _metadata_problems(store)
    if checksums:
        problems += _checksum_problems(store)
    if store.is_typed:  # every node type and relation
        problems += _typed_problems(store)
    for section in (_topology_problems, _row_problems, _link_problems):
        try:
            problems += section(store)
        except (StoreError, OSError, ValueError) as exc:
            problems.append(str(exc))
    for ntype in store.node_types:
        problems += _guard(_split_problems, store, ntype)
    return list(dict.fromkeys(problems))  # one finding once, in the order found


def _download(store: GraphStore) -> None:
    """Every array and table of a store on object storage into its cache; an object that
    differs from the manifest is left for the checks below to report."""
    if not isinstance(store, RemoteGraphStore):
        return
    for key in [*store.manifest["arrays"], *store.manifest["tables"]]:
        try:
            if key in store.manifest["arrays"]:
                store.prefetch([key])
            else:
                store.cache.ensure_file(key)
        except CorruptStoreError:
            continue


def _metadata_problems(store: GraphStore) -> list[str]:
    """Each array's ``zarr.json`` against its manifest entry."""
    problems = []
    for key, entry in store.manifest["arrays"].items():
        try:
            _checks.check_array_metadata(store.path, key, _arrays.array_metadata(store.path, key), entry)
        except (StoreError, OSError, ValueError) as exc:
            problems.append(str(exc))
    return problems


def _checksum_problems(store: GraphStore) -> list[str]:
    problems = []
    root = store.path
    for key, meta in store.manifest["arrays"].items():
        try:
            actual = _arrays.checksum_array(root, key)
        except (StoreError, OSError, ValueError) as exc:
            problems.append(str(exc))
            continue
        if actual != meta.get("checksum"):
            problems.append(f"{key}: checksum {actual} does not match the manifest's {meta.get('checksum')}")
    for key, meta in store.manifest["tables"].items():
        try:
            _fetch.ensure_file(root, key)  # a store on object storage: into its cache
        except StoreError as exc:
            problems.append(str(exc))
            continue
        if not (root / key).is_file():
            problems.append(f"{key}: table missing")
            continue
        try:
            actual = _arrays.checksum_file(root / key)
        except OSError as exc:
            problems.append(f"{key}: cannot be read ({exc.strerror or exc})")
            continue
        if actual != meta.get("checksum"):
            problems.append(f"{key}: checksum {actual} does not match the manifest's {meta.get('checksum')}")
    return problems


def _topology_problems(store: GraphStore) -> list[str]:
    n, e = store.num_nodes, store.num_edges
    if not store.has_array("csc/indptr"):
        return []
    indptr, indices = store.indptr, store.indices
    problems = check_csc(indptr, indices, n, e, "csc")
    recorded = store.manifest["arrays"]["csc/indices"].get("range")
    actual = _checks.index_range(indices)
    if not problems and recorded is not None and actual is not None and actual != recorded:
        problems.append(f"csc/indices: node IDs in {actual}, but the manifest records {recorded}")
    if store.has_edge_ids and store.edge_id.shape[0] != indices.shape[0]:
        problems.append(f"csc/edge_id: {store.edge_id.shape[0]} entries, expected {indices.shape[0]}")
    if store.has_array("edge/feat") and not store.has_edge_ids:
        problems.append("edge/feat: stored without csc/edge_id, so no CSC slot can find its features")
    if store.has_csr:
        problems += check_csc(store.csr_indptr, store.csr_indices, n, e, "csr")
    return problems


def _row_problems(store: GraphStore) -> list[str]:
    problems, n = [], store.num_nodes
    if store.has_features:
        views, _ = store.feature_chunks()
        rows = sum(v.shape[0] for v in views)
        if rows != n:
            problems.append(f"node/feat: {rows} rows, expected num_nodes = {n}")
    if store.has_labels and store.labels.shape[0] != n:
        problems.append(f"node/label: {store.labels.shape[0]} rows, expected num_nodes = {n}")
    return problems + _time_problems(store)


def _time_problems(store: GraphStore) -> list[str]:
    """``nodes/time`` and ``csc/time``: 1-D int64, one value per node / per CSC slot."""
    problems = []
    for key, rows, what in (("nodes/time", store.num_nodes, "num_nodes"),
                            ("csc/time", store.num_edges, "num_edges")):
        if not store.has_array(key):
            continue
        meta = store.manifest["arrays"][key]
        shape, dtype = tuple(meta.get("shape", ())), str(meta.get("dtype"))
        if dtype != "int64":
            problems.append(f"{key}: dtype {dtype}, expected int64 timestamps")
        if shape != (rows,):
            problems.append(f"{key}: shape {shape}, expected ({rows},) ({what} = {rows})")
    return problems


def _split_problems(store: GraphStore, ntype: str) -> list[str]:
    """The splits of node type ``ntype`` (``_N`` of a homogeneous store): IDs in range, each
    once, splits pairwise disjoint and of the sizes the manifest records."""
    problems, n, typed = [], store.num_nodes_dict[ntype], store.is_typed
    recorded = store.manifest.get("typed_splits", {}).get(ntype, {}) if typed else store.manifest["splits"]
    of = f" of {ntype!r}" if typed else ""
    seen: dict[str, np.ndarray] = {}
    for name in store.typed_split_names(ntype):
        try:
            ids = np.asarray(store.array(ts.split_key(ntype, name))) if typed else store.split(name)
        except StoreError as exc:
            problems.append(str(exc))
            continue
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            problems.append(f"split {name!r}{of}: node IDs outside [0, {n})")
        if np.unique(ids).size != ids.size:
            problems.append(f"split {name!r}{of}: repeated node IDs")
        if recorded.get(name) != ids.size:
            problems.append(f"split {name!r}{of}: {ids.size} IDs, the manifest says {recorded.get(name)}")
        for other, other_ids in seen.items():
            common = np.intersect1d(ids, other_ids)
            if common.size:
                problems.append(f"splits {other!r} and {name!r}{of} share {common.size} node(s)")
        seen[name] = ids
    return problems


def check_csc(indptr: np.ndarray, indices: np.ndarray, num_nodes: int, num_edges: int, prefix: str) -> list[str]:
    """Invariants of one compressed topology (CSC or CSR)."""
    problems = []
    if indptr.shape != (num_nodes + 1,):
        return [f"{prefix}/indptr: shape {indptr.shape}, expected ({num_nodes + 1},)"]
    if indptr[0] != 0:
        problems.append(f"{prefix}/indptr: starts at {indptr[0]}, expected 0")
    for start in range(0, indptr.shape[0], _SCAN_BLOCK):
        block = indptr[max(0, start - 1): start + _SCAN_BLOCK]
        bad = np.flatnonzero(np.diff(block) < 0)
        if bad.size:
            problems.append(f"{prefix}/indptr: decreases at node {max(0, start - 1) + bad[0]}")
            break
    if indptr[-1] != indices.shape[0]:
        problems.append(f"{prefix}/indptr: ends at {indptr[-1]}, but {prefix}/indices has {indices.shape[0]} entries")
    if indices.shape[0] != num_edges:
        problems.append(f"{prefix}/indices: {indices.shape[0]} entries, manifest says num_edges = {num_edges}")
    for start in range(0, indices.shape[0], _SCAN_BLOCK):
        block = indices[start:start + _SCAN_BLOCK]
        if block.size and (block.min() < 0 or block.max() >= num_nodes):
            pos = start + int(np.flatnonzero((block < 0) | (block >= num_nodes))[0])
            problems.append(f"{prefix}/indices: entry {pos} = {indices[pos]} out of range [0, {num_nodes})")
            break
    return problems


# -- typed stores: every node type and relation --------------------------------------------
def _typed_problems(store: GraphStore) -> list[str]:
    """Every finding about a typed store's node types and relations (empty: none).

    Per relation: its CSC as :func:`graphpipe.store.checks.check_relation` checks it;
    ``edge_id``, ``time`` and ``edge_feat`` have ``E`` rows; ``edge_id`` is a permutation of
    ``0..E-1``. Per type: ``feat`` / ``label`` / ``time`` (and the ID map table) have ``N_t``
    rows, labels are ``>= -1``; split IDs in ``[0, N_t)``, each once, splits pairwise disjoint
    and of the recorded sizes."""
    problems: list[str] = []
    for etype in store.edge_types:
        problems += _guard(_relation_problems, store, etype)
    for ntype in store.node_types:
        problems += _guard(_node_problems, store, ntype)
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
        _checks.check_relation(indptr, indices, etype, store.num_nodes_dict, recorded)
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
    for start in range(0, eid.shape[0], _SCAN_BLOCK):
        block = np.asarray(eid[start:start + _SCAN_BLOCK])
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
    return min(int(values[s:s + _SCAN_BLOCK].min()) for s in range(0, values.shape[0], _SCAN_BLOCK))


def _link_problems(store: GraphStore) -> list[str]:
    """Each link split (``link/<split>/*``): shapes, dtypes, node IDs in range."""
    from graphpipe.store.link import link_split_names, read_link_split

    problems = []
    for name in link_split_names(store):
        try:
            read_link_split(store, name)
        except StoreError as exc:
            problems.append(str(exc))
    return problems
