"""Link-prediction splits in a homogeneous store: ``link/<split>/...`` arrays.

A link split holds the supervision edges of one split (``train``, ``valid``, ``test``)
as global node IDs, apart from the message-passing graph (``csc/``):

=========================  ===========  ==========================================
key                        shape        meaning
=========================  ===========  ==========================================
``link/<s>/src``           ``(n,)``     int64 source of each positive edge
``link/<s>/dst``           ``(n,)``     int64 destination of each positive edge
``link/<s>/neg_src``       ``(m,)``     int64 negative pairs (ogbl-collab/ppa ``edge_neg``)
``link/<s>/neg_dst``       ``(m,)``     int64, with ``neg_src``
``link/<s>/neg_dst2d``     ``(n, K)``   int64 negatives per positive (ogbl-citation2
                                        ``target_node_neg``; the source is ``src``)
``link/<s>/weight``        ``(n,)``     per positive edge (ogbl-collab ``weight``)
``link/<s>/year``          ``(n,)``     int64 per positive edge (ogbl-collab ``year``)
=========================  ===========  ==========================================

The manifest lists them under ``manifest["link"]["splits"][<s>]`` (counts and which
optional arrays exist). :func:`read_link_split` checks every node ID against
``[0, num_nodes)`` before handing the arrays on (a store is input too).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from graphpipe.store.errors import CorruptStoreError, StoreError

__all__ = ["LINK_ARRAYS", "LinkSplit", "link_key", "link_split_names", "read_link_split",
           "write_link_split"]

LINK_ARRAYS = ("src", "dst", "neg_src", "neg_dst", "neg_dst2d", "weight", "year")
"""The arrays one link split may hold (``link/<split>/<name>``)."""
_NODE_ARRAYS = ("src", "dst", "neg_src", "neg_dst", "neg_dst2d")


def link_key(split: str, name: str) -> str:
    """The store key of array ``name`` of link split ``split`` (``link/train/src``)."""
    return f"link/{split}/{name}"


@dataclass
class LinkSplit:
    """The supervision edges of one split (global node IDs).

    Attributes:
        src, dst: int64 ``(n,)`` positive edges ``src[i] -> dst[i]``.
        neg_src, neg_dst: int64 ``(m,)`` negative pairs, or None.
        neg_dst2d: int64 ``(n, K)`` negative destinations of each positive's source, or None.
        weight: ``(n,)`` edge weights, or None.
        year: int64 ``(n,)`` edge years, or None.
    """

    src: np.ndarray
    dst: np.ndarray
    neg_src: np.ndarray | None = None
    neg_dst: np.ndarray | None = None
    neg_dst2d: np.ndarray | None = None
    weight: np.ndarray | None = None
    year: np.ndarray | None = None

    @property
    def num_pos(self) -> int:
        return int(self.src.shape[0])

    def arrays(self) -> dict[str, np.ndarray]:
        """``{name: array}`` of the arrays present."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def check(self, num_nodes: int, where: str, error: type[Exception] = StoreError) -> None:
        """Shapes, dtypes and node ID ranges; ``error(where: ...)`` naming the array."""
        n = self.num_pos
        shapes = {"src": (n,), "dst": (n,), "weight": (n,), "year": (n,)}
        if self.neg_src is not None or self.neg_dst is not None:
            m = -1 if self.neg_src is None else self.neg_src.shape[0]
            shapes.update(neg_src=(m,), neg_dst=(m,))
        for name, value in self.arrays().items():
            if value.dtype.kind not in "iuf" or (name != "weight" and value.dtype.kind == "f"):
                raise error(f"{where}: {name}: dtype {value.dtype}, expected integers")
            expected = shapes.get(name)
            if name == "neg_dst2d":
                if value.ndim != 2 or value.shape[0] != n:
                    raise error(f"{where}: {name}: shape {value.shape}, expected ({n}, K)")
            elif value.shape != expected:
                raise error(f"{where}: {name}: shape {value.shape}, expected {expected}")
            if name in _NODE_ARRAYS and value.size:
                lo, hi = int(value.min()), int(value.max())
                if lo < 0 or hi >= num_nodes:
                    bad = lo if lo < 0 else hi
                    raise error(f"{where}: {name}: node id {bad} out of range [0, {num_nodes})")
        if (self.neg_src is None) != (self.neg_dst is None):
            raise error(f"{where}: neg_src and neg_dst must be given together")


def write_link_split(writer: Any, split: str, link: LinkSplit, num_nodes: int) -> None:
    """Write ``link`` as ``link/<split>/*`` through ``writer`` (a
    :class:`~graphpipe.store.StoreWriter` or :class:`~graphpipe.store.StoreEditor`) and
    record it in ``writer.manifest["link"]``; checked first (:class:`StoreError`)."""
    if not split.replace("_", "").replace("-", "").isalnum():
        raise StoreError(f"link split name {split!r}: letters, digits, '_' and '-' only")
    link.check(num_nodes, f"link split {split!r}")
    entry: dict[str, Any] = {"num_pos": link.num_pos}
    for name, value in link.arrays().items():
        dtype = np.int64 if name != "weight" else value.dtype
        writer.write_array(link_key(split, name), np.ascontiguousarray(value, dtype=dtype))
    if link.neg_src is not None:
        entry["num_neg"] = int(link.neg_src.shape[0])
    if link.neg_dst2d is not None:
        entry["neg_per_pos"] = int(link.neg_dst2d.shape[1])
    entry["arrays"] = sorted(link.arrays())
    writer.manifest.setdefault("link", {}).setdefault("splits", {})[split] = entry


def link_split_names(store: Any) -> list[str]:
    """The link splits of a :class:`~graphpipe.store.GraphStore` (empty without any)."""
    return list((store.manifest.get("link") or {}).get("splits", {}))


def read_link_split(store: Any, split: str) -> LinkSplit:
    """Link split ``split`` of ``store``, every node ID checked against ``[0, N)``.

    >>> import tempfile, numpy as np
    >>> from graphpipe.store import GraphStore, StoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with StoreWriter(tmp.name + "/g") as w:
    ...     w.write_array("csc/indptr", np.array([0, 1, 2, 2]))
    ...     w.write_array("csc/indices", np.array([1, 0]))
    ...     w.manifest.update(num_nodes=3, num_edges=2)
    ...     write_link_split(w, "test", LinkSplit(np.array([0]), np.array([2]),
    ...                      neg_src=np.array([1]), neg_dst=np.array([2])), 3)
    ...     _ = w.commit()
    >>> store = GraphStore.open(tmp.name + "/g")
    >>> link_split_names(store)
    ['test']
    >>> s = read_link_split(store, "test")
    >>> s.src.tolist(), s.dst.tolist(), s.neg_src.tolist(), s.neg_dst.tolist()
    ([0], [2], [1], [2])
    >>> tmp.cleanup()
    """
    names = link_split_names(store)
    if split not in names:
        raise StoreError(f"{store.path}: no link split {split!r} (link splits: {names or 'none'})")
    values = {name: np.asarray(store.array(link_key(split, name)))
              for name in LINK_ARRAYS if store.has_array(link_key(split, name))}
    if "src" not in values or "dst" not in values:
        raise CorruptStoreError(f"{store.path}: link split {split!r} lacks src/dst arrays")
    link = LinkSplit(**values)
    link.check(store.num_nodes, f"{store.path}: link split {split!r}", error=CorruptStoreError)
    return link
