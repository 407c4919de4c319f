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

__all__ = ["memory_source", "write_parts_store"]

def memory_source(arrays: dict[str, np.ndarray], name: str, source_format: str, label: str) -> Any:
    """A :class:`graphpipe.ingest.source.DatasetSource` over ``arrays``; ``label`` names
    the object in error messages (``"Data"``, ``"DGLGraph"``)."""
    from graphpipe.ingest.npz import source_from_arrays

    source = source_from_arrays(arrays, label, name=name, source_format=source_format)
    source.num_nodes_backed = True  # the graph's node count holds, edges or not
    return source


def write_parts_store(parts: tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, np.ndarray]],
                      path: str | os.PathLike, *, overwrite: bool, name: str | None,
                      source_format: str, label: str, prepare: Any = None) -> Any:
    """Write ``parts`` ``(arrays, node_extra, edge_extra)`` as a new store at ``path``
    (``csc/edge_id`` kept: slot -> column of ``edge_index``); the extra arrays are added
    atomically after the ingest. ``prepare(source)``, when given, is called on the
    :class:`~graphpipe.ingest.source.DatasetSource` before the ingest (to attach node
    text, say). Returns the opened :class:`graphpipe.store.GraphStore`."""
    from graphpipe.ingest.api import ingest
    from graphpipe.ingest.options import IngestOptions
    from graphpipe.store import GraphStore

    arrays, node_extra, edge_extra = parts
    source = memory_source(arrays, name or os.path.basename(os.fspath(path)), source_format, label)
    if prepare is not None:
        prepare(source)
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
