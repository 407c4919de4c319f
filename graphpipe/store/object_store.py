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
* ``GRAPHPIPE_S3_TIMEOUT``: seconds one request may take (30; not a credential);
* ``GRAPHPIPE_S3_RETRY_TIMEOUT``: seconds after the first attempt in which retries may start
  (20; not a credential).

Retries are bounded (:func:`retry_config`): a refused or unreachable endpoint, a server
that died, throttling (``503 SlowDown``) or other 5xx answers that do not stop, or an
endpoint that never answers, end in one error line that says how many retries were made
within how long, not after minutes of silent retries.

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

from graphpipe.store.errors import ObjectStorageError, StoreError

SCHEME = "s3://"
ENV_VARS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL")
"""The only places credentials, region and endpoint are read from."""
MAX_CONCURRENCY = 16
"""Requests in flight at once in :meth:`RemotePrefix.get_many` / :meth:`RemotePrefix.put_many`."""
MAX_RETRIES = 8
"""Retries of one request at most (obstore's policy: backoff 0.1 s doubling to 4 s, with
jitter), none started later than :func:`retry_timeout` after the first attempt: a server
restarting within seconds is waited for, an endpoint that refuses connections fails in about
a second, an unreachable one (each connection attempt waits 3 s) after about the window."""
TIMEOUT_ENV = "GRAPHPIPE_S3_TIMEOUT"
"""Seconds one request attempt may take, connection and transfer (default
:data:`DEFAULT_TIMEOUT`): an endpoint that accepts connections and never answers fails after
at most this plus the retry window, not after minutes."""
DEFAULT_TIMEOUT = 30.0
RETRY_TIMEOUT_ENV = "GRAPHPIPE_S3_RETRY_TIMEOUT"
"""Seconds after a request's first attempt in which a retry may still start (default
:data:`DEFAULT_RETRY_TIMEOUT`)."""
DEFAULT_RETRY_TIMEOUT = 20.0
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
    return _seconds(TIMEOUT_ENV, DEFAULT_TIMEOUT)


def retry_timeout() -> float:
    """Seconds after a request's first attempt in which retries may start:
    :data:`RETRY_TIMEOUT_ENV`, or :data:`DEFAULT_RETRY_TIMEOUT`.

    >>> retry_timeout()
    20.0
    """
    return _seconds(RETRY_TIMEOUT_ENV, DEFAULT_RETRY_TIMEOUT)


def retry_config() -> dict[str, Any]:
    """obstore's retry policy: at most :data:`MAX_RETRIES` retries within :func:`retry_timeout`.

    >>> retry_config()["max_retries"], retry_config()["retry_timeout"].total_seconds()
    (8, 20.0)
    """
    return {"max_retries": MAX_RETRIES, "retry_timeout": timedelta(seconds=retry_timeout()),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=4),
                        "base": 2}}


def _seconds(name: str, default: float) -> float:
    """The environment variable ``name`` as seconds in (0, 3600], or ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 3600:
        raise StoreError(f"{name}={raw!r}: expected seconds in (0, 3600]")
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


class LocalWriteError(StoreError):
    """Downloaded bytes could not be written to a local file (:attr:`cause`: the ``OSError``,
    a full disk for one), as opposed to a failed request."""

    def __init__(self, cause: OSError):
        super().__init__(str(cause))
        self.cause = cause


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
        s3 = S3Store(bucket, prefix=prefix, config=config, client_options=options,
                     retry_config=retry_config())
        self.store = ObjectStore(s3, read_only=read_only)
        self.stats = RequestStats()
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes | memoryview | None:
        """The object ``key``'s bytes, or None when there is no such object."""
        return self.get_many([key])[0]

    def get_many(self, keys: Iterable[str], limits: Iterable[int | None] | None = None) -> list[Any]:
        """The bytes of each of ``keys`` (None where missing), :data:`MAX_CONCURRENCY` at a time;
        at most ``limits[i]`` bytes of ``keys[i]`` where given (a ranged GET: an object far
        larger than expected never sits whole in memory)."""
        keys = list(keys)
        limits = [None] * len(keys) if limits is None else list(limits)
        return self._run(self._gather(self._get_one, list(zip(keys, limits))), keys)

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

    async def _get_one(self, key: str, limit: int | None = None) -> Any:
        from zarr.abc.store import RangeByteRequest
        from zarr.core.buffer import default_buffer_prototype

        byte_range = RangeByteRequest(0, limit) if limit else None
        buf = await self.store.get(key, default_buffer_prototype(), byte_range)
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
        try:
            os.pwrite(fd, data, start)
        except OSError as exc:
            raise LocalWriteError(exc) from None
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
            where = keys[0] if len(keys) == 1 else f"{keys[0]} (+{len(keys) - 1} more)"
            raise ObjectStorageError(f"{self.url}/{where}: {describe_failure(exc)}") from None


_RETRIED = re.compile(r" in (?P<secs>[0-9.]+)s(?:, after (?P<n>[0-9]+) retries)?.*?(?: - (?P<why>.*))?$")
_S3_ERROR = re.compile(r":? *<\?xml.*?<Code>(?P<code>[A-Za-z]+)</Code>.*$")


def describe_failure(exc: BaseException) -> str:
    """One line for a failed request: how many retries in how long (bounded by what), and why.

    >>> describe_failure(RuntimeError("Error performing GET http://h/b/k in 1.25s, after 8 "
    ...     "retries, max_retries: 8, retry_timeout: 20s  - HTTP error: error sending request"))
    'object storage request failed after 8 retries in 1.2 s (retries are bounded: at most 8 within 20 s, GRAPHPIPE_S3_RETRY_TIMEOUT): HTTP error: error sending request'
    """
    lines = str(exc).strip().splitlines()
    text = " ".join(lines[0].split()) if lines else ""
    found = _RETRIED.search(text)
    if found is None:
        return f"object storage request failed ({type(exc).__name__}: {text[:200] or '-'})"
    why = _S3_ERROR.sub(r" (\g<code>)", (found["why"] or type(exc).__name__).strip())[:200]
    return (f"object storage request failed after {found['n'] or 0} retries in {float(found['secs']):.1f} s "
            f"(retries are bounded: at most {MAX_RETRIES} within {retry_timeout():g} s, "
            f"{RETRY_TIMEOUT_ENV}): {why}")
