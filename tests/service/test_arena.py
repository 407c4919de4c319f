"""Shared-memory arenas of the service (graphpipe.service.arena), without a server: the
allocator, the two mappings of one file, the registry's limits and its reaper."""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pytest

from graphpipe.ops.sampling import sample_neighbors
from graphpipe.service import protocol
from graphpipe.service.arena import (
    ALIGN,
    HEADER_BYTES,
    ArenaRegistry,
    ClientArena,
    ServerArena,
    remove_stale_files,
)

MIB = 1 << 20
OWNER = "ipv4:127.0.0.1:1"


@contextlib.contextmanager
def loopback_connection() -> Iterator[tuple[str, socket.socket]]:
    """A real TCP connection on loopback: ``(peer string of its client end, client socket)``
    (a peer the way gRPC names it to the server)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        try:
            host, port = client.getsockname()
            yield f"ipv4:{host}:{port}", client
        finally:
            client.close()
            accepted.close()


@pytest.fixture
def arena(tmp_path):
    arena = ServerArena(str(tmp_path / "arena"), MIB, OWNER)
    yield arena
    arena.unlink()


def test_first_fit_allocation_reuses_and_merges_freed_segments(arena):
    a = arena.allocate(100)
    b = arena.allocate(ALIGN)
    c = arena.allocate(1000)
    assert (a, b, c) == (HEADER_BYTES, HEADER_BYTES + 128, HEADER_BYTES + 192)
    assert arena.bytes_in_use == 128 + 64 + 1024
    arena.free(b)
    assert arena.allocate(10) == b  # the first hole that fits
    arena.free(a)
    arena.free(b)  # merges with a's hole
    assert arena.allocate(192) == a
    arena.free(a)
    arena.free(c)  # a, b and c merge with the tail: one free range again
    assert arena.bytes_in_use == 0
    assert arena.allocate(MIB - HEADER_BYTES) == HEADER_BYTES
    assert arena.allocate(1) is None  # full
    with pytest.raises(ValueError, match="offset 5 is not a segment in use"):
        arena.free(5)


def test_random_allocations_never_overlap(arena):
    rng = np.random.default_rng(0)
    live: dict[int, int] = {}
    for _ in range(2000):
        if live and rng.random() < 0.45:
            offset = int(rng.choice(list(live)))
            arena.free(offset)
            del live[offset]
        else:
            length = int(rng.integers(1, 40_000))
            offset = arena.allocate(length)
            if offset is not None:
                live[offset] = -(-length // ALIGN) * ALIGN
        spans = sorted(live.items())
        for (s1, n1), (s2, _) in itertools.pairwise(spans):
            assert s1 + n1 <= s2
        assert all(s >= HEADER_BYTES and s + n <= MIB for s, n in spans)
        assert arena.bytes_in_use == sum(live.values())
    for offset in list(live):
        arena.free(offset)
    assert arena.allocate(MIB - HEADER_BYTES) == HEADER_BYTES


def test_a_batch_written_by_the_server_is_read_in_place(arena):
    indptr = np.array([0, 2, 3, 5, 5], np.int64)
    indices = np.array([1, 2, 0, 1, 3], np.int64)
    out = sample_neighbors(indptr, indices, np.array([0, 2]), [2, 2], seed=4)
    batch = protocol.encode_sample_output(out, protocol.sample_response_schema(2))
    offset, length = arena.write_batch(batch, batch.schema.serialize().size)
    client = ClientArena(arena.id, arena.path, arena.nbytes, arena.nonce)
    arena.linked = False  # the client unlinked it
    assert not os.path.exists(arena.path)
    got = protocol.decode_sample_row(client.read(offset, length))[0]
    np.testing.assert_array_equal(got.n_id, out.n_id)
    for g, w in zip(got.blocks, out.blocks, strict=True):
        np.testing.assert_array_equal(g.indices, w.indices)
    assert client.address <= got.n_id.ctypes.data < client.address + client.nbytes
    assert client.take_freed() == []
    del got, g  # the loop variable holds a block too
    gc.collect()
    assert client.take_freed() == [offset]
    arena.free(offset)
    assert arena.bytes_in_use == 0
    # a batch bigger than the arena does not fit
    big = pa.record_batch([pa.array(np.zeros(MIB // 8, np.int64))], names=["v"])
    assert arena.write_batch(big, big.schema.serialize().size) is None
    with pytest.raises(RuntimeError, match="outside arena"):
        client.read(arena.nbytes - 8, 64)


def test_client_refuses_a_file_that_is_not_the_servers(arena, tmp_path):
    with pytest.raises(OSError, match="nonce differs"):
        ClientArena(arena.id, arena.path, arena.nbytes, b"x" * 16)
    other = ServerArena(str(tmp_path / "other"), 2 * MIB, OWNER)
    with pytest.raises(OSError, match="not the 1048576 the server sent"):
        ClientArena(other.id, other.path, MIB, other.nonce)
    other.unlink()
    with pytest.raises(FileExistsError):  # never over an existing file
        ServerArena(arena.path, MIB, OWNER)


def test_registry_limits_and_reaper(tmp_path):
    registry = ArenaRegistry(3 * MIB, str(tmp_path), idle_timeout=3600, unmapped_timeout=0.0,
                             reap_interval=3600)
    try:
        with loopback_connection() as (peer, _), loopback_connection() as (closing, sock):
            first = registry.attach(MIB, peer)
            with pytest.raises(ValueError, match="--shared-memory-mib 3 in all"):
                registry.attach(3 * MIB, peer)
            with pytest.raises(ValueError, match="'bytes' must be at least"):
                registry.attach(1000, peer)
            with pytest.raises(ValueError, match="'bytes' must be a positive integer"):
                registry.attach(True, peer)
            with pytest.raises(ValueError, match="over loopback"):
                registry.attach(MIB, "ipv4:192.0.2.7:5000")
            gone = registry.attach(MIB, closing)
            sock.close()  # its connection closes
            assert registry.get(first.id, peer) is first and len(registry) == 2
            assert registry.reap() == [gone.id]
            assert registry.get(gone.id, closing) is None
            assert not os.path.exists(first.path)  # unlinked by get(): the client used it
            # never mapped: unlinked after unmapped_timeout; unused for idle_timeout: dropped
            lonely = registry.attach(MIB, peer)
            registry.reap()
            assert not os.path.exists(lonely.path) and registry.get(lonely.id, peer) is lonely
            registry.idle_timeout = 0.0
            time.sleep(0.01)
            assert sorted(registry.reap()) == sorted([first.id, lonely.id])
            assert len(registry) == 0 and registry.bytes_in_use == 0
            last = registry.attach(MIB, peer)
    finally:
        registry.close()
    assert not os.path.exists(last.path) and len(registry) == 0
    assert list(tmp_path.iterdir()) == []


def test_an_arena_belongs_to_the_connection_that_attached_it(tmp_path):
    """Another connection naming the arena gets none: no use, no detach."""
    registry = ArenaRegistry(4 * MIB, str(tmp_path), reap_interval=3600)
    try:
        with loopback_connection() as (owner, _), loopback_connection() as (other, _):
            arena = registry.attach(MIB, owner)
            assert registry.get(arena.id, other) is None
            assert registry.detach(arena.id, owner=other) is False
            assert registry.get(arena.id, owner) is arena
            assert registry.reap() == []  # both connections open
            assert registry.detach(arena.id, owner=owner) is True
            assert registry.get(arena.id, owner) is None
    finally:
        registry.close()


def test_stale_files_of_dead_servers_are_removed_on_start(tmp_path):
    dead, alive = _exited_pid(), os.getppid()
    names = {"dead": f"graphpipe-arena-{dead}-0123456789abcdef",
             "alive": f"graphpipe-arena-{alive}-0123456789abcdef",
             "mine": f"graphpipe-arena-{os.getpid()}-0123456789abcdef",
             "other name": f"graphpipe-arena-{dead}-not-hex",
             "unrelated": "something-else"}
    for name in names.values():
        (tmp_path / name).write_bytes(b"x")
    os.symlink(tmp_path / names["unrelated"], tmp_path / f"graphpipe-arena-{dead}-fedcba9876543210")
    registry = ArenaRegistry(MIB, str(tmp_path), reap_interval=3600)
    registry.close()
    left = sorted(p.name for p in tmp_path.iterdir())
    assert names["dead"] not in left
    assert sorted([names["alive"], names["mine"], names["other name"], names["unrelated"],
                   f"graphpipe-arena-{dead}-fedcba9876543210"]) == left  # a link is never a stale arena
    assert remove_stale_files(str(tmp_path / "missing")) == []


def test_registry_disabled(tmp_path):
    for registry in (ArenaRegistry(0, str(tmp_path)), ArenaRegistry(MIB, str(tmp_path / "missing"))):
        assert not registry.enabled
        with pytest.raises(ValueError, match="hands out no shared memory"):
            registry.attach(MIB, OWNER)
        registry.close()


def _exited_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid
