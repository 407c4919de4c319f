"""A store on object storage: ``graphpipe.store.open("s3://bucket/prefix")``.

The store is read through zarr's storage layer (:class:`graphpipe.store.object_store.RemotePrefix`)
into a local **chunk cache directory** that mirrors the store's layout; the reader
then memory-maps the cached files exactly as it maps a local store's, so every
loader, tier and check works unchanged. The cache fills on demand, one array at
a time (its ``zarr.json`` on first use, all its chunks when it is first read:
:mod:`graphpipe.store._fetch` is the hook the array and table readers call).

* **Each object is read once per machine.** A cached file is never fetched again;
  processes sharing the cache (ranks of one machine) take a per-array file lock
  (``flock``) around the download, so the second rank waits and finds the chunks.
* **No half-written files.** Each object is written to a temporary name and
  renamed into place; a crashed download leaves no file under its real name, and its
  temporary file is removed by the next download of that object or array.
* **Every object checked.** A store uploaded by graphpipe records each object's size
  and checksum in its manifest (:mod:`graphpipe.store.object_digests`): a downloaded
  object that differs (truncated, replaced) is a one-line :class:`CorruptStoreError`
  naming its key, before its file takes its name. A verified file is stamped (its
  mtime), so the first use of a cached file in a process proves it unchanged with one
  ``stat``; a file changed since (torn, truncated, edited) is hashed and, when it differs,
  fetched again.
* **A full cache disk is one line.** A write that fails for lack of space (``ENOSPC``,
  ``EDQUOT``, ``EFBIG``) raises :class:`StoreError` naming the cache directory and
  ``GRAPHPIPE_CACHE_DIR``; no partial file is left.
* **No half-written store.** :func:`open_remote` refuses a prefix without
  ``manifest.json``; an upload (:mod:`graphpipe.store.upload`) writes it last.
* **The cache follows the manifest.** The cache directory is
  ``<cache_dir>/<sha256(endpoint, URL, manifest bytes)>``: a store re-uploaded under
  the same URL gets a new directory, never stale chunks.
* The manifest and Arrow tables travel over the same store; a remote store is read
  only (``edit``/``add_derived`` refuse).

Default ``cache_dir``: ``$GRAPHPIPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphpipe/s3``
(``~/.cache/graphpipe/s3``).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import stat
import threading
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.store import _fetch
from graphpipe.store import checks as _checks
from graphpipe.store.arrays import chunk_grid
from graphpipe.store.errors import CorruptStoreError, StoreError
from graphpipe.store.manifest import MANIFEST_FILE, read_manifest
from graphpipe.store.object_digests import (
    check_object,
    check_object_file,
    check_objects_field,
    is_stamped,
    set_stamp,
)
from graphpipe.store.object_store import LocalWriteError, RemotePrefix, check_key
from graphpipe.store.reader import GraphStore, _resolve_in_memory, check_opened

MAX_CHUNKS = 1 << 20
"""Most chunks one array may have (a manifest claiming more is refused before any request)."""
FETCH_GROUP = 4
"""Objects downloaded at once in whole GETs (memory held: up to this many objects of at most
:data:`RANGED_BYTES`; a default feature chunk is 64 MiB)."""
RANGED_BYTES = 256 << 20
"""Objects of known size above this (a one-chunk ``csc/indices`` of a large graph) are
downloaded in ranged GETs written straight into the file, never whole in memory."""
PART_BYTES = 32 << 20
"""Bytes per ranged GET."""
PARTS_IN_FLIGHT = 4
"""Ranged GETs in flight at once (memory held: ``PARTS_IN_FLIGHT * PART_BYTES``)."""
_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def default_cache_dir() -> Path:
    """``$GRAPHPIPE_CACHE_DIR``, else ``$XDG_CACHE_HOME/graphpipe/s3`` (``~/.cache/graphpipe/s3``)."""
    if os.environ.get("GRAPHPIPE_CACHE_DIR"):
        return Path(os.environ["GRAPHPIPE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphpipe" / "s3"


class ChunkCache:
    """Fills ``root`` (a cache directory) from ``remote`` on demand; see the module docstring.

    Args:
        remote: the store's objects; root: the cache directory of this store version;
        manifest: the store's manifest (which arrays exist, their shapes and chunks).
    """

    def __init__(self, remote: RemotePrefix, root: Path, manifest: dict[str, Any]):
        self.remote, self.root, self.manifest = remote, root, manifest
        self.objects = check_objects_field(manifest, f"{remote.url}/{MANIFEST_FILE}")
        self.fetched_files = 0
        self._done: set[str] = set()
        self._mutex = threading.Lock()

    def ensure_file(self, key: str) -> None:
        """``root/key`` present (downloaded once, under the lock of ``key``)."""
        check_key(key, self.remote.url)
        if key in self._done or self._cached(key):
            return
        with self._locked(key):
            if not self._cached(key):
                path = self.root / key
                self._sweep(path.parent.glob(f".{path.name}.part-*"))
                self._download([key], self._sizes([key]))
        self._done.add(key)

    def ensure_array(self, key: str) -> None:
        """Every chunk file of array ``key`` present (the missing ones downloaded together)."""
        if key in self._done:
            return
        self.ensure_file(f"{key}/zarr.json")
        keys, chunk_bytes = self._chunk_keys(key)
        if not all(self._cached(k) for k in keys):
            with self._locked(key):
                missing = [k for k in keys if not self._cached(k)]
                self._sweep((self.root / key / "c").rglob(".*.part-*"))
                self._download(missing, self._sizes(missing, chunk_bytes))
        self._done.add(key)

    @staticmethod
    def _sweep(parts: Iterable[Path]) -> None:
        """Remove temporary files a killed download left (the caller holds the lock every writer
        of them holds, so none is being written)."""
        for part in parts:
            part.unlink(missing_ok=True)

    def _cached(self, key: str) -> bool:
        """Whether ``root/key`` holds the object: present, and when the manifest records the
        object, stamped as verified (one ``stat``) or, failing that, of its size and checksum
        (then stamped again). A file that differs is replaced by the caller's download."""
        path = self.root / key
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return False
        entry = self.objects.get(key)
        if entry is None or is_stamped(st, entry):
            return stat.S_ISREG(st.st_mode)
        try:
            check_object_file(str(path), path, entry)
        except (CorruptStoreError, OSError):
            return False
        set_stamp(path, entry)
        return True

    def _sizes(self, keys: list[str], chunk_bytes: int = 0) -> dict[str, int]:
        """Expected bytes of each of ``keys``: the manifest's, else ``chunk_bytes`` (0: unknown)."""
        return {k: self.objects[k]["bytes"] if k in self.objects else chunk_bytes for k in keys}

    def _chunk_keys(self, key: str) -> tuple[list[str], int]:
        """Object keys of the chunks of ``key`` (zarr v3 default encoding), after its
        ``zarr.json`` is checked against the manifest, and the bytes of one chunk when
        stored uncompressed (0: unknown)."""
        try:
            meta = json.loads((self.root / key / "zarr.json").read_text())
            shape = tuple(int(s) for s in meta["shape"])
            chunks = tuple(int(c) for c in meta["chunk_grid"]["configuration"]["chunk_shape"])
        except (ValueError, KeyError, TypeError, OSError):
            raise CorruptStoreError(f"{self.remote.url}/{key}/zarr.json: not a zarr array's "
                                    f"metadata") from None
        entry = self.manifest["arrays"].get(key)
        if entry is not None:
            _checks.check_array_metadata(self.root, key, meta, entry)
        if any(c < 1 for c in chunks) or len(chunks) != len(shape) or \
                math.prod(math.ceil(s / c) for s, c in zip(shape, chunks)) > MAX_CHUNKS:
            raise CorruptStoreError(f"{self.remote.url}/{key}/zarr.json: shape {list(shape)} in "
                                    f"chunks {list(chunks)} is more than {MAX_CHUNKS} chunks")
        keys = [f"{key}/c/" + "/".join(map(str, coords)) for coords in chunk_grid(shape, chunks)]
        plain = [c.get("name") for c in meta.get("codecs", []) if isinstance(c, dict)] == ["bytes"]
        try:
            chunk_bytes = math.prod(chunks) * np.dtype(meta["data_type"]).itemsize if plain else 0
        except (TypeError, ValueError):   # a data type NumPy does not name: size unknown
            chunk_bytes = 0
        return keys, chunk_bytes

    def _download(self, keys: list[str], sizes: dict[str, int] | None = None) -> None:
        """Fetch ``keys`` into the cache; those whose size ``sizes`` knows to be above
        :data:`RANGED_BYTES` in ranged parts, the others :data:`FETCH_GROUP` at a time."""
        sizes = sizes or {}
        large = [k for k in keys if sizes.get(k, 0) > RANGED_BYTES]
        for key in large:
            self._download_ranged(key, sizes[key])
        keys = [k for k in keys if sizes.get(k, 0) <= RANGED_BYTES]
        for i in range(0, len(keys), FETCH_GROUP):
            group = keys[i:i + FETCH_GROUP]
            limits = [self.objects[k]["bytes"] + 1 if self.objects.get(k, {}).get("bytes") else None
                      for k in group]                     # one byte more: a longer object shows
            for key, data in zip(group, self.remote.get_many(group, limits)):
                if data is None:
                    raise CorruptStoreError(f"{self.remote.url}/{key}: object missing "
                                            f"(the store's manifest lists it)")
                self._write(key, data)

    def _download_ranged(self, key: str, size: int) -> None:
        """``root/key`` from ranged GETs written at their offsets of a temporary file, renamed."""
        path = self.root / key
        tmp = path.with_name(f".{path.name}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                self.remote.download_ranges(key, size, fd, PART_BYTES, PARTS_IN_FLIGHT)
            finally:
                os.close(fd)
            self._verify_and_place(key, tmp, path)
        except LocalWriteError as exc:
            raise self._write_error(key, size, exc.cause) from None
        except OSError as exc:
            raise self._write_error(key, size, exc) from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._mutex:
            self.fetched_files += 1

    def _write(self, key: str, data: Any) -> None:
        """``root/key`` := ``data``, through a temporary file and a rename."""
        entry = self.objects.get(key)
        if entry is not None:
            check_object(f"{self.remote.url}/{key}", data, entry)
        path = self.root / key
        tmp = path.with_name(f".{path.name}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(data)
            if entry is not None:
                set_stamp(tmp, entry)
            os.replace(tmp, path)
        except OSError as exc:
            raise self._write_error(key, memoryview(data).nbytes, exc) from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._mutex:
            self.fetched_files += 1

    def _verify_and_place(self, key: str, tmp: Path, path: Path) -> None:
        """Check the downloaded file ``tmp`` against the manifest, stamp it, rename it to ``path``."""
        entry = self.objects.get(key)
        if entry is not None:
            check_object_file(f"{self.remote.url}/{key}", tmp, entry)
            set_stamp(tmp, entry)
        os.replace(tmp, path)

    def _write_error(self, key: str, size: int, exc: OSError) -> StoreError:
        """One line for a failed cache write; a full disk names ``GRAPHPIPE_CACHE_DIR``."""
        if exc.errno in _FULL:
            return StoreError(f"{self.root}: the chunk cache's disk is full ({exc.strerror}) while "
                              f"writing {key} ({size} bytes); free space or set GRAPHPIPE_CACHE_DIR "
                              f"to a directory on a larger disk")
        return StoreError(f"{self.root / key}: cannot write the chunk cache ({exc.strerror or exc})")

    @contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        """An exclusive ``flock`` on ``root/.locks/<key>`` (shared by every process of this machine)."""
        locks = self.root / ".locks"
        locks.mkdir(exist_ok=True)
        fd = os.open(locks / (key.replace("/", "%") + ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


class RemoteGraphStore(GraphStore):
    """A :class:`GraphStore` read from ``s3://...`` through a local chunk cache.

    ``path`` is the cache directory (what the readers map); ``url`` the store's URL;
    ``cache`` its :class:`ChunkCache`; ``requests`` the GETs and bytes made so far.
    """

    def __init__(self, path: Path, manifest: dict[str, Any], in_memory: frozenset[str] = frozenset(),
                 *, url: str, cache: ChunkCache):
        super().__init__(path, manifest, in_memory)
        self.url, self.cache = url, cache

    @property
    def location(self) -> str:
        return self.url

    @property
    def requests(self) -> Any:
        """:class:`graphpipe.store.object_store.RequestStats` of this store's reads."""
        return self.cache.remote.stats

    def prefetch(self, keys: Iterable[str] | None = None) -> None:
        """Download arrays ``keys`` (default: every array and table) into the cache now."""
        for key in self.manifest["arrays"] if keys is None else keys:
            self.cache.ensure_array(key)
        if keys is None:
            for key in self.manifest["tables"]:
                self.cache.ensure_file(key)

    def remote_sizes(self) -> tuple[dict[str, int], int]:
        """``({array or table key: bytes}, total bytes)`` of the objects under the URL (one listing)."""
        listing = self.cache.remote.list()
        sizes = {key: sum(s for k, s in listing.items() if k.startswith(key + "/"))
                 for key in self.manifest["arrays"]}
        sizes.update({key: listing.get(key, 0) for key in self.manifest["tables"]})
        return sizes, sum(listing.values())

    def edit(self) -> Any:
        raise StoreError(f"{self.url}: a store on object storage is read only; edit a local copy "
                         f"and upload it with graphpipe ingest")

    def add_derived(self, name: str, arrays: dict, entry: dict, *, replace: bool = False) -> dict:
        return self.edit()

    def __repr__(self) -> str:
        return f"GraphStore({self.url!r}, nodes={self.num_nodes}, edges={self.num_edges})"


def open_remote(url: str, *, cache_dir: str | os.PathLike | None = None,
                in_memory: Any = False) -> RemoteGraphStore:
    """Open the store at ``url`` (``s3://bucket/prefix``) through a chunk cache under
    ``cache_dir``; ``graphpipe.store.open`` (:func:`graphpipe.store.open.open_store`) calls this
    for ``s3://`` paths.

    A ring ingested to an S3-compatible server (moto's, on loopback), then opened twice
    with one cache: the second open reads only the manifest.

    >>> import os, tempfile, urllib.request
    >>> import numpy as np
    >>> from moto.server import ThreadedMotoServer
    >>> from graphpipe.ingest import ingest
    >>> server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    >>> server.start()
    >>> endpoint = "http://%s:%d" % server.get_host_and_port()
    >>> saved = dict(os.environ)
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz, cache = os.path.join(tmp.name, "ring.npz"), os.path.join(tmp.name, "cache")
    >>> os.environ.update(AWS_ACCESS_KEY_ID="k", AWS_SECRET_ACCESS_KEY="s", AWS_DEFAULT_REGION="us-east-1",
    ...                   AWS_ENDPOINT_URL=endpoint, GRAPHPIPE_CACHE_DIR=cache)
    >>> urllib.request.urlopen(urllib.request.Request(endpoint + "/graphs", method="PUT")).status
    200
    >>> np.savez(npz, src=np.array([1, 2, 3, 0]), dst=np.arange(4),
    ...          x=np.arange(8, dtype=np.float32).reshape(4, 2))
    >>> _ = ingest(npz, "s3://graphs/rings/ring")      # built here, uploaded, manifest last
    >>> store = open_remote("s3://graphs/rings/ring", cache_dir=cache)
    >>> store
    GraphStore('s3://graphs/rings/ring', nodes=4, edges=4)
    >>> store.indices.tolist(), store.features(np.array([3])).tolist()
    ([1, 2, 3, 0], [[6.0, 7.0]])
    >>> store.requests.gets          # manifest, 2 x (zarr.json + chunk)
    5
    >>> again = open_remote("s3://graphs/rings/ring", cache_dir=cache)
    >>> again.features(np.array([3])).tolist(), again.requests.gets
    ([[6.0, 7.0]], 1)
    >>> server.stop(); os.environ.clear(); os.environ.update(saved); tmp.cleanup()
    """
    remote = RemotePrefix(url)
    data = remote.get(MANIFEST_FILE)
    if data is None:
        raise StoreError(f"{remote.url}: no {MANIFEST_FILE} under this prefix: not a graphpipe store "
                         f"(or its upload has not finished)")
    data = bytes(data)
    digest = hashlib.sha256(b"\0".join([remote.endpoint.encode(), remote.url.encode(), data]))
    base = Path(cache_dir if cache_dir is not None else default_cache_dir()).absolute()
    root = base / digest.hexdigest()[:32]
    root.mkdir(parents=True, exist_ok=True)
    cache = ChunkCache(remote, root, {"arrays": {}})
    cached = root / MANIFEST_FILE
    if not cached.is_file() or cached.read_bytes() != data:
        cache._write(MANIFEST_FILE, data)
    manifest = read_manifest(root)
    check_opened(manifest, remote.url)
    for key in list(manifest["arrays"]) + list(manifest.get("tables", {})):
        check_key(key, f"{remote.url}/{MANIFEST_FILE}")
    cache = ChunkCache(remote, root, manifest)
    _fetch.register(root, cache)
    in_mem = _resolve_in_memory(root, manifest, in_memory)
    return RemoteGraphStore(root, manifest, in_mem, url=remote.url, cache=cache)
