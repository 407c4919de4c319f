"""The feature tier per node type of a typed graph: each type with features reads its
rows from memory (the store's memory map or an array, :class:`graphpipe.loaders.rows.ChunkedRows`)
or from the disk tier of :mod:`graphpipe.loaders.feature_tier` (O_DIRECT
:class:`graphpipe.loaders.rows.DiskRows` over ``typed/<ntype>/feat``, behind a static hot
set of the type's nodes of highest in-degree summed over relations and a CLOCK cache).
Types without features have no row source and are not touched.

Which tier (:func:`typed_tiers`): ``features="memory"`` / ``"disk"`` for every type, a
mapping ``{ntype: "memory" | "disk" | "auto"}`` per type, or ``True`` / ``"auto"``: the
plan across types of :func:`plan_typed_tiers`: the smallest feature tables stay in
memory while together they take at most
:data:`graphpipe.store.reader.AUTO_MEMORY_FRACTION` of the memory this process may use,
the rest go to disk (the rule of the homogeneous ``"auto"``, over the sum of the types).
The row cache of the disk types takes :data:`graphpipe.loaders.feature_tier.CACHE_MEMORY_FRACTION`
of the usable memory left after the memory types and the memory-mapped topology, split
across the disk types in proportion to their bytes (:func:`split_cache`). Every tier
delivers ``X_t[n_id[t]]`` bit for bit (float32 and float16 alike: rows are copied as bytes).

Loaders over the same typed :class:`graphpipe.store.GraphStore` object share each type's
disk tier (a trainer's train and evaluation loaders), as the homogeneous tier is shared;
:func:`share_typed_disk_tier` builds them with a caller's cache sizes first (the
trainer's memory plan).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import numpy as np

from graphpipe.loaders.feature_tier import (
    CACHE_MEMORY_FRACTION,
    ROW_OVERHEAD,
    STATIC_SHARE,
    mapped_topology_bytes,
    read_ahead_topology,
)
from graphpipe.loaders.rows import CachedRows, ChunkedRows, DegreeCachedRows, DiskRows, RowSource

__all__ = ["plan_typed_tiers", "share_typed_disk_tier", "split_cache", "typed_feature_sources",
           "typed_tiers"]

TIERS = (True, "auto", "memory", "disk")
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # store -> {ntype: disk tier}


def _feature_key(ntype: str) -> str:
    from graphpipe.store.schema import node_key

    return node_key(ntype, "feat")


def _on_disk(data: Any, ntype: str) -> bool:
    """Whether ``ntype``'s rows are the store's uncompressed, memory-mapped array (the
    disk tier can read them)."""
    store = data.store
    if store is None or not store.has_array(_feature_key(ntype)):
        return False
    if _feature_key(ntype) in store.in_memory_arrays:
        return False
    from graphpipe.store.arrays import raw_chunk_files

    return raw_chunk_files(store.path, _feature_key(ntype)) is not None


def feature_bytes(data: Any, ntype: str) -> int:
    """Bytes of ``ntype``'s feature table (0 without one)."""
    x = data.features.get(ntype)
    return 0 if x is None else int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize


def plan_typed_tiers(sizes: Mapping[str, int], budget: float) -> dict[str, str]:
    """``{ntype: "memory" | "disk"}`` for feature tables of ``sizes`` bytes (only the types
    that may go to disk): the smallest stay in memory while their sum is at most ``budget``.

    >>> plan_typed_tiers({"paper": 900, "author": 50, "field": 40}, 100)
    {'paper': 'disk', 'author': 'memory', 'field': 'memory'}
    """
    tiers, used = {}, 0
    for t in sorted(sizes, key=lambda t: (sizes[t], t)):
        fits = used + sizes[t] <= budget
        tiers[t] = "memory" if fits else "disk"
        used += sizes[t] if fits else 0
    return {t: tiers[t] for t in sizes}


def typed_tiers(data: Any, features: Any, usable: int | None = None) -> dict[str, str]:
    """``{ntype: "memory" | "disk"}`` of every type with features in ``data`` (a
    :class:`graphpipe.loaders.GraphData`) for the loader's ``features`` option (module
    docstring); ``usable``: the memory budget of ``"auto"`` (default
    :func:`graphpipe.memory.usable_memory`)."""
    per_type = dict(features) if isinstance(features, Mapping) else {t: features for t in data.features}
    unknown = sorted(set(per_type) - set(data.features))
    if unknown:
        raise ValueError(f"'features' names node types without features: {', '.join(map(str, unknown))}")
    tiers: dict[str, str] = {}
    auto: dict[str, int] = {}
    for t in data.features:
        choice = per_type.get(t, "auto")
        if choice not in TIERS:
            raise ValueError(f"'features' of node type {t!r} must be True, 'auto', 'memory' or 'disk' "
                             f"(got {choice!r})")
        if choice == "disk":
            if data.store is None:
                raise ValueError("features='disk' needs a typed store (a GraphStore or a store path), "
                                 "not in-memory arrays")
            tiers[t] = "disk"
        elif choice == "memory" or not _on_disk(data, t):
            tiers[t] = "memory"
        else:
            auto[t] = feature_bytes(data, t)
    if auto:
        from graphpipe.memory import usable_memory
        from graphpipe.store.reader import AUTO_MEMORY_FRACTION

        usable = usable_memory() if usable is None else usable
        kept = sum(feature_bytes(data, t) for t, tier in tiers.items() if tier == "memory")
        tiers.update(plan_typed_tiers(auto, AUTO_MEMORY_FRACTION * usable - kept))
    return {t: tiers[t] for t in data.features}


def split_cache(data: Any, disk_types: list[str], budget: float) -> dict[str, int]:
    """Rows of each disk type's row cache out of ``budget`` bytes, shared in proportion to
    the types' feature bytes; each type's share pays its CLOCK slot table (4 bytes per
    node) and :data:`graphpipe.loaders.feature_tier.ROW_OVERHEAD` per row.

    >>> from types import SimpleNamespace
    >>> data = SimpleNamespace(features={"a": np.zeros((100, 4), np.float32),
    ...                                  "b": np.zeros((100, 12), np.float32)})
    >>> split_cache(data, ["a", "b"], 8000)     # 2,000 B: 400 slots, 33 rows of 16 + 32 B
    {'a': 33, 'b': 70}
    """
    sizes = {t: feature_bytes(data, t) for t in disk_types}
    total = max(1, sum(sizes.values()))
    rows = {}
    for t in disk_types:
        x = data.features[t]
        num_rows, row_bytes = int(x.shape[0]), int(np.prod(x.shape[1:])) * np.dtype(x.dtype).itemsize
        share = budget * sizes[t] / total - 4 * num_rows
        rows[t] = max(0, min(num_rows, int(share // (max(1, row_bytes) + ROW_OVERHEAD))))
    return rows


def _disk_source(data: Any, ntype: str, cache_rows: int, static_share: float = STATIC_SHARE) -> RowSource:
    """``ntype``'s disk tier: hot set (``static_share`` of ``cache_rows``, by in-degree
    over relations, filled with one near-sequential scan) over CLOCK over O_DIRECT reads."""
    from graphpipe.ops.features.degree import degree_order

    disk = DiskRows.from_store(data.store, key=_feature_key(ntype))
    if int(data.features[ntype].shape[0]) != disk.num_rows:
        raise ValueError(f"features of {ntype!r} differ from the store's {_feature_key(ntype)!r}")
    cache_rows = max(0, min(int(cache_rows), disk.num_rows))
    hot = int(cache_rows * static_share)
    source: RowSource = CachedRows(disk, cache_rows - hot)
    if hot:
        ids = np.sort(np.asarray(degree_order(data.in_degrees(ntype))[:hot], dtype=np.int64))
        source = DegreeCachedRows(source, ids, rows=disk.read_bulk(ids))
    return source


def typed_feature_sources(data: Any, features: Any, *, cache_rows: Mapping[str, int] | None = None,
                          usable: int | None = None) -> dict[str, RowSource]:
    """``{ntype: row source}`` of every type with features in ``data`` for the loader's
    ``features`` option (the tiers of :func:`typed_tiers`). The disk types' sources are
    shared per store unless ``cache_rows`` (rows per disk type) is given.

    >>> from graphpipe.loaders import GraphData
    >>> data = GraphData.from_dicts({"paper": 3, "author": 2},
    ...     {("author", "writes", "paper"): (np.array([0, 1]), np.array([0, 2]))},
    ...     x={"paper": np.eye(3, dtype=np.float32)})
    >>> rows = typed_feature_sources(data, True)
    >>> list(rows), rows["paper"].gather(np.array([2, 0])).tolist()
    (['paper'], [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    """
    tiers = typed_tiers(data, features, usable)
    out: dict[str, RowSource] = {}
    disk_types = [t for t, tier in tiers.items() if tier == "disk"]
    shared = _SHARED.setdefault(data.store, {}) if disk_types and cache_rows is None else None
    missing = [t for t in disk_types if shared is None or t not in shared]
    if missing:
        read_ahead_topology(data.store)  # sampling's first batches find the CSC pages cached
    if missing and cache_rows is None:
        cache_rows = _default_cache_rows(data, tiers, usable)
    for t, tier in tiers.items():
        x = data.features[t]
        if tier == "memory":
            out[t] = ChunkedRows([x], max(1, x.shape[0]))
        elif shared is not None and t in shared:
            out[t] = shared[t]
        else:
            out[t] = _disk_source(data, t, cache_rows.get(t, 0))
            if shared is not None:
                shared[t] = out[t]
    return out


def _default_cache_rows(data: Any, tiers: dict[str, str], usable: int | None) -> dict[str, int]:
    """The disk types' cache rows: :data:`CACHE_MEMORY_FRACTION` of the usable memory left
    after the memory types and the mapped topology, split by :func:`split_cache`."""
    from graphpipe.memory import usable_memory

    usable = usable_memory() if usable is None else usable
    kept = sum(feature_bytes(data, t) for t, tier in tiers.items() if tier == "memory" and _on_disk(data, t))
    left = max(0, usable - kept - mapped_topology_bytes(data.store))
    return split_cache(data, [t for t, tier in tiers.items() if tier == "disk"], CACHE_MEMORY_FRACTION * left)


def share_typed_disk_tier(data: Any, cache_rows: Mapping[str, int]) -> dict[str, RowSource]:
    """Build the disk tier of each type in ``cache_rows`` (rows of its row cache) for
    ``data``'s store now; loaders later built over the same store object (whose tier for
    that type is disk) use them. For the trainer's memory plan
    (:func:`graphpipe.train.memory_plan.plan_typed_training`)."""
    shared = _SHARED.setdefault(data.store, {})
    read_ahead_topology(data.store)
    for t, rows in cache_rows.items():
        shared[t] = _disk_source(data, t, int(rows))
    return {t: shared[t] for t in cache_rows}
