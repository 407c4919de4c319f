"""Derivations: an op computed on a store's graph and written back as derived arrays.

Each function here is the glue between a pure op (:mod:`graphpipe.ops`, which knows
nothing of files) and the store's public way to add derived arrays
(:meth:`graphpipe.store.GraphStore.add_derived`, atomic, handle kept up to date). It
sits above both, like the loaders; the CLI commands ``graphpipe centrality`` and
``graphpipe partition`` call it.

- :func:`write_centrality`: ``derived/degree_group`` (int8 per node) and
  ``derived/degree_order`` (int64 node IDs, hottest first), entry
  ``manifest["derived"]["centrality"]`` (:mod:`graphpipe.ops.features.degree`).
- :func:`write_partition`: ``partition/k{K}/part`` (int32), ``/perm`` and ``/inverse``
  (int64), entry ``manifest["derived"]["partition_k{K}"]`` (:mod:`graphpipe.ops.partition`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.ops.features.degree import degree_groups, degree_order
from graphpipe.ops.partition import cluster_permutation, metis_partition
from graphpipe.store.derived import DEGREE_GROUP_KEY, DEGREE_ORDER_KEY, partition_keys

__all__ = ["write_centrality", "write_partition"]


def write_centrality(store: Any, method: str = "quartile", bins: int = 4, *,
                     replace: bool = True) -> dict[str, Any]:
    """Compute the groups and the hotness order of ``store`` and store them as derived arrays.

    Args:
        store: a :class:`graphpipe.store.GraphStore`.
        method, bins: as in :func:`graphpipe.ops.features.degree.degree_groups`.
        replace: overwrite earlier centrality arrays (default); with False an
            existing ``derived/degree_group`` is an error.

    Returns:
        The manifest entry written to ``manifest["derived"]["centrality"]``.
    """
    degrees = np.asarray(store.in_degrees)
    groups = degree_groups(degrees, method, bins)
    order = degree_order(degrees)
    sizes = np.bincount(groups.astype(np.int64), minlength=bins)
    entry = {
        "degree": "in",
        "method": method,
        "bins": int(bins),
        "group_sizes": [int(s) for s in sizes],
        "arrays": {"group": DEGREE_GROUP_KEY, "order": DEGREE_ORDER_KEY},
    }
    return store.add_derived("centrality", {DEGREE_GROUP_KEY: groups, DEGREE_ORDER_KEY: order},
                             entry, replace=replace)


def write_partition(store: Any, num_parts: int, *, recursive: bool = False, seed: int = 0,
                    overwrite: bool = False) -> dict[str, Any]:
    """Partition a store's graph and add the result as derived arrays.

    Writes ``partition/k{K}/part`` (int32 ``(N,)``), ``partition/k{K}/perm`` and
    ``partition/k{K}/inverse`` (int64 ``(N,)``, see
    :func:`graphpipe.ops.partition.cluster_permutation`) and
    ``manifest["derived"]["partition_k{K}"]`` (edge cut, parameters, part sizes). Other
    K's entries and every other array are left untouched.

    Args:
        store: an open :class:`graphpipe.store.GraphStore`.
        num_parts: K.
        recursive, seed: as in :func:`graphpipe.ops.partition.metis_partition`.
        overwrite: replace an existing K-way partition (only its own keys); without it
            an existing one raises ``ValueError``.

    Returns:
        The manifest entry written.
    """
    keys = partition_keys(num_parts)
    k = int(num_parts)
    name = f"partition_k{k}"
    derived = store.manifest.get("derived") or {}
    exists = name in derived or any(store.has_array(key) for key in keys.values())
    if exists and not overwrite:
        raise ValueError(f"{store.path}: a {k}-way partition is already stored ({name}); "
                         f"pass overwrite=True (--overwrite) to replace it")
    result = metis_partition(*store.topology(), k, recursive=recursive, seed=seed)  # checked CSC
    perm, inverse = cluster_permutation(result.parts, k)
    sizes = np.bincount(result.parts.astype(np.int64), minlength=k)
    entry = {
        "method": "metis",
        "num_parts": k,
        "recursive": bool(recursive),
        "seed": int(seed),
        "objective": "edge_cut",
        "edge_cut": int(result.edge_cut),
        "part_sizes": [int(s) for s in sizes],
        "arrays": keys,
    }
    arrays = {keys["part"]: result.parts, keys["perm"]: perm, keys["inverse"]: inverse}
    return store.add_derived(name, arrays, entry, replace=exists)
