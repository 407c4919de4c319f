"""The sampling / ID-map service: a real ``graphpipe serve`` subprocess on a free
loopback port, called through :class:`graphpipe.service.Client`, :class:`RemoteSampler`
and a raw Flight client (for malformed requests)."""

from __future__ import annotations

import contextlib
import gc
import json
import queue
import signal
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

from graphpipe.ingest import ingest
from graphpipe.ingest.edgelist import read_edge_list
from graphpipe.loaders import LocalSampler, NeighborLoader
from graphpipe.ops.sampling import SampleOutput, sample_neighbors
from graphpipe.service import Client, RemoteSampler, protocol
from graphpipe.service.idindex import StringIdIndex
from graphpipe.store import GraphStore, StoreWriter

NUM_NODES = 3000
DIM = 8
MAX_SEEDS = 4000
MAX_ROWS = 5000
TOKEN = "s3cret-token"
START_TIMEOUT_S = 120
ARENA_MIB = 16


# -- stores -------------------------------------------------------------------------------------
def _write_store(dest: Path, *, external_ids: pa.Array | None = None, seed: int = 0) -> GraphStore:
    rng = np.random.default_rng(seed)
    degrees = rng.poisson(6, NUM_NODES)
    degrees[::97] = 0  # some isolated destinations
    degrees[5] = 300  # one hub
    indptr = np.zeros(NUM_NODES + 1, np.int64)
    np.cumsum(degrees, out=indptr[1:])
    indices = rng.integers(0, NUM_NODES, int(indptr[-1])).astype(np.int32)
    with StoreWriter(dest) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("node/feat", rng.standard_normal((NUM_NODES, DIM)).astype(np.float32))
        w.write_array("node/label", rng.integers(0, 4, NUM_NODES).astype(np.int64))
        w.write_splits({"train": np.sort(rng.choice(NUM_NODES, 700, replace=False)).astype(np.int64)})
        if external_ids is not None:
            w.write_id_map(external_ids)
        w.manifest["num_nodes"], w.manifest["num_edges"] = NUM_NODES, int(indptr[-1])
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [NUM_NODES], "dtype": "int64", "task_type": "multiclass",
                                "num_classes": 4}
        w.commit()
    return GraphStore.open(dest)


@pytest.fixture(scope="module")
def int_store(tmp_path_factory) -> GraphStore:
    """Features, labels, a train split and a sparse int64 ID map."""
    rng = np.random.default_rng(1)
    ids = rng.choice(1 << 40, NUM_NODES, replace=False).astype(np.int64) + (1 << 41)
    return _write_store(tmp_path_factory.mktemp("svc") / "int_store", external_ids=pa.array(ids))


@pytest.fixture(scope="module")
def string_store(tmp_path_factory) -> GraphStore:
    """An edge list with string IDs, ingested (the ID map is built by ingest)."""
    folder = tmp_path_factory.mktemp("svc_str")
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 400, 2000), rng.integers(0, 400, 2000)
    lines = ["src,dst"] + [f"user_{s:04d},item-{d}" for s, d in zip(src, dst)]
    (folder / "edges.csv").write_text("\n".join(lines) + "\n")
    return ingest(read_edge_list(folder / "edges.csv"), folder / "store")


# -- server subprocess --------------------------------------------------------------------------
@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text()

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
    """``graphpipe serve STORE --port 0`` in a subprocess; waits for its address line."""
    cmd = [sys.executable, "-m", "graphpipe.cli.serve", str(store.path), "--port", "0",
           "--threads", "2", "--max-seeds", str(MAX_SEEDS), "--max-rows", str(MAX_ROWS), *extra]
    log_file = open(log_path, "w")  # noqa: SIM115 - the child holds it until it exits
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log_file, text=True)
    log_file.close()
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=START_TIMEOUT_S)
    except queue.Empty:
        proc.kill()
        raise RuntimeError(f"server did not start: {log_path.read_text()[-2000:]}") from None
    if not line.startswith("serving "):
        proc.kill()
        raise RuntimeError(f"unexpected server output {line!r}: {log_path.read_text()[-2000:]}")
    url = line.split(" on ", 1)[1].strip()
    assert url.startswith("grpc://127.0.0.1:")
    return Server(proc, url, log_path)


@pytest.fixture(scope="module")
def server(int_store, tmp_path_factory) -> Iterator[Server]:
    srv = start_server(int_store, tmp_path_factory.mktemp("log") / "server.log")
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module", params=["shared_memory", "flight"])
def client(server, request) -> Iterator[Client]:
    """A client receiving sampled batches through a shared-memory arena, or over Flight only."""
    with Client(server.url, shared_memory=request.param == "shared_memory", arena_mib=ARENA_MIB) as c:
        yield c


def assert_same_output(got: SampleOutput, want: SampleOutput) -> None:
    np.testing.assert_array_equal(got.n_id, want.n_id)
    assert got.n_id.dtype == np.int64
    assert got.batch_size == want.batch_size
    assert got.num_sampled_nodes == want.num_sampled_nodes
    assert got.num_sampled_edges == want.num_sampled_edges
    assert len(got.blocks) == len(want.blocks)
    for g, w in zip(got.blocks, want.blocks):
        assert (g.num_dst, g.num_src) == (w.num_dst, w.num_src)
        for name in ("indptr", "indices", "edge_ids"):
            np.testing.assert_array_equal(getattr(g, name), getattr(w, name), err_msg=name)
            assert getattr(g, name).dtype == np.int64


# -- sampling -----------------------------------------------------------------------------------
@pytest.mark.parametrize(("fanouts", "replace"), [([4, 3], False), ([10, -1], False), ([3, 2, 2], True)])
def test_sample_matches_local_sampler(client, int_store, fanouts, replace):
    rng = np.random.default_rng(7)
    for key in (0, 5, 2**62):
        seeds = rng.choice(NUM_NODES, 50, replace=False)
        seeds[0] = 5  # the hub
        got = client.sample(seeds, fanouts, seed=key, replace=replace)
        want = sample_neighbors(int_store.indptr, int_store.indices, seeds, fanouts,
                                replace=replace, seed=key)
        assert_same_output(got.output, want)
        assert got.x is None and got.y is None
        assert got.output.n_id.flags.writeable


def test_decoded_arrays_own_their_memory(server, int_store):
    """Arrays over the received buffers stay valid after the call and the client are gone,
    and writing into one result leaves the others alone."""
    seeds = np.array([5, 1, 2, 3], dtype=np.int64)
    want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [6, 6], seed=9)
    with Client(server.url) as c:
        first = c.sample(seeds, [6, 6], seed=9, features=True).output
        second = c.sample(seeds, [6, 6], seed=9).output
    del c
    gc.collect()
    churn = Client(server.url)
    for i in range(5):  # reuse freed memory, if any were freed
        churn.sample(np.arange(200), [10, 10], seed=i)
    churn.close()
    assert_same_output(first, want)
    first.n_id[:] = -7
    first.blocks[0].indices[:] = -7
    assert_same_output(second, want)


def test_sample_with_features_and_labels(client, int_store):
    seeds = np.array([5, 0, 2999, 17], dtype=np.int64)
    got = client.sample(seeds, [5, 5], seed=3, features=True, labels=True)
    want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [5, 5], seed=3)
    assert_same_output(got.output, want)
    np.testing.assert_array_equal(got.x, int_store.features(want.n_id))
    np.testing.assert_array_equal(got.y, np.asarray(int_store.labels)[seeds])


def test_sample_batches_keep_request_order(client, int_store):
    rng = np.random.default_rng(8)
    batches = [rng.choice(NUM_NODES, n, replace=False) for n in (1, 30, 200, 7, 64)]
    keys = [11, 12, 13, 14, 15]
    results = client.sample_batches(batches, keys, [6, 4])
    for res, seeds, key in zip(results, batches, keys):
        assert_same_output(res.output, sample_neighbors(int_store.indptr, int_store.indices, seeds,
                                                        [6, 4], seed=key))


@pytest.mark.parametrize(("shared_memory", "prefetch"), [(None, 2), (False, 2), (None, 0)])
def test_remote_loader_yields_the_local_loaders_batches(server, int_store, shared_memory, prefetch):
    """prefetch 2 streams the windows (RemoteSampler.sample_stream), 0 calls per window."""
    kwargs = {"input_nodes": "train", "shuffle": True, "seed": 21, "window": 3, "prefetch": prefetch}
    local = NeighborLoader(int_store, [5, 3], batch_size=64, **kwargs)
    # the loader hands its fanouts to the remote sampler (bind_fanouts)
    sampler = RemoteSampler(server.url, shared_memory=shared_memory, arena_mib=ARENA_MIB)
    assert (sampler.client.arena() is not None) == (shared_memory is None)  # loopback: an arena
    remote = NeighborLoader(int_store, [5, 3], batch_size=64, sampler=sampler, **kwargs)
    for _epoch in range(2):
        pairs = list(zip(local, remote, strict=True))
        assert len(pairs) == len(local) == 11
        for a, b in pairs:
            for name in ("n_id", "x", "y", "edge_index", "e_id"):
                assert getattr(a, name).equal(getattr(b, name)), name
            for ba, bb in zip(a.blocks, b.blocks, strict=True):
                assert ba.indptr.equal(bb.indptr) and ba.indices.equal(bb.indices)
                assert ba.edge_ids.equal(bb.edge_ids)


def test_remote_loader_stopped_early_returns_its_segments(server, int_store):
    sampler = RemoteSampler(server.url, shared_memory=True, arena_mib=ARENA_MIB)
    c = sampler.client

    base = _settled_in_use(c, np.arange(5))  # the server is shared: earlier tests' frees land
    loader = NeighborLoader(int_store, [5, 3], batch_size=32, input_nodes="train", window=2, sampler=sampler, seed=3, shuffle=True)
    for _ in range(2):
        for i, batch in enumerate(loader):  # windows in flight when the loop stops
            if i == 3:
                break
        del batch
    deadline = time.monotonic() + 10
    while _in_use_after_a_probe(c, np.arange(5)) > base and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _in_use_after_a_probe(c, np.arange(5)) <= base  # every segment of the loader returned
    local = NeighborLoader(int_store, [5, 3], batch_size=32, input_nodes="train", window=2, seed=3, shuffle=True)
    for each in (loader, local):
        each.set_epoch(7)
    assert next(iter(loader)).n_id.equal(next(iter(local)).n_id)
    c.close()


def test_remote_sampler_needs_fanouts(server):
    sampler = RemoteSampler(server.url)
    with pytest.raises(ValueError, match="'fanouts'"):
        sampler.sample_from_nodes([np.array([1, 2])], [0])
    sampler.bind_fanouts([2, 2])
    assert len(sampler.sample_from_nodes([np.array([1, 2])], [0])[0].blocks) == 2
    with pytest.raises(ValueError, match="differ"):
        sampler.bind_fanouts([3])


# -- pipelined streams --------------------------------------------------------------------------
def _windows(sizes: list[int], seed: int) -> list[tuple[list[np.ndarray], list[int]]]:
    rng = np.random.default_rng(seed)
    out, key = [], 100
    for size in sizes:
        batches = [rng.choice(NUM_NODES, int(rng.integers(1, 120)), replace=False) for _ in range(size)]
        out.append((batches, list(range(key, key + size))))
        key += size
    return out


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_sample_stream_yields_what_sample_batches_returns(client, int_store, depth):
    windows = _windows([3, 1, 0, 4, 2, 1, 5], seed=depth)
    stream = client.sample_stream(iter(windows), [5, 3], depth=depth, features=True)
    got = list(stream)
    assert len(got) == len(windows)
    for results, (batches, keys) in zip(got, windows):
        assert len(results) == len(batches)
        for res, seeds, key in zip(results, batches, keys):
            want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [5, 3], seed=key)
            assert_same_output(res.output, want)
            assert res.output.n_id.flags.writeable
            np.testing.assert_array_equal(res.x, int_store.features(want.n_id))
    assert client.health()["status"] == "ready"


def test_remote_sampler_stream_yields_the_local_samplers_windows(server, int_store):
    windows = _windows([4, 4, 4, 2], seed=11)
    local = LocalSampler(int_store.indptr, int_store.indices, [4, 4], num_threads=2)
    sampler = RemoteSampler(server.url, fanouts=[4, 4])
    got = list(sampler.sample_stream(windows, depth=2))
    assert len(got) == len(windows)
    for outputs, (batches, keys) in zip(got, windows):
        for a, b in zip(outputs, local.sample_from_nodes(batches, keys), strict=True):
            assert_same_output(a, b)
    # the stream and the one-call path agree
    for a, b in zip(got[0], sampler.sample_from_nodes(*windows[0]), strict=True):
        assert_same_output(a, b)


def test_sample_stream_closed_early_and_errors(server, client, int_store):
    windows = _windows([2] * 20, seed=5)
    stream = client.sample_stream(windows, [3, 3], depth=3)
    first = next(stream)
    stream.close()  # windows still in flight are cancelled
    want = sample_neighbors(int_store.indptr, int_store.indices, windows[0][0][0], [3, 3], seed=windows[0][1][0])
    assert_same_output(first[0].output, want)
    bad = [*windows[:2], ([np.array([1, NUM_NODES])], [0]), *windows[2:4]]
    answered = 0
    with pytest.raises(ValueError, match=r"must be dense node IDs in \[0, 3000\) \(got 3000\)"):
        for _results in client.sample_stream(bad, [3, 3], depth=2):
            answered += 1
    assert answered == 2
    with pytest.raises(ValueError, match="'depth' must be a positive integer"):
        next(client.sample_stream(windows, [3, 3], depth=0))
    with pytest.raises(ValueError, match="one key per batch"):
        list(client.sample_stream([([np.array([1])], [0, 1])], [3, 3]))
    assert client.health()["status"] == "ready"
    assert len(client.sample_batches(*windows[0], [3, 3])) == 2


def test_decode_sample_rows_of_a_multi_row_batch(int_store):
    """Another writer may send several rows per response batch (and slices of them)."""
    seeds = [np.array([5, 1, 2]), np.array([7]), np.array([9, 10, 11, 12])]
    wants = [sample_neighbors(int_store.indptr, int_store.indices, s, [4, 2], seed=i) for i, s in enumerate(seeds)]
    schema = protocol.sample_response_schema(2)
    table = pa.Table.from_batches([protocol.encode_sample_output(w, schema) for w in wants])
    batch = table.combine_chunks().to_batches()[0]
    assert batch.num_rows == 3
    for (got, x, y), want in zip(protocol.decode_sample_rows(batch), wants, strict=True):
        assert_same_output(got, want)
        assert x is None and y is None
    got, _, _ = protocol.decode_sample_row(batch, 2, copy=True)
    assert_same_output(got, wants[2])


# -- response cap -------------------------------------------------------------------------------
def test_response_cap_refuses_with_the_limit(int_store, tmp_path):
    srv = start_server(int_store, tmp_path / "server.log", "--max-response-bytes", "20000")
    try:
        with Client(srv.url) as c:
            assert c.info()["server"]["max_response_bytes"] == 20000
            small = c.sample(np.array([1, 2]), [2])  # a few hundred bytes
            assert small.output.batch_size == 2
            with pytest.raises(ValueError, match=r"sample response of batch 1 .* would be \d+ bytes; this "
                                                 r"server's limit is --max-response-bytes 20000 per response batch"):
                c.sample_batches([np.array([1]), np.arange(500)], [0, 1], [10, 10])
            with pytest.raises(ValueError, match="--max-response-bytes 20000"):
                c.features(np.arange(1000))  # 1000 rows x 8 float32
            assert c.features(np.arange(10)).shape == (10, DIM)
            assert c.health()["status"] == "ready"
        with Client(srv.url, shared_memory=True, arena_mib=ARENA_MIB) as c:
            # the rows written into the arena before and after the failing one come back

            probe_only = _in_use_after_a_probe(c, np.array([1, 2]))
            window = [np.array([i]) for i in range(1, 4)] + [np.arange(500)] + [np.array([i]) for i in range(4, 8)]
            for _ in range(3):
                with pytest.raises(ValueError, match=r"sample response of batch 3 "):
                    c.sample_batches(window, list(range(8)), [10, 10])
            assert c.health()["arena_bytes_in_use"] > probe_only
            deadline = time.monotonic() + 10  # the jobs after the failing row may still run
            while _in_use_after_a_probe(c, np.array([1, 2])) != probe_only and time.monotonic() < deadline:
                time.sleep(0.05)
            assert _in_use_after_a_probe(c, np.array([1, 2])) == probe_only
    finally:
        assert srv.stop() == 0


# -- ID map, features, info ---------------------------------------------------------------------
def test_lookup_round_trip_int_ids(client, int_store):
    external = int_store.id_map.external_ids.to_numpy()
    dense = np.random.default_rng(3).permutation(NUM_NODES)[:500]
    np.testing.assert_array_equal(client.lookup(external[dense]), dense)
    assert client.reverse_lookup(dense) == external[dense].tolist()
    unknown = [int(external.max()) + 1, 7]
    with pytest.raises(KeyError, match=rf"2 unknown external ID\(s\), first: \[{unknown[0]}, 7\]"):
        client.lookup(np.array([external[0], *unknown]))
    loose = client.lookup(np.array([external[4], unknown[0], external[9]]), strict=False)
    np.testing.assert_array_equal(loose.node_id, [4, -1, 9])
    assert (loose.num_unknown, loose.first_unknown) == (1, [unknown[0]])
    with pytest.raises(ValueError, match="schema must be {external_id: int64}"):
        client.lookup(["a", "b"])


def test_lookup_round_trip_string_ids(string_store, tmp_path):
    srv = start_server(string_store, tmp_path / "server.log")
    try:
        with Client(srv.url) as c:
            external = string_store.id_map.external_ids.to_pylist()
            assert all(isinstance(v, str) for v in external)
            assert c.info()["server"]["id_map_type"] == "string"
            dense = c.lookup(external)
            np.testing.assert_array_equal(dense, np.arange(len(external)))
            assert c.reverse_lookup(dense[::-1]) == external[::-1]
            with pytest.raises(KeyError, match=r"first: \['nobody', 'user_x'\]"):
                c.lookup(["user_0001", "nobody", "user_x"])
            loose = c.lookup(["nobody", external[3]], strict=False)
            np.testing.assert_array_equal(loose.node_id, [-1, 3])
            assert loose.first_unknown == ["nobody"]
            with pytest.raises(ValueError, match="must be dense node IDs"):
                c.reverse_lookup([len(external)])
    finally:
        assert srv.stop() == 0


@pytest.mark.parametrize("max_bytes", [1 << 20, 0])  # 0: no sorted copy, index_in per call
def test_string_id_index_matches_index_in(max_bytes):
    external = pa.array(["b", "a", "dup", "ünï-cödé", "dup", "", "longer-id-12345"])
    index = StringIdIndex(external, max_bytes=max_bytes)
    assert index.indexed == bool(max_bytes)
    query = pa.array(["dup", "a", "nope", "ünï-cödé", "", "longer-id-12345-and-more", "b", "a\0"])
    np.testing.assert_array_equal(index.to_dense(query), [2, 1, -1, 3, 5, -1, 0, -1])
    np.testing.assert_array_equal(index.to_dense(query.cast(pa.large_string())), index.to_dense(query))
    assert index.to_dense(pa.array([], pa.string())).tolist() == []
    assert not StringIdIndex(pa.array(["x\0", "y"])).indexed  # NUL-terminated IDs: index_in
    assert StringIdIndex(pa.array(["x\0", "y"])).to_dense(pa.array(["y", "x", "x\0"])).tolist() == [1, -1, 0]


def test_features(client, int_store):
    ids = np.array([3, 3, 0, 2999, 17], dtype=np.int64)
    np.testing.assert_array_equal(client.features(ids), int_store.features(ids))
    rows, labels = client.features(ids, labels=True)
    np.testing.assert_array_equal(labels, np.asarray(int_store.labels)[ids])
    assert rows.shape == (5, DIM) and rows.flags.writeable


def test_info_and_health(client, int_store):
    info = client.info()
    assert info["num_nodes"] == NUM_NODES and info["num_edges"] == int_store.num_edges
    assert info["server"]["max_seeds"] == MAX_SEEDS and info["server"]["max_rows"] == MAX_ROWS
    assert client.health()["status"] == "ready"


# -- bad requests -------------------------------------------------------------------------------
def _raw_exchange(url: str, command: bytes | str, batch: pa.RecordBatch | None,
                  descriptor: fl.FlightDescriptor | None = None) -> None:
    flight = fl.FlightClient(url)
    try:
        desc = descriptor or fl.FlightDescriptor.for_command(command)
        writer, reader = flight.do_exchange(desc)
        try:
            if batch is not None:
                writer.begin(batch.schema)
                writer.write_batch(batch)
            writer.done_writing()
            reader.read_all()
        finally:
            with contextlib.suppress(pa.ArrowException):
                writer.close()
    finally:
        flight.close()


def _seed_batch(seeds: list, key: int = 0, seed_type: pa.DataType | None = None) -> pa.RecordBatch:
    return pa.record_batch([pa.array([seeds], pa.list_(seed_type or pa.int64())), pa.array([key], pa.int64())],
                           names=["seeds", "key"])


SAMPLE = {"op": "sample", "fanouts": [2, 2]}
RAW_BAD_REQUESTS = [
    ("not json", b"{sample", _seed_batch([1]), "must be UTF-8 JSON"),
    ("unknown op", {"op": "drop_table"}, _seed_batch([1]), "'op' must be one of"),
    ("unknown parameter", {**SAMPLE, "fanout": 3}, _seed_batch([1]), "unknown \\['fanout'\\]"),
    ("fanouts not a list", {"op": "sample", "fanouts": 5}, _seed_batch([1]), "'fanouts' must be a non-empty"),
    ("empty fanouts", {"op": "sample", "fanouts": []}, _seed_batch([1]), "'fanouts' must be a non-empty"),
    ("fanout below -1", {"op": "sample", "fanouts": [2, -3]}, _seed_batch([1]), ">= -1"),
    ("fanout not an int", {"op": "sample", "fanouts": [2.5]}, _seed_batch([1]), ">= -1"),
    ("replace not a bool", {**SAMPLE, "replace": "yes"}, _seed_batch([1]), "'replace' must be true or false"),
    ("seeds as float", SAMPLE, _seed_batch([1.0], seed_type=pa.float64()), "schema must be"),
    ("seeds as int32", SAMPLE, _seed_batch([1], seed_type=pa.int32()), "schema must be"),
    ("negative seed", SAMPLE, _seed_batch([3, -1]), r"must be dense node IDs in \[0, 3000\) \(got -1\)"),
    ("seed out of range", SAMPLE, _seed_batch([3, NUM_NODES]), r"\(got 3000\)"),
    ("duplicate seeds", SAMPLE, _seed_batch([4, 9, 4]), r"must be unique \(got 4 more than once\)"),
    ("null seed", SAMPLE, _seed_batch([4, None]), "must not contain nulls"),
    ("negative key", SAMPLE, _seed_batch([4], key=-2), r"'key' must be >= 0 \(got -2\)"),
    ("too many seeds", SAMPLE, _seed_batch(list(range(MAX_SEEDS + 1))), f"--max-seeds {MAX_SEEDS}"),
    ("features: too many rows", {"op": "features"},
     pa.record_batch([pa.array(np.zeros(MAX_ROWS + 1, np.int64))], names=["node_id"]), f"--max-rows {MAX_ROWS}"),
    ("lookup: too many rows", {"op": "lookup"},
     pa.record_batch([pa.array(np.zeros(MAX_ROWS + 1, np.int64))], names=["external_id"]), "--max-rows"),
    ("features: negative id", {"op": "features"}, pa.record_batch([pa.array([-5])], names=["node_id"]),
     r"\(got -5\)"),
    ("features: wrong column", {"op": "features"}, pa.record_batch([pa.array([1])], names=["id"]),
     "schema must be {node_id: int64}"),
]


@pytest.mark.parametrize(("command", "batch", "message"), [r[1:] for r in RAW_BAD_REQUESTS],
                         ids=[r[0] for r in RAW_BAD_REQUESTS])
def test_bad_request_is_refused_and_server_survives(server, client, command, batch, message):
    raw = command if isinstance(command, bytes) else json.dumps(command).encode()
    with pytest.raises(pa.ArrowInvalid, match=message) as info:
        _raw_exchange(server.url, raw, batch)
    assert "INVALID_ARGUMENT" in str(info.value) or "Invalid" in type(info.value).__name__
    assert client.health()["status"] == "ready"
    assert server.proc.poll() is None


def test_sample_accepts_other_writers_schemas(server, int_store):
    """Non-nullable fields, large_list and another list child name (as Java writes them)."""
    seeds = pa.LargeListArray.from_arrays(pa.array([0, 3], pa.int64()), pa.array([4, 9, 2], pa.int64()))
    schema = pa.schema([pa.field("seeds", pa.large_list(pa.field("$data$", pa.int64(), nullable=False)),
                                 nullable=False), pa.field("key", pa.int64(), nullable=False)])
    batch = pa.record_batch([seeds.cast(schema.field("seeds").type), pa.array([6], pa.int64())],
                            schema=schema)
    flight = fl.FlightClient(server.url)
    try:
        writer, reader = flight.do_exchange(fl.FlightDescriptor.for_command(json.dumps(SAMPLE)))
        writer.begin(schema)
        writer.write_batch(batch)
        writer.done_writing()
        table = reader.read_all()
        writer.close()
    finally:
        flight.close()
    want = sample_neighbors(int_store.indptr, int_store.indices, np.array([4, 9, 2]), [2, 2], seed=6)
    assert table.num_rows == 1
    np.testing.assert_array_equal(table.column("n_id")[0].values.to_numpy(), want.n_id)
    np.testing.assert_array_equal(table.column("block0_indices")[0].values.to_numpy(), want.blocks[0].indices)


def test_path_descriptor_and_unknown_action_are_refused(server, client):
    with pytest.raises(pa.ArrowInvalid, match="must be a command"):
        _raw_exchange(server.url, b"", _seed_batch([1]), fl.FlightDescriptor.for_path("sample"))
    flight = fl.FlightClient(server.url)
    with pytest.raises(pa.ArrowInvalid, match="'action' must be one of"):
        list(flight.do_action(fl.Action("drop", b"")))
    flight.close()
    assert client.health()["status"] == "ready"


def test_client_errors_carry_the_server_message(client):
    with pytest.raises(ValueError, match=r"^'seeds' \(batch 0\) must be unique \(got 7 more than once\)$"):
        client.sample(np.array([7, 7]), [2])
    with pytest.raises(ValueError, match=r"^'fanouts' entries must be integers >= -1"):
        client.sample(np.array([7]), [-2])
    with pytest.raises(ValueError, match="--max-seeds 4000"):
        client.sample_batches([np.arange(3000), np.arange(3000)], [0, 1], [1])
    assert client.health()["status"] == "ready"


def test_log_has_one_line_per_call(server, client):
    client.sample(np.array([1, 2, 3]), [2])
    deadline = time.monotonic() + 10
    while "sample size=3 " not in server.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    line = next(ln for ln in server.log().splitlines() if "sample size=3 " in ln)
    assert "127.0.0.1" in line and line.rstrip().endswith(" ms")


# -- shared-memory arenas -----------------------------------------------------------------------
def _arena_files(server: Server) -> list[Path]:
    return sorted(Path("/dev/shm").glob(f"graphpipe-arena-{server.proc.pid}-*"))


def _in_use_after_a_probe(c: Client, seeds: np.ndarray) -> int:
    """The server's arena bytes in use once the frees so far reached it: the second
    probe's request returns the first probe's segment, its own stays in use."""
    for _ in range(2):
        gc.collect()
        c.sample(seeds, [2], seed=0)
    return c.health()["arena_bytes_in_use"]


def _settled_in_use(c: Client, seeds: np.ndarray, timeout: float = 10.0) -> int:
    """:func:`_in_use_after_a_probe` once it reads the same twice 0.1 s apart (segments that
    earlier clients of the shared server gave back may still be on their way)."""
    last, deadline = _in_use_after_a_probe(c, seeds), time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.1)
        now = _in_use_after_a_probe(c, seeds)
        if now == last:
            return now
        last = now
    return last


def _wait_for(condition, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_shared_memory_batches_equal_flight_batches(server, int_store):
    """Both transports return the local sampler's output, with features and labels, and
    the arena's file is gone from /dev/shm once the client mapped it."""
    rng = np.random.default_rng(31)
    batches = [rng.choice(NUM_NODES, n, replace=False) for n in (40, 1, 300)]
    with Client(server.url, shared_memory=True, arena_mib=ARENA_MIB) as shm, \
            Client(server.url, shared_memory=False) as flight:
        assert shm.arena() is not None and flight.arena() is None
        assert _arena_files(server) == []
        got = shm.sample_batches(batches, [1, 2, 3], [5, 4], features=True, labels=True)
        ref = flight.sample_batches(batches, [1, 2, 3], [5, 4], features=True, labels=True)
        for a, b, seeds, key in zip(got, ref, batches, [1, 2, 3], strict=True):
            want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [5, 4], seed=key)
            assert_same_output(a.output, want)
            assert_same_output(b.output, want)
            np.testing.assert_array_equal(a.x, int_store.features(want.n_id))
            np.testing.assert_array_equal(a.y, np.asarray(int_store.labels)[seeds])
            assert a.output.n_id.flags.writeable and a.x.flags.writeable
        assert shm.health()["arena_bytes_in_use"] > 0  # the results above still hold segments


def test_arena_segments_return_when_the_arrays_are_garbage(server, int_store):
    with Client(server.url, shared_memory=True, arena_mib=ARENA_MIB) as c:
        seeds = np.arange(200)

        probe_only = _in_use_after_a_probe(c, seeds)
        assert probe_only > 0
        kept = c.sample(seeds, [10, 10], seed=1)
        with_kept = _in_use_after_a_probe(c, seeds)
        assert with_kept > probe_only
        for i in range(50):  # far more than the arena holds, were segments never freed
            c.sample(seeds, [10, 10], seed=i, features=True)
        windows = _windows([3] * 10, seed=2)
        for results in c.sample_stream(windows, [6, 6], depth=2):
            assert len(results) == 3
        del results  # the last window's batches
        assert _in_use_after_a_probe(c, seeds) == with_kept
        stream = c.sample_stream(windows, [6, 6], depth=3)
        next(stream)
        stream.close()  # reads and drops the windows in flight
        assert _in_use_after_a_probe(c, seeds) == with_kept
        want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [10, 10], seed=1)
        assert_same_output(kept.output, want)
        del kept
        assert _in_use_after_a_probe(c, seeds) == probe_only
        arenas = c.health()["arenas"]
    assert _wait_for(lambda: Client(server.url, shared_memory=False).health()["arenas"] == arenas - 1)


def test_a_full_arena_sends_over_flight(server, int_store):
    """Batches bigger than the arena, and batches while held ones fill it, still arrive."""
    with Client(server.url, shared_memory=True, arena_mib=1) as c:
        big = np.arange(2500)
        arena = c.arena()

        def in_arena(values: np.ndarray) -> bool:
            return arena.address <= values.ctypes.data < arena.address + arena.nbytes

        got = c.sample(big, [60], seed=3, replace=True, features=True)  # ~2.4 MB: over Flight
        want = sample_neighbors(int_store.indptr, int_store.indices, big, [60], seed=3, replace=True)
        assert_same_output(got.output, want)
        np.testing.assert_array_equal(got.x, int_store.features(want.n_id))
        assert not in_arena(got.output.n_id)
        held = [c.sample(np.arange(i, i + 100), [8, 8], seed=i, features=True) for i in range(0, 2000, 100)]
        placed = [in_arena(res.output.n_id) for res in held]
        assert placed[0] and not placed[-1]  # the first fit, then the held ones fill the arena
        for i, res in zip(range(0, 2000, 100), held):
            want = sample_neighbors(int_store.indptr, int_store.indices, np.arange(i, i + 100), [8, 8], seed=i)
            assert_same_output(res.output, want)
            np.testing.assert_array_equal(res.x, int_store.features(want.n_id))


def test_arena_of_a_client_that_exited_is_dropped(server, int_store):
    """A client killed without closing leaves no file and, after the reaper's pass (its
    connection is gone), no arena."""
    code = ("import os, numpy as np; from graphpipe.service import Client; "
            f"c = Client({server.url!r}, shared_memory=True, arena_mib={ARENA_MIB}); "
            "r = c.sample(np.arange(50), [3, 3]); print(c.arena().id, flush=True); os._exit(0)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    arena_id = proc.stdout.strip()
    assert _wait_for(lambda: f"dropped shared-memory arena {arena_id}" in server.log(), timeout=60)
    line = next(ln for ln in server.log().splitlines() if f"dropped shared-memory arena {arena_id}" in ln)
    assert line.endswith("closed")  # its connection ended with it
    assert _arena_files(server) == []


def test_shared_memory_refusals(int_store, tmp_path, server):
    """A server without shared memory: a client that requires it gets the reason, one that
    does not falls back to Flight. Bad arena parameters are invalid arguments."""
    srv = start_server(int_store, tmp_path / "server.log", "--shared-memory-mib", "0")
    try:
        with pytest.raises(ConnectionError, match="--shared-memory-mib 0"):
            Client(srv.url, shared_memory=True).sample(np.arange(5), [2])
        with Client(srv.url) as c:
            assert c.arena() is None
            assert c.info()["server"]["shared_memory"]["enabled"] is False
            want = sample_neighbors(int_store.indptr, int_store.indices, np.arange(5), [2], seed=0)
            assert_same_output(c.sample(np.arange(5), [2]).output, want)
    finally:
        assert srv.stop() == 0
    flight = fl.FlightClient(server.url)
    try:
        for body, message in (({"bytes": 1 << 40, "pid": 1}, "would exceed this server's limit"),
                              ({"bytes": 1000, "pid": 1}, "'bytes' must be at least"),
                              ({"bytes": "1", "pid": 1}, "'bytes' must be a positive integer"),
                              ({"bytes": 1 << 20, "pid": "7"}, "'pid' must be a positive integer"),
                              ({"bytes": 1 << 20, "pid": 1, "path": "/etc/passwd"}, "unknown \\['path'\\]")):
            with pytest.raises(pa.ArrowInvalid, match=message):
                list(flight.do_action(fl.Action("attach_arena", json.dumps(body).encode())))
    finally:
        flight.close()
    with pytest.raises(pa.ArrowInvalid, match="'arena' must be a string"):
        _raw_exchange(server.url, json.dumps({**SAMPLE, "arena": 5}).encode(), _seed_batch([1]))
    assert server.proc.poll() is None


def _exchange_with_metadata(url: str, command: dict, metadata: bytes,
                            connection: fl.FlightClient | None = None) -> list:
    """A raw sample call on ``connection`` (an arena is only its attaching connection's),
    else on a new connection."""
    flight = connection if connection is not None else fl.FlightClient(url)
    try:
        writer, reader = flight.do_exchange(fl.FlightDescriptor.for_command(json.dumps(command)))
        batch = _seed_batch([1, 2])
        writer.begin(batch.schema)
        writer.write_with_metadata(batch, pa.py_buffer(metadata))
        writer.done_writing()
        chunks = []
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            chunks.append(chunk)
        writer.close()
        return chunks
    finally:
        if connection is None:
            flight.close()


def test_bad_frees_are_refused_and_unknown_arenas_get_flight(server, int_store):
    with Client(server.url, shared_memory=True, arena_mib=ARENA_MIB) as c:
        arena_id = c.arena().id
        command = {**SAMPLE, "arena": arena_id}
        for metadata, message in ((b"{free", "must be JSON"),
                                  (b'{"free": [1.5]}', "list of integer offsets"),
                                  (b'{"free": 7}', "list of integer offsets"),
                                  (b'{"free": [64000000]}', "is not a segment in use")):
            with pytest.raises(pa.ArrowInvalid, match=message):
                _exchange_with_metadata(server.url, command, metadata, c._flight)
        # a segment message names where the batch is; the raw client reads it from its own mapping
        chunks = _exchange_with_metadata(server.url, command, b"", c._flight)
        assert len(chunks) == 1 and chunks[0].data is None
        offset, length = json.loads(chunks[0].app_metadata.to_pybytes())["segment"]
        got = protocol.decode_sample_row(c.arena().read(offset, length))[0]
        want = sample_neighbors(int_store.indptr, int_store.indices, np.array([1, 2]), [2, 2], seed=0)
        assert_same_output(got, want)
    # an arena the server does not know (detached): the batch comes over Flight
    chunks = _exchange_with_metadata(server.url, {**SAMPLE, "arena": arena_id}, b'{"free": [64]}')
    assert len(chunks) == 1 and chunks[0].data is not None
    assert server.proc.poll() is None


# -- auth ---------------------------------------------------------------------------------------
def test_token_required(int_store, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    srv = start_server(int_store, tmp_path / "server.log", "--token-file", str(token_file))
    try:
        for token in (None, "wrong-token"):
            with Client(srv.url, token=token) as c:
                with pytest.raises(PermissionError, match="bearer token"):
                    c.health()
                with pytest.raises(PermissionError, match="bearer token"):
                    c.sample(np.array([1]), [2])
                with pytest.raises(PermissionError):
                    c.lookup(np.array([1]))
        with pytest.raises(fl.FlightUnauthenticatedError):
            _raw_exchange(srv.url, json.dumps(SAMPLE), _seed_batch([1]))
        assert "refused do_action call: missing or wrong bearer token" in srv.log()
        assert "refused do_exchange call" in srv.log()
        with Client(srv.url, token=TOKEN) as c:
            assert c.health()["status"] == "ready"
            assert c.sample(np.array([1, 2]), [2]).output.batch_size == 2
    finally:
        assert srv.stop() == 0


# -- load ---------------------------------------------------------------------------------------
def _client_load(url: str, store: GraphStore, worker: int, requests: int, errors: list,
                 done: list) -> None:
    rng = np.random.default_rng(100 + worker)
    external = store.id_map.external_ids.to_numpy()
    try:
        with Client(url) as c:
            for i in range(requests):
                seeds = rng.choice(NUM_NODES, 40, replace=False)
                got = c.sample(seeds, [4, 3], seed=i)
                want = sample_neighbors(store.indptr, store.indices, seeds, [4, 3], seed=i)
                assert_same_output(got.output, want)
                np.testing.assert_array_equal(c.lookup(external[seeds]), seeds)
                done.append(1)
    except BaseException as exc:  # noqa: BLE001 - collected and reported by the test
        errors.append(f"worker {worker}: {type(exc).__name__}: {exc}")


def test_eight_concurrent_clients(server, int_store):
    errors: list[str] = []
    done: list[int] = []
    threads = [threading.Thread(target=_client_load, args=(server.url, int_store, w, 12, errors, done))
               for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []
    assert len(done) == 8 * 12


def test_sigterm_during_load_drains_and_exits_zero(int_store, tmp_path):
    srv = start_server(int_store, tmp_path / "server.log")
    stop = threading.Event()
    outcomes: queue.Queue = queue.Queue()

    def load(worker: int) -> None:
        rng = np.random.default_rng(worker)
        with Client(srv.url) as c:
            for i in range(2000):  # bounded; normally ended by the server going away
                if stop.is_set():
                    return
                seeds = rng.choice(NUM_NODES, 300, replace=False)
                try:
                    got = c.sample_batches([seeds, seeds[::-1].copy()], [i, i + 1], [10, 10])
                except ConnectionError:
                    outcomes.put("refused")
                    return
                except BaseException as exc:  # noqa: BLE001 - reported below
                    outcomes.put(f"error: {type(exc).__name__}: {exc}")
                    return
                want = sample_neighbors(int_store.indptr, int_store.indices, seeds, [10, 10], seed=i)
                outcomes.put("ok" if np.array_equal(got[0].output.n_id, want.n_id) else "wrong result")

    threads = [threading.Thread(target=load, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while seen.count("ok") < 20 and time.monotonic() < deadline:  # wait until under load
        try:
            seen.append(outcomes.get(timeout=1))
        except queue.Empty:
            pass
    srv.proc.send_signal(signal.SIGTERM)
    try:
        code = srv.proc.wait(timeout=60)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
        if srv.proc.poll() is None:
            srv.proc.kill()
    while not outcomes.empty():
        seen.append(outcomes.get())
    assert code == 0
    assert seen.count("ok") >= 20
    assert [s for s in seen if s not in ("ok", "refused")] == []
    assert "drained; exiting" in srv.log()


def test_sigterm_with_a_held_stream_exits_zero(int_store, tmp_path):
    """A client that keeps a sample stream open between windows (a loader that stopped
    pulling) does not hold the drain up; its next pull fails with ConnectionError."""
    srv = start_server(int_store, tmp_path / "server.log")
    try:
        c = Client(srv.url, arena_mib=ARENA_MIB)
        stream = c.sample_stream(_windows([2] * 10, seed=4), [3, 3], depth=2)
        first = next(stream)
        assert len(first) == 2
        assert c.health()["in_flight"] == 3  # two idle streams and this call
        started = time.monotonic()
        assert srv.stop() == 0
        assert time.monotonic() - started < 30
        assert "closing 2 idle stream(s)" in srv.log()
        with pytest.raises(ConnectionError):
            for _results in stream:
                pass
        assert _arena_files(srv) == []
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def test_serve_refuses_a_missing_store(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "graphpipe.cli.serve", str(tmp_path / "nope"),
                           "--port", "0"], check=False, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "error:" in proc.stderr and "nope" in proc.stderr
