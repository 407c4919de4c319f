"""Bridges between graphpipe and other graph libraries, one module per job, as free
functions (the package face re-exports them lazily: ``graphpipe.from_pyg``, ...).

* :mod:`graphpipe.interop.pyg_data`: a ``torch_geometric.data.Data`` written as a store
  (``graphpipe.from_pyg(data, path)``) or read by a loader (``NeighborLoader(data, ...)``).
* :mod:`graphpipe.interop.pyg_hetero`: a ``HeteroData`` written as a typed store
  (``graphpipe.from_pyg(hetero_data, path)``).
* :mod:`graphpipe.interop.dgl_graph`: a homogeneous ``dgl.DGLGraph`` written as a store
  (``graphpipe.from_dgl(g, path)``).
* :mod:`graphpipe.interop.pyg_backend`: a store as PyG's remote backend, a
  ``torch_geometric.data.FeatureStore`` + ``torch_geometric.data.GraphStore`` pair
  (``graphpipe.to_pyg_backend(store)``).

Each module imports its library only when used; ``import graphpipe`` never needs them.
:class:`graphpipe.store.GraphStore` knows nothing of them.
"""
