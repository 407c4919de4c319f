"""Derivations: an op computed on a store's graph and written back as derived arrays.

Each function here is the glue between a pure op (:mod:`graphpipe.ops`, which knows
nothing of files) and the store's public way to add derived arrays
(:meth:`graphpipe.store.GraphStore.add_derived`, atomic, handle kept up to date). It
sits above both, like the loaders; the CLI commands ``graphpipe centrality``,
``graphpipe partition`` and ``graphpipe derive`` call it.

- :func:`write_centrality`: ``derived/degree_group`` (int8 per node) and
  ``derived/degree_order`` (int64 node IDs, hottest first), entry
  ``manifest["derived"]["centrality"]`` (:mod:`graphpipe.ops.features.degree`).
- :func:`write_partition`: ``partition/k{K}/part`` (int32), ``/perm`` and ``/inverse``
  (int64), entry ``manifest["derived"]["partition_k{K}"]`` (:mod:`graphpipe.ops.partition`).
- :func:`write_mean_features`: a featureless type's features as the mean of its neighbours'
  over one relation (the OGB-LSC MAG240M baseline's author and institution features),
  written out of core as the type's feature array ``typed/<type>/feat`` (so every loader and
  trainer uses them), entry ``manifest["derived"]["mean_features_<type>"]``
  (:mod:`graphpipe.ops.features.neighbour_mean`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from graphpipe.ops.features.degree import degree_groups, degree_order
from graphpipe.ops.features.neighbour_mean import neighbour_mean_blocks, transpose_csc
from graphpipe.ops.partition import cluster_permutation, metis_partition
from graphpipe.store.derived import DEGREE_GROUP_KEY, DEGREE_ORDER_KEY, partition_keys
from graphpipe.store.errors import StoreError
from graphpipe.store.schema import etype_key, node_key, parse_etype
from graphpipe.store.writer import StoreEditor

__all__ = ["write_centrality", "write_mean_features", "write_partition"]


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


def _mean_neighbours(store: Any, ntype: str, etype: tuple[str, str, str]
                     ) -> tuple[str, np.ndarray, np.ndarray]:
    """(the other type, indptr, indices): ``ntype``'s neighbours over ``etype`` as rows of the
    other type's features (the relation's CSC, or its transpose when ``ntype`` is its source)."""
    src, _, dst = etype
    if ntype not in (src, dst) or src == dst:
        raise StoreError(f"{store.path}: relation {etype_key(etype)!r} must join {ntype!r} to "
                         f"another type")
    indptr, indices = store.typed_csc(etype)
    if dst == ntype:
        return src, np.asarray(indptr), indices
    num_src = store.num_nodes_dict[src]
    t_indptr, t_dst, _ = transpose_csc(np.asarray(indptr, np.int64),
                                       np.asarray(indices, np.int64), num_src)
    return dst, t_indptr, t_dst


def write_mean_features(store: Any, ntype: str, via: str | tuple[str, str, str], *,
                        memory_bytes: int = 256 << 20, replace: bool = False) -> dict[str, Any]:
    """Give ``ntype`` features: the mean of its neighbours' features over relation ``via``.

    The OGB-LSC MAG240M baseline's preprocessing: an author is the mean of the papers it
    writes (``via="author___writes___paper"``), an institution the mean of its authors'
    (derived) features (``via="author___affiliated_with___institution"``, run after the
    authors'). ``ntype`` may be either end of ``via``; the other end must have features.
    Computed out of core (:func:`graphpipe.ops.features.neighbour_mean.neighbour_mean_blocks`:
    the other type's features are read a bounded block of rows at a time, the result written
    a block at a time; the relation's topology, transposed when ``ntype`` is its source, is
    held in memory) in float64, stored in the other type's dtype (float16 stays float16) as
    ``typed/<ntype>/feat`` with entry ``manifest["derived"]["mean_features_<ntype>"]``, in
    one atomic step. A node without neighbours gets a zero row. Handles opened before do
    not see the new array: open the store again.

    Args:
        store: a typed :class:`graphpipe.store.GraphStore`.
        ntype: the node type to give features.
        via: the relation ``"src___rel___dst"`` (or a tuple) joining it to a featured type.
        memory_bytes: the working memory of the computation (about).
        replace: overwrite features ``ntype`` already has (without it they are an error).

    Returns:
        The manifest entry written.

    >>> import tempfile, numpy as np
    >>> from graphpipe.store import open_store
    >>> from graphpipe.store.writer import TypedStoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with TypedStoreWriter(tmp.name + "/s", {"author": 3, "paper": 2}) as w:
    ...     w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 0, 1]))
    ...     w.write_node_array("paper", "feat", np.array([[2.0], [4.0]], dtype=np.float32))
    ...     _ = w.commit()
    >>> entry = write_mean_features(open_store(tmp.name + "/s"), "author", "author___writes___paper")
    >>> open_store(tmp.name + "/s").typed_features("author")[:, 0].tolist()
    [2.0, 3.0, 0.0]
    >>> tmp.cleanup()
    """
    if not getattr(store, "is_typed", False):
        raise StoreError(f"{store.path}: not a typed store: --mean-features needs node types")
    if ntype not in store.num_nodes_dict:
        raise StoreError(f"{store.path}: no node type {ntype!r} (types: "
                         f"{', '.join(store.node_types)})")
    etype = parse_etype(via) if isinstance(via, str) else tuple(via)
    if etype not in [tuple(e) for e in store.edge_types]:
        raise StoreError(f"{store.path}: no relation {etype_key(etype)!r} (relations: "
                         f"{', '.join(etype_key(e) for e in store.edge_types)})")
    if store.typed_features(ntype) is not None and not replace:
        raise StoreError(f"{store.path}: type {ntype!r} already has features; pass "
                         f"replace=True (--overwrite) to replace them")
    other, indptr, indices = _mean_neighbours(store, ntype, etype)
    x = store.typed_features(other)
    if x is None:
        raise StoreError(f"{store.path}: type {other!r} has no features to average (derive "
                         f"them first)")
    n, key = store.num_nodes_dict[ntype], node_key(ntype, "feat")
    deg = np.diff(np.asarray(indptr, np.int64))
    entry = {"method": "mean", "via": etype_key(etype), "source_type": other,
             "dtype": str(x.dtype), "without_neighbours": int((deg == 0).sum()),
             "arrays": {"feat": key}}
    with StoreEditor(store.path) as editor:
        rows = editor.row_writer(key, (n, int(x.shape[1])), x.dtype,
                                 replace=store.typed_features(ntype) is not None)
        try:
            for block in neighbour_mean_blocks(indptr, indices, x, memory_bytes=memory_bytes):
                rows.write(block)
            rows.close()
        except BaseException:
            rows.abort()
            raise
        editor.manifest.setdefault("derived", {})
        if editor.manifest["derived"] is None:
            editor.manifest["derived"] = {}
        editor.manifest["derived"][f"mean_features_{ntype}"] = entry
        editor.commit()
    return entry
