"""A real S3-compatible HTTP server on loopback for the object-storage tests: moto's
``ThreadedMotoServer`` (what s3fs tests against), not a mocked client.

Its objects live in moto's in-process backend, not in the server thread, so
:meth:`S3Server.restart` (stop, then a new server on the same port) serves the same
objects again: a restart a client can observe (refused connections, then answers)
without losing the data.
"""

from __future__ import annotations

import logging
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphpipe.store import GraphStore
from graphpipe.store.manifest import MANIFEST_FILE
from graphpipe.store.object_digests import OBJECTS, check_object_file, is_stamped


class S3Server:
    """moto's S3 server on ``127.0.0.1`` (a free port) with a bucket ``bucket``."""

    def __init__(self, bucket: str = "graphs"):
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._cls = ThreadedMotoServer
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.host, self.port = self.server.get_host_and_port()
        self.endpoint = f"http://{self.host}:{self.port}"
        self.bucket = bucket
        urllib.request.urlopen(urllib.request.Request(f"{self.endpoint}/{bucket}", method="PUT"),
                               timeout=10).close()

    def env(self) -> dict[str, str]:
        return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint}

    def stop(self) -> None:
        self.server.stop()

    def start_again(self) -> None:
        """A new server on the same port (moto's objects are kept in-process)."""
        self.server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory) -> Iterator[S3Server]:
    """The server, with the ``AWS_*`` variables pointing at it and the default chunk cache
    (``GRAPHPIPE_CACHE_DIR``) in a temporary directory, for the module's tests."""
    server = S3Server()
    env = {**server.env(), "GRAPHPIPE_CACHE_DIR": str(tmp_path_factory.mktemp("s3-cache"))}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield server
    finally:
        server.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def assert_cache_whole(cache: Path) -> None:
    """Every file of every store under ``cache`` is the verified object the manifest names
    (size and checksum), and no temporary file is left."""
    for root in {p.parent for p in cache.rglob(MANIFEST_FILE)}:
        objects = GraphStore.open(root).manifest[OBJECTS]
        for path in root.rglob("*"):
            if path.is_file() and ".locks" not in path.parts and path.name != MANIFEST_FILE:
                assert not path.name.startswith("."), path          # no .part file left
                entry = objects[path.relative_to(root).as_posix()]
                check_object_file(str(path), path, entry)
                assert is_stamped(path.stat(), entry)
