"""Bridges between a graphpipe store and other graph libraries' interfaces.

* :mod:`graphpipe.interop.pyg_backend`: a store as PyG's remote backend, a
  ``torch_geometric.data.FeatureStore`` + ``torch_geometric.data.GraphStore`` pair
  (:meth:`graphpipe.store.GraphStore.to_pyg_backend`).

Each module imports its library only when used; ``import graphpipe`` never needs them.
"""
