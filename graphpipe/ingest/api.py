"""``ingest(source, dest)``: the front door that turns any dataset into a store.

What kind of ingest it is gets decided once, here: an ``s3://`` destination is built in
a local temporary directory and uploaded, manifest last
(:func:`graphpipe.store.upload.upload_store`; the prefix is checked before any work, and
readers never see it half written); a path's format is detected once by the registry
(:mod:`graphpipe.ingest.formats`), which also refuses the options that format does not
take; every source, typed (heterogeneous) or not, streams through the one store builder
(:func:`graphpipe.ingest.pipeline.build_store`).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Callable, Iterable

from graphpipe import interrupt
from graphpipe.ingest import formats
from graphpipe.ingest.options import IngestOptions, require_ingest_memory
from graphpipe.ingest.pipeline import build_store
from graphpipe.ingest.source import DatasetSource, TypedSource
from graphpipe.store import GraphStore, open_store
from graphpipe.store.atomic import check_destination

ProgressFn = Callable[[str, int, int], None]


def ingest(source: DatasetSource | TypedSource | str | os.PathLike, dest: str | os.PathLike,
           options: IngestOptions | None = None, *, progress: ProgressFn | None = None,
           reader_options: dict | None = None, format: str | None = None) -> GraphStore:
    """Ingest ``source`` (a path, or a source a format opened) into a new store at ``dest``
    (a folder, or ``s3://bucket/prefix``).

    ``format``: one of :func:`graphpipe.ingest.formats.names` instead of detecting it;
    ``reader_options``: what that format's reader takes (``Format.options``; any other is
    refused). A typed (heterogeneous) folder (OGB's heterogeneous raw layout, MAG240M's,
    typed edge lists, GraphBolt's and DGL's chunked layouts with several types) becomes a
    typed store.

    Returns the opened store. Raises :class:`~graphpipe.ingest.errors.IngestError` (bad
    input, naming the file and line/field) or :class:`graphpipe.store.StoreError`
    (destination, full disk); in every failure ``dest`` is left as it was.

    An edge list with features, labels and a split (``.npz``, see
    :mod:`graphpipe.ingest.npz`; CSV/TSV/Parquet edge lists and OGB folders go the
    same way):

    >>> import os, tempfile
    >>> import numpy as np
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "tri.npz")
    >>> np.savez(npz, edge_index=np.array([[0, 1, 2, 0], [1, 2, 0, 2]]),
    ...          x=np.eye(3, dtype=np.float32), y=np.array([0, 1, 1]), train_idx=np.array([0, 2]))
    >>> store = ingest(npz, os.path.join(tmp.name, "tri"))
    >>> store.num_nodes, store.num_edges, store.feature_dim
    (3, 4, 3)
    >>> store.indptr.tolist(), store.indices.tolist()  # CSC, in-neighbours sorted per node
    ([0, 1, 2, 4], [2, 0, 0, 1])
    >>> store.split("train").tolist(), store.labels.tolist()
    ([0, 2], [0, 1, 1])
    >>> ingest(npz, os.path.join(tmp.name, "tri"))    # dest exists: refused, left as it was
    Traceback (most recent call last):
    ...
    graphpipe.store.errors.StoreError: ...
    >>> tmp.cleanup()
    """
    options = options or IngestOptions()
    require_ingest_memory(options)
    progress = _stops_on_interrupt(progress)
    if isinstance(dest, str) and dest.startswith("s3://"):
        return _ingest_remote(source, dest, options, progress=progress,
                              reader_options=reader_options, format=format)
    if not isinstance(source, (DatasetSource, TypedSource)):
        source = open_dataset(source, dest, options, format=format, reader_options=reader_options)
    return build_store(source, dest, options, progress=progress)


def open_dataset(path: str | os.PathLike, dest: str | os.PathLike, options: IngestOptions | None = None,
                 *, format: str | None = None, reader_options: dict | None = None,
                 inputs: Iterable[str | os.PathLike | None] = ()) -> DatasetSource | TypedSource:
    """Open the dataset at ``path`` for an ingest into ``dest``: its format detected once
    (or ``format``), the options it does not take refused and ``dest`` checked (never one
    of the inputs: ``path``, a node table, ``.npy`` features, ``inputs``) before any work.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = os.path.join(tmp.name, "edges.csv")
    >>> _ = open(path, "w").write("src,dst\\n0,1\\n")
    >>> open_dataset(path, os.path.join(tmp.name, "store")).num_input_edges
    1
    >>> open_dataset(path, os.path.join(tmp.name, "store"), reader_options={"split": "time"})
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: --split does not apply to edgelist datasets (...)
    >>> tmp.cleanup()
    """
    options = options or IngestOptions()
    fmt = formats.get(format) if format else formats.detect(path)
    given = {k: v for k, v in (reader_options or {}).items() if v is not None}
    fmt.check(given, options)
    check_destination(dest, overwrite=options.overwrite,
                      sources=[path, given.get("nodes"), given.get("node_features"), *inputs])
    return fmt.open(path, **given)


def _stops_on_interrupt(progress: ProgressFn | None) -> ProgressFn:
    """``progress``, which also stops the ingest at a Ctrl-C that something swallowed
    (:mod:`graphpipe.interrupt`): every stage reports progress as it goes."""

    def report(stage: str, done: int, total: int) -> None:
        interrupt.check()
        if progress is not None:
            progress(stage, done, total)

    return report


def _ingest_remote(source: DatasetSource | str | os.PathLike, dest: str, options: IngestOptions,
                   **kwargs) -> GraphStore:
    """Build the store in a temporary directory (next to ``$TMPDIR``), then upload it."""
    from graphpipe.store.upload import check_remote_destination, upload_store

    check_remote_destination(dest, overwrite=options.overwrite)
    with tempfile.TemporaryDirectory(prefix="graphpipe-upload-") as tmp:
        local = f"{tmp}/store"
        ingest(source, local, dataclasses.replace(options, overwrite=False), **kwargs)
        upload_store(local, dest, overwrite=options.overwrite)
    return open_store(dest)
