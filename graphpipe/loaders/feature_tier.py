"""Which tier the loader reads feature rows from: memory (the store's chunk views: an
in-memory array or memory maps) or disk (:class:`graphpipe.loaders.rows.DiskRows`
behind a CLOCK cache, :class:`graphpipe.loaders.rows.CachedRows`).

``features=True`` (the loader's default) means ``"auto"``: the disk tier when the rows
come from a store whose features are uncompressed, not loaded into memory, and larger
than :data:`graphpipe.store.reader.AUTO_MEMORY_FRACTION` of the memory this process may
use (:func:`graphpipe.memory.usable_memory`: free RAM bounded by the cgroup limit), the
same rule as ``GraphStore.open(in_memory="auto")``; memory otherwise. ``"disk"`` and
``"memory"`` force a tier. Both tiers deliver ``X[n_id]`` bit for bit.

The CLOCK cache takes :data:`CACHE_MEMORY_FRACTION` of the usable memory (less its
4-byte-per-node slot table), capped at the number of rows. Loaders over the same
:class:`graphpipe.store.GraphStore` object (a trainer's train, eval and inference loaders)
share one disk tier and cache, so the budget is spent once per store, not per loader
(their per-epoch disk counters then include each other's reads while both run).
"""

from __future__ import annotations

import weakref
from typing import Any

from graphpipe.loaders.rows import CachedRows, DiskRows, RowSource

__all__ = ["CACHE_MEMORY_FRACTION", "FEATURE_TIERS", "choose_tier", "feature_source", "share_disk_tier"]

FEATURE_TIERS = (True, "auto", "memory", "disk")
CACHE_MEMORY_FRACTION = 0.25
"""Share of the usable memory the disk tier's CLOCK cache takes."""
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # store -> its disk tier


def choose_tier(data: Any, features: bool | str) -> str:
    """``"memory"`` or ``"disk"`` for ``features`` (see the module docstring)."""
    if features not in FEATURE_TIERS:
        raise ValueError(f"'features' must be True, False, 'auto', 'memory' or 'disk' (got {features!r})")
    store = data.store
    if features == "memory":
        return "memory"
    if features == "disk":
        if store is None:
            raise ValueError("features='disk' needs a store (a GraphStore or a store path), "
                             "not in-memory arrays")
        return "disk"
    if store is None or "node/feat" in store.in_memory_arrays:
        return "memory"
    from graphpipe.memory import usable_memory
    from graphpipe.store.arrays import array_nbytes, raw_chunk_files
    from graphpipe.store.reader import AUTO_MEMORY_FRACTION

    if raw_chunk_files(store.path, "node/feat") is None:
        return "memory"  # compressed: already decoded into memory by the store
    fits = array_nbytes(store.path, "node/feat") <= AUTO_MEMORY_FRACTION * usable_memory()
    return "memory" if fits else "disk"


def cache_capacity(num_rows: int, row_bytes: int) -> int:
    """Rows of the CLOCK cache: :data:`CACHE_MEMORY_FRACTION` of the usable memory."""
    from graphpipe.memory import usable_memory

    budget = CACHE_MEMORY_FRACTION * usable_memory() - 4 * num_rows
    return max(0, min(num_rows, int(budget // max(1, row_bytes))))


def feature_source(data: Any, features: bool | str, *, cache_rows: int | None = None) -> RowSource:
    """The row source of ``data``'s features for the tier :func:`choose_tier` picks;
    ``cache_rows`` overrides the CLOCK cache's size."""
    if choose_tier(data, features) == "memory":
        return data.feature_rows()
    if cache_rows is None and data.store in _SHARED:
        return _SHARED[data.store]
    disk = DiskRows.from_store(data.store)
    rows = cache_capacity(disk.num_rows, disk.row_bytes) if cache_rows is None else int(cache_rows)
    source = CachedRows(disk, rows)
    if cache_rows is None:
        _SHARED[data.store] = source
    return source


def share_disk_tier(store: Any, cache_rows: int) -> RowSource:
    """Build ``store``'s shared disk tier now, with a CLOCK cache of ``cache_rows`` rows:
    the loaders later built over the same store object (default ``cache_rows``) use it.
    For a caller that sizes the cache after its own fixed costs are known (the trainer's
    :func:`graphpipe.train.memory_plan.plan_training`)."""
    source = CachedRows(DiskRows.from_store(store), int(cache_rows))
    _SHARED[store] = source
    return source

