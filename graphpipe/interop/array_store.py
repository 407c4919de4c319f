"""In-memory graph arrays -> a store: the part shared by :mod:`graphpipe.interop.pyg_data`
(a PyG ``Data``) and :mod:`graphpipe.interop.dgl_graph` (a ``dgl.DGLGraph``).

A graph arrives as ``(arrays, node_extra, edge_extra)``: ``arrays`` with the keys
:func:`graphpipe.ingest.npz.source_from_arrays` reads (``edge_index`` ``(2, E)``,
``num_nodes``, ``x``, ``y``, ``edge_attr``, split masks), ``node_extra`` / ``edge_extra``
the other node / edge arrays, written as ``node/<name>`` / ``edge/<name>``.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["MASK_SPLITS", "add_mask_splits", "memory_source", "tensor_numpy", "write_parts_store"]

MASK_SPLITS = {"train_mask": "train", "val_mask": "valid", "test_mask": "test"}
"""Boolean node masks that also become splits (mask name -> split name)."""


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


def memory_source(arrays: dict[str, np.ndarray], name: str, source_format: str, label: str) -> Any:
    """A :class:`graphpipe.ingest.source.DatasetSource` over ``arrays``; ``label`` names
    the object in error messages (``"Data"``, ``"DGLGraph"``)."""
    from graphpipe.ingest.npz import source_from_arrays

    source = source_from_arrays(arrays, label, name=name, source_format=source_format)
    source.num_nodes_backed = True  # the graph's node count holds, edges or not
    return source


def write_parts_store(parts: tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]],
                      path: str | os.PathLike, *, overwrite: bool, name: str | None,
                      source_format: str, label: str) -> Any:
    """Write ``parts`` ``(arrays, node_extra, edge_extra)`` as a new store at ``path``
    (``csc/edge_id`` kept: slot -> column of ``edge_index``); the extra arrays are added
    atomically after the ingest. Returns the opened :class:`graphpipe.store.GraphStore`."""
    from graphpipe.ingest.pipeline import IngestOptions, ingest
    from graphpipe.store import GraphStore

    arrays, node_extra, edge_extra = parts
    source = memory_source(arrays, name or os.path.basename(os.fspath(path)), source_format, label)
    store = ingest(source, path, IngestOptions(overwrite=overwrite, allow_isolated_nodes=True,
                                                edge_ids="always"))
    if node_extra or edge_extra:
        with store.edit() as editor:
            for key, values in node_extra.items():
                editor.write_array(f"node/{key}", values)
            for key, values in edge_extra.items():
                editor.write_array(f"edge/{key}", values)
            editor.commit()
        store = GraphStore.open(path)
    return store
