"""The store's ``manifest.json``: schema, counts, dtypes, checksums and provenance.

The manifest is the single source of truth about what a store holds. Layout::

    {
      "format": "graphpipe-store",
      "format_version": 1,
      "name": str,
      "num_nodes": int, "num_edges": int,
      "graph": {"reverse_edges_added": bool, "self_loops_removed": bool,
                "deduplicated": bool, "sorted_neighbors": bool, "has_csr": bool},
      "arrays": {key: {"shape": [...], "dtype": str, "chunks": [...],
                       "compression": null | "zstd", "checksum": "xxh3_128:<hex>"}},
      "tables": {key: {"rows": int, "columns": {name: arrow type str},
                       "checksum": "xxh3_128:<hex>"}},
      "node_features": null | {"dim": int, "dtype": str},
      "edge_features": null | {"dim": int, "dtype": str},
      "labels": null | {"shape": [...], "dtype": str, "task_type": str, "num_classes": int | null},
      "splits": {name: count},
      "id_map": null | {"external_type": "int64" | "string"},
      "provenance": {"source_format": str, "source_path": str,
                     "graphpipe_version": str, "created": ISO-8601 str},
      "derived": {name: {...}}     # written later by `graphpipe centrality`, `partition`, ...
    }
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from graphpipe.store.errors import CorruptStoreError, ManifestVersionError, StoreError

FORMAT_NAME = "graphpipe-store"
FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"


def new_manifest(name: str) -> dict[str, Any]:
    """An empty manifest for a store called ``name``."""
    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "name": name,
        "num_nodes": 0,
        "num_edges": 0,
        "graph": {
            "reverse_edges_added": False,
            "self_loops_removed": False,
            "deduplicated": False,
            "sorted_neighbors": True,
            "has_csr": False,
        },
        "arrays": {},
        "tables": {},
        "node_features": None,
        "edge_features": None,
        "labels": None,
        "splits": {},
        "id_map": None,
        "provenance": {},
        "derived": {},
    }


def read_manifest(store_path: str | os.PathLike) -> dict[str, Any]:
    """Read and check ``manifest.json`` of the store at ``store_path``.

    Raises :class:`StoreError` when the file is missing or not JSON, and
    :class:`ManifestVersionError` when its format version is not this reader's.
    """
    path = Path(store_path) / MANIFEST_FILE
    if not Path(store_path).exists():
        raise StoreError(f"{store_path}: no such store")
    if not path.is_file():
        raise StoreError(f"{path}: missing; {store_path} is not a graphpipe store")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CorruptStoreError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise StoreError(f"{path}: field 'format' is {manifest.get('format')!r}, expected {FORMAT_NAME!r}"
                         if isinstance(manifest, dict) else f"{path}: not a manifest object")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise ManifestVersionError(
            f"{path}: store format version {version!r} is not supported by this graphpipe, "
            f"which reads format version {FORMAT_VERSION}"
        )
    return manifest


def write_manifest(store_path: str | os.PathLike, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` atomically (temporary file, fsync, rename)."""
    path = Path(store_path) / MANIFEST_FILE
    tmp = path.with_name(f".{MANIFEST_FILE}.tmp-{os.getpid()}")
    data = json.dumps(manifest, indent=2, sort_keys=False)
    with open(tmp, "w") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def fsync_dir(path: str | os.PathLike) -> None:
    """fsync a directory so a rename inside it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
