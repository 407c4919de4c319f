"""A ``torch_geometric.data.Data`` written into a store (:func:`from_pyg`,
``graphpipe.from_pyg``); a loader reads one in memory instead
(:meth:`graphpipe.loaders.graph_data.GraphData.from_pyg`, behind ``NeighborLoader(data, ...)``).

Attributes are sorted by PyG's own rules (:func:`graphpipe.loaders.pyg_arrays.pyg_parts`):

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
from typing import Any

from graphpipe.interop.array_store import write_parts_store
from graphpipe.interop.pyg_hetero import from_pyg_hetero
from graphpipe.loaders.pyg_arrays import pyg_parts

__all__ = ["from_pyg"]


def from_pyg(data: Any, path: str | os.PathLike, *, overwrite: bool = False,
                    name: str | None = None) -> Any:
    """Write ``data`` (a PyG ``Data``) as a new store at ``path``; returns the opened
    :class:`graphpipe.store.GraphStore`. Every node and edge tensor is kept (module
    docstring); the other node/edge arrays are added atomically after the ingest. A
    ``HeteroData`` becomes a typed store keeping every node type, relation and attribute
    (:func:`graphpipe.interop.pyg_hetero.from_pyg_hetero`).

    >>> import tempfile, torch
    >>> from torch_geometric.data import Data
    >>> import graphpipe
    >>> data = Data(x=torch.eye(3), y=torch.tensor([0, 1, 1]),
    ...             edge_index=torch.tensor([[0, 1, 2], [1, 2, 0]]),
    ...             edge_attr=torch.tensor([[0.5], [1.5], [2.5]]),
    ...             train_mask=torch.tensor([True, True, False]), edge_weight=torch.tensor([1, 2, 3]))
    >>> tmp = tempfile.TemporaryDirectory()
    >>> store = graphpipe.from_pyg(data, tmp.name + "/tri")
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
    from torch_geometric.data import HeteroData

    if isinstance(data, HeteroData):
        return from_pyg_hetero(data, path, overwrite=overwrite, name=name)
    return write_parts_store(pyg_parts(data), path, overwrite=overwrite, name=name,
                             source_format="pyg", label="Data")
