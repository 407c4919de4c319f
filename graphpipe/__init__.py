"""graphpipe: graph datasets as an on-disk columnar store, and fast loaders that feed training from it."""

__version__ = "0.1.0"

from graphpipe.store import GraphStore, StoreError  # noqa: E402

__all__ = ["GraphStore", "StoreError", "__version__"]
