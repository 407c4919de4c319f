"""Typed (heterogeneous) sources: which folders are typed, and their ingest into a typed store.

:func:`is_typed_source` recognises the typed layouts (OGB's heterogeneous raw folder,
:mod:`graphpipe.ingest.ogb_hetero`; MAG240M's, :mod:`graphpipe.ingest.mag240m`; typed
edge lists and node tables, :mod:`graphpipe.ingest.typed_edgelist`); :func:`ingest_typed` writes one as a typed store
(:mod:`graphpipe.store.writer`), atomically. ``graphpipe ingest`` and
:func:`graphpipe.ingest.ingest` dispatch here when the source is typed, so the same
command ingests both kinds. Of :class:`~graphpipe.ingest.pipeline.IngestOptions`, a typed
ingest honours ``overwrite``, ``name``, ``memory_limit``, ``feature_dtype``,
``allow_nonfinite`` and ``add_reverse_edges`` (every relation ``(src, rel, dst)`` gains
its reverse ``(dst, rev_<rel>, src)``, PyG's ``ToUndirected(merge=False)`` naming; the
manifest's ``reverse_edge_types`` maps each to the relation it reverses); the options
that rewrite a topology otherwise (self-loop removal, deduplication, unsorted rows, CSR,
compression) are refused rather than ignored.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphpipe.ingest.errors import IngestError
from graphpipe.store.atomic import check_destination

ProgressFn = Callable[[str, int, int], None]
TYPED_READER_OPTIONS = ("split", "target_type")


def is_typed_source(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a typed dataset folder graphpipe reads.

    >>> import tempfile
    >>> is_typed_source(tempfile.gettempdir() + "/no-such-folder")
    False
    """
    from graphpipe.ingest.mag240m import mag240m_dir
    from graphpipe.ingest.ogb_hetero import is_ogb_hetero_folder
    from graphpipe.ingest.typed_edgelist import is_typed_edgelist_folder

    return is_ogb_hetero_folder(path) or mag240m_dir(path) is not None or \
        is_typed_edgelist_folder(path)


def _check_options(options: Any) -> None:
    refused = {"remove_self_loops": "--remove-self-loops",
               "deduplicate": "--dedup", "build_csr": "--csr", "compression": "--compression"}
    for field, flag in refused.items():
        if getattr(options, field):
            raise IngestError(f"{flag} is not supported for typed (heterogeneous) datasets")
    if not options.sort_neighbors:
        raise IngestError("--no-sort is not supported for typed (heterogeneous) datasets")
    if options.feature_dtype not in ("float32", "float16"):
        raise ValueError(f"'feature_dtype' must be float32 or float16 (got {options.feature_dtype!r})")


def ingest_typed(source: str | os.PathLike, dest: str | os.PathLike, options: Any = None, *,
                 reader_options: dict | None = None, progress: ProgressFn | None = None) -> Any:
    """Ingest the typed folder ``source`` into a typed store at ``dest``; returns the opened
    :class:`~graphpipe.store.GraphStore`. ``reader_options``: ``split`` (which
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
    from graphpipe.ingest.ogb_hetero import ingest_ogb_hetero
    from graphpipe.ingest.pipeline import IngestOptions, default_memory_limit, parse_size
    from graphpipe.store import GraphStore

    options = options or IngestOptions()
    _check_options(options)
    reader_options = {k: v for k, v in (reader_options or {}).items() if v is not None}
    unknown = sorted(set(reader_options) - set(TYPED_READER_OPTIONS))
    if unknown:
        raise IngestError(f"{source}: options {unknown} do not apply to a typed dataset")
    check_destination(dest, overwrite=options.overwrite, sources=[source])
    memory_limit = parse_size(options.memory_limit) or default_memory_limit()
    from graphpipe.ingest.mag240m import ingest_mag240m, mag240m_dir
    from graphpipe.ingest.typed_edgelist import ingest_typed_edgelist, is_typed_edgelist_folder

    reader = ingest_mag240m if mag240m_dir(source) is not None else \
        ingest_typed_edgelist if is_typed_edgelist_folder(source) else ingest_ogb_hetero
    if reader is not ingest_ogb_hetero and reader_options.get("split"):
        raise IngestError(f"{source}: --split applies to OGB folders only")
    reader(Path(source), dest, name=options.name, overwrite=options.overwrite,
           memory_limit=memory_limit, feature_dtype=options.feature_dtype,
           allow_nonfinite=options.allow_nonfinite, add_reverse_edges=options.add_reverse_edges,
           progress=progress, **reader_options)
    return GraphStore.open(dest)
