"""Which tier the loader reads feature rows from: memory (the store's chunk views: an
in-memory array or memory maps) or disk (:class:`graphpipe.loaders.rows.DiskRows`
behind a static hot set by in-degree, :class:`graphpipe.loaders.rows.DegreeCachedRows`,
and a CLOCK cache for the rest, :class:`graphpipe.loaders.rows.CachedRows`).

``features=True`` (the loader's default) means ``"auto"``: the disk tier when the rows
come from a store whose features are uncompressed, not loaded into memory, and larger
than :data:`graphpipe.store.reader.AUTO_MEMORY_FRACTION` of the memory this process may
use (:func:`graphpipe.memory.usable_memory`: free RAM bounded by the cgroup limit), the
same rule as ``GraphStore.open(in_memory="auto")``; memory otherwise. ``"disk"`` and
``"memory"`` force a tier. Both tiers deliver ``X[n_id]`` bit for bit.

The row cache takes :data:`CACHE_MEMORY_FRACTION` of the usable memory left after the
page cache that memory-mapped topology will take (less the
4-byte-per-node slot table of CLOCK and ~32 bytes per cached row of tables), capped at
the number of rows; :data:`STATIC_SHARE` of its rows are the hot set
(the nodes of highest in-degree, read at start-up with one near-sequential scan,
:meth:`graphpipe.loaders.rows.DiskRows.read_bulk`), the rest CLOCK. The split is
measured (benchmarks/results/disk_features.md, R-MAT 8.4M nodes, 200 batches, 400K-row
cache): hit rate 52% all-CLOCK (its compulsory-miss bound: 429K distinct rows in
901K), 62% / 68% / 72% / 74% with a static share of 0.25 / 0.5 / 0.75 / 1.0. The hot
set serves the power-law head from the first batch on; CLOCK keeps a tenth for
recency (Match-Reorder's window, graphs whose degree predicts access less well). Loaders over the same
:class:`graphpipe.store.GraphStore` object (a trainer's train, eval and inference loaders)
share one disk tier and cache, so the budget is spent once per store, not per loader
(their per-epoch disk counters then include each other's reads while both run).

Cold start: building the disk tier asks the kernel to read the memory-mapped CSC arrays
ahead (:func:`read_ahead_topology`, ``POSIX_FADV_WILLNEED``: sequential reads in the
background while the hot set fills), so the first batches' sampling does not fault the
topology in one random 4 KiB read at a time.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

import numpy as np

from graphpipe.loaders.rows import CachedRows, DegreeCachedRows, DiskRows, RowSource

__all__ = ["CACHE_MEMORY_FRACTION", "FEATURE_TIERS", "MATCH_REORDER_AUTO", "ROW_OVERHEAD", "STATIC_SHARE",
           "auto_match_reorder", "choose_tier", "feature_source", "mapped_topology_bytes",
           "mapped_topology_keys", "read_ahead_topology", "row_tier",
           "share_disk_tier"]

FEATURE_TIERS = (True, "auto", "memory", "disk")
CACHE_MEMORY_FRACTION = 0.5
"""Share of the usable memory the disk tier's row cache takes (O_DIRECT reads leave no
second copy of rows in the page cache)."""
ROW_OVERHEAD = 32
"""Bytes per cached row beyond the row itself (the hot set's hash table, CLOCK's slot state)."""
STATIC_SHARE = 0.9
"""Share of the row cache held by the static hot set (the rest: CLOCK)."""
MATCH_REORDER_AUTO: dict[str, bool | str] = {"memory": False, "disk": False, "gpu": True}
"""What the loader's ``match_reorder="auto"`` (its default) becomes: per row tier on a CPU
device, and on a GPU device whatever the tier. Measured (benchmarks/results/defaults.md,
``benchmarks/defaults.py``): in memory a reused row costs the same copy as a gathered
one, so no reuse is fastest; on the disk tier the hot set (the rows of highest
in-degree) already holds nearly every row consecutive batches share (Match saved 1-2% of
the disk reads), so no reuse is fastest there too. GPU: Match-Reorder as before
(host-to-device copies are the cost it saves; not measured here, no GPU)."""
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


def row_tier(rows: RowSource | None) -> str:
    """``"disk"`` when ``rows``' chain of wrappers (``rows.source`` ...) reads a
    :class:`graphpipe.loaders.rows.DiskRows`, else ``"memory"`` (also for None)."""
    seen = 0
    while rows is not None and seen < 64:
        if isinstance(rows, DiskRows):
            return "disk"
        rows, seen = getattr(rows, "source", None), seen + 1
    return "memory"


def auto_match_reorder(tier: str, device_type: str) -> bool | str:
    """The ``match_reorder`` setting ``"auto"`` resolves to for a row ``tier``
    (``"memory"`` / ``"disk"``) and a batch device type (``"cpu"``, ``"cuda"``, ...):
    :data:`MATCH_REORDER_AUTO`. Every setting delivers the same batches (Reorder only
    permutes them, and only in shuffled epochs).

    >>> auto_match_reorder("memory", "cpu"), auto_match_reorder("disk", "cpu"), auto_match_reorder("memory", "cuda")
    (False, False, True)
    """
    if tier not in ("memory", "disk"):
        raise ValueError(f"'tier' must be 'memory' or 'disk' (got {tier!r})")
    return MATCH_REORDER_AUTO["gpu" if device_type != "cpu" else tier]


def cache_capacity(num_rows: int, row_bytes: int, reserve: int = 0) -> int:
    """Rows of the row cache: :data:`CACHE_MEMORY_FRACTION` of the usable memory less
    ``reserve`` bytes, less CLOCK's 4-byte-per-node slot table, at ``row_bytes`` plus 32
    bytes (the hot set's hash table, CLOCK's per-slot state) per row."""
    from graphpipe.memory import usable_memory

    budget = CACHE_MEMORY_FRACTION * max(0, usable_memory() - reserve) - 4 * num_rows
    return max(0, min(num_rows, int(budget // (max(1, row_bytes) + ROW_OVERHEAD))))


def feature_source(data: Any, features: bool | str, *, cache_rows: int | None = None,
                   static_share: float | None = None) -> RowSource:
    """The row source of ``data``'s features for the tier :func:`choose_tier` picks;
    ``cache_rows`` overrides the row cache's size, ``static_share`` the hot set's share
    (None: :data:`STATIC_SHARE`)."""
    if choose_tier(data, features) == "memory":
        return data.feature_rows()
    share = STATIC_SHARE if static_share is None else static_share
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"'static_share' must be in [0, 1] (got {static_share!r})")
    shared = cache_rows is None and static_share is None
    if shared and data.store in _SHARED:
        return _SHARED[data.store]
    read_ahead_topology(data.store)  # sampling's first batches find the CSC pages cached
    disk = DiskRows.from_store(data.store)
    if cache_rows is None:
        rows = cache_capacity(disk.num_rows, disk.row_bytes, mapped_topology_bytes(data.store))
    else:
        rows = int(cache_rows)
    hot = int(rows * share)
    source: RowSource = CachedRows(disk, rows - hot)
    if hot:
        from graphpipe.ops.features.degree import degree_order
        from graphpipe.store.derived import read_degree_order

        order = read_degree_order(data.store)
        order = degree_order(np.diff(data.indptr)) if order is None else order
        ids = np.sort(np.asarray(order[:hot], dtype=np.int64))
        source = DegreeCachedRows(source, ids, rows=disk.read_bulk(ids))
    if shared:
        _SHARED[data.store] = source
    return source


def mapped_topology_keys(store: Any) -> list[str]:
    """The CSC arrays (``indptr``, ``indices``; every relation's on a typed store) that
    ``store`` leaves memory-mapped."""
    if getattr(store, "is_typed", False):
        from graphpipe.store.schema import rel_key

        keys = [rel_key(et, n) for et in store.edge_types for n in ("csc/indptr", "csc/indices")]
    else:
        keys = ["csc/indptr", "csc/indices"]
    loaded = set(store.in_memory_arrays)
    return [k for k in keys if k not in loaded and store.has_array(k)]


def mapped_topology_bytes(store: Any) -> int:
    """Bytes of the CSC arrays ``store`` leaves memory-mapped (:func:`mapped_topology_keys`):
    sampling faults them into the page cache, which a memory cap counts, so the row cache
    must leave them room (measured: without this reserve a 1 GB cap thrashes the maps,
    29 GB read in 200 batches)."""
    from graphpipe.store.arrays import array_nbytes

    return sum(array_nbytes(store.path, k) for k in mapped_topology_keys(store))


def read_ahead_topology(store: Any) -> int:
    """Ask the kernel to read the memory-mapped CSC arrays of ``store`` into the page cache
    now, in the background (``posix_fadvise(POSIX_FADV_WILLNEED)``: sequential, device-speed
    readahead), so the first batches' sampling finds them cached instead of faulting each
    page in with one random read (a cold start: the user's first minute). Returns the files
    advised; a no-op where the call is missing. The disk tier reserves these bytes already
    (:func:`mapped_topology_bytes`), so the pages fit under a cap."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    from graphpipe.store.arrays import array_metadata, chunk_paths

    advised = 0
    for key in mapped_topology_keys(store):
        meta = array_metadata(store.path, key)
        for path in chunk_paths(store.path, key, tuple(meta["shape"]),
                                tuple(meta["chunk_grid"]["configuration"]["chunk_shape"])):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
                advised += 1
            finally:
                os.close(fd)
    return advised


def share_disk_tier(store: Any, cache_rows: int) -> RowSource:
    """Build ``store``'s shared disk tier now, with a row cache of ``cache_rows`` rows
    (hot set + CLOCK as :func:`feature_source` splits it): the loaders later built over
    the same store object (default ``cache_rows``) use it. For a caller that sizes the
    cache after its own fixed costs are known (the trainer's
    :func:`graphpipe.train.memory_plan.plan_training`)."""
    from graphpipe.loaders.graph_data import resolve_graph_data

    source = feature_source(resolve_graph_data(store), "disk", cache_rows=int(cache_rows))
    _SHARED[store] = source
    return source
