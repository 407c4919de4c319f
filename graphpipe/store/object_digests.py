"""What a store on object storage records about each of its objects, and the checks against it.

An upload (:mod:`graphpipe.store.upload`) adds to the manifest it writes last an
``"objects"`` field: every other object's size and ``xxh3_128`` digest::

    "objects": {"node/feat/c/0/0": {"bytes": 4096, "checksum": "xxh3_128:<hex>"}, ...}

The chunk cache (:mod:`graphpipe.store.remote`) checks each object it downloads against
its entry before the file takes its name (:func:`check_object`): a truncated or replaced
object is a one-line :class:`CorruptStoreError` naming its key, never data. A verified
file is **stamped**: its modification time is set to a value derived from the digest
(:func:`stamp`), so a later read of the cache proves the file unchanged with one ``stat``
(size and mtime); a file written or truncated since (a torn copy, an edit, a crashed
writer that bypassed the rename) has a new mtime and is hashed again or refetched.

Stores uploaded before this field existed have no ``"objects"``: their chunks are checked
by size where the array's metadata implies it, as before.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import xxhash

from graphpipe.store.arrays import checksum_file
from graphpipe.store.errors import CorruptStoreError

OBJECTS = "objects"
"""The manifest field of an uploaded store that maps object keys to their entries."""
_CHECKSUM = re.compile(r"^xxh3_128:[0-9a-f]{32}$")
_STAMP_BASE = 946_684_800
"""2000-01-01 UTC: stamps lie in the 3.2 years after it, a time no cache file is written at."""


def entry_for_bytes(data: bytes | memoryview) -> dict[str, Any]:
    """The manifest entry of an object holding ``data``.

    >>> entry_for_bytes(b"graph")["bytes"]
    5
    """
    return {"bytes": memoryview(data).nbytes, "checksum": _checksum(data)}


def entry_for_file(path: str | os.PathLike) -> dict[str, Any]:
    """The manifest entry of an object holding the bytes of the file ``path`` (read in blocks)."""
    return {"bytes": os.path.getsize(path), "checksum": checksum_file(path)}


def _checksum(data: bytes | memoryview) -> str:
    return "xxh3_128:" + xxhash.xxh3_128_hexdigest(data)


def check_objects_field(manifest: dict[str, Any], where: str) -> dict[str, dict[str, Any]]:
    """The manifest's ``"objects"`` (empty when absent), after checking every entry's form.

    >>> check_objects_field({"objects": {"k": {"bytes": 5, "checksum": "xxh3_128:" + "0" * 32}}}, "m")["k"]["bytes"]
    5
    >>> check_objects_field({"objects": {"k": {"bytes": -1}}}, "s3://b/g/manifest.json")
    Traceback (most recent call last):
    ...
    graphpipe.store.errors.CorruptStoreError: s3://b/g/manifest.json: field 'objects' entry 'k' ...
    """
    objects = manifest.get(OBJECTS, {})
    if not isinstance(objects, dict):
        raise CorruptStoreError(f"{where}: field {OBJECTS!r} is not an object")
    for key, entry in objects.items():
        ok = isinstance(entry, dict) and type(entry.get("bytes")) is int and entry["bytes"] >= 0 \
            and isinstance(entry.get("checksum"), str) and _CHECKSUM.match(entry["checksum"])
        if not ok:
            raise CorruptStoreError(f"{where}: field {OBJECTS!r} entry {key!r} is not "
                                    f"{{'bytes': int >= 0, 'checksum': 'xxh3_128:<32 hex digits>'}}")
    return objects


def check_object(where: str, data: bytes | memoryview, entry: dict[str, Any]) -> None:
    """Raise :class:`CorruptStoreError` naming ``where`` (the object's URL) when ``data`` is not
    the object ``entry`` describes.

    >>> check_object("s3://b/g/k", b"graph", entry_for_bytes(b"graph"))
    >>> check_object("s3://b/g/k", b"grap", entry_for_bytes(b"graph"))
    Traceback (most recent call last):
    ...
    graphpipe.store.errors.CorruptStoreError: s3://b/g/k: 4 bytes, the store's manifest says 5 (the object was truncated or replaced after the store was uploaded)
    """
    _check_size(where, memoryview(data).nbytes, entry)
    if _checksum(data) != entry["checksum"]:
        raise _changed(where)


def check_object_file(where: str, path: Path, entry: dict[str, Any]) -> None:
    """:func:`check_object` for bytes already written to the file ``path``."""
    _check_size(where, path.stat().st_size, entry)
    if checksum_file(path) != entry["checksum"]:
        raise _changed(where)


def _check_size(where: str, size: int, entry: dict[str, Any]) -> None:
    """``size`` bytes read (at most one more than expected: a ranged GET) against ``entry``."""
    if size != entry["bytes"]:
        got = f"{size} bytes" if size < entry["bytes"] else f"more than {entry['bytes']} bytes"
        raise CorruptStoreError(f"{where}: {got}, the store's manifest says {entry['bytes']} "
                                f"(the object was truncated or replaced after the store was uploaded)")


def _changed(where: str) -> CorruptStoreError:
    return CorruptStoreError(f"{where}: content checksum (xxh3_128) differs from the store's manifest "
                             f"(the object was changed after the store was uploaded)")


def stamp(entry: dict[str, Any]) -> int:
    """The modification time (whole seconds) a verified cache file of ``entry`` carries.

    >>> stamp({"bytes": 1, "checksum": "xxh3_128:" + "0" * 32})
    946684800
    """
    return _STAMP_BASE + int(entry["checksum"][9:17], 16) % 100_000_000


def set_stamp(path: Path, entry: dict[str, Any]) -> None:
    """Mark the file ``path`` as holding verified bytes of ``entry``."""
    seconds = stamp(entry)
    os.utime(path, (seconds, seconds))


def is_stamped(st: os.stat_result, entry: dict[str, Any]) -> bool:
    """Whether a file with status ``st`` still is the verified copy of ``entry`` (size and stamp)."""
    return st.st_size == entry["bytes"] and int(st.st_mtime) == stamp(entry)
