"""An ``s3://bucket/prefix`` URL as a zarr store: :class:`RemotePrefix`.

Everything graphpipe reads or writes on object storage goes through zarr's own
storage layer, :class:`zarr.storage.ObjectStore` over obstore's ``S3Store`` (Rust
``object_store``: connection pooling, retries with exponential backoff on 5xx,
dropped and refused connections and timeouts). Credentials, region and endpoint
come from the environment only, never from a store:

* ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``: the key pair (both or neither;
  neither: unsigned requests, for public buckets);
* ``AWS_DEFAULT_REGION``: the region (``us-east-1`` when unset);
* ``AWS_ENDPOINT_URL``: an S3-compatible server (MinIO, Ceph, moto, ...); plain
  ``http://`` is allowed only for such an explicit endpoint;
* ``GRAPHPIPE_S3_TIMEOUT``: seconds one request may take (30; not a credential).

Retries are bounded (:data:`RETRY`): a refused or unreachable endpoint, or one that never
answers, ends in one error line within seconds, not after minutes of silent retries.

:class:`RemotePrefix` adds what the store needs on top of zarr's ``Store`` API:
synchronous calls, many gets at once, object-storage errors as one-line
:class:`StoreError` naming the URL and key, and counters of requests and bytes.
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from graphpipe.store.errors import StoreError

SCHEME = "s3://"
ENV_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")
"""The only places credentials, region and endpoint are read from."""
MAX_CONCURRENCY = 16
"""Requests in flight at once in :meth:`RemotePrefix.get_many` / :meth:`RemotePrefix.put_many`."""
RETRY = {"max_retries": 8, "retry_timeout": timedelta(seconds=20),
         "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=4),
                     "base": 2}}
"""obstore's retry policy: up to 8 retries, none started later than 20 s after the first
attempt, backoff 0.1 s doubling to 4 s: a server restarting within seconds is waited for, an
endpoint that refuses connections fails in a few seconds (obstore's error says how many
retries it made)."""
TIMEOUT_ENV = "GRAPHPIPE_S3_TIMEOUT"
"""Seconds one request attempt may take, connection and transfer (default
:data:`DEFAULT_TIMEOUT`): an endpoint that accepts connections and never answers fails after
at most this plus the retry window, not after minutes."""
DEFAULT_TIMEOUT = 30.0
_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


def is_remote(path: Any) -> bool:
    """Whether ``path`` names a store on object storage (``s3://...``)."""
    return isinstance(path, str) and path.startswith(SCHEME)


def parse_url(url: str) -> tuple[str, str]:
    """``(bucket, prefix)`` of ``s3://bucket/prefix`` (prefix without slashes at its ends).

    >>> parse_url("s3://graphs/ogbn-arxiv/")
    ('graphs', 'ogbn-arxiv')
    """
    if not is_remote(url):
        raise StoreError(f"{url}: not an s3:// URL")
    bucket, _, prefix = url[len(SCHEME):].partition("/")
    prefix = prefix.strip("/")
    if not bucket or not re.fullmatch(r"[a-z0-9][a-z0-9.\-]{1,62}", bucket):
        raise StoreError(f"{url}: bucket name {bucket!r} is not a valid S3 bucket name")
    if not prefix:
        raise StoreError(f"{url}: give a prefix inside the bucket (s3://{bucket}/NAME); a store "
                         f"does not take a whole bucket")
    for part in prefix.split("/"):
        check_key_part(part, url)
    return bucket, prefix


def check_key_part(part: str, where: str) -> None:
    """One ``/``-separated component of an object key (or of a cached file's path):
    letters, digits, ``_ . -``, not ``.`` or ``..``; a store's keys are untrusted and
    become file names in the chunk cache."""
    if not _KEY.match(part) or part in (".", ".."):
        raise StoreError(f"{where}: key component {part!r} is not allowed "
                         f"(letters, digits, '_', '.', '-' only; not '.' or '..')")


def check_key(key: str, where: str) -> str:
    """``key`` when every component passes :func:`check_key_part`."""
    for part in key.split("/"):
        check_key_part(part, where)
    return key


def request_timeout() -> float:
    """Seconds one request may take: :data:`TIMEOUT_ENV`, or :data:`DEFAULT_TIMEOUT`.

    >>> request_timeout()
    30.0
    """
    raw = os.environ.get(TIMEOUT_ENV)
    if raw is None:
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise StoreError(f"{TIMEOUT_ENV}={raw!r}: expected seconds in (0, 3600]")
    return value


def s3_config_from_env() -> tuple[dict[str, Any], dict[str, Any]]:
    """``(S3 config, client options)`` for obstore from :data:`ENV_VARS` only."""
    key_id, secret = os.environ.get("AWS_ACCESS_KEY_ID"), os.environ.get("AWS_SECRET_ACCESS_KEY")
    if bool(key_id) != bool(secret):
        raise StoreError("set both AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or neither")
    config: dict[str, Any] = {"region": os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"}
    if key_id:
        config.update(access_key_id=key_id, secret_access_key=secret)
    else:
        config["skip_signature"] = True
    options: dict[str, Any] = {"connect_timeout": timedelta(seconds=3),
                               "timeout": timedelta(seconds=request_timeout())}
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        if not endpoint.startswith(("http://", "https://")):
            raise StoreError(f"AWS_ENDPOINT_URL={endpoint!r}: expected an http:// or https:// URL")
        config.update(endpoint=endpoint.rstrip("/"), virtual_hosted_style_request=False)
        options["allow_http"] = endpoint.startswith("http://")
    return config, options


@dataclass
class RequestStats:
    """Requests made through a :class:`RemotePrefix` (all threads together)."""

    gets: int = 0
    get_bytes: int = 0
    puts: int = 0
    put_bytes: int = 0


class RemotePrefix:
    """The objects under ``s3://bucket/prefix`` through :class:`zarr.storage.ObjectStore`.

    Keys are relative to the prefix (``"manifest.json"``, ``"node/feat/c/0/0"``).
    Every call is synchronous (run on zarr's event loop); failures other than a
    missing key raise :class:`StoreError` naming the URL and key.
    """

    def __init__(self, url: str, *, read_only: bool = True):
        try:
            from obstore.store import S3Store
            from zarr.storage import ObjectStore
        except ImportError:
            raise StoreError(f"{url}: stores on object storage need obstore "
                             f"(pip install 'graphpipe[s3]')") from None

        self.url = url.rstrip("/")
        bucket, prefix = parse_url(self.url)
        config, options = s3_config_from_env()
        self.endpoint = config.get("endpoint", "")
        s3 = S3Store(bucket, prefix=prefix, config=config, client_options=options, retry_config=RETRY)
        self.store = ObjectStore(s3, read_only=read_only)
        self.stats = RequestStats()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | memoryview | None:
        """The object ``key``'s bytes, or None when there is no such object."""
        return self.get_many([key])[0]

    def get_many(self, keys: Iterable[str]) -> list[Any]:
        """The bytes of each of ``keys`` (None where missing), :data:`MAX_CONCURRENCY` at a time."""
        keys = list(keys)
        return self._run(self._gather(self._get_one, [(k,) for k in keys]), keys)

    def download_ranges(self, key: str, size: int, fd: int, part_bytes: int, in_flight: int) -> None:
        """Write object ``key`` (``size`` bytes) into the open file ``fd`` at its offsets, in
        ranged GETs of ``part_bytes`` (``in_flight`` at a time): a large object never
        sits whole in memory. Raises :class:`StoreError` when the object is missing or its
        parts do not have the expected sizes."""
        starts = list(range(0, size, part_bytes))
        self._run(self._gather(self._get_range_into,
                               [(key, s, min(size, s + part_bytes), fd) for s in starts], in_flight), [key])

    def put_many(self, items: Iterable[tuple[str, bytes | memoryview]]) -> None:
        """Write each ``(key, bytes)``, :data:`MAX_CONCURRENCY` at a time."""
        items = list(items)
        self._run(self._gather(self._put_one, items), [k for k, _ in items])

    def put_file(self, key: str, path: str | os.PathLike) -> None:
        """Write the file ``path`` as ``key`` streamed in parts (S3 multipart upload through
        the obstore ``S3Store`` under zarr's ``ObjectStore``): for files too large for one PUT."""
        import obstore

        async def put() -> None:
            await obstore.put_async(self.store.store, key, Path(path))
        self._run(put(), [key])
        with self._lock:
            self.stats.puts += 1
            self.stats.put_bytes += Path(path).stat().st_size

    def delete_many(self, keys: Iterable[str]) -> None:
        """Delete each of ``keys`` (a missing key is no error)."""
        keys = list(keys)
        self._run(self._gather(self.store.delete, [(k,) for k in keys]), keys)

    def list(self) -> dict[str, int]:
        """Every key under the prefix with its size in bytes."""
        async def collect() -> dict[str, int]:
            return {meta["path"]: int(meta["size"]) async for meta in self.store._list("")}
        return self._run(collect(), ["(list)"])

    async def _gather(self, fn: Any, args: list[tuple], in_flight: int = MAX_CONCURRENCY) -> list[Any]:
        gate = asyncio.Semaphore(in_flight)

        async def one(a: tuple) -> Any:
            async with gate:
                return await fn(*a)
        return list(await asyncio.gather(*(one(a) for a in args)))

    async def _get_one(self, key: str) -> Any:
        from zarr.core.buffer import default_buffer_prototype

        buf = await self.store.get(key, default_buffer_prototype())
        if buf is None:
            return None
        data = buf.as_numpy_array().data
        with self._lock:
            self.stats.gets += 1
            self.stats.get_bytes += data.nbytes
        return data

    async def _get_range_into(self, key: str, start: int, end: int, fd: int) -> None:
        from zarr.abc.store import RangeByteRequest
        from zarr.core.buffer import default_buffer_prototype

        buf = await self.store.get(key, default_buffer_prototype(), RangeByteRequest(start, end))
        data = None if buf is None else buf.as_numpy_array().data
        if data is None or data.nbytes != end - start:
            got = "no object" if data is None else f"{data.nbytes} bytes"
            raise StoreError(f"{self.url}/{key}: bytes [{start}, {end}) of the object: {got}, "
                             f"expected {end - start} (the object is missing or shorter than its metadata says)")
        os.pwrite(fd, data, start)
        with self._lock:
            self.stats.gets += 1
            self.stats.get_bytes += data.nbytes

    async def _put_one(self, key: str, data: bytes | memoryview) -> None:
        from zarr.core.buffer import cpu

        await self.store.set(key, cpu.Buffer.from_bytes(data))
        with self._lock:
            self.stats.puts += 1
            self.stats.put_bytes += memoryview(data).nbytes

    def _run(self, coro: Any, keys: list[str]) -> Any:
        from zarr.core.sync import sync

        try:
            return sync(coro)
        except StoreError:
            raise
        except Exception as exc:  # noqa: BLE001 - obstore's errors: one line naming the objects
            detail = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            where = keys[0] if len(keys) == 1 else f"{keys[0]} (+{len(keys) - 1} more)"
            raise StoreError(f"{self.url}/{where}: object storage request failed "
                             f"({type(exc).__name__}: {detail})") from None
