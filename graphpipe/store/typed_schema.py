"""Key names of a typed (heterogeneous) store, and the checks of its manifest.

A typed store holds several node types, each with its own count, and one CSC per
relation ``(src_type, rel, dst_type)``. Node IDs are local to their type
(``0 .. N_t - 1``). Keys (zarr arrays under the store root)::

    typed/<ntype>/feat          (N_t, D_t)  float, one chunk (a zero-copy memory map)
    typed/<ntype>/label         (N_t,)      int64, -1 = unlabelled
    typed/<ntype>/time          (N_t,)      int64 node timestamps (OGB's node_year)
    typed/<ntype>/split/<name>  (n,)        int64 local IDs, in the order given
    typed/<ntype>/id_map.parquet  table     external_id (int64 | string), node_id: optional
    rel/<etype>/csc/indptr      (N_dst+1,)  int64
    rel/<etype>/csc/indices     (E,)        int32 (int64 when N_src >= 2**31), sorted per dst
    rel/<etype>/csc/edge_id     (E,)        int64 position in the relation's input edge list
    rel/<etype>/edge_feat       (E, D)      CSC order
    rel/<etype>/time            (E,)        int64, CSC order

``<etype>`` is ``"src___rel___dst"``, the name OGB gives a relation's folder. The
manifest gains ``node_types`` ``{ntype: count}``, ``edge_types`` ``[[src, rel, dst], ...]``,
``target_type`` (the type with labels and splits, or null), ``typed_splits``
``{ntype: {name: count}}`` and ``typed_labels`` ``{ntype: {"num_classes": C}}``;
``num_nodes`` / ``num_edges`` are the totals over types and relations. A store without
``node_types`` is homogeneous and read exactly as before.

Names become path components, so a type, relation or split name must match
``[A-Za-z0-9_][A-Za-z0-9_.-]*`` without ``___`` (:func:`check_name`): a name from an
untrusted dataset can never climb out of the store.

>>> etype_key(("paper", "cites", "paper"))
'paper___cites___paper'
>>> parse_etype("author___writes___paper")
('author', 'writes', 'paper')
>>> rel_key(("author", "writes", "paper"), "csc/indptr")
'rel/author___writes___paper/csc/indptr'
>>> node_key("paper", "feat"), split_key("paper", "train")
('typed/paper/feat', 'typed/paper/split/train')
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from graphpipe.store.checks import check_range
from graphpipe.store.errors import CorruptStoreError, StoreError

SEP = "___"
NODE_ROOT = "typed"
REL_ROOT = "rel"
NODE_ARRAYS = ("feat", "label", "time")
REL_ARRAYS = ("csc/indptr", "csc/indices", "csc/edge_id", "edge_feat", "time")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_NAME_MAX = 200

EdgeType = tuple[str, str, str]


def check_name(name: Any, what: str = "name") -> str:
    """``name`` when it is a safe type, relation or split name; else :class:`StoreError`.

    >>> check_name("field_of_study")
    'field_of_study'
    >>> check_name("../x", "node type")
    Traceback (most recent call last):
    ...
    graphpipe.store.errors.StoreError: node type '../x' is not allowed: ...
    """
    if not isinstance(name, str) or len(name) > _NAME_MAX or not _NAME.fullmatch(name) \
            or SEP in name:
        raise StoreError(f"{what} {name!r} is not allowed: use letters, digits, '_', '.', '-' "
                         f"(not starting with '.' or '-', no '{SEP}', at most {_NAME_MAX} characters)")
    return name


def as_etype(etype: Any) -> EdgeType:
    """``(src, rel, dst)`` from a tuple/list of three names or a ``"src___rel___dst"`` string."""
    if isinstance(etype, str):
        return parse_etype(etype)
    if not isinstance(etype, (tuple, list)) or len(etype) != 3:
        raise StoreError(f"edge type {etype!r} must be (src_type, relation, dst_type)")
    return (check_name(etype[0], "node type"), check_name(etype[1], "relation"),
            check_name(etype[2], "node type"))


def etype_key(etype: Any) -> str:
    """``"src___rel___dst"``: the relation's folder name (OGB's) and its key part."""
    return SEP.join(as_etype(etype))


def parse_etype(text: str) -> EdgeType:
    """``"src___rel___dst"`` -> ``(src, rel, dst)`` (each part a safe name)."""
    parts = text.split(SEP) if isinstance(text, str) else []
    if len(parts) != 3:
        raise StoreError(f"edge type {text!r} must be 'src{SEP}rel{SEP}dst'")
    return as_etype(tuple(parts))


def node_key(ntype: str, name: str) -> str:
    """Key of node array ``name`` (``feat``, ``label``, ``time``) of type ``ntype``."""
    return f"{NODE_ROOT}/{check_name(ntype, 'node type')}/{name}"


def split_key(ntype: str, name: str) -> str:
    """Key of split ``name`` of type ``ntype``."""
    return f"{NODE_ROOT}/{check_name(ntype, 'node type')}/split/{check_name(name, 'split name')}"


def id_map_key(ntype: str) -> str:
    """Key of the table of ``ntype``'s external IDs (``external_id``, ``node_id``)."""
    return f"{NODE_ROOT}/{check_name(ntype, 'node type')}/id_map.parquet"


def rel_key(etype: Any, name: str) -> str:
    """Key of relation array ``name`` (``csc/indptr``, ``csc/indices``, ``edge_feat``, ...)."""
    return f"{REL_ROOT}/{etype_key(etype)}/{name}"


def is_typed(manifest: dict[str, Any]) -> bool:
    """Whether the manifest describes a typed store."""
    return "node_types" in manifest


def is_index_array(key: str) -> bool:
    """Whether ``key`` is a relation's ``csc/indices`` (its range is recorded at commit)."""
    return key.startswith(f"{REL_ROOT}/") and key.endswith("/csc/indices")


# -- manifest checks (at GraphStore.open) -----------------------------------------------------
def _fail(path: str | os.PathLike, message: str) -> CorruptStoreError:
    return CorruptStoreError(f"{Path(path) / 'manifest.json'}: {message}")


def _counts(manifest: dict[str, Any], path: str | os.PathLike) -> dict[str, int]:
    node_types = manifest.get("node_types")
    if not isinstance(node_types, dict) or not node_types:
        raise _fail(path, "field 'node_types' must be a non-empty object {type: count}")
    for ntype, count in node_types.items():
        try:
            check_name(ntype, "node type")
        except StoreError as exc:
            raise _fail(path, f"field 'node_types': {exc}") from None
        if type(count) is not int or count < 0:
            raise _fail(path, f"field 'node_types': count of {ntype!r} must be an integer >= 0 "
                              f"(got {count!r})")
    return node_types


def _etypes(manifest: dict[str, Any], counts: dict[str, int],
            path: str | os.PathLike) -> list[EdgeType]:
    raw = manifest.get("edge_types")
    if not isinstance(raw, list):
        raise _fail(path, "field 'edge_types' must be a list of [src, rel, dst]")
    etypes = []
    for item in raw:
        try:
            etype = as_etype(item)
        except StoreError as exc:
            raise _fail(path, f"field 'edge_types': {exc}") from None
        if etype[0] not in counts or etype[2] not in counts:
            raise _fail(path, f"field 'edge_types': {list(etype)} names a node type not in "
                              f"'node_types'")
        etypes.append(etype)
    if len(set(etypes)) != len(etypes):
        raise _fail(path, "field 'edge_types' lists a relation twice")
    return etypes


def _entry(arrays: dict[str, Any], key: str, path: str | os.PathLike, rows: int | None,
           kinds: str, ndim: int | None) -> list | None:
    """Shape of array ``key`` after checking rows, dimensions and dtype kind (None: absent)."""
    meta = arrays.get(key)
    if meta is None:
        return None
    from graphpipe.store.checks import _dtype

    shape = meta.get("shape") if isinstance(meta, dict) else None
    dtype = _dtype(meta.get("dtype")) if isinstance(meta, dict) else None
    if type(shape) is not list or not shape or not all(type(s) is int and s >= 0 for s in shape) \
            or (rows is not None and shape[0] != rows) or (ndim is not None and len(shape) != ndim):
        raise _fail(path, f"array {key!r} has shape {shape!r}, expected {rows} rows"
                          + (f" and {ndim} dimension(s)" if ndim else ""))
    if dtype is None or dtype.kind not in kinds or (key.endswith("indptr") and dtype.itemsize != 8):
        raise _fail(path, f"array {key!r} has dtype {meta.get('dtype')!r}, which it cannot have")
    return shape


def _check_relation(arrays: dict[str, Any], etype: EdgeType, counts: dict[str, int],
                    path: str | os.PathLike) -> None:
    n_src, n_dst = counts[etype[0]], counts[etype[2]]
    if rel_key(etype, "csc/indptr") not in arrays or rel_key(etype, "csc/indices") not in arrays:
        raise _fail(path, f"relation {etype_key(etype)!r} has no csc/indptr or csc/indices")
    _entry(arrays, rel_key(etype, "csc/indptr"), path, n_dst + 1, "i", 1)
    num_edges = _entry(arrays, rel_key(etype, "csc/indices"), path, None, "iu", 1)[0]
    _entry(arrays, rel_key(etype, "csc/edge_id"), path, num_edges, "iu", 1)
    _entry(arrays, rel_key(etype, "time"), path, num_edges, "iu", 1)
    _entry(arrays, rel_key(etype, "edge_feat"), path, num_edges, "biuf", None)
    check_range(arrays, rel_key(etype, "csc/indices"), n_src, num_edges, path, repr(etype[0]))


def check_typed_manifest(manifest: dict[str, Any], path: str | os.PathLike) -> None:
    """Raise :class:`CorruptStoreError` unless the typed fields are consistent: type counts
    are integers >= 0, every relation names known types and has a CSC whose ``indptr`` has
    ``N_dst + 1`` int64 entries and whose recorded index range lies in ``[0, N_src)``, and the
    per-type arrays have ``N_t`` rows."""
    counts = _counts(manifest, path)
    arrays = manifest["arrays"]
    for etype in _etypes(manifest, counts, path):
        _check_relation(arrays, etype, counts, path)
    for ntype, n in counts.items():
        _entry(arrays, node_key(ntype, "feat"), path, n, "f", 2)
        _entry(arrays, node_key(ntype, "label"), path, n, "iu", 1)
        _entry(arrays, node_key(ntype, "time"), path, n, "iu", 1)
    target = manifest.get("target_type")
    if target is not None and target not in counts:
        raise _fail(path, f"field 'target_type' is {target!r}, not one of {sorted(counts)}")
    splits = manifest.get("typed_splits", {})
    if not isinstance(splits, dict) or any(t not in counts or not isinstance(s, dict)
                                           for t, s in splits.items()):
        raise _fail(path, "field 'typed_splits' must be {node type: {split: count}}")
    for ntype, names in splits.items():
        for name in names:
            _entry(arrays, split_key(ntype, name), path, names[name], "iu", 1)
