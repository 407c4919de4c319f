"""A real HTTP/1.1 proxy on loopback in front of the S3 server that injects faults, for the
object-storage fault tests (issue 27): a socket server that forwards each request to moto
unless its rule says otherwise, not a mock of any client or server.

``proxy.rule(method, key, n)`` is called for every request (``key``: the path after the
bucket; ``n``: how many requests of that method came before; :attr:`FaultProxy.answered` counts those the server
answered) and answers what to do:

* ``None``: forward it;
* ``"503"``: answer ``503 SlowDown`` (S3's throttling answer); ``"500"``: ``500 InternalError``;
* ``"die"``: the server dies: the listener closes (later connections are refused) and every
  open connection is closed without an answer;
* ``"hold"``: block the request until :meth:`FaultProxy.release` (:attr:`held` is set), so
  that a test can kill the client at that exact point.
"""

from __future__ import annotations

import http.client
import socket
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
        "proxy-connection", "content-length"}
_ERRORS = {"503": (503, "SlowDown", "Please reduce your request rate."),
           "500": (500, "InternalError", "We encountered an internal error. Please try again.")}


class FaultProxy:
    """The proxy, listening on ``127.0.0.1:port`` (:attr:`endpoint`), forwarding to ``upstream``."""

    def __init__(self, upstream: str, bucket: str):
        self.upstream = urlsplit(upstream)
        self.bucket = bucket
        self.rule: Callable[[str, str, int], str | None] = lambda method, key, n: None
        self.counts: Counter[str] = Counter()
        self.answered: Counter[str] = Counter()          # forwarded requests the server answered
        self.log: list[tuple[str, str, str]] = []       # (method, key, what was done)
        self.held = threading.Event()
        self._release = threading.Event()
        self._dead = threading.Event()
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with proxy._lock:
                    proxy._conns.add(self.connection)

            def finish(self) -> None:
                with proxy._lock:
                    proxy._conns.discard(self.connection)
                super().finish()

            def do_GET(self) -> None:
                proxy._handle(self)

            do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.handle_error = lambda request, address: None    # clients that hung up
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()

    def env(self, server_env: dict[str, str]) -> dict[str, str]:
        """``server_env`` with the endpoint pointing at the proxy."""
        return {**server_env, "AWS_ENDPOINT_URL": self.endpoint}

    def release(self) -> None:
        self._release.set()

    def die(self) -> None:
        """Stop listening and drop every connection (idempotent)."""
        if self._dead.is_set():
            return
        self._dead.set()
        self._release.set()
        threading.Thread(target=self._close, daemon=True).start()

    def close(self) -> None:
        self.die()
        self._thread.join(10)

    def _close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _key(self, path: str) -> str:
        path = urlsplit(path).path.lstrip("/")
        return path[len(self.bucket) + 1:] if path.startswith(self.bucket + "/") else path

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        body = self._read_body(h)
        key = self._key(h.path)
        with self._lock:
            n = self.counts[h.command]
            self.counts[h.command] += 1
            what = None if self._dead.is_set() else self.rule(h.command, key, n)
            if self._dead.is_set():
                what = "dead"
            self.log.append((h.command, key, what or "forwarded"))
        if what == "hold":
            self.held.set()
            self._release.wait(120)
            what = "dead" if self._dead.is_set() else None
        if what == "die":
            self.die()
        if what in ("die", "dead"):
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if what in _ERRORS:
            status, code, message = _ERRORS[what]
            self._answer(h, status, [("Content-Type", "application/xml")],
                         (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
                          f"<Message>{message}</Message></Error>").encode())
            return
        status, headers, data = self._forward(h, body)
        with self._lock:
            self.answered[h.command] += 1
        self._answer(h, status, headers, data)

    @staticmethod
    def _read_body(h: BaseHTTPRequestHandler) -> bytes:
        if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts = []
            while True:
                size = int(h.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while h.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(h.rfile.read(size))
                h.rfile.readline()
        return h.rfile.read(int(h.headers.get("Content-Length") or 0))

    def _forward(self, h: BaseHTTPRequestHandler, body: bytes) -> tuple[int, list, bytes]:
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=60)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
            conn.request(h.command, h.path, body=body if body or h.command in ("PUT", "POST") else None,
                         headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            keep = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP
                    or (h.command == "HEAD" and k.lower() == "content-length")]
            return resp.status, keep, data
        finally:
            conn.close()

    @staticmethod
    def _answer(h: BaseHTTPRequestHandler, status: int, headers: list, data: bytes) -> None:
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        if h.command != "HEAD":
            h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if h.command != "HEAD":
            h.wfile.write(data)
