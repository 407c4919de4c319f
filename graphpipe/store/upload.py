"""A finished local store written to ``s3://bucket/prefix``: :func:`upload_store`.

The order makes the store appear whole or not at all: an existing store at the
prefix first loses its ``manifest.json`` (readers refuse it from then on), then
its objects, its root ``zarr.json`` last; the new store's root ``zarr.json`` goes up
first, then its other files, and ``manifest.json`` goes up last, with
every other object's size and checksum added (:mod:`graphpipe.store.object_digests`).
A reader (:func:`graphpipe.store.remote.open_remote`) refuses a prefix without a
manifest, so an interrupted upload is never read as a store; and whenever the prefix
holds objects it holds the manifest or the root ``zarr.json``, so a killed upload is
replaced by the next ``--overwrite``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from graphpipe.store.errors import StoreError
from graphpipe.store.manifest import MANIFEST_FILE
from graphpipe.store.object_digests import OBJECTS, entry_for_bytes, entry_for_file
from graphpipe.store.object_store import RemotePrefix, RequestStats, check_key

PUT_GROUP_BYTES = 256 << 20
"""Bytes read into memory for one group of concurrent PUTs."""
_ROOT = "zarr.json"
"""The store's root group metadata: the marker of an unfinished upload (see the module doc)."""
MULTIPART_BYTES = 64 << 20
"""Files larger than this go up with obstore's streamed multipart upload (S3 takes at most
5 GiB in one PUT; a one-chunk ``csc/indices`` of a large graph is bigger)."""


def check_remote_destination(url: str, *, overwrite: bool) -> RemotePrefix:
    """Refuse early (before an ingest builds anything) a prefix the upload would refuse:
    one holding objects, unless ``overwrite`` and they are a graphpipe store (or an
    unfinished upload of one: a root ``zarr.json`` without a manifest)."""
    remote = RemotePrefix(url, read_only=False)
    listing = remote.list()
    if not listing:
        return remote
    if not overwrite:
        raise StoreError(f"{remote.url}: already exists (pass --overwrite to replace it)")
    if MANIFEST_FILE not in listing and _ROOT not in listing:
        raise StoreError(f"{remote.url}: holds objects that are not a graphpipe store; --overwrite "
                         f"replaces only a store: remove them yourself or choose another prefix")
    return remote


def upload_store(local: str | os.PathLike, url: str, *, overwrite: bool = False) -> RequestStats:
    """Write the store directory ``local`` to ``url``, manifest last; returns the requests made.

    Refuses as :func:`check_remote_destination` does. Files whose names start with ``.``
    (temporary files, locks) are skipped.
    """
    local = Path(local)
    if not (local / MANIFEST_FILE).is_file():
        raise StoreError(f"{local}: not a graphpipe store (no {MANIFEST_FILE})")
    remote = check_remote_destination(url, overwrite=overwrite)
    old = remote.list()
    if old:
        remote.delete_many([MANIFEST_FILE])
        remote.delete_many(sorted(set(old) - {MANIFEST_FILE, _ROOT}))
        remote.delete_many([_ROOT])
    files = [p for p in sorted(local.rglob("*")) if p.is_file() and p.name != MANIFEST_FILE
             and not any(part.startswith(".") for part in p.relative_to(local).parts)]
    first = [p for p in files if p == local / _ROOT]          # alone, before any other object
    rest = [p for p in files if p not in first]
    objects: dict[str, dict] = {}
    for group in [first, *_groups([p for p in rest if p.stat().st_size <= MULTIPART_BYTES])]:
        items = [(_key(local, p, url), p.read_bytes()) for p in group]
        objects.update((key, entry_for_bytes(data)) for key, data in items)
        remote.put_many(items)
    for path in rest:
        if path.stat().st_size > MULTIPART_BYTES:
            objects[_key(local, path, url)] = entry_for_file(path)
            remote.put_file(_key(local, path, url), path)
    manifest = json.loads((local / MANIFEST_FILE).read_text())
    manifest[OBJECTS] = dict(sorted(objects.items()))
    remote.put_many([(MANIFEST_FILE, json.dumps(manifest, indent=2).encode())])
    return remote.stats


def _key(local: Path, path: Path, url: str) -> str:
    return check_key(path.relative_to(local).as_posix(), url)


def _groups(paths: list[Path]) -> list[list[Path]]:
    """``paths`` cut into runs of at most :data:`PUT_GROUP_BYTES` (one file at least)."""
    groups: list[list[Path]] = [[]]
    size = 0
    for path in paths:
        n = path.stat().st_size
        if groups[-1] and size + n > PUT_GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(path)
        size += n
    return [g for g in groups if g]
