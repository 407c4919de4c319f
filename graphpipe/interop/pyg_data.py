"""A ``torch_geometric.data.Data`` as graphpipe data: written into a store
(:func:`write_pyg_store`, behind ``GraphStore.from_pyg``) or read directly by a loader
(:func:`graph_data_from_pyg`, behind ``NeighborLoader(data, ...)``).

Attributes are sorted by PyG's own rules (``Data.is_node_attr`` / ``is_edge_attr``):

- ``edge_index`` ``(2, E)`` (row 0 source, row 1 target): the topology, CSC by
  destination built by graphpipe's builder (:func:`graphpipe.ingest.csc_builder.build_csc`);
  ``csc/edge_id`` keeps each slot's column in ``edge_index``, so a batch's ``e_id`` indexes
  ``data.edge_index`` as PyG's does;
- ``x`` -> ``node/feat``, ``y`` -> ``node/label``, ``edge_attr`` -> ``edge/feat`` (input
  edge order); 1-D boolean ``train_mask`` / ``val_mask`` / ``test_mask`` also become the
  splits ``train`` / ``valid`` / ``test`` (when pairwise disjoint);
- every other node tensor ``name`` -> ``node/<name>``, every other edge tensor ->
  ``edge/<name>`` (input edge order); graph-level values are left out.

torch_geometric is imported only inside these functions.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import numpy as np

from graphpipe.interop.array_store import (
    MASK_SPLITS,
    add_mask_splits,
    memory_source,
    tensor_numpy,
    write_parts_store,
)

__all__ = ["graph_data_from_pyg", "pyg_parts", "write_pyg_store"]

_RESERVED = {"edge_index", "x", "y", "edge_attr", "num_nodes"}


def pyg_parts(data: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(arrays, node_extra, edge_extra)`` of a homogeneous PyG ``Data``.

    ``arrays`` has the keys :func:`graphpipe.ingest.npz.source_from_arrays` reads
    (``edge_index``, ``num_nodes``, ``x``, ``y``, ``edge_attr``, split masks);
    ``node_extra`` / ``edge_extra`` the other node / edge tensors as NumPy (zero-copy for
    CPU tensors). Raises ``ValueError`` for anything but a ``Data`` with an ``edge_index``.
    """
    import torch
    from torch_geometric.data import Data

    if not isinstance(data, Data):
        raise ValueError(f"expected a torch_geometric.data.Data (got {type(data).__name__}; "  # noqa: TRY004 - the project reports bad arguments as ValueError
                         "HeteroData is not supported)")
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


def write_pyg_store(data: Any, path: str | os.PathLike, *, overwrite: bool = False,
                    name: str | None = None) -> Any:
    """Write ``data`` (a PyG ``Data``) as a new store at ``path``; returns the opened
    :class:`graphpipe.store.GraphStore`. Every node and edge tensor is kept (module
    docstring); the other node/edge arrays are added atomically after the ingest.

    >>> import tempfile, torch
    >>> from torch_geometric.data import Data
    >>> from graphpipe.store import GraphStore
    >>> data = Data(x=torch.eye(3), y=torch.tensor([0, 1, 1]),
    ...             edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
    ...             edge_attr=torch.tensor([[0.5], [1.5], [2.5]]),
    ...             train_mask=torch.tensor([True, True, False]), edge_weight=torch.tensor([1, 2, 3]))
    >>> tmp = tempfile.TemporaryDirectory()
    >>> store = GraphStore.from_pyg(data, tmp.name + "/tri")
    >>> store.num_nodes, store.num_edges, store.split_names
    (3, 3, ['train'])
    >>> store.indptr.tolist(), store.indices.tolist(), store.edge_id.tolist()
    ([0, 1, 2, 3], [2, 0, 1], [2, 0, 1])
    >>> store.edge_features[:, 0].tolist(), store.array("edge/edge_weight").tolist()
    ([0.5, 1.5, 2.5], [1, 2, 3])
    >>> store.array("node/train_mask").tolist()
    [True, True, False]
    >>> tmp.cleanup()
    """
    return write_parts_store(pyg_parts(data), path, overwrite=overwrite, name=name,
                             source_format="pyg", label="Data")


def graph_data_from_pyg(data: Any) -> Any:
    """What a loader reads from ``data`` (a PyG ``Data``): the CSC built by graphpipe's
    builder (in a temporary store, read back into memory), ``x`` / ``y`` / edge and
    other arrays viewed from the tensors without copies; splits from the masks.
    Returns a :class:`graphpipe.loaders.graph_data.GraphData`."""
    from graphpipe.ingest.pipeline import IngestOptions, ingest
    from graphpipe.loaders.from_sample import BatchAttrs
    from graphpipe.loaders.graph_data import GraphData

    arrays, node_extra, edge_extra = pyg_parts(data)
    num_nodes = int(arrays["num_nodes"])
    topology = {"edge_index": arrays["edge_index"], "num_nodes": arrays["num_nodes"]}
    with tempfile.TemporaryDirectory(prefix="graphpipe-pyg-") as tmp:
        store = ingest(memory_source(topology, "Data", "pyg", "Data"), os.path.join(tmp, "graph"),
                       IngestOptions(allow_isolated_nodes=True, edge_ids="always"))
        indptr, indices = (np.array(a) for a in store.topology())
        edge_order = np.array(store.edge_id)
    x = arrays.get("x")
    if x is not None:
        x = np.ascontiguousarray(x.reshape(-1, 1) if x.ndim == 1 else x)
    splits = {MASK_SPLITS[k]: np.flatnonzero(v).astype(np.int64) for k, v in arrays.items()
              if k in MASK_SPLITS}
    attrs = BatchAttrs(edge_order=edge_order, num_input_edges=int(arrays["edge_index"].shape[1]),
                       edge_attr=arrays.get("edge_attr"), node_attrs=node_extra, edge_attrs=edge_extra)
    return GraphData(indptr=indptr, indices=indices, num_nodes=num_nodes,
                     feature_chunks=None if x is None else [x], chunk_rows=max(1, num_nodes),
                     labels=arrays.get("y"), splits=splits, attrs=attrs)
