"""Object storage under faults (issue 27), against the real S3 server of conftest.py behind a
real fault-injecting HTTP proxy (fault_proxy.py): throttling and 5xx answers, the server
dying in the middle of an ingest, an open and an epoch, an upload killed half way, objects
changed after upload, a damaged chunk cache and a cache on a full disk. Each ends in one
line and a non-zero exit within a bounded time, never in a hang, a traceback or a
half-written store."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.store import CorruptStoreError, GraphStore, StoreError, open_store
from graphpipe.store.manifest import MANIFEST_FILE
from graphpipe.store.object_store import RemotePrefix
from graphpipe.store.upload import upload_store
from graphpipe.store.validate import validate
from tests.store.conftest import assert_cache_whole
from tests.store.fault_proxy import FaultProxy
from tests.store.test_remote import _rechunked

BOUND_S = 20
"""Seconds any failure below may take: the retry window (2 s here) plus slack for a loaded machine."""


@pytest.fixture(scope="module")
def local_store(ogb_raw_folder, tmp_path_factory) -> GraphStore:
    """The small community graph, its features in 10 chunks (so reads make several GETs)."""
    built = ingest(ogb_raw_folder[0], tmp_path_factory.mktemp("local") / "g")
    return _rechunked(built, tmp_path_factory.mktemp("chunked") / "g", 200)


@pytest.fixture
def proxy(s3_server, monkeypatch):
    """The proxy in front of the server; the ``AWS_*`` variables point at it, retries end
    within 2 s."""
    px = FaultProxy(s3_server.endpoint, s3_server.bucket)
    monkeypatch.setenv("AWS_ENDPOINT_URL", px.endpoint)
    monkeypatch.setenv("GRAPHPIPE_S3_RETRY_TIMEOUT", "2")
    yield px
    px.close()


def _uploaded(s3_server, local_store: GraphStore, name: str) -> str:
    """``local_store`` uploaded straight to the server (not through the proxy)."""
    url = f"s3://{s3_server.bucket}/{name}/g"
    _direct(s3_server, lambda: upload_store(local_store.path, url))
    return url


def _direct(s3_server, fn):
    """``fn()`` with the endpoint set to the server itself, not the proxy."""
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = s3_server.endpoint
    try:
        return fn()
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved


def _one_line_exit(result, started: float, *words: str) -> str:
    """The CLI's error: exit 2, one line, no traceback, within :data:`BOUND_S`."""
    assert time.perf_counter() - started < BOUND_S
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, \
        result.output
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("status", ["503", "500"])
def test_throttling_and_5xx_are_retried(s3_server, proxy, local_store, tmp_path, status) -> None:
    """503 SlowDown (S3's throttling) or 500 to the first two attempts of every GET: retried
    within the bound, the read completes, the bytes match."""
    url = _uploaded(s3_server, local_store, f"flaky{status}")
    tries: Counter[str] = Counter()

    def rule(method: str, key: str, n: int) -> str | None:
        tries[key] += method == "GET"
        return status if method == "GET" and tries[key] <= 2 else None

    proxy.rule = rule
    store = open_store(url, cache_dir=tmp_path / "cache")
    assert np.array_equal(store.features(np.arange(store.num_nodes)), local_store.feat)
    assert set(tries.values()) == {3}                        # each GET: two refusals, then served
    assert [what for _, _, what in proxy.log].count(status) == 2 * len(tries)
    assert_cache_whole(tmp_path / "cache")


@pytest.mark.parametrize("status", ["503", "500"])
def test_throttling_that_does_not_stop_is_one_line(s3_server, proxy, local_store, tmp_path,
                                                   monkeypatch, status) -> None:
    """Every chunk GET answered 503 (or 500): `graphpipe validate` ends within the retry bound
    with one line naming the object, the status and the bound."""
    url = _uploaded(s3_server, local_store, f"throttled{status}")
    monkeypatch.setenv("GRAPHPIPE_CACHE_DIR", str(tmp_path / "cache"))
    proxy.rule = lambda method, key, n: status if "/c/" in key else None
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["validate", url])
    line = _one_line_exit(result, started, url, status, "retries are bounded")
    assert "/c/" in line
    assert_cache_whole(tmp_path / "cache")


def test_server_dies_mid_ingest(s3_server, proxy, ogb_raw_folder, tmp_path, monkeypatch) -> None:
    """The server goes away after two objects of an ingest's upload went up: one line, exit 2,
    no store at the prefix (no manifest: readers refuse it), no local build left behind; the
    next `ingest --overwrite` replaces what the first one left."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    url = f"s3://{s3_server.bucket}/dies-ingest/g"
    proxy.rule = lambda method, key, n: "die" if method == "PUT" and proxy.answered["PUT"] >= 2 else None
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["ingest", str(ogb_raw_folder[0]), url, "--quiet"])
    _one_line_exit(result, started, url, "retries")
    listing = _direct(s3_server, lambda: RemotePrefix(url).list())
    assert listing and MANIFEST_FILE not in listing
    with pytest.raises(StoreError, match="no manifest.json"):
        _direct(s3_server, lambda: open_store(url, cache_dir=tmp_path / "cache"))
    assert not list((tmp_path / "tmp").iterdir())
    result = _direct(s3_server, lambda: CliRunner().invoke(
        cli, ["ingest", str(ogb_raw_folder[0]), url, "--quiet", "--overwrite"]))
    assert result.exit_code == 0, result.output


def test_server_dies_mid_open(s3_server, proxy, local_store, tmp_path, monkeypatch) -> None:
    """The server goes away after the manifest and the first metadata objects: `graphpipe
    validate` ends in one line; every file the cache holds is whole."""
    url = _uploaded(s3_server, local_store, "dies-open")
    monkeypatch.setenv("GRAPHPIPE_CACHE_DIR", str(tmp_path / "cache"))
    proxy.rule = lambda method, key, n: "die" if method == "GET" and n == 3 else None
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["validate", url])
    _one_line_exit(result, started, url, "retries")
    assert_cache_whole(tmp_path / "cache")


def test_server_dies_mid_epoch(s3_server, proxy, local_store, tmp_path, monkeypatch) -> None:
    """`graphpipe train` on the store: the server goes away after three feature chunks, while
    the loader reads the epoch's features: one line naming the object, exit 2."""
    url = _uploaded(s3_server, local_store, "dies-epoch")
    monkeypatch.setenv("GRAPHPIPE_CACHE_DIR", str(tmp_path / "cache"))
    chunks = []

    def rule(method: str, key: str, n: int) -> str | None:
        if key.startswith("dies-epoch/g/node/feat/c/"):
            chunks.append(key)
            return "die" if len(chunks) == 4 else None
        return None

    proxy.rule = rule
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["train", url, "--epochs", "1", "--hidden", "8"])
    _one_line_exit(result, started, url, "node/feat/c/", "retries")
    assert_cache_whole(tmp_path / "cache")


def _kill_when_held(proxy: FaultProxy, code: str, *args: str) -> None:
    """Run ``code`` in a child process (the ``AWS_*`` variables pointing at ``proxy``) and
    SIGKILL it as soon as the proxy holds one of its requests."""
    child = subprocess.Popen([sys.executable, "-c", code, *args],
                             env={**os.environ, "PYTHONPATH": os.getcwd()}, stderr=subprocess.PIPE)
    try:
        assert proxy.held.wait(120), child.stderr.read() if child.poll() is not None else "no request"
    finally:
        child.kill()
        child.wait(60)
        proxy.release()
    assert child.returncode == -signal.SIGKILL


_UPLOAD = """
import sys
from graphpipe.store.upload import upload_store
upload_store(sys.argv[1], sys.argv[2], overwrite=True)
"""


def test_killed_upload_is_never_a_store(s3_server, proxy, local_store, tmp_path) -> None:
    """An upload replacing a store is killed (SIGKILL) at its fifth object: readers refuse the
    prefix (neither the old store nor a mix of old and new objects is read), and a new upload
    replaces the leftovers."""
    url = _uploaded(s3_server, local_store, "killed")
    proxy.rule = lambda method, key, n: "hold" if method == "PUT" and n == 4 else None
    _kill_when_held(proxy, _UPLOAD, str(local_store.path), url)
    with pytest.raises(StoreError, match="upload has not finished"):
        _direct(s3_server, lambda: open_store(url, cache_dir=tmp_path / "cache"))
    _direct(s3_server, lambda: upload_store(local_store.path, url, overwrite=True))
    store = _direct(s3_server, lambda: open_store(url, cache_dir=tmp_path / "cache"))
    assert np.array_equal(_direct(s3_server, lambda: store.features(np.arange(store.num_nodes))),
                          local_store.feat)


@pytest.mark.parametrize("damage", ["changed", "truncated", "grown"])
def test_changed_or_truncated_object_names_its_key(s3_server, local_store, tmp_path, damage) -> None:
    """An object rewritten after the upload (same size, other bytes), cut short or replaced
    by a far larger one: the read is one CorruptStoreError naming the object; nothing of it
    enters the cache, and of the large one no more than the expected size + 1 byte is read."""
    url = _uploaded(s3_server, local_store, f"object-{damage}")
    key = "node/feat/c/3/0"
    old = bytes(RemotePrefix(url).get(key))
    listing = RemotePrefix(url).list()
    most = sum(n for k, n in listing.items() if k == MANIFEST_FILE or k.startswith("node/feat/")) + 1
    new = {"truncated": old[:len(old) // 2], "changed": bytes(b ^ 1 for b in old),
           "grown": old * 64}[damage]
    RemotePrefix(url, read_only=False).put_many([(key, new)])
    store = open_store(url, cache_dir=tmp_path / "cache")
    with pytest.raises(CorruptStoreError, match=f"{url}/{key}: .*after the store was uploaded"):
        store.features(np.array([0]))
    assert store.requests.get_bytes <= most                 # not the 64 times larger object
    findings = validate(url)
    assert any(f.startswith(f"{url}/{key}: ") for f in findings), findings
    assert not list((tmp_path / "cache").rglob("c/3/0")) and not list((tmp_path / "cache").rglob(".*part*"))


def test_damaged_cache_files_are_refetched(s3_server, local_store, tmp_path) -> None:
    """Cached files edited in place, cut short or replaced by a half-written copy are found
    at the next open (size and stamp, then checksum) and fetched again; an untouched file
    that only lost its stamp is hashed, not fetched."""
    url = _uploaded(s3_server, local_store, "damaged-cache")
    first = open_store(url, cache_dir=tmp_path / "cache")
    first.prefetch()
    root = first.path
    flipped, cut, torn = (root / f"node/feat/c/{i}/0" for i in (1, 4, 7))
    with open(flipped, "r+b") as fh:
        fh.seek(100)
        byte = fh.read(1)
        fh.seek(100)
        fh.write(bytes([byte[0] ^ 0xFF]))
    os.truncate(cut, cut.stat().st_size // 2)
    torn.write_bytes(torn.read_bytes()[:1000])
    os.utime(root / "node/feat/c/9/0")                                 # touched, bytes intact
    again = open_store(url, cache_dir=tmp_path / "cache")
    assert np.array_equal(again.features(np.arange(again.num_nodes)), local_store.feat)
    assert again.requests.gets == 1 + 3                                # the manifest + the 3 damaged
    assert_cache_whole(tmp_path / "cache")


_READER = """
import sys
import numpy as np
from graphpipe.store import open_store, remote
remote.RANGED_BYTES, remote.PART_BYTES = 4096, 4096      # chunks come in ranged parts
store = open_store(sys.argv[1], cache_dir=sys.argv[2])
store.features(np.arange(store.num_nodes))
"""


def test_download_killed_half_way_leaves_nothing_read(s3_server, proxy, local_store, tmp_path) -> None:
    """A reader is killed (SIGKILL) while a chunk is half downloaded (its first ranged parts
    written to the temporary file): the next reader of the cache fetches that chunk again,
    removes the leftover, and reads the right bytes."""
    url = _uploaded(s3_server, local_store, "killed-reader")
    cache = tmp_path / "cache"
    proxy.rule = lambda method, key, n: ("hold" if "/node/feat/c/" in key and proxy.answered["GET"] >= 6
                                         else None)
    _kill_when_held(proxy, _READER, url, str(cache))
    left = [p for p in cache.rglob(".*.part-*")]
    assert left and any(p.stat().st_size > 0 for p in left)              # a torn download
    proxy.rule = lambda method, key, n: None                 # the same endpoint: the same cache
    store = open_store(url, cache_dir=cache)
    assert np.array_equal(store.features(np.arange(store.num_nodes)), local_store.feat)
    assert not list(cache.rglob(".*.part-*"))
    assert_cache_whole(cache)


_FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # writes past the limit fail with EFBIG
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
from graphpipe.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def _small_tmpfs(path: Path) -> list[str] | None:
    """The command prefix that runs a command with a 64 KiB tmpfs mounted at ``path`` (in a
    user and mount namespace, unprivileged), or None where this machine does not allow it."""
    prefix = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=64k tmpfs "$0" && exec "$@"', str(path)]
    try:
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return prefix if probe.returncode == 0 else None


@pytest.mark.parametrize("disk", ["fsize", "tmpfs"])
def test_cache_on_a_full_disk_is_one_line(s3_server, local_store, tmp_path, disk) -> None:
    """The cache directory's disk fills while `graphpipe validate` fetches the store: a file
    size limit (``RLIMIT_FSIZE``: writes beyond it fail with EFBIG, as on a full disk), or a
    64 KiB tmpfs (ENOSPC; where user namespaces allow the mount). One line naming the cache
    and GRAPHPIPE_CACHE_DIR, exit 2, no partial file left (the tmpfs goes with the child)."""
    url = _uploaded(s3_server, local_store, f"full-disk-{disk}")
    objects = RemotePrefix(url).list()
    limit = max(n for k, n in objects.items() if "/c/" not in k) + 1      # metadata fits, chunks not
    assert objects["node/feat/c/0/0"] > limit
    cache = tmp_path / "cache"
    cache.mkdir()
    prefix = [] if disk != "tmpfs" else _small_tmpfs(cache)
    if prefix is None:
        pytest.skip("this machine allows no unprivileged tmpfs mount (user namespaces)")
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "GRAPHPIPE_CACHE_DIR": str(cache)}
    size_limit = str(limit if disk != "tmpfs" else 1 << 40)
    done = subprocess.run([*prefix, sys.executable, "-c", _FULL_DISK, size_limit, "validate", url],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "disk is full" in lines[0] and "GRAPHPIPE_CACHE_DIR" in lines[0], done.stderr
    assert not [p for p in cache.rglob("*") if p.name.startswith(".") and "part" in p.name]
