"""Object storage that is not there (issue 27): an endpoint that refuses connections, one that
is unreachable (connections never complete) or one that accepts them and never answers, ends
in one ``ObjectStorageError`` within seconds — retries are bounded and the error says so —
instead of minutes of silent retries (it was 120 s for an endpoint that never answers)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import StoreError, open_store
from graphpipe.store.errors import ObjectStorageError
from graphpipe.store.object_store import (
    RETRY_TIMEOUT_ENV,
    TIMEOUT_ENV,
    request_timeout,
    retry_timeout,
)


def _env(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "graphpipe")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "graphpipe")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _open_fails_within(tmp_path: Path, seconds: float, match: str) -> ObjectStorageError:
    """Opening ``s3://bucket/g`` raises one line matching ``match`` within ``seconds`` (+ 8 s of
    slack on a loaded machine)."""
    started = time.perf_counter()
    with pytest.raises(ObjectStorageError, match=match) as err:
        open_store("s3://bucket/g", cache_dir=tmp_path / "cache")
    assert time.perf_counter() - started < seconds + 8
    assert "\n" not in str(err.value)
    return err.value


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_endpoint_fails_within_seconds(monkeypatch, tmp_path: Path) -> None:
    _env(monkeypatch, _closed_port())
    _open_fails_within(tmp_path, 20, r"s3://bucket/g/manifest.json: .*after \d+ retries "
                       r"in [0-9.]+ s \(retries are bounded: at most 8 within 20 s")


@pytest.mark.parametrize("command", ["info", "validate", "train", "ingest"])
def test_refused_endpoint_in_the_cli_is_one_line(monkeypatch, tmp_path: Path, command: str) -> None:
    """Each command that takes an ``s3://`` store (``ingest``: as its destination, checked
    before any work) ends in one line saying the retries were bounded."""
    _env(monkeypatch, _closed_port())
    src = tmp_path / "ring.npz"
    np.savez(src, src=np.array([1, 2, 0]), dst=np.arange(3))
    args = [command, *([str(src)] if command == "ingest" else []), "s3://bucket/g"]
    started = time.perf_counter()
    result = CliRunner().invoke(cli, args)
    assert time.perf_counter() - started < 25
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: s3://bucket/g/") \
        and "retries are bounded" in lines[0], result.output


def test_unreachable_endpoint_fails_within_the_retry_window(monkeypatch, tmp_path: Path) -> None:
    """An endpoint whose connections never complete (its accept queue is full, so the kernel
    drops new SYNs: what an unreachable host looks like, on loopback): each attempt gives up
    after the 3 s connect timeout and no retry starts after the retry window (3 s here)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    filling = []
    for _ in range(8):                        # fill the accept queue; never accepted
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(listener.getsockname())
        filling.append(s)
    _env(monkeypatch, listener.getsockname()[1])
    monkeypatch.setenv(RETRY_TIMEOUT_ENV, "3")
    try:
        _open_fails_within(tmp_path, 3 + 3, "retries are bounded: at most 8 within 3 s")
    finally:
        for s in [*filling, listener]:
            s.close()


def test_silent_endpoint_fails_after_the_request_timeout(monkeypatch, tmp_path: Path) -> None:
    """A server that accepts connections and never answers (a hung proxy, a stopped process
    whose socket is still open): each attempt gives up after ``GRAPHPIPE_S3_TIMEOUT``, and no
    retry starts later than the retry window (``GRAPHPIPE_S3_RETRY_TIMEOUT``, 3 s here)
    after the first attempt."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    _env(monkeypatch, listener.getsockname()[1])
    monkeypatch.setenv(TIMEOUT_ENV, "2")
    monkeypatch.setenv(RETRY_TIMEOUT_ENV, "3")
    try:
        _open_fails_within(tmp_path, 3 + 2, "s3://bucket/g/manifest.json")
    finally:
        stop.set()
        thread.join(5)
        for s in [*held, listener]:
            s.close()


@pytest.mark.parametrize("raw", ["0", "-3", "soon", "99999"])
def test_bad_timeout_setting_is_one_line(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, raw)
    monkeypatch.setenv(RETRY_TIMEOUT_ENV, raw)
    with pytest.raises(StoreError, match=TIMEOUT_ENV):
        request_timeout()
    with pytest.raises(StoreError, match=RETRY_TIMEOUT_ENV):
        retry_timeout()
