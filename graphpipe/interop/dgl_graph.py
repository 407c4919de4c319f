"""A homogeneous ``dgl.DGLGraph`` written into a store (:func:`from_dgl`,
``graphpipe.from_dgl``).

- the edges in edge-ID order (``g.edges(order="eid")``): the topology, CSC by destination
  built by graphpipe's builder; ``csc/edge_id`` keeps each slot's DGL edge ID, so a batch's
  ``edata[dgl.EID]`` indexes ``g.edata`` as DGL's does;
- ``ndata["feat"]`` -> ``node/feat``, ``ndata["label"]`` -> ``node/label``, ``edata["feat"]``
  (or the graph's only edge feature) -> ``edge/feat`` (edge-ID order); 1-D boolean
  ``train_mask`` / ``val_mask`` / ``test_mask`` also become the splits ``train`` / ``valid``
  / ``test`` (when pairwise disjoint);
- every other ``ndata[name]`` -> ``node/<name>``, every other ``edata[name]`` ->
  ``edge/<name>``.

Heterogeneous graphs are refused. DGL is imported only inside these functions.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from graphpipe.interop.array_store import write_parts_store
from graphpipe.loaders.pyg_arrays import add_mask_splits, tensor_numpy

__all__ = ["dgl_parts", "from_dgl"]

_NODE_KEYS = {"feat": "x", "label": "y"}


def _edge_feature_key(edata: dict[str, np.ndarray]) -> str | None:
    """``"feat"``, else the only edge feature, else ``None``."""
    if "feat" in edata:
        return "feat"
    return next(iter(edata)) if len(edata) == 1 else None


def dgl_parts(g: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(arrays, node_extra, edge_extra)`` of a homogeneous ``DGLGraph`` (the shape
    :func:`graphpipe.interop.array_store.write_parts_store` writes): ``arrays`` holds
    ``edge_index`` ``(2, E)`` in edge-ID order, ``num_nodes``, ``x`` / ``y`` / ``edge_attr``
    and the split masks. Raises ``ValueError`` for anything else."""
    from graphpipe.loaders.dgl_blocks import import_dgl

    dgl = import_dgl()
    if not isinstance(g, dgl.DGLGraph):
        raise ValueError(f"expected a dgl.DGLGraph (got {type(g).__name__})")  # noqa: TRY004 - the project reports bad arguments as ValueError
    if not g.is_homogeneous:
        raise ValueError(f"only homogeneous DGL graphs can be written as a store (got node types "
                         f"{g.ntypes}, edge types {g.canonical_etypes})")
    src, dst = g.edges(order="eid")
    arrays: dict[str, np.ndarray] = {"edge_index": np.stack([tensor_numpy(src), tensor_numpy(dst)]),
                                     "num_nodes": np.array(int(g.num_nodes()))}
    node_extra = {key: tensor_numpy(value) for key, value in g.ndata.items()}
    for key, target in _NODE_KEYS.items():
        if key in node_extra:
            arrays[target] = node_extra.pop(key)
    add_mask_splits(arrays, node_extra)
    edge_extra = {key: tensor_numpy(value) for key, value in g.edata.items()}
    feat_key = _edge_feature_key(edge_extra)
    if feat_key is not None:
        arrays["edge_attr"] = edge_extra.pop(feat_key)
    return arrays, node_extra, edge_extra


def from_dgl(g: Any, path: str | os.PathLike, *, overwrite: bool = False,
                    name: str | None = None) -> Any:
    """Write ``g`` (a homogeneous ``dgl.DGLGraph``) as a new store at ``path``; returns the
    opened :class:`graphpipe.store.GraphStore`. Every node and edge feature is kept (module
    docstring). In an environment with DGL (docs/guide/dgl.md, "graphpipe beside DGL"):

    .. code-block:: python

        g = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0])))
        g.ndata["feat"], g.ndata["label"] = torch.eye(3), torch.tensor([0, 1, 1])
        g.ndata["train_mask"] = torch.tensor([True, True, False])
        g.edata["w"] = torch.tensor([0.5, 1.5, 2.5])        # the only edge feature
        store = graphpipe.from_dgl(g, "tri")
        store.split_names, store.edge_id.tolist()           # (['train'], [2, 0, 1])
        store.edge_features[:, 0].tolist()                  # [0.5, 1.5, 2.5]
    """
    return write_parts_store(dgl_parts(g), path, overwrite=overwrite, name=name,
                             source_format="dgl", label="DGLGraph")
