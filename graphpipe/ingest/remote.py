"""``ingest(source, "s3://bucket/prefix")``: build locally, then upload, manifest last.

The store is built by the ordinary pipeline in a temporary directory (next to
``$TMPDIR``), then written by :func:`graphpipe.store.upload.upload_store`; the prefix
is checked before any work, and readers never see it half written.
"""

from __future__ import annotations

import dataclasses
import tempfile
from typing import Any

from graphpipe.store import GraphStore, open_store
from graphpipe.store.upload import check_remote_destination, upload_store


def ingest_remote(source: Any, dest: str, options: Any, **kwargs: Any) -> GraphStore:
    """:func:`graphpipe.ingest.ingest` with an ``s3://`` ``dest`` (same arguments)."""
    from graphpipe.ingest.pipeline import IngestOptions, ingest

    options = options or IngestOptions()
    check_remote_destination(dest, overwrite=options.overwrite)
    with tempfile.TemporaryDirectory(prefix="graphpipe-upload-") as tmp:
        local = f"{tmp}/store"
        ingest(source, local, dataclasses.replace(options, overwrite=False), **kwargs)
        upload_store(local, dest, overwrite=options.overwrite)
    return open_store(dest)
