"""What a loader reads, whatever it was given: :class:`GraphData` (CSC topology, feature
row chunks, labels, splits) resolved from a store, a store path, a dict or a tuple by
:func:`resolve_graph_data`. The feature rows are handed to the gather stage as a
:class:`graphpipe.loaders.rows.RowSource` (:meth:`GraphData.feature_rows`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.from_sample import BatchAttrs
from graphpipe.loaders.pyg_arrays import mask_splits, pyg_parts
from graphpipe.loaders.rows import ChunkedRows
from graphpipe.store.checks import check_topology

__all__ = ["GraphData", "coo_to_csc", "numeric_array", "resolve_graph_data"]


@dataclass
class GraphData:
    """What a loader reads, whatever it was given.

    Attributes:
        indptr: int64 ``(N+1,)`` CSC offsets by destination.
        indices: int32/int64 ``(E,)`` in-neighbour global IDs.
        num_nodes: ``N``.
        feature_chunks: row-chunk views of the features (``chunks[c]`` holds rows
            ``c*chunk_rows ...``), or None without features.
        chunk_rows: rows per chunk.
        labels: ``(N,)`` or ``(N, tasks)`` labels, or None.
        splits: ``{name: int64 node IDs}`` for array input; read from the store otherwise.
        store: the :class:`graphpipe.store.GraphStore` when built from a store.
        attrs: edge order and other node/edge arrays batches carry
            (:class:`graphpipe.loaders.from_sample.BatchAttrs`).
    """

    indptr: np.ndarray
    indices: np.ndarray
    num_nodes: int
    feature_chunks: list[np.ndarray] | None
    chunk_rows: int
    labels: np.ndarray | None
    splits: dict[str, np.ndarray] = field(default_factory=dict)
    store: Any = None
    attrs: BatchAttrs = field(default_factory=BatchAttrs)
    _rows: ChunkedRows | None = field(default=None, repr=False)

    def feature_rows(self) -> ChunkedRows:
        """The feature rows as a row source over the chunk views (built once, not copied)."""
        if self._rows is None:
            assert self.feature_chunks is not None
            self._rows = ChunkedRows(self.feature_chunks, self.chunk_rows)
        return self._rows

    @property
    def split_names(self) -> list[str]:
        return list(self.store.split_names) if self.store is not None else list(self.splits)

    def split(self, name: str) -> np.ndarray:
        if name not in self.split_names:
            raise ValueError(f"'input_nodes' names an unknown split {name!r}; "
                             f"known splits: {self.split_names}")
        if self.store is not None:
            return np.asarray(self.store.split(name), dtype=np.int64)
        return np.asarray(self.splits[name], dtype=np.int64)

    def feature_dim(self) -> int:
        assert self.feature_chunks is not None
        return int(self.feature_chunks[0].shape[1])

    @classmethod
    def from_pyg(cls, data: Any) -> GraphData:
        """What a loader reads from a PyG ``Data``, built in memory: the CSC by destination
        (each row's sources ascending; ``attrs.edge_order`` maps a slot to its column of
        ``data.edge_index``, so a batch's ``e_id`` indexes it as PyG's does), ``x`` / ``y``
        / ``edge_attr`` and the other node and edge tensors viewed without copies
        (:func:`graphpipe.loaders.pyg_arrays.pyg_parts`), splits from the boolean masks.

        >>> import torch
        >>> from torch_geometric.data import Data
        >>> data = Data(x=torch.eye(3), edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
        ...             train_mask=torch.tensor([True, True, False]))
        >>> graph = GraphData.from_pyg(data)
        >>> graph.indptr.tolist(), graph.indices.tolist(), graph.attrs.edge_order.tolist()
        ([0, 1, 2, 3], [2, 0, 1], [2, 0, 1])
        >>> graph.split("train").tolist(), graph.feature_chunks[0] is not None
        ([0, 1], True)
        """
        return _from_pyg(data)


def numeric_array(value: Any, where: str) -> np.ndarray:
    """``value`` (a tensor, viewed when on the CPU, or anything ``np.asarray`` reads) as
    NumPy; ``ValueError`` naming ``where`` when it is not numeric."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype == object:
        raise ValueError(f"{where} is not a numeric array (got {type(value).__name__})")
    return arr


def _to_numpy(value: Any, name: str) -> np.ndarray | None:
    return None if value is None else numeric_array(value, f"'data' entry {name!r}")


def coo_to_csc(src: Any, dst: Any, num_src: int, num_dst: int, where: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, edge_order)`` of the edge list ``src -> dst`` (local IDs), built
    in memory: CSC by destination, each row's sources ascending (ties in list order, as
    graphpipe's ingest builder sorts them), ``edge_order[slot]`` the edge's position in
    the list; ``indices`` int32 below ``2**31`` sources. ``ValueError`` naming ``where``
    for IDs out of range.

    >>> indptr, indices, order = coo_to_csc([2, 0, 1, 0], [1, 1, 0, 1], 3, 3, "edges")
    >>> indptr.tolist(), indices.tolist(), order.tolist()
    ([0, 1, 4, 4], [1, 0, 0, 2], [2, 1, 3, 0])
    """
    src = numeric_array(src, where).astype(np.int64).ravel()
    dst = numeric_array(dst, where).astype(np.int64).ravel()
    if src.shape != dst.shape:
        raise ValueError(f"{where}: src and dst differ in length ({src.shape[0]} vs {dst.shape[0]})")
    for name, ids, n in (("src", src, num_src), ("dst", dst, num_dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
            raise ValueError(f"{where}: {name} IDs must lie in [0, {n})")
    order = np.argsort(dst * max(num_src, 1) + src, kind="stable")
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    indices = src[order]
    return indptr, indices.astype(np.int32) if num_src < 2**31 else indices, order


def _from_pyg(data: Any) -> GraphData:
    """A PyG ``Data`` read in memory: the CSC by :func:`coo_to_csc`, ``x`` / ``y`` / edge
    and other arrays viewed from the tensors (no copies); splits from the masks."""
    arrays, node_extra, edge_extra = pyg_parts(data)
    num_nodes = int(arrays["num_nodes"])
    src, dst = arrays["edge_index"]
    indptr, indices, edge_order = coo_to_csc(src, dst, num_nodes, num_nodes, "Data.edge_index")
    x = arrays.get("x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
    attrs = BatchAttrs(edge_order=edge_order, num_input_edges=int(arrays["edge_index"].shape[1]),
                       edge_attr=arrays.get("edge_attr"), node_attrs=node_extra, edge_attrs=edge_extra)
    return GraphData(indptr=indptr, indices=indices, num_nodes=num_nodes,
                     feature_chunks=None if x is None else [x], chunk_rows=max(1, num_nodes),
                     labels=arrays.get("y"), splits=mask_splits(arrays), attrs=attrs)


def _from_store(store: Any) -> GraphData:
    chunks, chunk_rows = store.feature_chunks() if store.has_features else (None, 1)
    if chunks is not None:
        chunks = [c.reshape(-1, 1) if c.ndim == 1 else c for c in chunks]
    indptr, indices = store.topology()  # checked once: the sampling kernels trust it
    return GraphData(indptr=np.asarray(indptr), indices=np.asarray(indices),
                     num_nodes=store.num_nodes, feature_chunks=chunks, chunk_rows=int(chunk_rows),
                     labels=np.asarray(store.labels) if store.has_labels else None, store=store,
                     attrs=_store_attrs(store))


def _store_attrs(store: Any) -> BatchAttrs:
    """The store's edge order (``csc/edge_id``), edge features, other ``node/*`` /
    ``edge/*`` arrays and timestamps (``nodes/time`` as ``time``, ``csc/time`` as
    ``edge_time``), memory maps until read."""
    keys = list(store.manifest.get("arrays", {}))
    num_input = int(store.manifest.get("graph", {}).get("num_input_edges", store.num_edges))
    attrs = BatchAttrs(
        edge_order=store.edge_id if "csc/edge_id" in keys else None, num_input_edges=num_input,
        edge_attr=store.edge_features if "edge/feat" in keys else None,
        node_attrs={k.split("/", 1)[1]: store.array(k) for k in keys
                    if k.startswith("node/") and k not in ("node/feat", "node/label")},
        edge_attrs={k.split("/", 1)[1]: store.array(k) for k in keys
                    if k.startswith("edge/") and k != "edge/feat"})
    if "nodes/time" in keys:
        attrs.node_attrs.setdefault("time", store.array("nodes/time"))
    if "csc/time" in keys:
        attrs.slot_attrs["edge_time"] = store.array("csc/time")
    return attrs


def _parts_of(store_or_arrays: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The named arrays of a dict or tuple input, and its splits."""
    if isinstance(store_or_arrays, dict):
        unknown = set(store_or_arrays) - {"indptr", "indices", "x", "y", "splits"}
        if unknown or not {"indptr", "indices"} <= set(store_or_arrays):
            raise ValueError("'data' as a dict needs keys 'indptr', 'indices' and optionally "
                             f"'x', 'y', 'splits' (got {sorted(store_or_arrays)})")
        splits = {k: np.asarray(_to_numpy(v, k), dtype=np.int64)
                  for k, v in (store_or_arrays.get("splits") or {}).items()}
        return store_or_arrays, splits
    if isinstance(store_or_arrays, (tuple, list)) and 2 <= len(store_or_arrays) <= 4:
        return dict(zip(("indptr", "indices", "x", "y"), store_or_arrays)), {}
    raise ValueError("'data' must be a PyG Data, a GraphStore, a store path, a dict or a tuple "
                     f"(indptr, indices, x, y) (got {type(store_or_arrays).__name__})")


def _from_arrays(store_or_arrays: Any) -> GraphData:
    parts, splits = _parts_of(store_or_arrays)
    indptr = _to_numpy(parts["indptr"], "indptr")
    indices = _to_numpy(parts["indices"], "indices")
    if indptr is None or indptr.ndim != 1 or len(indptr) < 1:
        raise ValueError("'data' indptr must be a 1-D array of N+1 offsets")
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices)
    num_nodes = len(indptr) - 1
    check_topology(indptr, indices, num_nodes, error=ValueError, where="'data'")
    x = _to_numpy(parts.get("x"), "x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
        if x.shape[0] != num_nodes:
            raise ValueError(f"'data' x has {x.shape[0]} rows for {num_nodes} nodes")
    y = _to_numpy(parts.get("y"), "y")
    if y is not None and y.shape[0] != num_nodes:
        raise ValueError(f"'data' y has {y.shape[0]} rows for {num_nodes} nodes")
    return GraphData(indptr=indptr, indices=indices, num_nodes=num_nodes,
                     feature_chunks=None if x is None else [x],
                     chunk_rows=max(1, num_nodes), labels=y, splits=splits)


def resolve_graph_data(store_or_arrays: Any) -> GraphData:
    """A :class:`GraphData` from a GraphStore, a store path, a ``torch_geometric.data.Data``
    (:meth:`GraphData.from_pyg`), a dict with keys
    ``indptr, indices[, x, y, splits]`` or a tuple ``(indptr, indices, x, y)``.

    The topology handed on is checked (once, ``O(N + E)``) to be a CSC whose every
    slice and index is in bounds: :meth:`GraphStore.topology` for a store, the same
    check (raising ``ValueError``) for arrays given directly."""
    from graphpipe.store import GraphStore, open_store

    if isinstance(store_or_arrays, (str, os.PathLike)):
        if not Path(store_or_arrays).is_dir():
            raise ValueError(f"'data' is not a store directory (got {str(store_or_arrays)!r})")
        store_or_arrays = open_store(store_or_arrays, in_memory="auto")
    if isinstance(store_or_arrays, GraphStore):
        return _from_store(store_or_arrays)
    if type(store_or_arrays).__module__.split(".")[0] == "torch_geometric":
        return GraphData.from_pyg(store_or_arrays)
    return _from_arrays(store_or_arrays)
