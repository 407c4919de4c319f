"""Derived arrays: results computed from a store's own data, added under new keys.

A derivation (degree-centrality groups, a K-way partition, ...) is recorded as

- its arrays, each under its own key (``derived/degree_group``, ``partition/k4/part``);
- one manifest entry ``manifest["derived"][name]`` with its parameters and the keys of
  its arrays.

:func:`write_derived` adds both in one atomic step (a :class:`~graphpipe.store.StoreEditor`:
arrays written aside, renamed into place, manifest replaced atomically with the new
checksums), so a reader sees the old derivation or the new one, never half of each.
Call it through :meth:`graphpipe.store.GraphStore.add_derived`, which also brings the
open handle (manifest and array cache) up to date. The key names of the derivations
graphpipe writes are defined here, so readers need not know who computed them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from graphpipe.store.errors import CorruptStoreError
from graphpipe.store.manifest import read_manifest
from graphpipe.store.writer import StoreEditor

__all__ = [
    "DEGREE_GROUP_KEY",
    "DEGREE_ORDER_KEY",
    "partition_keys",
    "read_degree_order",
    "write_derived",
]

DEGREE_GROUP_KEY = "derived/degree_group"
"""int8 ``(N,)`` degree-centrality group of each node (``manifest["derived"]["centrality"]``)."""
DEGREE_ORDER_KEY = "derived/degree_order"
"""int64 ``(N,)`` node IDs by in-degree, hottest first (the static feature cache's order)."""


def partition_keys(num_parts: int) -> dict[str, str]:
    """Store keys of a K-way partition: ``{"part", "perm", "inverse"}`` -> array key."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) \
            or int(num_parts) < 1:
        raise ValueError(f"'num_parts' must be a positive integer (got {num_parts!r})")
    k = int(num_parts)
    return {name: f"partition/k{k}/{name}" for name in ("part", "perm", "inverse")}


def write_derived(path: str | os.PathLike, name: str, arrays: Mapping[str, np.ndarray],
                  entry: dict[str, Any], *, replace: bool = False) -> dict[str, Any]:
    """Add ``arrays`` (key -> array) and ``manifest["derived"][name] = entry`` to the
    store at ``path`` atomically; returns the store's new manifest.

    With ``replace=False`` a key that already exists is an error
    (:class:`~graphpipe.store.StoreError`) and nothing is written; with ``replace=True``
    those keys are replaced. Arrays and manifest entries of other derivations are kept.
    """
    with StoreEditor(path) as editor:
        for key, data in arrays.items():
            editor.write_array(key, data, replace=replace)
        if editor.manifest.get("derived") is None:
            editor.manifest["derived"] = {}
        editor.manifest["derived"][name] = entry
        editor.commit()
    return read_manifest(path)


def read_degree_order(store: Any) -> np.ndarray | None:
    """The stored hotness order (:data:`DEGREE_ORDER_KEY`) of a
    :class:`~graphpipe.store.GraphStore`, or None when absent."""
    if not store.has_array(DEGREE_ORDER_KEY):
        return None
    order = np.asarray(store.array(DEGREE_ORDER_KEY))
    n = store.num_nodes
    if order.ndim != 1 or order.dtype.kind not in "iu" or (order.size and (
            int(order.min()) < 0 or int(order.max()) >= n)):  # a corrupt store: never index with it
        raise CorruptStoreError(f"{store.path}: array {DEGREE_ORDER_KEY!r} is not node IDs in "
                                f"[0, {n})")
    return order
