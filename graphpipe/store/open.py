"""Opening a store by local path or URL: :func:`open_store`, ``graphpipe.store.open``.

The one place that knows both kinds of store: a local directory is a
:class:`graphpipe.store.reader.GraphStore` (:meth:`GraphStore.open` reads local paths only),
an ``s3://bucket/prefix`` a :class:`graphpipe.store.remote.RemoteGraphStore` read through a
local chunk cache. Both check the manifest at open (:func:`graphpipe.store.reader.check_opened`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from graphpipe.store.object_store import is_remote
from graphpipe.store.reader import GraphStore
from graphpipe.store.remote import open_remote


def open_store(path: str | os.PathLike, in_memory: bool | str | Iterable[str] = False, *,
               cache_dir: str | os.PathLike | None = None) -> GraphStore:
    """The store at ``path``: a local directory, or ``s3://bucket/prefix`` read through a
    chunk cache under ``cache_dir`` (:func:`graphpipe.store.remote.open_remote`; credentials
    and endpoint from ``AWS_*`` environment variables only). ``in_memory`` as
    :meth:`GraphStore.open`'s.

    >>> import os, tempfile
    >>> import numpy as np
    >>> import graphpipe.store
    >>> from graphpipe.ingest import ingest
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz, path = os.path.join(tmp.name, "tri.npz"), os.path.join(tmp.name, "tri")
    >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]))
    >>> _ = ingest(npz, path)
    >>> graphpipe.store.open(path)
    GraphStore('...tri', nodes=3, edges=3)
    >>> graphpipe.store.open("s3://graphs")               # checked before any request
    Traceback (most recent call last):
    ...
    graphpipe.store.errors.StoreError: s3://graphs: ...
    >>> tmp.cleanup()
    """
    if is_remote(path):
        return open_remote(str(path), cache_dir=cache_dir, in_memory=in_memory)
    return GraphStore.open(path, in_memory)
