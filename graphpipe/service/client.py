"""Python client of the sampling / ID-map service, and the loader samplers that ask the
service: :class:`RemoteSampler` (``NeighborLoader``) and :class:`RemoteHeteroSampler`
(``NeighborLoader`` on a typed graph, over ``sample_typed``) (protocol: :mod:`graphpipe.service`).

Server errors surface as Python exceptions carrying the server's message:
``ValueError`` (invalid argument: malformed request, limit exceeded), ``KeyError``
(unknown external IDs), ``PermissionError`` (missing or wrong token),
``ConnectionError`` (server unreachable or shutting down), ``TimeoutError``,
``RuntimeError`` (anything else).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.allocator import tune_allocator
from graphpipe.loaders.sampler import BaseSampler
from graphpipe.ops.sampling import EdgeType, HeteroSampleOutput, SampleOutput, etype_str
from graphpipe.service import protocol
from graphpipe.service.arena import ClientArena

log = logging.getLogger("graphpipe.service")

__all__ = ["Client", "LookupResult", "RemoteHeteroSampler", "RemoteSampler", "SampleResult"]


@dataclass
class SampleResult:
    """One sampled batch from the service.

    Attributes:
        output: the :class:`graphpipe.ops.sampling.SampleOutput` (``n_id`` int64
            ``(num_nodes,)`` seeds first, ``blocks`` input layer first).
        x: ``(num_nodes, dim)`` feature rows of ``output.n_id`` when asked for, else None.
        y: ``(batch_size,)`` (or ``(batch_size, tasks)``) labels of the seeds when asked
            for, else None.
    """

    output: SampleOutput
    x: np.ndarray | None = None
    y: np.ndarray | None = None


@dataclass
class LookupResult:
    """Dense IDs of a non-strict lookup.

    Attributes:
        node_id: int64 ``(n,)`` dense ID of each external ID, -1 when unknown.
        num_unknown: how many external IDs were unknown.
        first_unknown: the first few unknown external IDs, by value.
    """

    node_id: np.ndarray
    num_unknown: int
    first_unknown: list[Any]


def _server_message(exc: BaseException) -> str:
    text = str(exc)
    for marker in (". Detail: ", ". gRPC client debug context"):
        text = text.split(marker, 1)[0]
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


def translate_error(exc: BaseException) -> BaseException:
    """The Python exception for a Flight error, carrying the server's message."""
    message = _server_message(exc)
    if isinstance(exc, (fl.FlightUnauthenticatedError, fl.FlightUnauthorizedError)):
        return PermissionError(message)
    if isinstance(exc, fl.FlightUnavailableError):
        return ConnectionError(message)
    if isinstance(exc, fl.FlightTimedOutError):
        return TimeoutError(message)
    if isinstance(exc, fl.FlightCancelledError):
        return ConnectionError(message)
    if isinstance(exc, pa.ArrowKeyError):
        return KeyError(message)
    if isinstance(exc, pa.ArrowInvalid):
        return ValueError(message)
    return RuntimeError(message)


class Client:
    """A connection to a graphpipe service.

    Args:
        url: ``grpc://host:port``, or ``grpc+tls://host:port`` for a server started with
            ``--tls-cert``/``--tls-key`` (what ``graphpipe serve`` prints).
        token: bearer token when the server was started with ``--token-file`` (send it
            only over TLS or loopback: it travels in the clear otherwise).
        tls_root_certs: PEM bytes (or a path to a PEM file) of the certificate(s) to trust
            for a ``grpc+tls://`` server, e.g. its self-signed certificate; None: the
            system's roots.
        timeout: per-call timeout in seconds (None: no timeout).
        tune_malloc: call :func:`graphpipe.allocator.tune_allocator` (glibc: keep
            freed memory for reuse rather than faulting fresh pages in for every
            response; about 1.5 ms of CPU per sampled batch of the benchmark graph).
            Process-wide; ``GRAPHPIPE_TUNE_MALLOC=0`` also turns it off.
        shared_memory: receive sampled batches through a shared-memory arena when the
            server runs on this host (:mod:`graphpipe.service.arena`): the server writes
            each batch once into memory both processes map, and only its place travels
            over Flight. None (default): try it when ``url`` names a loopback address and
            fall back to Flight silently; True: require it (``ConnectionError`` when the
            server cannot hand one out); False: never.
        arena_mib: size of that arena in MiB, allocated in the server's tmpfs up front
            (it must hold the batches in flight and those the caller still holds; a
            batch that does not fit comes over Flight). :meth:`close` (or a ``with``
            block) gives it back; otherwise the server drops it when this process exits
            or after 10 minutes without a call.

    A server on a loopback port of this process (``graphpipe serve STORE`` elsewhere),
    over a four-node store:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.ops.sampling import sample_neighbors
    >>> from graphpipe.service import SamplingServer
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "g.npz")
    >>> np.savez(npz, src=np.array([1, 2, 3, 0, 0]), dst=np.array([0, 0, 1, 2, 3]),
    ...          x=np.arange(8, dtype=np.float32).reshape(4, 2))
    >>> store = ingest(npz, os.path.join(tmp.name, "g"))
    >>> server = SamplingServer(store, "grpc://127.0.0.1:0", threads=1)
    >>> with Client(f"grpc://127.0.0.1:{server.port}", shared_memory=False) as client:
    ...     info = client.info()
    ...     result = client.sample(np.array([0, 1]), [2], seed=5, features=True)
    ...     rows = client.features([3, 0])
    >>> info["num_nodes"], info["server"]["max_seeds"] > 0
    (4, True)
    >>> result.output.n_id.tolist(), result.output.num_sampled_nodes
    ([0, 1, 2, 3], [2, 2])
    >>> local = sample_neighbors(store.indptr, store.indices, np.array([0, 1]), [2], seed=5)
    >>> np.array_equal(result.output.n_id, local.n_id)    # the same sample as in-process
    True
    >>> result.x[:, 0].tolist(), rows.tolist()
    ([0.0, 2.0, 4.0, 6.0], [[6.0, 7.0], [0.0, 1.0]])
    >>> server.close(); tmp.cleanup()
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None,
                 tune_malloc: bool = True, shared_memory: bool | None = None, arena_mib: int = 256,
                 tls_root_certs: bytes | str | os.PathLike | None = None):
        if not isinstance(url, str) or not url.startswith(("grpc://", "grpc+tcp://", "grpc+tls://")):
            raise ValueError(f"'url' must look like grpc://host:port or grpc+tls://host:port (got {url!r})")
        if token is not None and (not isinstance(token, str) or not token):
            raise ValueError("'token' must be a non-empty string or None")
        self.url = url
        self._flight = fl.FlightClient(url, **_tls_options(url, tls_root_certs))
        headers = [(b"authorization", f"Bearer {token}".encode())] if token else []
        self._options = fl.FlightCallOptions(headers=headers, timeout=timeout)
        self._id_type: str | None = None
        if shared_memory not in (None, True, False):
            raise ValueError(f"'shared_memory' must be None, True or False (got {shared_memory!r})")
        if isinstance(arena_mib, bool) or not isinstance(arena_mib, int) or arena_mib < 1:
            raise ValueError(f"'arena_mib' must be a positive integer (got {arena_mib!r})")
        self.shared_memory, self.arena_mib = shared_memory, arena_mib
        self._arena: ClientArena | None | bool = None  # None: not tried; False: not available
        self._arena_lock = threading.Lock()
        if tune_malloc:
            tune_allocator()

    # -- transport ------------------------------------------------------------------------------
    def _exchange(self, command: bytes, request: pa.RecordBatch, *, arena: ClientArena | None = None
                  ) -> list[tuple[pa.RecordBatch, bytes | None]]:
        """One DoExchange call: send ``request``, return every response (batch, app_metadata);
        with ``arena`` the request carries its freed segments and segment messages are read
        from it."""
        descriptor = fl.FlightDescriptor.for_command(command)
        responses: list[tuple[pa.RecordBatch, bytes | None]] = []
        try:
            writer, reader = self._flight.do_exchange(descriptor, self._options)
            try:
                writer.begin(request.schema)
                _write_request(writer, request, arena)
                writer.done_writing()
                while True:
                    try:
                        chunk = reader.read_chunk()
                    except StopIteration:
                        break
                    data = _chunk_batch(chunk, arena)
                    if data is not None:
                        meta = chunk.app_metadata if chunk.data is not None else None
                        responses.append((data, meta.to_pybytes() if meta is not None else None))
                    data = chunk = None
            finally:
                writer.close()
        except (pa.ArrowException, OSError, RuntimeError) as exc:
            responses.clear()  # a traceback the caller keeps must not hold arena segments
            if isinstance(exc, (ConnectionError, PermissionError, RuntimeError)):
                raise
            raise translate_error(exc) from None
        return responses

    def _action(self, name: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = json.dumps(body).encode() if body is not None else b""
        try:
            results = list(self._flight.do_action(fl.Action(name, payload), self._options))
        except (pa.ArrowException, OSError) as exc:
            raise translate_error(exc) from None
        return json.loads(results[0].body.to_pybytes())

    def arena(self) -> ClientArena | None:
        """The shared-memory arena ``sample`` calls use (attached on first use), or None
        when this client receives over Flight (see ``shared_memory``)."""
        if self._arena is None:
            with self._arena_lock:
                if self._arena is None:
                    self._arena = self._attach_arena()
        return self._arena or None

    def _attach_arena(self) -> ClientArena | bool:
        if self.shared_memory is False or (self.shared_memory is None and not _is_loopback(self.url)):
            return False
        try:
            reply = self._action("attach_arena", {"bytes": self.arena_mib << 20, "pid": os.getpid()})
        except (ValueError, RuntimeError) as exc:  # refused: an old server, a limit, a full tmpfs
            if self.shared_memory:
                raise ConnectionError(f"the server at {self.url} hands out no shared memory: {exc}") from None
            log.info("receiving over Flight: the server hands out no shared memory (%s)", exc)
            return False
        try:
            return ClientArena(reply["arena"], reply["path"], int(reply["bytes"]), bytes.fromhex(reply["nonce"]))
        except OSError as exc:  # another host, another user, another /dev/shm
            try:
                self._action("detach_arena", {"arena": reply["arena"]})
            except (ValueError, RuntimeError, ConnectionError, PermissionError, TimeoutError):
                pass
            if self.shared_memory:
                raise ConnectionError(f"cannot map the server's shared-memory arena: {exc}") from None
            log.info("receiving over Flight: cannot map the server's arena (%s)", exc)
            return False

    # -- operations -----------------------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        """The store's manifest, plus a ``server`` section (limits, protocol version)."""
        return self._action("info")

    def health(self) -> dict[str, Any]:
        """``{"status": "ready", "in_flight": calls}`` when the server is serving."""
        return self._action("health")

    def sample_batches(self, seed_batches: Sequence[np.ndarray], keys: Sequence[int],
                       fanouts: Sequence[int], *, replace: bool = False, features: bool = False,
                       labels: bool = False, copy: bool = False) -> list[SampleResult]:
        """Sample several seed batches in one call (the server samples them in parallel).

        Args:
            seed_batches: per batch, int ``(B_i,)`` unique dense seed IDs.
            keys: per batch, a non-negative random key; the result is a pure function of
                (graph, seeds, fanouts, replace, key), identical to
                :func:`graphpipe.ops.sampling.sample_neighbors` with ``seed=key``.
            fanouts: neighbours per hop, seed hop first (``-1``: all).
            features: also return the feature rows of ``n_id``.
            labels: also return the seeds' labels.
            copy: copy the arrays out of the received message (default: writable numpy
                arrays over the received buffers, which this call alone holds).
        """
        if not _check_window(seed_batches, keys):
            return []
        arena = self.arena()
        command = _sample_command(fanouts, replace, features, labels, arena)
        responses = self._exchange(command, protocol.sample_request_batch(seed_batches, keys), arena=arena)
        results = [SampleResult(out, x, y) for batch, _ in responses
                   for out, x, y in protocol.decode_sample_rows(batch, copy=copy)]
        if len(results) != len(seed_batches):
            raise RuntimeError(f"server returned {len(results)} samples for {len(seed_batches)} batches")
        return results

    def sample_stream(self, windows: Iterable[tuple[Sequence[np.ndarray], Sequence[int]]],
                      fanouts: Sequence[int], *, replace: bool = False, features: bool = False,
                      labels: bool = False, copy: bool = False, depth: int = 2
                      ) -> Iterator[list[SampleResult]]:
        """Sample a stream of windows, keeping up to ``depth`` of them in flight.

        Yields, per ``(seed_batches, keys)`` of ``windows`` and in order, what
        :meth:`sample_batches` returns for it, but the server samples the next windows
        while the caller decodes and uses this one: window ``i`` goes on the ``i % depth``-th
        of ``depth`` DoExchange streams held open for the generator's life (sent once the
        window ``depth`` places before it was received), so one caller keeps the server's
        workers busy. ``windows`` is consumed lazily, ``depth`` windows ahead of what was
        yielded. Closing the generator early cancels the windows in flight. The client's
        ``timeout`` bounds each stream's whole life (the generator's), not one window.
        With a shared-memory arena, closing early reads the windows in flight (and
        drops them) instead, so that their segments return to the arena.
        """
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"'depth' must be a positive integer (got {depth!r})")
        arena = self.arena()
        command = _sample_command(fanouts, replace, features, labels, arena)
        descriptor = fl.FlightDescriptor.for_command(command)
        streams: list[tuple[fl.FlightStreamWriter, fl.FlightStreamReader]] = []
        pending: deque[tuple[int, int]] = deque()  # (stream, batches) per window in flight
        source = iter(windows)
        sent = 0
        finished = False

        def send_next() -> bool:
            nonlocal sent
            window = next(source, None)
            if window is None:
                return False
            seed_batches, keys = window
            if not _check_window(seed_batches, keys):
                pending.append((-1, 0))
                return True
            slot = sent % depth
            sent += 1
            if slot == len(streams):
                streams.append(self._flight.do_exchange(descriptor, self._options))
                streams[slot][0].begin(protocol.sample_request_schema())
            _write_request(streams[slot][0], protocol.sample_request_batch(seed_batches, keys), arena)
            pending.append((slot, len(seed_batches)))
            return True

        try:
            try:
                while len(pending) < depth and send_next():
                    pass
                while pending:
                    slot, count = pending.popleft()
                    results: list[SampleResult] = []
                    while len(results) < count:
                        data = _chunk_batch(streams[slot][1].read_chunk(), arena)
                        if data is not None:
                            results += [SampleResult(out, x, y) for out, x, y in
                                        protocol.decode_sample_rows(data, copy=copy)]
                    if len(results) != count:
                        raise RuntimeError(f"server returned {len(results)} samples for {count} batches")
                    send_next()
                    yield results
                for writer, reader in streams:  # end the calls: collect each server status
                    writer.done_writing()
                    for _ in reader:
                        pass
                finished = True
            except StopIteration:
                raise RuntimeError("the server ended a sample stream before answering every window") from None
            except (pa.ArrowException, OSError) as exc:
                if isinstance(exc, (ConnectionError, PermissionError)):
                    raise
                raise translate_error(exc) from None
        finally:
            if not finished and arena is not None:
                finished = _drain(streams, arena)
            for writer, reader in streams:
                if not finished:
                    reader.cancel()
                try:
                    writer.close()
                except (pa.ArrowException, OSError):
                    if finished:
                        raise

    def sample(self, seeds: np.ndarray, fanouts: Sequence[int], *, seed: int = 0, replace: bool = False,
               features: bool = False, labels: bool = False, copy: bool = False) -> SampleResult:
        """Sample the multi-hop neighbourhood of ``seeds`` (int ``(B,)`` unique dense IDs)
        with random key ``seed``; see :meth:`sample_batches`."""
        return self.sample_batches([seeds], [seed], fanouts, replace=replace, features=features,
                                   labels=labels, copy=copy)[0]

    def sample_typed(self, seed_batches: Sequence[np.ndarray], keys: Sequence[int], ntype: str,
                     fanouts: Sequence[int] | Mapping[Any, Sequence[int]], *, replace: bool = False,
                     frontier: str = "new", copy: bool = False) -> list[HeteroSampleOutput]:
        """Sample seed batches of node type ``ntype`` on the server's typed graph, one call
        (``info()["typed"]``; a one-type store is the type ``_N`` with the one relation
        ``_N____E____N``).

        Returns one :class:`~graphpipe.ops.sampling.HeteroSampleOutput` per batch, equal to
        ``sample_neighbors(graph, {ntype: seeds}, fanouts, seed=key, ...)`` on the server's
        graph (``fanouts``: one list for every relation, or one per relation by
        ``(src, rel, dst)`` or ``"src___rel___dst"``); on a one-type store the same draws
        as :meth:`sample_batches`.
        """
        if not _check_window(seed_batches, keys):
            return []
        if isinstance(fanouts, Mapping):
            fanouts = {(k if isinstance(k, str) else etype_str(tuple(k))): [int(f) for f in v]
                       for k, v in fanouts.items()}
        else:
            fanouts = [int(f) for f in fanouts]
        command = protocol.encode_command("sample_typed", ntype=ntype, fanouts=fanouts,
                                          replace=bool(replace), frontier=frontier)
        responses = self._exchange(command, protocol.sample_request_batch(seed_batches, keys))
        outs = [o for batch, _ in responses for o in protocol.decode_typed_rows(batch, frontier, copy=copy)]
        if len(outs) != len(seed_batches):
            raise RuntimeError(f"server returned {len(outs)} samples for {len(seed_batches)} batches")
        return outs

    def _external_type(self) -> str:
        if self._id_type is None:
            self._id_type = str(self.info()["server"]["id_map_type"])
        return self._id_type

    def lookup(self, external_ids: Sequence[Any] | np.ndarray | pa.Array, *, strict: bool = True
               ) -> np.ndarray | LookupResult:
        """Dense IDs (int64 ``(n,)``) of external IDs (strings or int64, as the store's ID map holds).

        With ``strict`` unknown IDs raise ``KeyError`` naming how many and the first few;
        otherwise a :class:`LookupResult` (unknown → -1, with the count and first few).
        """
        if isinstance(external_ids, pa.ChunkedArray):
            external_ids = external_ids.combine_chunks()
        if isinstance(external_ids, pa.Array):
            values = external_ids
        else:
            arr = np.asarray(external_ids)
            if arr.ndim != 1:
                raise ValueError(f"'external_ids' must be 1-D (got shape {arr.shape})")
            if arr.size == 0:
                values = pa.array([], pa.string() if self._external_type() == "string" else pa.int64())
            elif arr.dtype.kind in "iu":
                values = pa.array(arr.astype(np.int64, copy=False))
            elif arr.dtype.kind in "UO":
                try:
                    values = pa.array(arr.tolist(), pa.string())
                except (pa.ArrowInvalid, pa.ArrowTypeError):
                    raise ValueError("'external_ids' must be all strings or all integers "
                                     f"(got {arr[:3].tolist()}...)") from None
            else:
                raise ValueError(f"'external_ids' must be strings or integers (got dtype {arr.dtype})")
        if pa.types.is_large_string(values.type):
            values = values.cast(pa.string())
        if pa.types.is_integer(values.type):
            values = values.cast(pa.int64())
        request = pa.record_batch([values], names=["external_id"])
        responses = self._exchange(protocol.encode_command("lookup", strict=bool(strict)), request)
        dense = np.concatenate([b.column(0).to_numpy() for b, _ in responses]) if responses \
            else np.zeros(0, np.int64)
        dense = np.array(dense, dtype=np.int64, copy=True)
        if strict:
            return dense
        num_unknown, first = 0, []
        for _, meta in responses:
            info = json.loads(meta) if meta else {"unknown": 0, "first_unknown": []}
            num_unknown += int(info["unknown"])
            first += list(info["first_unknown"])
        return LookupResult(dense, num_unknown, first[:5])

    def reverse_lookup(self, node_ids: Sequence[int] | np.ndarray) -> list[Any]:
        """External IDs (str or int) of dense IDs ``node_ids`` (int ``(n,)``)."""
        request = pa.record_batch([pa.array(_int_ids(node_ids, "node_ids"))], names=["node_id"])
        responses = self._exchange(protocol.encode_command("reverse_lookup"), request)
        return [v for b, _ in responses for v in b.column(0).to_pylist()]

    def features(self, node_ids: Sequence[int] | np.ndarray, *, labels: bool = False
                 ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Feature rows ``(n, dim)`` of dense IDs ``node_ids`` (int ``(n,)``, repeats allowed);
        with ``labels`` the tuple ``(rows, labels)``."""
        request = pa.record_batch([pa.array(_int_ids(node_ids, "node_ids"))], names=["node_id"])
        responses = self._exchange(protocol.encode_command("features", labels=bool(labels)), request)
        if not responses:
            raise RuntimeError("server returned no feature rows")
        rows = [protocol.rows_of_fixed(b.column(0)) for b, _ in responses]
        rows = rows[0] if len(rows) == 1 else np.concatenate(rows)
        if not labels:
            return rows
        y = [protocol.rows_of_fixed(b.column(1)) for b, _ in responses]
        return rows, (y[0] if len(y) == 1 else np.concatenate(y))

    def close(self) -> None:
        """Give the shared-memory arena back (batches already received stay valid) and
        close the connection."""
        arena, self._arena = self._arena, False
        if isinstance(arena, ClientArena):
            try:
                self._action("detach_arena", {"arena": arena.id})
            except (ValueError, RuntimeError, ConnectionError, PermissionError, TimeoutError) as exc:
                log.info("could not detach arena %s: %s (the server drops it when this process exits)",
                         arena.id, exc)
        self._flight.close()

    def __enter__(self) -> Client:  # noqa: PYI034 - Client is not subclassed
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client({self.url!r})"


def _tls_options(url: str, root_certs: bytes | str | os.PathLike | None) -> dict[str, Any]:
    """FlightClient keyword arguments for ``url``'s transport: the trusted roots for TLS."""
    if root_certs is None:
        return {}
    if not url.startswith("grpc+tls://"):
        raise ValueError(f"'tls_root_certs' needs a grpc+tls:// url (got {url!r})")
    if not isinstance(root_certs, bytes):
        with open(root_certs, "rb") as fh:
            root_certs = fh.read()
    return {"tls_root_certs": root_certs}


def _check_window(seed_batches: Sequence[np.ndarray], keys: Sequence[int]) -> bool:
    """Check a window's seed batches and keys; False when it is empty."""
    if len(seed_batches) != len(keys):
        raise ValueError(f"'keys' must have one key per batch ({len(seed_batches)}) (got {len(keys)})")
    for b in seed_batches:
        arr = np.asarray(b)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"'seed_batches' entries must be 1-D integer arrays "
                             f"(got dtype {arr.dtype}, shape {arr.shape})")
    return len(seed_batches) > 0


def _sample_command(fanouts: Sequence[int], replace: bool, features: bool, labels: bool,
                    arena: ClientArena | None = None) -> bytes:
    extra = {"arena": arena.id} if arena is not None else {}
    return protocol.encode_command("sample", fanouts=[int(f) for f in fanouts], replace=bool(replace),
                                   features=bool(features), labels=bool(labels), **extra)


def _is_loopback(url: str) -> bool:
    host = url.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _write_request(writer: fl.FlightStreamWriter, request: pa.RecordBatch, arena: ClientArena | None) -> None:
    """Write one request batch; with ``arena`` its app_metadata returns the freed segments."""
    freed = arena.take_freed() if arena is not None else []
    if freed:
        writer.write_with_metadata(request, pa.py_buffer(json.dumps({"free": freed}).encode()))
    else:
        writer.write_batch(request)


def _chunk_batch(chunk: fl.FlightStreamChunk, arena: ClientArena | None) -> pa.RecordBatch | None:
    """The record batch of a response message: its own, or the arena segment a
    metadata-only message ``{"segment": [offset, length]}`` names; None for other messages."""
    if chunk.data is not None:
        return chunk.data
    if arena is None or chunk.app_metadata is None:
        return None
    try:
        offset, length = json.loads(chunk.app_metadata.to_pybytes())["segment"]
    except (ValueError, KeyError, TypeError):
        raise RuntimeError(f"server sent an unexpected metadata message "
                           f"{chunk.app_metadata.to_pybytes()[:80]!r}") from None
    return arena.read(int(offset), int(length))


def _drain(streams: list[tuple[fl.FlightStreamWriter, fl.FlightStreamReader]], arena: ClientArena) -> bool:
    """End the calls of ``streams`` and read what the server still sends (its segments
    return to the arena as the batches are dropped). False when a stream failed."""
    clean = True
    for writer, reader in streams:
        try:
            writer.done_writing()
            while True:
                _chunk_batch(reader.read_chunk(), arena)
        except StopIteration:
            pass
        except (pa.ArrowException, OSError, RuntimeError):
            clean = False
    return clean


def _int_ids(values: Sequence[int] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"'{name}' must be a 1-D array of integer IDs (got dtype {arr.dtype}, "
                         f"shape {arr.shape})")
    return arr.astype(np.int64, copy=False)


class RemoteSampler(BaseSampler):
    """The loader sampler that samples on a graphpipe service:
    ``NeighborLoader(store, fanouts, batch_size=batch_size, sampler=RemoteSampler(url, fanouts=fanouts))``.

    For the same seed batches and keys it returns exactly what
    :class:`graphpipe.loaders.LocalSampler` returns on the server's store, so a loader
    over the service yields the batches of the local loader. The server samples a
    window's batches in parallel; a prefetching loader streams its windows through
    :meth:`sample_stream` (2 in flight), otherwise one call per window.

    Several URLs (services over the same store, "replicas") spread the batches round
    robin and keep the loader going when one dies: its batches are asked again, same
    seeds and keys, of another (:class:`graphpipe.service.replicas.ReplicaSet`), so the
    epoch is the one a single service gives.

    Args:
        url: ``grpc://host:port`` or ``grpc+tls://host:port``, or a list of them (replicas).
        token: bearer token (``--token-file`` servers).
        fanouts: neighbours per hop, seed hop first; None until :meth:`bind_fanouts`
            is called (by a loader that supports it).
        replace: sample with replacement.
        timeout: per-call timeout in seconds.
        tune_malloc, shared_memory, arena_mib, tls_root_certs: see :class:`Client`.
        revive_after: with replicas, seconds before a failed replica is called again.
    """

    def __init__(self, url: str | Sequence[str], token: str | None = None, *,
                 fanouts: Sequence[int] | None = None, replace: bool = False,
                 timeout: float | None = None, tune_malloc: bool = True,
                 shared_memory: bool | None = None, arena_mib: int = 256,
                 tls_root_certs: bytes | str | os.PathLike | None = None, revive_after: float = 30.0):
        urls = [url] if isinstance(url, str) else list(url)
        if not urls:
            raise ValueError("'url' must name at least one service")
        clients = [Client(u, token, timeout=timeout, tune_malloc=tune_malloc, shared_memory=shared_memory,
                          arena_mib=arena_mib, tls_root_certs=tls_root_certs) for u in urls]
        self.client = clients[0]
        self.replicas = None
        if len(clients) > 1:
            from graphpipe.service.replicas import ReplicaSet

            self.replicas = ReplicaSet(clients, revive_after=revive_after)
        self.fanouts = None if fanouts is None else [int(f) for f in fanouts]
        self.replace = bool(replace)

    @property
    def supports_stream(self) -> bool:
        """Yes: :meth:`sample_stream` keeps windows in flight on the service."""
        return True

    @property
    def supports_bind_fanouts(self) -> bool:
        """Yes: a loader hands its fanouts over with :meth:`bind_fanouts`."""
        return True

    def bind_fanouts(self, fanouts: Sequence[int], replace: bool = False) -> None:
        """Take the loader's fanouts (and ``replace``) when none were given; refuse different ones."""
        fanouts = [int(f) for f in fanouts]
        if self.fanouts is not None and self.fanouts != fanouts:
            raise ValueError(f"'fanouts' of the loader {fanouts} differ from the RemoteSampler's "
                             f"{self.fanouts}")
        self.fanouts = fanouts
        self.replace = self.replace or bool(replace)

    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray],
                          seeds: Sequence[int]) -> list[SampleOutput]:
        if self.fanouts is None:
            raise ValueError("'fanouts' of the RemoteSampler are not set (got None); pass "
                             "RemoteSampler(url, fanouts=[...])")
        source = self.replicas or self.client
        results = source.sample_batches(seed_batches, seeds, self.fanouts, replace=self.replace)
        return [r.output for r in results]

    def sample_stream(self, windows: Iterable[tuple[Sequence[np.ndarray], Sequence[int]]], *,
                      depth: int = 2) -> Iterator[list[SampleOutput]]:
        """:meth:`sample_from_nodes` of each ``(seed_batches, seeds)`` of ``windows``, in order,
        with up to ``depth`` windows in flight (:meth:`Client.sample_stream`)."""
        if self.fanouts is None:
            raise ValueError("'fanouts' of the RemoteSampler are not set (got None); pass "
                             "RemoteSampler(url, fanouts=[...])")
        source = self.replicas or self.client
        for results in source.sample_stream(windows, self.fanouts, replace=self.replace, depth=depth):
            yield [r.output for r in results]

    def close(self) -> None:
        """Close the connection(s) (and the replicas' worker threads)."""
        if self.replicas is not None:
            self.replicas.close()
        else:
            self.client.close()

    def __repr__(self) -> str:
        urls = self.client.url if self.replicas is None else self.replicas.urls
        return f"RemoteSampler({urls!r}, fanouts={self.fanouts}, replace={self.replace})"


class RemoteHeteroSampler:
    """The typed loader's sampler that samples on a graphpipe service:
    ``NeighborLoader(store, fanouts, ..., sampler=RemoteHeteroSampler(url))``.

    For the same seeds, fanouts and keys the service returns exactly what the local typed
    sampler returns on the same graph, so a loader over the service yields the batches of
    the local loader (features are gathered by the loader, from its own data). The
    loader's graph must be the server's: :meth:`check_graph` compares node counts and
    relations with the server's ``info()["typed"]`` and refuses a mismatch.

    Args:
        url: ``grpc://host:port`` of a ``graphpipe serve`` over the same typed store.
        token, timeout, tls_root_certs: see :class:`graphpipe.service.Client`.

    Over a served typed store, the remote loader's batches equal the local loader's:

    >>> import os, tempfile
    >>> import numpy as np, torch
    >>> from graphpipe.loaders import NeighborLoader
    >>> from graphpipe.service import SamplingServer
    >>> from graphpipe.store.writer import TypedStoreWriter
    >>> tmp = tempfile.TemporaryDirectory()
    >>> with TypedStoreWriter(os.path.join(tmp.name, "t"), {"paper": 3, "author": 2},
    ...                       target_type="paper") as w:
    ...     w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 1, 2]))
    ...     w.write_node_array("paper", "feat", np.eye(3, dtype=np.float32))
    ...     path = w.commit()
    >>> server = SamplingServer(path, "grpc://127.0.0.1:0", threads=1)
    >>> remote = RemoteHeteroSampler(f"grpc://127.0.0.1:{server.port}")
    >>> kw = dict(input_nodes=("paper", None), batch_size=2, seed=3)
    >>> local_batches = list(NeighborLoader(remote.graph_data(path), [2], **kw))
    >>> remote_batches = list(NeighborLoader(remote.graph_data(path), [2], sampler=remote, **kw))
    >>> all(torch.equal(a.n_id[t], b.n_id[t]) for a, b in zip(local_batches, remote_batches)
    ...     for t in a.n_id)
    True
    >>> remote.close(); server.close(); tmp.cleanup()
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float | None = None,
                 tls_root_certs: bytes | str | None = None):
        self.client = Client(url, token, timeout=timeout, shared_memory=False,
                             tls_root_certs=tls_root_certs)
        typed = self.client.info()["typed"]
        self.node_types: dict[str, int] = dict(typed["node_types"])
        self.edge_types: list[str] = list(typed["edge_types"])
        self.reverse = bool(typed["reverse"])

    def graph_data(self, store: Any) -> Any:
        """The :class:`graphpipe.loaders.GraphData` of ``store`` (a typed store or
        its path) over the relations the server samples (its reverses added when the
        server adds them)."""
        from graphpipe.loaders.graph_data import add_reverse_relations, resolve_graph_data

        data = resolve_graph_data(store)
        if self.reverse and data.store is not None:
            data = add_reverse_relations(data)
        self.check_graph(data.num_nodes_dict, data.edge_types)
        return data

    def check_graph(self, num_nodes: Mapping[str, int], edge_types: Sequence[EdgeType]) -> None:
        """Refuse a loader graph that is not the server's (counts, relations, order)."""
        mine = [etype_str(e) for e in edge_types]
        if dict(num_nodes) != self.node_types or mine != self.edge_types:
            raise ValueError(f"the loader's graph ({dict(num_nodes)}, {mine}) is not the one the "
                             f"service samples ({self.node_types}, {self.edge_types})")

    def sample(self, seed_batches: Sequence[Mapping[str, np.ndarray]],
               fanouts: Mapping[EdgeType, Sequence[int]], keys: Sequence[int], *,
               replace: bool = False, frontier: str = "new") -> list[HeteroSampleOutput]:
        """One window: per batch a ``{ntype: seeds}`` dict of one type."""
        types = {t for b in seed_batches for t in b}
        if len(types) > 1:
            raise ValueError(f"a remote window must seed one node type (got {sorted(types)})")
        if not types:
            return []
        ntype = types.pop()
        return self.client.sample_typed([b[ntype] for b in seed_batches], keys, ntype, dict(fanouts),
                                        replace=replace, frontier=frontier)

    def close(self) -> None:
        """Close the connection."""
        self.client.close()
