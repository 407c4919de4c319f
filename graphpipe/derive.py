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
  written out of core in bounded memory (the other type's features read in sequential
  blocks, resumable) as the type's feature array ``typed/<type>/feat`` (so every loader and
  trainer uses them), entry ``manifest["derived"]["mean_features_<type>"]``
  (:mod:`graphpipe.ops.features.neighbour_mean`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ops.features.degree import degree_groups, degree_order
from graphpipe.ops.features.neighbour_mean import neighbour_mean_blocks
from graphpipe.ops.partition import cluster_permutation, metis_partition
from graphpipe.store.derived import DEGREE_GROUP_KEY, DEGREE_ORDER_KEY, partition_keys
from graphpipe.store.errors import StoreError
from graphpipe.store.schema import etype_key, node_key, parse_etype, rel_array_key
from graphpipe.store.work_folder import open_work, save_part
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


def _mean_layout(store: Any, ntype: str, etype: tuple[str, str, str]
                 ) -> tuple[str, str, np.ndarray, np.ndarray]:
    """(the other type, layout, indptr, indices): the relation's stored CSC as the
    neighbours of ``ntype`` (:mod:`graphpipe.ops.features.neighbour_mean`): grouped by the
    output rows when ``ntype`` is its destination, by the other type's rows when ``ntype``
    is its source (no transpose: the CSC is streamed in the other type's row order)."""
    src, _, dst = etype
    if ntype not in (src, dst) or src == dst:
        raise StoreError(f"{store.path}: relation {etype_key(etype)!r} must join {ntype!r} to "
                         f"another type")
    indptr, indices = store.typed_csc(etype)
    return (src, "rows", indptr, indices) if dst == ntype else (dst, "sources", indptr, indices)


def _work_params(store: Any, ntype: str, etype: tuple[str, str, str], other: str, x: np.ndarray,
                 accumulate: np.dtype) -> dict[str, Any]:
    """What a resumed run must share with the one that wrote the parts: the inputs'
    checksums (a re-derived source type or a re-ingested relation starts afresh)."""
    arrays = store.manifest.get("arrays") or {}
    checksum = lambda key: (arrays.get(key) or {}).get("checksum")
    return {"ntype": ntype, "via": etype_key(etype), "source_type": other,
            "rows": int(store.num_nodes_dict[ntype]), "shape": [int(v) for v in x.shape],
            "dtype": str(x.dtype), "accumulate": str(np.dtype(accumulate)),
            "source_checksum": checksum(node_key(other, "feat")),
            "relation_checksum": checksum(rel_array_key(store.manifest, etype, "csc/indices"))}


def _open_work(work: Path, params: dict[str, Any]) -> int:
    """Create ``work`` or reuse it (:func:`graphpipe.store.work_folder.open_work`; parts
    written for other inputs are removed): the first output row not yet in its parts."""
    open_work(work, params, refuse=None)
    done = 0
    for r0, r1, *_ in _parts(work):
        if r0 != done:
            break
        done = r1
    return done


def _parts(work: Path) -> list[tuple[int, int, Path, int]]:
    """The finished parts ``part-<first>-<end>-<rows without neighbours>.npy`` of ``work``,
    ``(first, end, path, without)`` by first row."""
    found = []
    for path in work.glob("part-*-*-*.npy"):
        first, end, empty = path.stem.split("-")[1:4]
        found.append((int(first), int(end), path, int(empty)))
    return sorted(found)


def _save_part(work: Path, r0: int, rows: np.ndarray, without: int) -> None:
    save_part(work / f"part-{r0:012d}-{r0 + rows.shape[0]:012d}-{without:012d}.npy", rows)


def write_mean_features(store: Any, ntype: str, via: str | tuple[str, str, str], *,
                        memory_bytes: int = 256 << 20, accumulate: Any = np.float64,
                        replace: bool = False) -> dict[str, Any]:
    """Give ``ntype`` features: the mean of its neighbours' features over relation ``via``.

    The OGB-LSC MAG240M baseline's preprocessing: an author is the mean of the papers it
    writes (``via="author___writes___paper"``), an institution the mean of its authors'
    (derived) features (``via="author___affiliated_with___institution"``, run after the
    authors'). ``ntype`` may be either end of ``via``; the other end must have features.

    Out of core in bounded memory
    (:func:`graphpipe.ops.features.neighbour_mean.neighbour_mean_blocks`): the sums of a
    block of ``ntype``'s rows are held while the other type's features stream past in
    sequential blocks of rows (never read in random order), each output block one pass;
    the relation's stored CSC is read in order, a bounded chunk at a time. Memory:
    ``memory_bytes`` and the open store. Summed in ``accumulate`` (float64: the sum of
    float16/float32 rows is exact in practice and the result the NumPy reference's bit
    for bit; float32 halves the passes, within float32 rounding), divided, stored in the
    other type's dtype (float16 stays float16) as ``typed/<ntype>/feat`` with entry
    ``manifest["derived"]["mean_features_<ntype>"]``. A node without neighbours gets a
    zero row.

    Resumable and atomic: each finished block is saved under
    ``STORE/.derive-mean_features_<ntype>/``; a run stopped part-way and started again
    (same inputs) starts after the last saved block; at the end the blocks are copied into
    the store in one atomic commit and the folder removed. Handles opened before do not
    see the new array: open the store again.

    Args:
        store: a typed :class:`graphpipe.store.GraphStore`.
        ntype: the node type to give features.
        via: the relation ``"src___rel___dst"`` (or a tuple) joining it to a featured type.
        memory_bytes: the working memory of the computation.
        accumulate: float64 (default) or float32 sums.
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
    >>> entry["passes"], entry["source_bytes_gathered"]
    (1, 8)
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
    other, grouped, indptr, indices = _mean_layout(store, ntype, etype)
    x = store.typed_features(other)
    if x is None:
        raise StoreError(f"{store.path}: type {other!r} has no features to average (derive "
                         f"them first)")
    n, key = store.num_nodes_dict[ntype], node_key(ntype, "feat")
    work = Path(store.path) / f".derive-mean_features_{ntype}"
    params = _work_params(store, ntype, etype, other, x, accumulate)
    resumed = _open_work(work, params)
    counter = _ReadCounter(x)
    blocks = neighbour_mean_blocks(indptr, indices, counter, grouped=grouped, num_rows=n,
                                   memory_bytes=memory_bytes, accumulate=accumulate,
                                   start=resumed)
    passes = 0
    for r0, rows, counts in blocks:
        _save_part(work, r0, rows, int((counts == 0).sum()))
        passes += 1
    entry = {"method": "mean", "via": etype_key(etype), "source_type": other,
             "dtype": str(x.dtype), "accumulate": params["accumulate"],
             "without_neighbours": sum(empty for *_, empty in _parts(work)),
             "arrays": {"feat": key},
             "resumed_at_row": resumed, "passes": passes,
             "source_bytes_gathered": counter.bytes_taken}
    _commit_parts(store, work, key, (n, int(x.shape[1])), x.dtype, entry, ntype)
    shutil.rmtree(work, ignore_errors=True)
    return entry


class _ReadCounter:
    """``x`` with a count of the bytes of the rows taken from it (whole blocks, or the rows a
    sparse block's edges name; the device reads the pages around them too)."""

    def __init__(self, x: np.ndarray):
        self.x, self.bytes_taken = x, 0
        self.shape, self.dtype, self.ndim = x.shape, x.dtype, x.ndim

    def __getitem__(self, rows: Any) -> np.ndarray:
        got = self.x[rows]
        self.bytes_taken += int(got.nbytes)
        return got


def _commit_parts(store: Any, work: Path, key: str, shape: tuple[int, int], dtype: np.dtype,
                  entry: dict[str, Any], ntype: str) -> None:
    """Copy the parts of ``work`` into ``key`` a part at a time, in one atomic commit."""
    with StoreEditor(store.path) as editor:
        rows = editor.row_writer(key, shape, dtype, replace=store.typed_features(ntype) is not None)
        try:
            for r0, r1, path, _ in _parts(work):
                part = np.load(path, mmap_mode="r")
                if r0 != rows.rows_written or part.shape != (r1 - r0, shape[1]):
                    raise StoreError(f"{path}: a part out of place (remove {work} and run again)")
                for c0 in range(0, part.shape[0], 1 << 14):  # 24 MiB of 768 float16 rows
                    rows.write(part[c0:c0 + (1 << 14)])
            rows.close()
        except BaseException:
            rows.abort()
            raise
        editor.manifest.setdefault("derived", {})
        if editor.manifest["derived"] is None:
            editor.manifest["derived"] = {}
        editor.manifest["derived"][f"mean_features_{ntype}"] = entry
        editor.commit()
