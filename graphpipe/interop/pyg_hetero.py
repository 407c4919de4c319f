"""A ``torch_geometric.data.HeteroData`` written into a typed store (``graphpipe.from_pyg``
dispatches here), through :class:`graphpipe.store.StoreWriter`'s typed API.

Every node type, relation and tensor attribute is kept:

- per node type ``t``: its ``num_nodes``; ``x`` (2-D float) -> ``typed/<t>/feat``, ``y``
  (1-D int64, classes >= -1) -> ``typed/<t>/label``; an ``x`` / ``y`` of another shape or
  dtype, and every other node tensor ``name``, -> ``typed/<t>/<name>`` as given; 1-D boolean
  ``train_mask`` / ``val_mask`` / ``test_mask`` also become the splits ``train`` / ``valid``
  / ``test`` of ``t`` (when pairwise disjoint);
- per relation: ``edge_index`` ``(2, E)`` (local source, destination IDs) -> the relation's
  CSC, ``csc/edge_id`` = column of ``edge_index``; ``edge_attr`` -> ``rel/<etype>/edge_feat``
  and every other edge tensor ``name`` -> ``rel/<etype>/<name>``, in CSC order (slot ``k``
  holds edge ``edge_id[k]``);
- graph-level values are left out.

torch_geometric is imported only inside these functions.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphpipe.loaders.pyg_arrays import add_mask_splits, mask_splits, storage_tensors, tensor_numpy

__all__ = ["from_pyg_hetero"]

_NODE_RESERVED = {"feat", "label", "split", "id_map.parquet"}
_EDGE_RESERVED = {"csc", "edge_feat"}


def _check_attr(name: str, reserved: set[str], where: str) -> None:
    from graphpipe.store import schema as ts

    ts.check_name(name, f"{where} attribute")
    if name in reserved:
        raise ValueError(f"{where}: attribute name {name!r} is reserved in a store ({sorted(reserved)})")


def _write_node_type(w: Any, ntype: str, storage: Any) -> None:
    """Declare ``ntype`` and write its attributes and mask splits into the writer ``w``."""
    from graphpipe.store import schema as ts

    n = storage.num_nodes
    if n is None:
        raise ValueError(f"HeteroData[{ntype!r}] has no num_nodes and no node attribute")
    w.add_node_type(ntype, int(n))
    attrs = storage_tensors(storage)
    x, y = attrs.get("x"), attrs.get("y")
    if x is not None and x.ndim == 2 and x.dtype.kind == "f":
        w.write_node_array(ntype, "feat", attrs.pop("x"))
    if y is not None and y.ndim == 1 and y.dtype == np.int64 and y.min(initial=-1) >= -1:
        w.write_node_array(ntype, "label", attrs.pop("y"))
    for name, values in attrs.items():
        _check_attr(name, _NODE_RESERVED, f"HeteroData[{ntype!r}]")
        w.write_array(ts.node_key(ntype, name), values)
    masks: dict[str, np.ndarray] = {}
    add_mask_splits(masks, attrs)
    for split, ids in mask_splits(masks).items():
        w.write_split(ntype, split, ids)


def _write_relation(w: Any, etype: tuple[str, str, str], storage: Any) -> None:
    """Add relation ``etype`` (its CSC, ``edge_attr`` and every other edge tensor) to ``w``."""
    from graphpipe.store import schema as ts
    from graphpipe.store.writer import csc_order

    if "edge_index" not in storage:
        raise ValueError(f"HeteroData[{etype!r}] has no edge_index")
    edge_index = tensor_numpy(storage.edge_index)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"HeteroData[{etype!r}].edge_index must be (2, E) (got {edge_index.shape})")
    attrs = storage_tensors(storage)
    w.add_relation(etype, edge_index[0], edge_index[1], edge_feat=attrs.pop("edge_attr", None))
    _, order = csc_order(edge_index[0].astype(np.int64), edge_index[1].astype(np.int64),
                         w.num_nodes_dict[etype[2]])
    for name, values in attrs.items():
        _check_attr(name, _EDGE_RESERVED, f"HeteroData[{etype!r}]")
        if values.shape[:1] != (edge_index.shape[1],):
            raise ValueError(f"HeteroData[{etype!r}].{name} has shape {values.shape}, "
                             f"expected ({edge_index.shape[1]}, ...) (one row per edge)")
        w.write_array(ts.rel_key(etype, name), values[order])


def from_pyg_hetero(data: Any, path: str | os.PathLike, *, overwrite: bool = False,
                    name: str | None = None) -> Any:
    """Write ``data`` (a PyG ``HeteroData``) as a new typed store at ``path`` (atomically);
    returns the opened :class:`graphpipe.store.GraphStore`. What is kept: module docstring.

    >>> import tempfile, torch
    >>> from torch_geometric.data import HeteroData
    >>> data = HeteroData()
    >>> data["paper"].x = torch.eye(3)
    >>> data["paper"].y = torch.tensor([0, 1, 1])
    >>> data["paper"].train_mask = torch.tensor([True, False, True])
    >>> data["author"].num_nodes = 2
    >>> data["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [2, 0, 1]])
    >>> data["author", "writes", "paper"].edge_attr = torch.tensor([[0.5], [1.5], [2.5]])
    >>> tmp = tempfile.TemporaryDirectory()
    >>> store = from_pyg_hetero(data, tmp.name + "/mini")
    >>> store.num_nodes_dict, store.typed_split("paper", "train").tolist()
    ({'paper': 3, 'author': 2}, [0, 2])
    >>> [a.tolist() for a in store.typed_csc(("author", "writes", "paper"))]
    [[0, 1, 2, 3], [1, 1, 0]]
    >>> store.typed_edge_ids(("author", "writes", "paper")).tolist()
    [1, 2, 0]
    >>> store.typed_edge_features(("author", "writes", "paper"))[:, 0].tolist()
    [1.5, 2.5, 0.5]
    >>> tmp.cleanup()
    """
    from torch_geometric.data import HeteroData

    from graphpipe.store import GraphStore, StoreWriter

    if not isinstance(data, HeteroData):
        raise ValueError(f"expected a torch_geometric.data.HeteroData (got {type(data).__name__})")  # noqa: TRY004 - bad arguments are ValueError here
    if not data.node_types:
        raise ValueError("the HeteroData has no node types")
    with StoreWriter(path, name=name, overwrite=overwrite) as w:
        for ntype in data.node_types:
            _write_node_type(w, ntype, data[ntype])
        for etype in data.edge_types:
            _write_relation(w, etype, data[etype])
        w.manifest.setdefault("provenance", {})["source_format"] = "pyg"
        w.commit()
    return GraphStore.open(path)
