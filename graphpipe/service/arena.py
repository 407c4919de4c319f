"""Shared-memory arenas: the same-host transport of ``sample`` responses.

A client on the server's host asks for an arena (DoAction ``attach_arena``). The server
creates a file under ``/dev/shm`` (mode 0600, its whole size allocated up front, so a
full tmpfs refuses the attach instead of faulting later), maps it and returns its path;
the client maps the same file and unlinks it, so the memory lives exactly as long as
the two mappings. From then on the server writes each sampled batch of that client's
``sample`` calls into a free segment of the arena, as an Arrow IPC stream (schema,
one record batch, end-of-stream marker), and sends only ``{"segment": [offset, length]}``
over Flight; the client reads the batch in place (no copy) and reports the segment free
once the arrays decoded from it are garbage (``{"free": [offset, ...]}`` in the
app_metadata of its next request batch). A batch that does not fit, or any arena
trouble, goes over Flight as usual: shared memory only removes copies, never changes a
result.

Server side: :class:`ServerArena` (one per attached client) and :class:`ArenaRegistry`
(attach, detach, and a reaper that unlinks files nobody mapped and drops the arenas of
connections that closed or fell silent). Client side: :class:`ClientArena`.

Ownership. An arena belongs to the connection that attached it (its gRPC peer address,
with the authenticated identity when there is one; a token server has already refused
calls without the token): a call from any other connection that names it is treated as
naming no arena (its batches go over Flight, its frees are ignored, a detach answers
false). Arenas are handed out only to loopback peers, and only when the peer's socket,
as ``/proc/net/tcp`` lists it, belongs to the server's own user (the file is mode 0600
anyway). The server trusts no process ID a client sends. On start the registry removes
the arena files that servers of this user left in its directory when they died
(``graphpipe-arena-<server pid>-<hex>`` whose server pid no longer runs).
"""

from __future__ import annotations

import bisect
import logging
import mmap
import os
import re
import secrets
import stat
import threading
import time
import weakref
from collections import deque
from typing import Any

import numpy as np
import pyarrow as pa

from graphpipe.service import peers

__all__ = ["ALIGN", "HEADER_BYTES", "ArenaRegistry", "ClientArena", "ServerArena", "remove_stale_files"]

log = logging.getLogger("graphpipe.service")

#: segments start at multiples of this many bytes (Arrow's buffer alignment)
ALIGN = 64
#: the arena's first bytes hold a random nonce the client checks after mapping
HEADER_BYTES = ALIGN
MIN_ARENA_BYTES = 1 << 20
#: names of arena files: ``graphpipe-arena-<server pid>-<16 hex digits>``
_FILE_NAME = re.compile(r"graphpipe-arena-(\d+)-[0-9a-f]{16}")


def _round_up(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class ServerArena:
    """The server's side of one client's arena: the mapping and a first-fit allocator.

    Args:
        path: file to create (must not exist); unlinked by the client once mapped,
            else by :meth:`unlink` (the reaper, :meth:`ArenaRegistry.close`).
        nbytes: arena size in bytes (allocated up front: ``OSError`` ENOSPC when the
            file system cannot hold it).
        owner: the connection that attached it (see the module docstring); the reaper
            drops the arena once that connection closed.
    """

    def __init__(self, path: str, nbytes: int, owner: str):
        self.path, self.nbytes, self.owner = path, int(nbytes), str(owner)
        self.id = secrets.token_hex(8)
        self.nonce = secrets.token_bytes(16)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, self.nbytes)
            except OSError:
                os.unlink(path)
                raise
            self._map = mmap.mmap(fd, self.nbytes)
        finally:
            os.close(fd)
        self._bytes = np.frombuffer(self._map, dtype=np.uint8)
        self._bytes[:len(self.nonce)] = np.frombuffer(self.nonce, dtype=np.uint8)
        self._lock = threading.Lock()
        self._free_starts = [HEADER_BYTES]  # sorted starts of free ranges
        self._free_ends = [self.nbytes]  # their ends, index-aligned
        self._used: dict[int, int] = {}  # offset -> length of every segment handed out
        self.attached_at = self.last_used = time.monotonic()
        self.linked = True

    # -- allocation ------------------------------------------------------------------------------
    def allocate(self, length: int) -> int | None:
        """The offset of a free segment of ``length`` bytes (rounded up), or None when full."""
        length = _round_up(max(int(length), 1))
        with self._lock:
            for i, (start, end) in enumerate(zip(self._free_starts, self._free_ends)):
                if end - start >= length:
                    if end - start == length:
                        del self._free_starts[i], self._free_ends[i]
                    else:
                        self._free_starts[i] = start + length
                    self._used[start] = length
                    return start
        return None

    def free(self, offset: int) -> None:
        """Return the segment at ``offset``; ValueError when no segment starts there."""
        with self._lock:
            length = self._used.pop(offset, None)
            if length is None:
                raise ValueError(f"'free' offset {offset} is not a segment in use of arena {self.id}")
            end = offset + length
            i = bisect.bisect_left(self._free_starts, offset)
            if i < len(self._free_starts) and self._free_starts[i] == end:  # merge with the next
                end = self._free_ends[i]
                del self._free_starts[i], self._free_ends[i]
            if i > 0 and self._free_ends[i - 1] == offset:  # merge with the previous
                self._free_ends[i - 1] = end
            else:
                self._free_starts.insert(i, offset)
                self._free_ends.insert(i, end)

    @property
    def bytes_in_use(self) -> int:
        """Bytes of the segments handed out and not yet freed."""
        with self._lock:
            return sum(self._used.values())

    # -- writing ---------------------------------------------------------------------------------
    def write_batch(self, batch: pa.RecordBatch, schema_bytes: int) -> tuple[int, int] | None:
        """Write ``batch`` as an Arrow IPC stream into a new segment; ``(offset, length)``,
        or None when it does not fit (``schema_bytes``: size of the serialized schema)."""
        need = schema_bytes + pa.ipc.get_record_batch_size(batch) + 2 * ALIGN
        offset = self.allocate(need)
        if offset is None:
            return None
        try:
            sink = pa.FixedSizeBufferWriter(pa.py_buffer(self._bytes[offset:offset + _round_up(need)]))
            with pa.ipc.new_stream(sink, batch.schema) as writer:
                writer.write_batch(batch)
            length = sink.tell()
        except (pa.ArrowException, OSError, ValueError) as exc:  # it goes over Flight instead
            log.warning("could not write a batch into arena %s: %s", self.id, exc)
            self.free(offset)
            return None
        self.last_used = time.monotonic()
        return offset, length

    def unlink(self) -> None:
        """Remove the file name if the client has not (the mappings stay valid)."""
        if self.linked:
            self.linked = False
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class ArenaRegistry:
    """The arenas a server handed out, at most ``max_bytes`` in all, under ``directory``.

    On start it removes the stale arena files of dead servers (:func:`remove_stale_files`).
    A reaper thread (every ``reap_interval`` seconds) unlinks an arena's file when its
    client has not mapped it after ``unmapped_timeout`` seconds, and drops arenas whose
    connection closed (its socket no longer established, see :mod:`graphpipe.service.peers`)
    or that no call used for ``idle_timeout`` seconds (their client then gets its batches
    over Flight).
    """

    def __init__(self, max_bytes: int, directory: str = "/dev/shm", *, idle_timeout: float = 600.0,
                 unmapped_timeout: float = 30.0, reap_interval: float = 5.0):
        self.max_bytes, self.directory = int(max_bytes), directory
        self.idle_timeout, self.unmapped_timeout = float(idle_timeout), float(unmapped_timeout)
        self._arenas: dict[str, ServerArena] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = None
        if self.enabled:
            removed = remove_stale_files(directory)
            if removed:
                log.info("removed %d stale shared-memory arena file(s) of dead servers from %s",
                         len(removed), directory)
            self._reaper = threading.Thread(target=self._reap_loop, args=(reap_interval,),
                                            name="graphpipe-arena-reaper", daemon=True)
            self._reaper.start()

    @property
    def enabled(self) -> bool:
        """Whether this server hands out arenas at all."""
        return self.max_bytes > 0 and os.path.isdir(self.directory)

    def attach(self, nbytes: Any, owner: str) -> ServerArena:
        """A new arena of ``nbytes`` for the connection ``owner`` (a gRPC peer string);
        ValueError naming the reason when refused, OSError when the file system cannot
        hold it."""
        if not self.enabled:
            raise ValueError("this server hands out no shared memory (--shared-memory-mib 0 "
                             f"or no {self.directory})")
        if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1:
            raise ValueError(f"'bytes' must be a positive integer (got {nbytes!r:.40})")
        if nbytes < MIN_ARENA_BYTES:
            raise ValueError(f"'bytes' must be at least {MIN_ARENA_BYTES} (got {nbytes})")
        _check_local_owner(owner)
        with self._lock:
            in_use = sum(a.nbytes for a in self._arenas.values())
            if in_use + nbytes > self.max_bytes:
                raise ValueError(f"an arena of {nbytes} bytes would exceed this server's limit, "
                                 f"--shared-memory-mib {self.max_bytes >> 20} in all ({in_use} bytes "
                                 "handed out)")
            path = os.path.join(self.directory, f"graphpipe-arena-{os.getpid()}-{secrets.token_hex(8)}")
            arena = ServerArena(path, nbytes, owner)
            self._arenas[arena.id] = arena
        return arena

    def get(self, arena_id: Any, owner: str) -> ServerArena | None:
        """The arena ``arena_id`` of connection ``owner``; None when unknown (dropped by the
        reaper, never attached) or another connection's."""
        with self._lock:
            arena = self._arenas.get(arena_id) if isinstance(arena_id, str) else None
        if arena is None or arena.owner != owner:
            return None
        arena.last_used = time.monotonic()
        arena.unlink()  # the client used it, so it has mapped it
        return arena

    def detach(self, arena_id: Any, owner: str | None = None) -> bool:
        """Drop arena ``arena_id`` (its memory is freed once the client unmaps it too);
        with ``owner`` only when it is that connection's."""
        with self._lock:
            arena = self._arenas.get(arena_id) if isinstance(arena_id, str) else None
            if arena is None or (owner is not None and arena.owner != owner):
                return False
            del self._arenas[arena_id]
        arena.unlink()
        return True

    def __len__(self) -> int:
        with self._lock:
            return len(self._arenas)

    @property
    def bytes_in_use(self) -> int:
        """Bytes of the segments handed out and not yet freed, over all arenas."""
        with self._lock:
            arenas = list(self._arenas.values())
        return sum(a.bytes_in_use for a in arenas)

    def reap(self) -> list[str]:
        """One pass of the reaper; the IDs of the arenas it dropped."""
        now = time.monotonic()
        dropped = []
        with self._lock:
            arenas = list(self._arenas.values())
        for arena in arenas:
            if arena.linked and now - arena.attached_at > self.unmapped_timeout:
                arena.unlink()
            reason = None
            sock = peers.local_socket(arena.owner)
            if sock is not None and sock.state != peers.ESTABLISHED:
                reason = f"connection {arena.owner} closed"
            elif now - arena.last_used > self.idle_timeout:
                reason = f"unused for {self.idle_timeout:.0f} s"
            if reason is not None and self.detach(arena.id):
                log.info("dropped shared-memory arena %s (%d bytes): %s", arena.id, arena.nbytes, reason)
                dropped.append(arena.id)
        return dropped

    def _reap_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.reap()
            except Exception:
                log.exception("arena reaper pass failed")

    def close(self) -> None:
        """Stop the reaper; drop every arena (and unlink the files of those never mapped)."""
        self._stop.set()
        if self._reaper is not None:
            self._reaper.join()
        with self._lock:
            arenas, self._arenas = list(self._arenas.values()), {}
        for arena in arenas:
            arena.unlink()


def _check_local_owner(owner: str) -> None:
    """Refuse (ValueError) an arena for a peer that is not on loopback, or whose socket
    belongs to another user (when ``/proc/net/tcp`` tells)."""
    if not peers.is_loopback_peer(owner):
        raise ValueError(f"shared-memory arenas are for clients on the server's host over loopback "
                         f"(this call comes from {owner.split(' ', 1)[0]})")
    sock = peers.local_socket(owner)
    if sock is not None and sock is not peers.GONE and sock.uid != os.getuid():
        raise ValueError("shared-memory arenas are for clients of the server's own user "
                         f"(uid {os.getuid()}; this connection's is {sock.uid})")


def remove_stale_files(directory: str) -> list[str]:
    """Unlink the arena files in ``directory`` that servers left when they died: regular
    files named ``graphpipe-arena-<pid>-<hex>``, owned by this user, whose ``pid`` is not
    this process and no longer runs. Returns the names removed."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    me, uid = os.getpid(), os.getuid()
    for name in names:
        match = _FILE_NAME.fullmatch(name)
        if match is None or int(match.group(1)) == me or _process_alive(int(match.group(1))):
            continue
        path = os.path.join(directory, name)
        try:
            info = os.lstat(path)
            if stat.S_ISREG(info.st_mode) and info.st_uid == uid:
                os.unlink(path)
                removed.append(name)
        except OSError:
            continue
    return removed


def _process_alive(pid: int) -> bool:
    if pid <= 0:
        return True  # not a process of its own: leave the file alone
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):  # exists, owned by another user / not a pid
        return True
    return True


class _Segment:
    """Base object of every array read from one arena segment: exposes the segment's
    bytes to numpy (writable: the server does not touch a segment until it is freed),
    and reports the segment free when the last of those arrays is garbage."""

    __slots__ = ("__array_interface__", "__weakref__", "_arena")

    def __init__(self, arena: ClientArena, offset: int, length: int):
        self._arena = arena  # keeps the mapping alive while any array uses it
        self.__array_interface__ = {"data": (arena.address + offset, False), "shape": (length,),
                                    "typestr": "|u1", "version": 3}


class ClientArena:
    """The client's side of an arena: the mapping, reading segments, collecting frees.

    Args:
        path: the file the server created (unlinked here once mapped).
        nbytes: its size.
        nonce: the bytes the server wrote at its start (proves it is the server's file).
    """

    def __init__(self, arena_id: str, path: str, nbytes: int, nonce: bytes):
        self.id = arena_id
        fd = os.open(path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        try:
            if os.fstat(fd).st_size != nbytes:
                raise OSError(f"{path} is {os.fstat(fd).st_size} bytes, not the {nbytes} the server sent")
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self._map = mmap.mmap(fd, nbytes, flags=flags)
        finally:
            os.close(fd)
        self._bytes = np.frombuffer(self._map, dtype=np.uint8)
        if self._bytes[:len(nonce)].tobytes() != nonce:
            raise OSError(f"{path} does not hold the server's arena (nonce differs)")
        os.unlink(path)  # the memory now lives as long as the two mappings
        self.address = self._bytes.ctypes.data
        self.nbytes = nbytes
        self._freed: deque[int] = deque()

    def read(self, offset: int, length: int) -> pa.RecordBatch:
        """The record batch in segment ``[offset, offset + length)`` (no copy); the segment
        is reported free once every array read from it is garbage."""
        if offset < HEADER_BYTES or length < 1 or offset + length > self.nbytes:
            raise RuntimeError(f"server sent segment [{offset}, {offset + length}) outside arena "
                               f"{self.id} of {self.nbytes} bytes")
        segment = _Segment(self, offset, length)
        weakref.finalize(segment, self._freed.append, offset)
        return pa.ipc.open_stream(pa.py_buffer(np.asarray(segment))).read_next_batch()

    def take_freed(self) -> list[int]:
        """The offsets freed since the last call (to send with the next request)."""
        out = []
        while True:
            try:
                out.append(self._freed.popleft())
            except IndexError:
                return out
