"""graphpipe: graph datasets as an on-disk columnar store, and fast loaders that feed training from it."""

from graphpipe.omp import set_wait_policy

# The loaders' Numba kernels run in background threads while torch computes; with
# OpenMP's default spin-waiting the two thread pools starve each other (a training step
# on 2 cores was 8x slower). Must be set before torch or Numba start their pools; when
# torch came first, the loaders warn once with the remedy (graphpipe/omp.py).
set_wait_policy()

from graphpipe._version import __version__
from graphpipe.store import GraphStore, StoreError

__all__ = ["GraphStore", "NeighborLoader", "StoreError", "__version__"]


def __getattr__(name: str) -> object:
    """``graphpipe.NeighborLoader`` (:class:`graphpipe.loaders.NeighborLoader`), imported on
    first use so that ``import graphpipe`` does not import torch; what a PyG script's
    ``from torch_geometric.loader import NeighborLoader`` becomes.

    >>> from graphpipe import NeighborLoader
    >>> NeighborLoader.__module__
    'graphpipe.loaders.neighbor_loader'
    """
    if name == "NeighborLoader":
        from graphpipe.loaders import NeighborLoader

        return NeighborLoader
    raise AttributeError(f"module 'graphpipe' has no attribute {name!r}")
