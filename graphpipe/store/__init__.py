"""The on-disk store: a directory with ``manifest.json``, Zarr v3 arrays and Parquet tables.

See ``docs/store-format.md`` for the layout. ``graphpipe.store.open(path_or_url)``
(:func:`graphpipe.store.open.open_store`) opens a local store or an ``s3://`` one.
"""

from graphpipe.store.errors import CorruptStoreError, ManifestVersionError, StoreError
from graphpipe.store.manifest import FORMAT_VERSION
from graphpipe.store.open import open_store
from graphpipe.store.reader import GraphStore
from graphpipe.store.tables import IdMap
from graphpipe.store.writer import StoreEditor, StoreWriter

open = open_store

__all__ = [
    "FORMAT_VERSION",
    "CorruptStoreError",
    "GraphStore",
    "IdMap",
    "ManifestVersionError",
    "StoreEditor",
    "StoreError",
    "StoreWriter",
    "open",
    "open_store",
]
