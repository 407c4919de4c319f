"""Bridges between graphpipe and other graph libraries, one module per job.

* :mod:`graphpipe.interop.pyg_data`: a ``torch_geometric.data.Data`` written as a store
  (:meth:`graphpipe.store.GraphStore.from_pyg`) or read by a loader (``NeighborLoader(data, ...)``).
* :mod:`graphpipe.interop.pyg_backend`: a store as PyG's remote backend, a
  ``torch_geometric.data.FeatureStore`` + ``torch_geometric.data.GraphStore`` pair
  (:meth:`graphpipe.store.GraphStore.to_pyg_backend`).

Each module imports its library only when used; ``import graphpipe`` never needs them.
"""
