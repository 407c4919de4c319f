"""Object storage that is not there (issue 27): an endpoint that refuses connections, or one
that accepts them and never answers, ends in one ``StoreError`` within seconds — retries are
bounded and the error says so — instead of minutes of silent retries (it was 120 s for an
endpoint that never answers)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from graphpipe.store import StoreError, open_store
from graphpipe.store.object_store import TIMEOUT_ENV, request_timeout


def _env(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "graphpipe")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "graphpipe")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_endpoint_fails_within_seconds(monkeypatch, tmp_path: Path) -> None:
    _env(monkeypatch, _closed_port())
    started = time.perf_counter()
    with pytest.raises(StoreError, match=r"s3://bucket/g/manifest.json: .*retries") as err:
        open_store("s3://bucket/g", cache_dir=tmp_path / "cache")
    assert time.perf_counter() - started < 25
    assert "\n" not in str(err.value)


def test_silent_endpoint_fails_after_the_request_timeout(monkeypatch, tmp_path: Path) -> None:
    """A server that accepts connections and never answers (a hung proxy, a stopped process
    whose socket is still open): each attempt gives up after ``GRAPHPIPE_S3_TIMEOUT``, and no
    retry starts later than ``RETRY["retry_timeout"]`` (20 s) after the first attempt."""
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
    started = time.perf_counter()
    try:
        with pytest.raises(StoreError, match="s3://bucket/g/manifest.json"):
            open_store("s3://bucket/g", cache_dir=tmp_path / "cache")
        assert time.perf_counter() - started < 20 + 2 + 8   # + 8 s of slack on a loaded machine
    finally:
        stop.set()
        thread.join(5)
        for s in [*held, listener]:
            s.close()


@pytest.mark.parametrize("raw", ["0", "-3", "soon", "99999"])
def test_bad_timeout_setting_is_one_line(monkeypatch, raw: str) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, raw)
    with pytest.raises(StoreError, match=TIMEOUT_ENV):
        request_timeout()
