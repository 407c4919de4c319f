"""Hypothesis-made requests against ``graphpipe serve``: typed (``sample_typed`` on a typed
store) and link (``sample`` as the link loader sends it: sources, destinations and
negatives, some out of range, with features and labels) requests, near-valid and
hostile. Every answer is a result or a clean refusal (INVALID_ARGUMENT / NOT_FOUND, one
line, nothing of the server's insides), never INTERNAL, a hang or a dead server.

The servers are real subprocesses on loopback (a crash fails the test, not pytest);
every call has a timeout. A fuzzer: it runs in ``make fuzz`` (``GRAPHPIPE_FUZZ_EXAMPLES``
examples per test), not in ``make test``.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl
import pytest

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

EXAMPLES = int(os.environ.get("GRAPHPIPE_FUZZ_EXAMPLES", "0"))
pytestmark = pytest.mark.skipif(EXAMPLES == 0, reason="a fuzzer: make fuzz runs it "
                                                      "(GRAPHPIPE_FUZZ_EXAMPLES)")
hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies
CALL_TIMEOUT_S = 60
NUM_NODES = 500


def _serve(store_path: Path, log: Path) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "graphpipe.cli.serve", str(store_path), "--port", "0",
           "--threads", "2", "--max-seeds", "64", "--max-request-bytes", str(256 << 20)]
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=fh, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: lines.put(proc.stdout.readline()), daemon=True).start()
    try:
        line = lines.get(timeout=180)
    except queue.Empty:
        proc.kill()
        raise RuntimeError(f"server did not start: {log.read_text()[-2000:]}") from None
    assert line.startswith("serving "), log.read_text()[-2000:]
    return proc, line.split(" on ", 1)[1].strip()


@contextlib.contextmanager
def _server(store_path: Path, log: Path) -> Iterator[tuple[subprocess.Popen, fl.FlightClient]]:
    proc, url = _serve(store_path, log)
    flight = fl.FlightClient(url)
    try:
        yield proc, flight
    finally:
        flight.close()
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@pytest.fixture(scope="module")
def typed_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_typed")
    data = mag_dataset(papers=300, authors=400, institutions=20, fields=40, num_classes=3,
                       feature_dim=4, seed=2)
    store = ingest(write_ogb_mag(root / "src", data), root / "store")
    with _server(store.path, root / "server.log") as (proc, flight):
        yield proc, flight, store


@pytest.fixture(scope="module")
def link_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz_link")
    rng = np.random.default_rng(0)
    np.savez(root / "g.npz", src=rng.integers(0, NUM_NODES, 4000), dst=rng.integers(0, NUM_NODES, 4000),
             x=rng.standard_normal((NUM_NODES, 4)).astype(np.float32), y=rng.integers(0, 3, NUM_NODES))
    store = ingest(root / "g.npz", root / "store")
    with _server(store.path, root / "server.log") as (proc, flight):
        yield proc, flight, store


# -- the requests -------------------------------------------------------------------------------
_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 64), 1 << 64),
                  st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
_JSON = st.recursive(_LEAF, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_FANOUT = st.one_of(st.integers(-1, 6), st.integers(-(1 << 40), 1 << 40), _LEAF)
_FANOUTS = st.one_of(st.lists(st.integers(-1, 6), min_size=1, max_size=3),
                     st.lists(_FANOUT, max_size=18), _JSON)
_ID = st.one_of(st.integers(-3, NUM_NODES + 3), st.integers(-(1 << 63), (1 << 63) - 1))
_SEEDS = st.lists(st.lists(_ID, max_size=12), max_size=5)
_KEYS = st.integers(-(1 << 63), (1 << 63) - 1) | st.integers(0, 100)


_VALID_FANOUTS = st.lists(st.integers(-1, 4), min_size=1, max_size=3)


@st.composite
def _request(draw, fields: dict[str, tuple[st.SearchStrategy, st.SearchStrategy]], seeds: st.SearchStrategy,
             valid_seeds: st.SearchStrategy) -> tuple[dict, list[list[int]], list[int], int]:
    """``(params, seed batches, keys, schema kind)``: a valid request (half of them) or one
    with a hostile field, seed list, key or schema. ``fields``: name -> (valid, hostile)."""
    hostile = draw(st.sampled_from([None, None, None, *fields, "seeds", "keys", "schema", "extra"]))
    params = {name: draw(bad if name == hostile else good) for name, (good, bad) in fields.items()}
    if hostile == "extra":
        params[draw(st.text(max_size=8))] = draw(_JSON)
    seed_lists = draw(seeds if hostile == "seeds" else valid_seeds)
    keys = draw(st.lists(_KEYS, min_size=1, max_size=3) if hostile == "keys"
                else st.lists(st.integers(0, 100), min_size=1, max_size=3))
    schema_kind = draw(st.sampled_from([1, 2])) if hostile == "schema" else 0
    return params, seed_lists, keys, schema_kind


def _unique_ids(n: int) -> st.SearchStrategy:
    return st.lists(st.lists(st.integers(0, n - 1), max_size=12, unique=True), max_size=5)


def _typed_request(store) -> st.SearchStrategy:
    relations = ["___".join(e) for e in store.edge_types]
    per_relation = st.dictionaries(st.sampled_from([*relations, "a___b___c"]),
                                   st.lists(st.integers(-1, 4), min_size=1, max_size=2),
                                   max_size=len(relations) + 1)
    fields = {"ntype": (st.just("paper"), st.sampled_from([*store.node_types, "venue", ""]) | _LEAF),
              "fanouts": (_VALID_FANOUTS | st.fixed_dictionaries({r: st.just([2, 1]) for r in relations}),
                          _FANOUTS | per_relation),
              "replace": (st.booleans(), _LEAF),
              "frontier": (st.sampled_from(["new", "all"]), _LEAF)}
    return _request(fields, _SEEDS, _unique_ids(store.num_nodes_dict["paper"]))


@st.composite
def _link_seeds(draw) -> list[list[int]]:
    """What a hostile link loader asks: each batch sources, destinations and negatives,
    some out of range, some repeated."""
    batches = []
    for _ in range(draw(st.integers(0, 4))):
        src = draw(st.lists(st.integers(0, NUM_NODES - 1), max_size=6))
        neg = draw(st.lists(_ID, max_size=6))
        ids = list(dict.fromkeys(src + neg)) if draw(st.booleans()) else src + neg
        batches.append(ids)
    return batches


_LINK_REQUEST = _request({"fanouts": (_VALID_FANOUTS, _FANOUTS), "replace": (st.booleans(), _LEAF),
                          "features": (st.booleans(), _LEAF), "labels": (st.booleans(), _LEAF)},
                         _link_seeds(), _unique_ids(NUM_NODES))


def _batch(seeds: list[list[int]], keys: list[int], schema_kind: int) -> pa.RecordBatch:
    keys = (keys * (len(seeds) // max(1, len(keys)) + 1))[:len(seeds)]
    if schema_kind == 1:  # seeds as strings
        return pa.record_batch([pa.array([[str(v) for v in s] for s in seeds], pa.list_(pa.string())),
                                pa.array(keys, pa.int64())], names=["seeds", "key"])
    if schema_kind == 2:  # no key column
        return pa.record_batch([pa.array(seeds, pa.list_(pa.int64()))], names=["seeds"])
    return pa.record_batch([pa.array(seeds, pa.list_(pa.int64())), pa.array(keys, pa.int64())],
                           names=["seeds", "key"])


# -- one call and what may come back ------------------------------------------------------------
def _call(flight: fl.FlightClient, command: bytes, batch: pa.RecordBatch) -> list[pa.RecordBatch]:
    options = fl.FlightCallOptions(timeout=CALL_TIMEOUT_S)
    writer, reader = flight.do_exchange(fl.FlightDescriptor.for_command(command), options=options)
    try:
        writer.begin(batch.schema)
        writer.write_batch(batch)
        writer.done_writing()
        return [chunk.data for chunk in reader if chunk.data is not None]
    finally:
        with contextlib.suppress(pa.ArrowException):
            writer.close()


def _answer(proc: subprocess.Popen, flight: fl.FlightClient, store, command: bytes,
            batch: pa.RecordBatch) -> list[pa.RecordBatch] | None:
    """The result batches, or None after a clean refusal; fails on anything else."""
    try:
        return _call(flight, command, batch)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as exc:
        if isinstance(exc, fl.FlightError):  # a Flight status other than INVALID_ARGUMENT
            pytest.fail(f"not a clean refusal: {exc!r:.2000}")
        text = str(exc)
        assert len(text) < 4000, text[:4000]
        for leak in ("Traceback", 'File "', "graphpipe/service", str(store.path), ".py\""):
            assert leak not in text, text
        return None
    finally:
        assert proc.poll() is None, "the server died"


def _settings():
    return hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                               suppress_health_check=list(hypothesis.HealthCheck))


def test_typed_requests(typed_server):
    proc, flight, store = typed_server
    sizes = store.num_nodes_dict

    @_settings()
    @hypothesis.given(request=_typed_request(store))
    def run(request):
        params, seeds, keys, schema_kind = request
        command = json.dumps({"op": "sample_typed", **params}, allow_nan=False).encode()
        got = _answer(proc, flight, store, command, _batch(seeds, keys, schema_kind))
        for b in got or []:  # a valid request: every node of every type in range
            for t, n in sizes.items():
                for ids in b.column(f"n_id/{t}").to_pylist():
                    assert all(0 <= v < n for v in ids or [])

    run()


def test_link_requests(link_server):
    proc, flight, store = link_server

    @_settings()
    @hypothesis.given(request=_LINK_REQUEST)
    def run(request):
        params, seeds, keys, schema_kind = request
        command = json.dumps({"op": "sample", **params}, allow_nan=False).encode()
        got = _answer(proc, flight, store, command, _batch(seeds, keys, schema_kind))
        for b in got or []:
            for ids in b.column("n_id").to_pylist():
                assert all(0 <= v < NUM_NODES for v in ids)

    run()
