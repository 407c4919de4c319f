"""Typed (heterogeneous) datasets: which paths are typed, and their ingest into a typed store.

The typed formats of the registry (:mod:`graphpipe.ingest.formats`) are OGB's
heterogeneous raw folder (:mod:`graphpipe.ingest.ogb_hetero`), MAG240M's
(:mod:`graphpipe.ingest.mag240m`) and typed edge lists and node tables
(:mod:`graphpipe.ingest.typed_edgelist`); each writes a typed store
(:mod:`graphpipe.store.writer`), atomically. ``graphpipe ingest`` and
:func:`graphpipe.ingest.ingest` take them like any other dataset. Of
:class:`~graphpipe.ingest.options.IngestOptions`, a typed ingest honours ``overwrite``,
``name``, ``memory_limit``, ``feature_dtype``, ``allow_nonfinite`` and
``add_reverse_edges`` (every relation ``(src, rel, dst)`` gains its reverse ``(dst,
rev_<rel>, src)``, PyG's ``ToUndirected(merge=False)`` naming; the manifest's
``reverse_edge_types`` maps each to the relation it reverses); the options that rewrite
a topology otherwise (self-loop removal, deduplication, unsorted rows, CSR, compression)
are refused rather than ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from graphpipe.ingest import formats
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.options import IngestOptions
from graphpipe.store import GraphStore

ProgressFn = Callable[[str, int, int], None]


def is_typed_source(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a typed dataset folder graphpipe reads.

    >>> import tempfile
    >>> is_typed_source(tempfile.gettempdir() + "/no-such-folder")
    False
    """
    return any(fmt.typed and fmt.sniff(path) for fmt in formats.FORMATS)


def ingest_typed(source: str | os.PathLike, dest: str | os.PathLike, options: IngestOptions | None = None,
                 *, reader_options: dict | None = None, progress: ProgressFn | None = None) -> GraphStore:
    """Ingest the typed folder ``source`` into a typed store at ``dest``; returns the opened
    :class:`~graphpipe.store.GraphStore`. ``reader_options``: ``split`` (OGB: which
    ``split/<name>``), ``target_type`` (default: the type with labels).

    >>> import os, tempfile
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = write_ogb_mag(os.path.join(tmp.name, "mag"), mag_dataset(
    ...     papers=50, authors=30, institutions=3, fields=8, num_classes=3, feature_dim=4))
    >>> store = ingest_typed(folder, os.path.join(tmp.name, "store"))
    >>> store.target_type, store.num_nodes_dict["paper"], store.typed_features("paper").shape
    ('paper', 50, (50, 4))
    >>> tmp.cleanup()
    """
    fmt = formats.detect(source)
    if not fmt.typed:
        raise IngestError(f"{source}: not a typed dataset (format {fmt.name})")
    options = options or IngestOptions()
    fmt.open(source, **(reader_options or {})).write(dest, options, progress)
    return GraphStore.open(dest)
