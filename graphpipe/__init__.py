"""graphpipe: graph datasets as an on-disk columnar store, and fast loaders that feed training from it."""

from graphpipe.omp import set_wait_policy

# The loaders' Numba kernels run in background threads while torch computes; with
# OpenMP's default spin-waiting the two thread pools starve each other (a training step
# on 2 cores was 8x slower). Must be set before torch or Numba start their pools; when
# torch came first, the loaders warn once with the remedy (graphpipe/omp.py).
set_wait_policy()

from graphpipe._version import __version__
from graphpipe.store import GraphStore, StoreError

__all__ = ["GraphStore", "NeighborLoader", "StoreError", "__version__", "from_dgl", "from_pyg",
           "to_pyg_backend"]


def __getattr__(name: str) -> object:
    """Names imported on first use, so that ``import graphpipe`` imports neither torch nor
    PyG/DGL: ``graphpipe.NeighborLoader`` (:class:`graphpipe.loaders.NeighborLoader`,
    what a PyG script's ``from torch_geometric.loader import NeighborLoader`` becomes), and the
    conversions of :mod:`graphpipe.interop`: ``from_pyg(data, path)`` and ``from_dgl(g, path)``
    (a PyG ``Data`` / a ``DGLGraph`` written as a store), ``to_pyg_backend(store)`` (a store as
    PyG's remote backend).

    >>> from graphpipe import NeighborLoader, from_pyg
    >>> NeighborLoader.__module__, from_pyg.__module__
    ('graphpipe.loaders.neighbor_loader', 'graphpipe.interop.pyg_data')
    """
    if name == "NeighborLoader":
        from graphpipe.loaders import NeighborLoader as found
    elif name == "from_pyg":
        from graphpipe.interop.pyg_data import from_pyg as found
    elif name == "from_dgl":
        from graphpipe.interop.dgl_graph import from_dgl as found
    elif name == "to_pyg_backend":
        from graphpipe.interop.pyg_backend import to_pyg_backend as found
    else:
        raise AttributeError(f"module 'graphpipe' has no attribute {name!r}")
    return found
