"""The service facing hostile network clients: malformed and oversize requests are
refused before any work with INVALID_ARGUMENT and no traceback, the server stays up,
arenas belong to the connection that attached them, stale arena files are removed on
start, TLS round trips, a non-loopback bind without a token warns, hundreds of idle or
stalled connections do not starve an active client, and a store replaced under the
server is served whole. Real ``graphpipe serve`` subprocesses on loopback (the
fault-injection and replaced-store tests run the server in-process), every wait bounded."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest
from graphpipe.cli.serve import exposure_warning, is_loopback_host

from graphpipe.ops.sampling import sample_neighbors
from graphpipe.service import Client
from graphpipe.service.limits import GraphShape, effective_fanouts, sample_bytes_bound
from graphpipe.service.server import SamplingServer
from graphpipe.store import GraphStore, StoreWriter

NUM_NODES = 3000
HUB_DEGREE = 300
START_TIMEOUT_S = 120
MAX_SEEDS = 4000
ARENA_MIB = 16
MIB = 1 << 20


# -- store and server ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory) -> GraphStore:
    """A random graph with one hub of in-degree 300, features (dim 8) and labels."""
    rng = np.random.default_rng(3)
    degrees = rng.poisson(5, NUM_NODES)
    degrees[5] = HUB_DEGREE
    indptr = np.zeros(NUM_NODES + 1, np.int64)
    np.cumsum(degrees, out=indptr[1:])
    indices = rng.integers(0, NUM_NODES, int(indptr[-1])).astype(np.int32)
    dest = tmp_path_factory.mktemp("hostile") / "store"
    with StoreWriter(dest) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("node/feat", rng.standard_normal((NUM_NODES, 8)).astype(np.float32))
        w.write_array("node/label", rng.integers(0, 4, NUM_NODES).astype(np.int64))
        w.manifest["num_nodes"], w.manifest["num_edges"] = NUM_NODES, int(indptr[-1])
        w.manifest["node_features"] = {"dim": 8, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [NUM_NODES], "dtype": "int64", "task_type": "multiclass",
                                "num_classes": 4}
        w.commit()
    return GraphStore.open(dest)


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()

    def peak_rss(self) -> int:
        """The server process's peak resident set so far (VmHWM), bytes."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM in /proc/PID/status")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise


def start_server(store: GraphStore, log_path: Path, *extra: str) -> Server:
    """``graphpipe serve STORE --port 0 ...`` in a subprocess; waits for its address line."""
    cmd = [sys.executable, "-m", "graphpipe.cli.serve", str(store.path), "--port", "0",
           "--threads", "2", "--max-seeds", str(MAX_SEEDS), *extra]
    with open(log_path, "w") as log_file:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=START_TIMEOUT_S)
    except queue.Empty:
        proc.kill()
        raise RuntimeError(f"server did not start: {log_path.read_text()[-2000:]}") from None
    if not line.startswith("serving "):
        proc.kill()
        proc.wait(timeout=10)
        raise RuntimeError(f"unexpected server output {line!r}: {log_path.read_text()[-2000:]}")
    url = line.split(" on ", 1)[1].strip()
    assert url.split("://", 1)[1].startswith("127.0.0.1:")
    return Server(proc, url, log_path)


@pytest.fixture(scope="module")
def server(store, tmp_path_factory) -> Iterator[Server]:
    srv = start_server(store, tmp_path_factory.mktemp("log") / "server.log",
                       "--max-request-bytes", str(64 * MIB))
    yield srv
    assert srv.stop() == 0


def _seed_batch(seed_lists: list[list[int]], keys: list[int] | None = None) -> pa.RecordBatch:
    keys = keys if keys is not None else [0] * len(seed_lists)
    return pa.record_batch([pa.array(seed_lists, pa.list_(pa.int64())), pa.array(keys, pa.int64())],
                           names=["seeds", "key"])


def _exchange(url: str, command: bytes, batch: pa.RecordBatch | None = None,
              metadata: bytes | None = None) -> list[fl.FlightStreamChunk]:
    """One raw DoExchange call on its own connection: every response chunk."""
    flight = fl.FlightClient(url)
    try:
        writer, reader = flight.do_exchange(fl.FlightDescriptor.for_command(command))
        try:
            batch = batch if batch is not None else _seed_batch([[1, 2]])
            writer.begin(batch.schema)
            if metadata is None:
                writer.write_batch(batch)
            else:
                writer.write_with_metadata(batch, pa.py_buffer(metadata))
            writer.done_writing()
            chunks = []
            while True:
                try:
                    chunks.append(reader.read_chunk())
                except StopIteration:
                    return chunks
        finally:
            with contextlib.suppress(pa.ArrowException):
                writer.close()
    finally:
        flight.close()


def _action(url: str, name: str, body: bytes) -> list:
    flight = fl.FlightClient(url)
    try:
        return list(flight.do_action(fl.Action(name, body)))
    finally:
        flight.close()


def _assert_clean_refusal(info: pytest.ExceptionInfo, store: GraphStore) -> None:
    """INVALID_ARGUMENT (pyarrow's client raises ArrowInvalid for that status alone), and
    nothing of the server's insides in the reply."""
    text = str(info.value)
    assert isinstance(info.value, pa.ArrowInvalid) and not isinstance(info.value, fl.FlightError), text
    assert len(text) < 4000
    for leak in ("Traceback", 'File "', "graphpipe/service", str(store.path), ".py"):
        assert leak not in text, text


def _assert_serving(server: Server, store: GraphStore) -> None:
    """The server is alive and answers the next good request correctly."""
    assert server.proc.poll() is None
    with Client(server.url, shared_memory=False) as c:
        got = c.sample(np.array([4, 9, 2]), [3, 2], seed=11).output
    want = sample_neighbors(store.indptr, store.indices, np.array([4, 9, 2]), [3, 2], seed=11)
    np.testing.assert_array_equal(got.n_id, want.n_id)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


SAMPLE = {"op": "sample", "fanouts": [2, 2]}
BAD_COMMANDS = [
    ("fanout 10**30", json.dumps({"op": "sample", "fanouts": [10**30]}), "at most 2147483647"),
    ("fanout 2**31", json.dumps({"op": "sample", "fanouts": [3, 1 << 31]}), "at most 2147483647"),
    ("negative fanout", json.dumps({"op": "sample", "fanouts": [-7]}), ">= -1"),
    ("float fanout", json.dumps({"op": "sample", "fanouts": [2.0]}), ">= -1"),
    ("bool fanout", json.dumps({"op": "sample", "fanouts": [True]}), ">= -1"),
    ("string fanout", json.dumps({"op": "sample", "fanouts": ["5"]}), ">= -1"),
    ("17 hops", json.dumps({"op": "sample", "fanouts": [1] * 17}), "at most 16 hops"),
    ("fanouts nested 5000 deep", '{"op":"sample","fanouts":' + _nested(5000) + "}", "nests deeper"),
    ("fanouts nested 5 deep", '{"op":"sample","fanouts":' + _nested(5) + "}", "nests deeper"),
    ("command nested 100000 deep", _nested(100_000), "nests deeper|is \\d+ bytes"),
    ("command of 1 MiB", json.dumps({**SAMPLE, "pad": "x" * MIB}), "is \\d+ bytes; the limit is 65536"),
    ("huge integer text", '{"op":"sample","fanouts":[' + "9" * 5000 + "]}", "must be UTF-8 JSON"),
    ("not UTF-8", b'{"op":"sample","fanouts":[2],"x":"\xff"}', "UTF-8 JSON"),
    ("not an object", json.dumps([SAMPLE]), "JSON object with a string 'op'"),
]


@pytest.mark.parametrize(("command", "message"), [c[1:] for c in BAD_COMMANDS],
                         ids=[c[0] for c in BAD_COMMANDS])
def test_bad_commands_are_invalid_arguments(server, store, command, message):
    raw = command if isinstance(command, bytes) else command.encode()
    with pytest.raises(pa.ArrowInvalid, match=message) as info:
        _exchange(server.url, raw)
    _assert_clean_refusal(info, store)
    _assert_serving(server, store)


BAD_ACTIONS = [
    ("attach_arena", _nested(50_000).encode(), "nests deeper|is \\d+ bytes"),
    ("attach_arena", json.dumps({"bytes": [[[[[1]]]]]}).encode(), "nests deeper"),
    ("attach_arena", json.dumps({"bytes": MIB, "pad": "y" * (100 << 10)}).encode(), "the limit is 65536"),
    ("attach_arena", json.dumps({"bytes": 10**30}).encode(), "would exceed this server's limit"),
    ("detach_arena", b'{"arena": ' + _nested(3000).encode() + b"}", "nests deeper"),
    ("detach_arena", b"\xff\xfe", "must be a JSON object"),
    ("x" * 5000, b"", "'action' must be one of"),
]


@pytest.mark.parametrize(("action", "body", "message"), BAD_ACTIONS,
                         ids=["nested", "nested value", "huge body", "huge bytes", "nested detach",
                              "not utf-8", "long unknown action"])
def test_bad_action_bodies_are_invalid_arguments(server, store, action, body, message):
    with pytest.raises(pa.ArrowInvalid, match=message) as info:
        _action(server.url, action, body)
    _assert_clean_refusal(info, store)
    _assert_serving(server, store)


def test_bad_request_metadata_and_rows_are_invalid_arguments(server, store):
    command = json.dumps(SAMPLE).encode()
    cases = [(_seed_batch([[1]]), b'{"free": ' + _nested(10_000).encode() + b"}", "nests deeper"),
             (_seed_batch([[1]]), b'{"free": [' + b"1," * (3 * MIB) + b"1]}", "the limit is 4194304"),
             (_seed_batch([[]] * (MAX_SEEDS + 1)), None, f"{MAX_SEEDS + 1} seed batches.*--max-seeds"),
             (_seed_batch([[1]], keys=[-1]), None, "'key' must be >= 0")]
    for batch, metadata, message in cases:
        with pytest.raises(pa.ArrowInvalid, match=message) as info:
            _exchange(server.url, command, batch, metadata)
        _assert_clean_refusal(info, store)
    _assert_serving(server, store)


def test_methods_the_service_does_not_implement_answer_without_tracebacks(server, store):
    flight = fl.FlightClient(server.url)
    calls = [lambda: flight.do_get(fl.Ticket(b"../../etc/passwd")).read_all(),
             lambda: list(flight.list_flights()),
             lambda: flight.get_flight_info(fl.FlightDescriptor.for_path("x"))]
    try:
        for call in calls:
            with pytest.raises(pa.ArrowNotImplementedError) as info:
                call()
            assert "Traceback" not in str(info.value) and ".py" not in str(info.value)
    finally:
        flight.close()
    _assert_serving(server, store)


# -- the request bound --------------------------------------------------------------------------
def test_oversize_requests_are_refused_before_allocating(server, store):
    """Each of these would make the server allocate gigabytes; refused with the bound and
    the limit, the server's peak RSS does not move."""
    with Client(server.url, shared_memory=False) as c:
        c.sample(np.arange(100), [5, 5], seed=1)  # warm: the peak of ordinary work
        peak = server.peak_rss()
        cases = [([10**6, 10**6], True, np.arange(1000)),  # 1e9 edges, then 1e15
                 ([2_000_000_000], True, np.arange(2)),  # one hop, 4e9 edges
                 ([2000], True, np.arange(NUM_NODES)),  # 6e6 edges
                 ([100] * 16, True, np.array([5]))]
        for fanouts, replace, seeds in cases:
            with pytest.raises(ValueError, match=r"could take up to \d+ bytes.*--max-request-bytes 67108864"):
                c.sample(seeds, fanouts, replace=replace)
        with pytest.raises(ValueError, match="--max-request-bytes"):  # many rows add up
            c.sample_batches([np.arange(i, i + 1000) for i in range(0, 2000, 1000)] * 2, [0, 1, 2, 3],
                             [400, 400], replace=True)  # each row alone fits
    assert server.peak_rss() - peak < 32 * MIB
    assert "error:" in server.log() and "Traceback" not in server.log()
    _assert_serving(server, store)


def test_a_fanout_above_every_degree_takes_all_neighbours(server, store):
    """Without replacement a fanout of 10**9 is exactly -1 (and allocates nothing by its size)."""
    seeds = np.array([5, 17, 2999, 0])
    want = sample_neighbors(store.indptr, store.indices, seeds, [-1, 3], seed=4)
    also = sample_neighbors(store.indptr, store.indices, seeds, [HUB_DEGREE + 3, 3], seed=4)
    np.testing.assert_array_equal(want.n_id, also.n_id)
    with Client(server.url, shared_memory=False) as c:
        peak = server.peak_rss()
        got = c.sample(seeds, [10**9, 3], seed=4).output
        assert server.peak_rss() - peak < 32 * MIB
    np.testing.assert_array_equal(got.n_id, want.n_id)
    for g, w in zip(got.blocks, want.blocks):
        np.testing.assert_array_equal(g.indices, w.indices)
        np.testing.assert_array_equal(g.edge_ids, w.edge_ids)


def test_the_bound_is_an_upper_bound(store):
    """sample_bytes_bound >= what sampling returns, over fanouts with and without replacement."""
    shape = GraphShape(np.asarray(store.indptr), chunk=1000)
    degrees = np.diff(np.asarray(store.indptr))
    assert shape.max_degree == int(degrees.max()) == HUB_DEGREE
    rng = np.random.default_rng(0)
    for fanouts, replace in (([4, 3], False), ([-1, 2], False), ([10, 10, 10], True), ([400, 1], False)):
        for size in (1, 50, 600):
            seeds = rng.choice(NUM_NODES, size, replace=False)
            kernel = effective_fanouts(fanouts, replace, shape.max_degree)
            out = sample_neighbors(store.indptr, store.indices, seeds, kernel, replace=replace, seed=1)
            returned = out.n_id.nbytes + sum(b.indptr.nbytes + b.indices.nbytes + b.edge_ids.nbytes
                                             for b in out.blocks)
            assert sample_bytes_bound(shape, seeds, kernel, replace) >= returned, (fanouts, size)
            assert sample_bytes_bound(shape, seeds, kernel, replace, row_bytes=32) >= \
                returned + 32 * len(out.n_id)


# -- errors and request IDs ---------------------------------------------------------------------
def test_internal_error_reply_names_only_a_request_id(store, caplog):
    """An unexpected error (fault injected into the store's feature reads) answers INTERNAL
    with the request ID; the traceback, with the same ID, is in the server's log only."""
    server = SamplingServer(GraphStore.open(store.path), "grpc://127.0.0.1:0", threads=1, shared_memory_bytes=0)
    secret = "/very/secret/disk/path"

    def failing_features(ids):
        raise OSError(f"I/O error reading {secret}")

    server.store.features = failing_features
    try:
        with caplog.at_level(logging.INFO, logger="graphpipe.service"), \
                Client(f"grpc://127.0.0.1:{server.port}", shared_memory=False) as c:
            with pytest.raises(RuntimeError, match=r"^internal error, request id [0-9a-f]{12}") as info:
                c.features(np.array([1, 2]))
            assert secret not in str(info.value) and "Traceback" not in str(info.value)
            request_id = str(info.value).split("request id ", 1)[1][:12]
            assert c.health()["status"] == "ready"
    finally:
        server.close()
    logged = [r for r in caplog.records if request_id in r.getMessage() and "internal error" in r.getMessage()]
    assert len(logged) == 1
    assert "Traceback" in logged[0].getMessage() and secret in logged[0].getMessage()


def test_log_lines_carry_request_ids(server, store):
    with pytest.raises(pa.ArrowInvalid):
        _exchange(server.url, json.dumps({"op": "sample", "fanouts": [-9]}).encode())
    with Client(server.url, shared_memory=False) as c:
        c.sample(np.array([3]), [2])
    lines = [ln for ln in server.log().splitlines() if " request " in ln]
    assert any("sample size=1 " in ln for ln in lines)
    assert any("error: 'fanouts' entries must be integers >= -1" in ln for ln in lines)


# -- arenas -------------------------------------------------------------------------------------
def test_another_connection_cannot_use_or_free_an_arena(server, store):
    with Client(server.url, shared_memory=True, arena_mib=ARENA_MIB) as owner:
        arena = owner.arena()
        held = owner.sample(np.arange(40), [3, 3], seed=2)  # its segment stays in use while held
        in_use = owner.health()["arena_bytes_in_use"]
        assert in_use > 0
        command = json.dumps({**SAMPLE, "arena": arena.id}).encode()
        for offset in range(0, 4 * 1024 * 1024, 64 * 1024):  # frees of every plausible segment
            chunks = _exchange(server.url, command, metadata=json.dumps({"free": [offset + 64]}).encode())
            assert len(chunks) == 1 and chunks[0].data is not None  # over Flight: no arena for it
            if offset > 256 * 1024:
                break
        assert owner.health()["arena_bytes_in_use"] == in_use
        assert json.loads(_action(server.url, "detach_arena",
                                  json.dumps({"arena": arena.id}).encode())[0].body.to_pybytes()) \
            == {"detached": False}
        got = owner.sample(np.arange(40), [3, 3], seed=2)  # still the owner's arena
        np.testing.assert_array_equal(got.output.n_id, held.output.n_id)
        assert owner.health()["arenas"] >= 1
        del held, got


def test_a_claimed_pid_is_ignored(server, store):
    """An arena attached with someone else's pid is the caller's connection's all the same."""
    flight = fl.FlightClient(server.url)
    try:
        body = json.dumps({"bytes": MIB, "pid": os.getppid()}).encode()
        reply = json.loads(next(iter(flight.do_action(fl.Action("attach_arena", body)))).body.to_pybytes())
        assert "for ipv4:127.0.0.1:" in server.log() or "for ipv6:" in server.log()
        detach = fl.Action("detach_arena", json.dumps({"arena": reply["arena"]}).encode())
        assert json.loads(next(iter(flight.do_action(detach))).body.to_pybytes()) == {"detached": True}
    finally:
        flight.close()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(reply["path"])


def test_stale_arena_files_are_removed_on_start(store, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    stale = Path(f"/dev/shm/graphpipe-arena-{proc.pid}-{secrets.token_hex(8)}")
    stale.write_bytes(b"\0" * 4096)
    srv = start_server(store, tmp_path / "server.log")
    try:
        assert not stale.exists()
        deadline = time.monotonic() + 10  # stderr may land after the address line on stdout
        while "stale shared-memory arena file(s)" not in srv.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stale shared-memory arena file(s) of dead servers" in srv.log()
    finally:
        assert srv.stop() == 0
        with contextlib.suppress(FileNotFoundError):
            stale.unlink()


# -- TLS and exposure ---------------------------------------------------------------------------
def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


def test_tls_round_trip(store, tmp_path):
    cert, key = _self_signed(tmp_path)
    token_file = tmp_path / "token"
    token_file.write_text("tls-token\n")
    srv = start_server(store, tmp_path / "server.log", "--tls-cert", str(cert), "--tls-key", str(key),
                       "--token-file", str(token_file))
    try:
        assert srv.url.startswith("grpc+tls://127.0.0.1:")
        want = sample_neighbors(store.indptr, store.indices, np.arange(20), [3, 2], seed=5)
        for root in (cert.read_bytes(), str(cert)):
            with Client(srv.url, token="tls-token", tls_root_certs=root) as c:
                got = c.sample(np.arange(20), [3, 2], seed=5, features=True)
                np.testing.assert_array_equal(got.output.n_id, want.n_id)
                np.testing.assert_array_equal(got.x, store.features(want.n_id))
        with Client(srv.url, token="tls-token", timeout=10) as c, \
                pytest.raises((ConnectionError, RuntimeError, OSError)):  # the system roots do not trust it
            c.health()
        plain = "grpc://" + srv.url.split("://", 1)[1]
        with Client(plain, token="tls-token", timeout=10, shared_memory=False) as c, \
                pytest.raises((ConnectionError, RuntimeError, OSError)):
            c.health()
        with Client(srv.url, tls_root_certs=cert.read_bytes()) as c, pytest.raises(PermissionError):
            c.health()
        assert srv.proc.poll() is None
    finally:
        assert srv.stop() == 0
    with pytest.raises(ValueError, match="needs a grpc\\+tls:// url"):
        Client("grpc://127.0.0.1:1", tls_root_certs=b"x")


_SERVE_CASES = """
import json, sys
from click.testing import CliRunner
from graphpipe.cli.serve import command
results = [CliRunner().invoke(command, args) for args in json.loads(sys.argv[1])]
print(json.dumps([[r.exit_code, r.output] for r in results]))
"""


def test_tls_flags_are_checked(store, tmp_path):
    """Each refused before binding; the four cases in one child process (one interpreter
    start instead of four: a case that did not refuse would serve, and time out)."""
    cert, key = _self_signed(tmp_path)
    cases = ((["--tls-cert", str(cert)], "--tls-cert and --tls-key go together"),
             (["--tls-key", str(key)], "--tls-cert and --tls-key go together"),
             (["--tls-cert", str(key), "--tls-key", str(key)], "is not a PEM certificate"),
             (["--tls-cert", str(cert), "--tls-key", str(cert)], "is not a PEM private key"))
    argv = [[str(store.path), "--port", "0", *args] for args, _ in cases]
    proc = subprocess.run([sys.executable, "-c", _SERVE_CASES, json.dumps(argv)], check=False,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for (code, output), (_, message) in zip(json.loads(proc.stdout.strip().splitlines()[-1]), cases):
        assert code != 0 and message in output, output
        assert "Traceback" not in output


@pytest.mark.parametrize(("host", "token", "tls", "warns"), [
    ("127.0.0.1", False, False, None), ("localhost", False, False, None), ("::1", False, False, None),
    ("127.8.9.10", False, False, None),
    ("0.0.0.0", False, False, "no --token-file"), ("::", False, False, "no --token-file"),
    ("10.1.2.3", False, True, "no --token-file"), ("trainer.example.org", False, False, "no --token-file"),
    ("0.0.0.0", True, False, "no TLS"), ("0.0.0.0", True, True, None)])
def test_exposure_warning(host, token, tls, warns):
    warning = exposure_warning(host, has_token=token, tls=tls)
    assert is_loopback_host(host) == host.startswith(("127.", "localhost", "::1"))
    if warns is None:
        assert warning is None
    else:
        assert warns in warning and host in warning


def test_non_loopback_bind_without_token_warns(store):
    """The CLI warns before binding. 192.0.2.1 (TEST-NET-1) is no address of this host, so
    the bind fails and nothing is ever exposed."""
    proc = subprocess.run([sys.executable, "-m", "graphpipe.cli.serve", str(store.path), "--host", "192.0.2.1",
                           "--port", "0"], check=False, capture_output=True, text=True, timeout=120)
    assert "warning: --host 192.0.2.1 is not loopback and there is no --token-file" in proc.stderr
    assert proc.returncode != 0 and "serving" not in proc.stdout


# -- many idle and slow connections --------------------------------------------------------------
IDLE_CONNECTIONS = 300
SLOW_CALLS = 64
ANSWER_BOUND_S = 30


def test_idle_and_slow_connections_do_not_starve_an_active_client(server, store):
    """300 TCP connections that never speak, 64 half-sent HTTP/2 prefaces and 64 calls that
    began a request and never send its batch: an active client's sample still answers
    within the bound, and the server's memory grows by a bounded amount per connection."""
    host, port = server.url.split("://", 1)[1].rsplit(":", 1)
    _assert_serving(server, store)  # warm: the peak of ordinary work
    before = server.peak_rss()
    sockets, slow = [], []
    try:
        for i in range(IDLE_CONNECTIONS):
            sock = socket.create_connection((host, int(port)), timeout=10)
            if i < SLOW_CALLS:
                sock.sendall(b"PRI * HTTP/2.0\r\n")  # a preface never finished
            sockets.append(sock)
        command = fl.FlightDescriptor.for_command(json.dumps(SAMPLE).encode())
        for _ in range(SLOW_CALLS):
            flight = fl.FlightClient(server.url)
            writer, reader = flight.do_exchange(command)
            writer.begin(_seed_batch([[1]]).schema)  # the request batch never follows
            slow.append((flight, writer, reader))
        t0 = time.monotonic()
        with Client(server.url, shared_memory=False, timeout=ANSWER_BOUND_S) as c:
            got = c.sample(np.array([4, 9, 2]), [3, 2], seed=11).output
        assert time.monotonic() - t0 < ANSWER_BOUND_S
        want = sample_neighbors(store.indptr, store.indices, np.array([4, 9, 2]), [3, 2], seed=11)
        np.testing.assert_array_equal(got.n_id, want.n_id)
        per_connection = (server.peak_rss() - before) / (IDLE_CONNECTIONS + SLOW_CALLS)
        assert per_connection < 256 << 10, per_connection
    finally:
        for flight, writer, _reader in slow:
            with contextlib.suppress(pa.ArrowException):
                writer.close()
            flight.close()
        for sock in sockets:
            sock.close()
    _assert_serving(server, store)


# -- the served store replaced ----------------------------------------------------------------------
def test_a_store_replaced_under_the_server_is_served_whole_or_refused(tmp_path):
    """``graphpipe ingest --overwrite`` of the served store: the server keeps answering from
    the store it opened (features ``[i, 0]``, never the new ``[i, 1]``; what it had not
    mapped yet would answer UNAVAILABLE in one line), the new store validates."""
    from click.testing import CliRunner
    from graphpipe.cli.main import cli

    dest, n = tmp_path / "store", 300
    for generation in (0, 1):
        x = np.stack([np.arange(n), np.full(n, generation)], axis=1).astype(np.float32)
        np.savez(tmp_path / f"gen{generation}.npz", src=(np.arange(n) + 1) % n, dst=np.arange(n), x=x)
    assert CliRunner().invoke(cli, ["ingest", str(tmp_path / "gen0.npz"), str(dest), "-q"]).exit_code == 0
    srv = SamplingServer(GraphStore.open(dest), "grpc://127.0.0.1:0", threads=1, shared_memory_bytes=0)
    try:
        with Client(f"grpc://127.0.0.1:{srv.port}", shared_memory=False, timeout=60) as c:
            ids = np.array([7, 0, 299])
            assert np.asarray(c.features(ids)).tolist() == [[7, 0], [0, 0], [299, 0]]
            result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "gen1.npz"), str(dest), "-q",
                                              "--overwrite"])
            assert result.exit_code == 0, result.output
            assert np.asarray(c.features(ids)).tolist() == [[7, 0], [0, 0], [299, 0]]
            assert c.sample(np.array([3]), [2]).output.n_id.tolist() == [3, 4]
        assert CliRunner().invoke(cli, ["validate", str(dest)]).exit_code == 0
    finally:
        srv.close()
    assert GraphStore.open(dest).features(np.array([7])).tolist() == [[7, 1]]
