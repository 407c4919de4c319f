"""graphpipe: graph datasets as an on-disk columnar store, and fast loaders that feed training from it."""

from graphpipe.omp import set_wait_policy

# The loaders' Numba kernels run in background threads while torch computes; with
# OpenMP's default spin-waiting the two thread pools starve each other (a training step
# on 2 cores was 8x slower). Must be set before torch or Numba start their pools; when
# torch came first, the loaders warn once with the remedy (graphpipe/omp.py).
set_wait_policy()

__version__ = "0.1.0"

from graphpipe.store import GraphStore, StoreError

__all__ = ["GraphStore", "StoreError", "__version__"]
