"""A PyG ``Data`` or ``HeteroData`` read as NumPy arrays, the part shared by a loader
reading it in memory (:meth:`graphpipe.loaders.graph_data.GraphData.from_pyg`) and a store
written from it (:mod:`graphpipe.interop.pyg_data`, :mod:`graphpipe.interop.pyg_hetero`).

Attributes are sorted by PyG's own rules (``Data.is_node_attr`` / ``is_edge_attr``):
``edge_index``, ``x``, ``y``, ``edge_attr`` and ``num_nodes`` by name; 1-D boolean
``train_mask`` / ``val_mask`` / ``test_mask`` also become the splits ``train`` /
``valid`` / ``test`` (when pairwise disjoint); every other node or edge tensor is kept by
its name; graph-level values are left out. Tensors on the CPU are viewed, not copied.
A ``HeteroData`` is read per node type and per relation by the same rules
(:func:`pyg_typed_parts`). torch_geometric is imported only inside these functions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["MASK_SPLITS", "add_mask_splits", "mask_splits", "pyg_parts", "pyg_typed_parts", "storage_tensors",
           "tensor_numpy"]

MASK_SPLITS = {"train_mask": "train", "val_mask": "valid", "test_mask": "test"}
"""Boolean node masks that also become splits (mask name -> split name)."""

_RESERVED = {"edge_index", "x", "y", "edge_attr", "num_nodes"}


def tensor_numpy(value: Any) -> np.ndarray:
    """A torch tensor as NumPy (zero-copy for a CPU tensor)."""
    return value.detach().cpu().numpy()


def add_mask_splits(arrays: dict[str, np.ndarray], node_extra: dict[str, np.ndarray]) -> None:
    """Copy the 1-D boolean ``train_mask`` / ``val_mask`` / ``test_mask`` of ``node_extra``
    into ``arrays`` (so they become splits) when they are pairwise disjoint.

    >>> arrays, extra = {}, {"train_mask": np.array([True, False]), "val_mask": np.array([False, True])}
    >>> add_mask_splits(arrays, extra); sorted(arrays)
    ['train_mask', 'val_mask']
    """
    masks = {k: v for k, v in node_extra.items() if k in MASK_SPLITS and v.dtype == bool and v.ndim == 1}
    if not masks or int(np.sum(list(masks.values()), axis=0).max()) <= 1:
        arrays.update(masks)


def mask_splits(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``{split name: int64 node IDs}`` of the masks :func:`add_mask_splits` kept.

    >>> mask_splits({"train_mask": np.array([True, False, True]), "x": np.zeros(3)})
    {'train': array([0, 2])}
    """
    return {MASK_SPLITS[k]: np.flatnonzero(v).astype(np.int64) for k, v in arrays.items()
            if k in MASK_SPLITS}


def pyg_parts(data: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(arrays, node_extra, edge_extra)`` of a homogeneous PyG ``Data``.

    ``arrays`` has the keys :func:`graphpipe.ingest.npz.source_from_arrays` reads
    (``edge_index``, ``num_nodes``, ``x``, ``y``, ``edge_attr``, split masks);
    ``node_extra`` / ``edge_extra`` the other node / edge tensors as NumPy (zero-copy for
    CPU tensors). Raises ``ValueError`` for anything but a ``Data`` with an ``edge_index``.

    >>> import torch
    >>> from torch_geometric.data import Data
    >>> data = Data(edge_index=torch.tensor([[0, 1, 1], [1, 0, 0]]), y=torch.tensor([1, 0]),
    ...             stamp=torch.tensor([7, 8, 9]), title="graph-level values are left out")
    >>> arrays, node_extra, edge_extra = pyg_parts(data)
    >>> sorted(arrays), sorted(node_extra), sorted(edge_extra)
    (['edge_index', 'num_nodes', 'y'], [], ['stamp'])
    """
    import torch
    from torch_geometric.data import Data

    if not isinstance(data, Data):
        raise ValueError(f"expected a torch_geometric.data.Data (got {type(data).__name__}; "  # noqa: TRY004 - the project reports bad arguments as ValueError
                         "a HeteroData is read by pyg_typed_parts)")
    edge_index = data.edge_index
    if not isinstance(edge_index, torch.Tensor) or edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError("Data.edge_index must be a (2, E) integer tensor "
                         f"(got {getattr(edge_index, 'shape', type(edge_index).__name__)})")
    arrays: dict[str, np.ndarray] = {"edge_index": tensor_numpy(edge_index),
                                     "num_nodes": np.array(int(data.num_nodes))}
    node_extra: dict[str, np.ndarray] = {}
    edge_extra: dict[str, np.ndarray] = {}
    for key in data.keys():  # noqa: SIM118 - Data.keys() is a method, Data no mapping
        value = data[key]
        if key == "edge_index" or not isinstance(value, torch.Tensor):
            continue
        if key in _RESERVED:
            arrays[key] = tensor_numpy(value)
        elif data.is_node_attr(key):
            node_extra[key] = tensor_numpy(value)
        elif data.is_edge_attr(key):
            edge_extra[key] = tensor_numpy(value)
    add_mask_splits(arrays, node_extra)
    return arrays, node_extra, edge_extra


def storage_tensors(storage: Any) -> dict[str, np.ndarray]:
    """The tensor attributes of one PyG node or edge storage as NumPy (``edge_index`` left
    out; zero-copy for CPU tensors)."""
    import torch

    return {key: tensor_numpy(value) for key, value in storage.items()
            if isinstance(value, torch.Tensor) and key != "edge_index"}


def pyg_typed_parts(data: Any) -> tuple[dict[str, tuple[dict, dict]], dict[tuple, tuple[dict, dict]]]:
    """``(nodes, edges)`` of a PyG ``HeteroData``: ``nodes[t] = (arrays, node_extra)`` with
    ``arrays`` holding ``num_nodes``, ``x``, ``y`` and the kept split masks of type ``t``,
    ``edges[etype] = (arrays, edge_extra)`` with ``edge_index`` ``(2, E)`` and ``edge_attr``;
    the ``*_extra`` dicts hold every other tensor (the rules of :func:`pyg_parts`, per type).
    ``ValueError`` for anything but a ``HeteroData`` whose relations have a ``(2, E)``
    ``edge_index``.

    >>> import torch
    >>> from torch_geometric.data import HeteroData
    >>> data = HeteroData()
    >>> data["paper"].x = torch.eye(2)
    >>> data["paper"].train_mask = torch.tensor([True, False])
    >>> data["paper", "cites", "paper"].edge_index = torch.tensor([[0], [1]])
    >>> data["paper", "cites", "paper"].year = torch.tensor([2020])
    >>> nodes, edges = pyg_typed_parts(data)
    >>> sorted(nodes["paper"][0]), sorted(edges[("paper", "cites", "paper")][1])
    (['num_nodes', 'train_mask', 'x'], ['year'])
    """
    import torch
    from torch_geometric.data import HeteroData

    if not isinstance(data, HeteroData):
        raise ValueError(f"expected a torch_geometric HeteroData (got {type(data).__name__})")  # noqa: TRY004 - the project reports bad arguments as ValueError
    nodes: dict[str, tuple[dict, dict]] = {}
    for ntype in data.node_types:
        extra = storage_tensors(data[ntype])
        arrays = {"num_nodes": np.array(int(data[ntype].num_nodes or 0))}
        arrays.update({k: extra.pop(k) for k in ("x", "y") if k in extra})
        add_mask_splits(arrays, extra)
        nodes[ntype] = (arrays, extra)
    edges: dict[tuple, tuple[dict, dict]] = {}
    for etype in data.edge_types:
        ei = data[etype].get("edge_index")
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
            raise ValueError(f"HeteroData[{etype}] needs a (2, E) edge_index")
        extra = storage_tensors(data[etype])
        arrays = {"edge_index": tensor_numpy(ei)}
        if "edge_attr" in extra:
            arrays["edge_attr"] = extra.pop("edge_attr")
        edges[etype] = (arrays, extra)
    return nodes, edges
