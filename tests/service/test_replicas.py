"""Replicas (issue 18, "sampling services as the data plane"): a RemoteSampler over two real
``graphpipe serve`` processes on loopback spreads the batches over both, and when one is
killed mid-epoch the epoch goes on, every batch once, equal to a single server's epoch."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from graphpipe.loaders import NeighborLoader
from graphpipe.service import RemoteSampler
from graphpipe.service.replicas import ReplicaSet
from graphpipe.store import GraphStore
from tests.service.test_service import ARENA_MIB, Server, _write_store, start_server

FIELDS = ("n_id", "x", "y", "edge_index", "e_id", "input_id")
LOADER = {"input_nodes": "train", "shuffle": True, "seed": 21, "window": 3, "batch_size": 32}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> GraphStore:
    return _write_store(tmp_path_factory.mktemp("replicas") / "store")


@pytest.fixture(scope="module")
def survivor(store, tmp_path_factory) -> Iterator[Server]:
    srv = start_server(store, tmp_path_factory.mktemp("log") / "survivor.log")
    yield srv
    assert srv.stop() == 0


@pytest.fixture(scope="module")
def partner(store, tmp_path_factory) -> Iterator[Server]:
    srv = start_server(store, tmp_path_factory.mktemp("log") / "partner.log")
    yield srv
    assert srv.stop() == 0


@pytest.fixture
def victim(store, tmp_path) -> Iterator[Server]:
    srv = start_server(store, tmp_path / "victim.log")
    yield srv
    if srv.proc.poll() is None:
        srv.stop()


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"grpc://127.0.0.1:{sock.getsockname()[1]}"


def _epoch(loader: NeighborLoader, on_batch=None) -> list[dict]:
    batches = []
    for i, batch in enumerate(loader):
        batches.append({name: getattr(batch, name).clone() for name in FIELDS})
        if on_batch is not None:
            on_batch(i)
    return batches


def _assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want) > 10
    for a, b in zip(got, want):
        for name in FIELDS:
            assert a[name].dtype == b[name].dtype and a[name].equal(b[name]), name


@pytest.mark.parametrize("prefetch", [2, 0])
def test_a_replica_killed_mid_epoch_loses_no_batch(store, survivor, victim, prefetch):
    """prefetch 2: windows streamed (several in flight when the replica dies); 0: one call each."""
    a, b = survivor, victim
    one = NeighborLoader(store, [5, 3], prefetch=prefetch, **LOADER,
                         sampler=RemoteSampler(a.url, arena_mib=ARENA_MIB))
    single, single_next = _epoch(one), _epoch(one)
    sampler = RemoteSampler([a.url, b.url], arena_mib=ARENA_MIB, revive_after=3600)
    loader = NeighborLoader(store, [5, 3], prefetch=prefetch, sampler=sampler, **LOADER)

    def kill_b(i: int) -> None:
        if i == 4:
            b.proc.kill()
            b.proc.wait(30)

    _assert_same(_epoch(loader, kill_b), single)
    replicas = sampler.replicas
    assert replicas.calls[0] > 0 and replicas.calls[1] > 0     # both served before the kill
    assert replicas.failovers > 0 and replicas.live() == [0]
    calls_b = replicas.calls[1]
    _assert_same(_epoch(loader), single_next)                   # the next epoch on the survivor
    assert replicas.calls[1] == calls_b
    sampler.close()


def test_batches_go_round_robin(store, survivor, partner):
    a, b = survivor, partner
    sampler = RemoteSampler([a.url, b.url], fanouts=[4, 2], arena_mib=ARENA_MIB)
    replicas = sampler.replicas
    seeds = [np.arange(i * 10, i * 10 + 10) for i in range(6)]
    assert replicas.assign(6) == [0, 1, 0, 1, 0, 1]
    outputs = sampler.sample_from_nodes(seeds, list(range(6)))
    want = RemoteSampler(a.url, fanouts=[4, 2], shared_memory=False).sample_from_nodes(seeds, list(range(6)))
    assert all(np.array_equal(o.n_id, w.n_id) for o, w in zip(outputs, want))
    assert replicas.calls == [1, 1]                             # one call per replica per window
    sampler.close()


def test_no_replica_left_is_a_connection_error():
    sampler = RemoteSampler([_dead_url(), _dead_url()], fanouts=[3], shared_memory=False)
    with pytest.raises(ConnectionError, match="no replica is reachable"):
        sampler.sample_from_nodes([np.arange(5), np.arange(5, 9)], [1, 2])
    assert sampler.replicas.failovers == 2
    sampler.close()


def test_request_errors_are_not_failed_over(store, survivor, partner):
    """A bad request fails on every replica: raised at once, no replica marked dead."""
    a, b = survivor, partner
    replicas = ReplicaSet([RemoteSampler(u).client for u in (a.url, b.url)])
    with pytest.raises(ValueError):
        replicas.sample_batches([np.array([store.num_nodes + 5])], [0], [3])
    assert replicas.live() == [0, 1] and replicas.failovers == 0
    replicas.close()
