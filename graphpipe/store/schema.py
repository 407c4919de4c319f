"""Key names of every store: node types, relations and their arrays.

Every store answers the typed face (:class:`graphpipe.store.types.TypedFace`). A
homogeneous store is one node type and one relation, named as DGL names them,
``_N`` and ``("_N", "_E", "_N")`` (:data:`HOMOGENEOUS_NTYPE`, :data:`HOMOGENEOUS_ETYPE`),
and keeps its own layout: ``node/feat``, ``node/label``, ``nodes/time``, ``csc/indptr``,
``csc/indices``, ``csc/edge_id``, ``csc/time`` (:func:`node_array_key`,
:func:`rel_array_key`; ``docs/store-format.md``).

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
``node_types`` is homogeneous (old stores open as they are).

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
>>> node_array_key({"arrays": {}}, "_N", "feat"), rel_array_key({"arrays": {}}, HOMOGENEOUS_ETYPE, "time")
('node/feat', 'csc/time')
"""

from __future__ import annotations

import re
from typing import Any

from graphpipe.store.errors import StoreError

SEP = "___"
NODE_ROOT = "typed"
REL_ROOT = "rel"
NODE_ARRAYS = ("feat", "label", "time")
REL_ARRAYS = ("csc/indptr", "csc/indices", "csc/edge_id", "edge_feat", "time")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")
_NAME_MAX = 200

EdgeType = tuple[str, str, str]

HOMOGENEOUS_NTYPE = "_N"
HOMOGENEOUS_ETYPE: EdgeType = ("_N", "_E", "_N")
"""The node type and relation a homogeneous store answers with (DGL's default names)."""
_HOMOGENEOUS_NODE_KEYS = {"feat": "node/feat", "label": "node/label", "time": "nodes/time"}
_HOMOGENEOUS_REL_KEYS = {"csc/indptr": "csc/indptr", "csc/indices": "csc/indices",
                         "csc/edge_id": "csc/edge_id", "time": "csc/time"}


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


def node_array_key(manifest: dict[str, Any], ntype: str, kind: str) -> str:
    """Key of node array ``kind`` (``feat``, ``label``, ``time``) of ``ntype`` in the store
    ``manifest`` describes: ``typed/<ntype>/<kind>``, or a homogeneous store's own key."""
    return node_key(ntype, kind) if is_typed(manifest) else _HOMOGENEOUS_NODE_KEYS[kind]


def rel_array_key(manifest: dict[str, Any], etype: Any, name: str) -> str | None:
    """Key of relation array ``name`` of ``etype`` in the store ``manifest`` describes, or None
    for ``edge_feat`` of a homogeneous store (its ``edge/feat`` is in input edge order)."""
    return rel_key(etype, name) if is_typed(manifest) else _HOMOGENEOUS_REL_KEYS.get(name)
