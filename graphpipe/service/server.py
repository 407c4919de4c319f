"""The Arrow Flight server of the sampling / ID-map service (protocol: :mod:`graphpipe.service`).

:class:`SamplingServer` serves one store, opened read-only and memory-mapped.
At most ``threads`` seed batches are sampled at a time over all calls (the Numba
kernels release the GIL): a request of one batch is sampled in the call's own
thread, the batches of a larger request on a shared pool of ``threads`` workers,
each response row written as soon as it and the rows before it are ready. :func:`serve_until_signalled`
blocks until SIGTERM/SIGINT, then drains the calls in flight and returns.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.allocator import release_free_memory
from graphpipe.ops.sampling import DEFAULT_ETYPE, sample_neighbors
from graphpipe.service import limits, protocol
from graphpipe.service.arena import ArenaRegistry
from graphpipe.service.idindex import StringIdIndex
from graphpipe.service.lookup import features, lookup, reverse_lookup
from graphpipe.service.requests import action_params, owner
from graphpipe.service.sample import TypedSampling, sample, sample_typed, served_graph
from graphpipe.store import GraphStore, open_store
from graphpipe.store.generation import StoreReplacedError

__all__ = ["BearerTokenMiddlewareFactory", "SamplingServer", "hide_reply_tracebacks",
           "serve_until_signalled"]

log = logging.getLogger("graphpipe.service")

DEFAULT_MAX_SEEDS = 1 << 18
DEFAULT_MAX_ROWS = 1 << 22
DEFAULT_MAX_RESPONSE_BYTES = 1 << 30
DEFAULT_MAX_REQUEST_BYTES = 2 << 30
DEFAULT_SHARED_MEMORY_BYTES = 2 << 30
MAX_LAYERS = limits.MAX_LAYERS
#: after a call that moved more bytes than this, free heap memory goes back to the OS
TRIM_AFTER_BYTES = 256 << 20


def hide_reply_tracebacks() -> None:
    """Keep Python tracebacks (and with them the server's file paths) out of error replies.

    pyarrow's Flight server appends ``traceback.format_exception`` of a handler's
    exception to the reply of every status but the Flight-specific ones (so to each
    INVALID_ARGUMENT and NOT_FOUND); with ``sys.tracebacklimit = 0`` that text is only
    ``ExceptionType: message``. Process-wide (``graphpipe serve`` calls it); the server's
    own log keeps full tracebacks (:func:`_log_internal_error` formats them with an
    explicit limit).
    """
    sys.tracebacklimit = 0


class BearerTokenMiddlewareFactory(fl.ServerMiddlewareFactory):
    """Refuses (UNAUTHENTICATED) every call whose ``authorization`` header is not
    ``Bearer <token>`` (constant-time comparison)."""

    def __init__(self, token: str):
        if not token:
            raise ValueError("'token' must be a non-empty string (got '')")
        self._expected = f"Bearer {token}".encode()

    def start_call(self, info: fl.CallInfo, headers: dict[str, list[str]]) -> None:
        for value in headers.get("authorization", []):
            given = value.encode() if isinstance(value, str) else bytes(value)
            if hmac.compare_digest(given, self._expected):
                return
        log.info("refused %s call: missing or wrong bearer token", _method_name(info))
        raise fl.FlightUnauthenticatedError(
            "missing or wrong bearer token (send header 'authorization: Bearer <token>')")


def _method_name(info: fl.CallInfo) -> str:
    name = str(getattr(info, "method", "call"))
    return name.rsplit(".", 1)[-1].lower()


class SamplingServer(fl.FlightServerBase):
    """Serves ``sample``, ``lookup``, ``reverse_lookup``, ``features`` (DoExchange) and
    ``info``, ``health`` (DoAction) for one store.

    Args:
        store: a :class:`graphpipe.store.GraphStore` or a store path (opened read-only;
            arrays are memory maps when stored uncompressed).
        location: ``grpc://host:port`` to bind; port 0 picks a free port (see :attr:`port`).
        token: when set, every call must carry ``authorization: Bearer <token>``.
        threads: sampling worker threads shared by all calls (default: CPU count).
        max_seeds: most seeds in one request record batch of ``sample``.
        max_rows: most IDs in one request record batch of ``lookup``, ``reverse_lookup``
            and ``features``.
        max_response_bytes: most bytes (Arrow buffers) in one response record batch: one
            sampled batch of ``sample`` (with its feature rows), one batch of ``features``;
            a larger one fails the call (INVALID_ARGUMENT naming the size and the limit)
            instead of being sent.
        max_request_bytes: most bytes one ``sample`` request batch may make the server
            allocate, as an upper bound computed before any work
            (:func:`graphpipe.service.limits.sample_bytes_bound` summed over its seed
            batches); above it the call fails (INVALID_ARGUMENT naming bound and limit).
        shared_memory_bytes: most bytes of shared-memory arenas handed out to clients on
            this host, all together (0: none; see :mod:`graphpipe.service.arena`).
        shared_memory_dir: where arena files are created (a tmpfs).
        tls_certificates: ``[(certificate PEM, key PEM)]`` to serve TLS; ``location``
            must then be ``grpc+tls://host:port``.
        typed_reverse: a typed store only: serve its relations plus their reverses (the
            default, what the typed trainer samples) or, False, the stored ones only
            (:func:`graphpipe.service.sample.served_graph`).

    Error replies carry the server's message; to keep pyarrow from appending the Python
    traceback to them call :func:`hide_reply_tracebacks` (``graphpipe serve`` does).
    """

    def __init__(self, store: GraphStore | str | os.PathLike, location: str = "grpc://127.0.0.1:0", *,
                 token: str | None = None, threads: int | None = None,
                 max_seeds: int = DEFAULT_MAX_SEEDS, max_rows: int = DEFAULT_MAX_ROWS,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
                 shared_memory_bytes: int = DEFAULT_SHARED_MEMORY_BYTES, shared_memory_dir: str = "/dev/shm",
                 tls_certificates: list[tuple[bytes, bytes]] | None = None, typed_reverse: bool = True):
        self.store = store if isinstance(store, GraphStore) else open_store(store)
        threads = (os.cpu_count() or 1) if threads is None else threads
        for name, value in (("threads", threads), ("max_seeds", max_seeds), ("max_rows", max_rows),
                            ("max_response_bytes", max_response_bytes),
                            ("max_request_bytes", max_request_bytes)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"'{name}' must be a positive integer (got {value!r})")
        self.threads, self.max_seeds, self.max_rows = int(threads), int(max_seeds), int(max_rows)
        self.max_response_bytes, self.max_request_bytes = int(max_response_bytes), int(max_request_bytes)
        if isinstance(shared_memory_bytes, bool) or not isinstance(shared_memory_bytes, (int, np.integer)) \
                or shared_memory_bytes < 0:
            raise ValueError(f"'shared_memory_bytes' must be an integer >= 0 (got {shared_memory_bytes!r})")
        if self.store.is_typed:  # sample_typed only: sample.served_graph adds the reverses
            graph, reverse = served_graph(self.store, None, typed_reverse)
            max_degree = None
        else:
            self._init_one_relation()
            graph, reverse = served_graph(self.store, (self.indptr, self.indices), False)
            max_degree = {DEFAULT_ETYPE: self.shape.max_degree}
        self.typed = TypedSampling(graph, reverse, max_degree=max_degree, max_seeds=self.max_seeds,
                                   max_request_bytes=self.max_request_bytes,
                                   max_response_bytes=self.max_response_bytes)
        self.pool = ThreadPoolExecutor(self.threads, thread_name_prefix="graphpipe-serve")
        self.slots = threading.BoundedSemaphore(self.threads)  # batches sampled at a time
        self._lock = threading.Lock()
        self._in_flight = 0
        self._idle = 0  # calls in flight waiting for their client's next request batch
        self.draining = False
        self.closed = False
        self._handlers: dict[str, Callable[..., int]] = {
            "sample": sample, "lookup": lookup, "reverse_lookup": reverse_lookup,
            "features": features, "sample_typed": sample_typed}
        if self.store.is_typed:
            self._handlers = {op: _typed_only for op in self._handlers}
            self._handlers["sample_typed"] = sample_typed
        self.arenas = ArenaRegistry(int(shared_memory_bytes), shared_memory_dir)
        middleware = {"auth": BearerTokenMiddlewareFactory(token)} if token is not None else None
        super().__init__(location, middleware=middleware, tls_certificates=tls_certificates or [])

    def _init_one_relation(self) -> None:
        """Topology, feature/label shapes and ID map of a one-type store (checked once)."""
        indptr, indices = self.store.topology()  # checked once: the sampling kernels trust it
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices)
        self.num_nodes = self.store.num_nodes
        if self.indptr.shape[0] != self.num_nodes + 1:
            raise ValueError(f"'store' csc/indptr has {self.indptr.shape[0]} entries for "
                             f"{self.num_nodes} nodes")
        self.feature_spec = None  # (dtype, width or None) of a feature row
        if self.store.has_features:
            views, _ = self.store.feature_chunks()
            self.feature_spec = (views[0].dtype, int(views[0].shape[1]) if views[0].ndim > 1 else None)
        self.label_spec = None
        if self.store.has_labels:
            labels = self.store.labels
            self.label_spec = (labels.dtype, int(labels.shape[1]) if labels.ndim > 1 else None)
        self.id_map = self.store.id_map
        self.string_index: StringIdIndex | None = None  # built on the first string lookup
        self.index_lock = threading.Lock()
        self.id_type = protocol.id_type_for(self.num_nodes, self.indices.shape[0])
        self.shape = limits.GraphShape(self.indptr)  # the request bound's view of the graph
        if self.num_nodes:  # load the compiled sampling kernels before the first call
            sample_neighbors(self.indptr, self.indices, np.zeros(1, np.int64), [1])

    # -- plumbing ---------------------------------------------------------------------------------
    def _call(self, context: fl.ServerCallContext, op: str, work: Callable[[dict[str, Any]], int]) -> None:
        """Run ``work`` (returns the request size; may rename ``call["op"]`` and set
        ``call["bytes"]``, what it allocated) with one log line naming a fresh request ID,
        and the translation of its errors into Flight statuses (internal errors: only the
        request ID in the reply, the traceback in the log)."""
        t0 = time.perf_counter()
        call: dict[str, Any] = {"op": op, "id": secrets.token_hex(6), "bytes": 0}
        with self._lock:
            self._in_flight += 1
        try:
            size = work(call)
            log.info("request %s: %s %s size=%d %.1f ms", call["id"], context.peer(), call["op"], size,
                     1e3 * (time.perf_counter() - t0))
        except Exception as exc:  # noqa: BLE001 - every handler error becomes a Flight status
            log.info("request %s: %s %s %.1f ms error: %s", call["id"], context.peer(), call["op"],
                     1e3 * (time.perf_counter() - t0), _one_line(exc))
            raise _flight_error(exc, call["id"]) from None
        finally:
            with self._lock:
                self._in_flight -= 1
            if call["bytes"] > TRIM_AFTER_BYTES:
                release_free_memory()

    def do_exchange(self, context: fl.ServerCallContext, descriptor: fl.FlightDescriptor,
                    reader: fl.MetadataRecordBatchReader, writer: fl.MetadataRecordBatchWriter) -> None:
        def work(call: dict[str, Any]) -> int:
            if descriptor.descriptor_type != fl.DescriptorType.CMD:
                raise ValueError("the DoExchange descriptor must be a command (JSON), not a path")
            op, params = protocol.parse_command(descriptor.command)
            call["op"] = op
            return self._handlers[op](self, params, reader, writer, call, context)

        self._call(context, "exchange", work)

    def do_action(self, context: fl.ServerCallContext, action: fl.Action) -> list[bytes]:
        result: list[bytes] = []

        def work(call: dict[str, Any]) -> int:
            if action.type == "info":
                result.append(json.dumps(self.info()).encode())
            elif action.type == "health":
                result.append(json.dumps(self.health()).encode())
            elif action.type == "attach_arena":
                result.append(json.dumps(self._attach_arena(action.body, owner(context))).encode())
            elif action.type == "detach_arena":
                params = action_params(action.body, ("arena",), "detach_arena")
                detached = self.arenas.detach(params.get("arena"), owner=owner(context))
                result.append(json.dumps({"detached": detached}).encode())
            else:
                raise ValueError(f"'action' must be one of {list(protocol.ACTIONS)} (got {action.type!r:.80})")
            return 0

        self._call(context, str(action.type)[:40], work)
        return result

    def list_actions(self, context: fl.ServerCallContext) -> list[tuple[str, str]]:
        return [("info", "the store's manifest and the server's limits (JSON)"),
                ("health", "{\"status\": \"ready\"} when serving (JSON)"),
                ("attach_arena", ("a shared-memory arena for sample responses on this host: body "
                                  "{\"bytes\": N, \"pid\": P} -> {\"arena\", \"path\", \"bytes\", \"nonce\"}")),
                ("detach_arena", "drop an arena: body {\"arena\": ID}")]

    def info(self) -> dict[str, Any]:
        """The manifest plus a ``typed`` section (the graph ``sample_typed`` samples: a
        one-type store is the relation ``_N____E____N``) and a ``server`` section (protocol
        version, limits, threads, operations; for a one-type store also its ID types and
        shared memory)."""
        server = {"protocol_version": protocol.PROTOCOL_VERSION, "max_seeds": self.max_seeds,
                  "max_request_bytes": self.max_request_bytes,
                  "max_response_bytes": self.max_response_bytes, "threads": self.threads}
        if self.store.is_typed:
            server.update(operations=["sample_typed"], actions=["info", "health"])
        else:
            server.update(max_rows=self.max_rows, operations=list(protocol.DATA_OPS),
                          actions=list(protocol.ACTIONS), id_map_type=self.id_map.external_type,
                          sample_id_type=str(self.id_type),
                          shared_memory={"enabled": self.arenas.enabled, "max_bytes": self.arenas.max_bytes,
                                         "directory": self.arenas.directory})
        return {**self.store.manifest, "typed": self.typed.info(), "server": server}

    def health(self) -> dict[str, Any]:
        """``{"status": "ready" | "draining", "in_flight": calls (this one included), "arenas":
        shared-memory arenas attached, "arena_bytes_in_use": bytes of their segments not yet
        freed}``."""
        return {"status": "draining" if self.draining else "ready", "in_flight": self._in_flight,
                "arenas": len(self.arenas), "arena_bytes_in_use": self.arenas.bytes_in_use}

    def close(self) -> None:
        """Stop accepting calls, wait for those in flight, stop the worker pool."""
        self.draining = True
        self.shutdown()
        self.pool.shutdown(wait=True)
        self.arenas.close()
        self.closed = True

    @contextlib.contextmanager
    def waiting_for_client(self) -> Iterator[None]:
        """Counts the calling handler as idle while it waits for its client's next request
        batch (see :meth:`only_idle_calls`)."""
        with self._lock:
            self._idle += 1
        try:
            yield
        finally:
            with self._lock:
                self._idle -= 1

    @property
    def in_flight(self) -> int:
        """Calls in flight, the idle ones included."""
        return self._in_flight

    def only_idle_calls(self) -> bool:
        """Whether calls are in flight and every one waits for its client's next request
        batch (a held :meth:`Client.sample_stream`): no work of theirs is pending."""
        with self._lock:
            return 0 < self._in_flight == self._idle

    def _attach_arena(self, body: bytes, owner: str) -> dict[str, Any]:
        """A new arena for the connection ``owner`` (``pid`` in the body is accepted for
        older clients and ignored: the server trusts no process ID a client claims)."""
        params = action_params(body, ("bytes", "pid"), "attach_arena")
        pid = params.get("pid", 1)
        if isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
            raise ValueError(f"'pid' must be a positive integer (got {pid!r:.40}); it is ignored")
        try:
            arena = self.arenas.attach(params.get("bytes"), owner)
        except OSError as exc:
            raise ValueError(f"cannot create a shared-memory arena of {params.get('bytes')} bytes: "
                             f"{exc.strerror or exc}; ask for fewer bytes") from None
        log.info("attached shared-memory arena %s (%d bytes) for %s", arena.id, arena.nbytes, owner)
        return {"arena": arena.id, "path": arena.path, "bytes": arena.nbytes, "nonce": arena.nonce.hex()}

# -- helpers ------------------------------------------------------------------------------------
def _flight_error(exc: BaseException, request_id: str) -> BaseException:
    """The Flight status of a handler error: INVALID_ARGUMENT (ValueError, TypeError,
    IndexError), NOT_FOUND (KeyError), Flight's own errors as raised; anything else is
    INTERNAL with only ``request_id`` in the reply (the traceback goes to the log); a store
    replaced under the server is UNAVAILABLE (no path in the reply)."""
    if isinstance(exc, fl.FlightError):
        return exc
    if isinstance(exc, StoreReplacedError):  # what was mapped before still serves; this is new
        return fl.FlightUnavailableError("the store was replaced (graphpipe ingest --overwrite) "
                                         "after this server opened it; restart the server")
    if isinstance(exc, (ValueError, TypeError, IndexError)):  # pyarrow's own included
        return pa.ArrowInvalid(_one_line(exc))
    if isinstance(exc, KeyError):
        return pa.ArrowKeyError(_one_line(exc))
    _log_internal_error(exc, request_id)
    return fl.FlightInternalError(f"internal error, request id {request_id} (the server's log has "
                                  "the details)")


def _one_line(exc: BaseException) -> str:
    """The message of ``exc`` (a KeyError's without quotes), on one line, at most 1000 characters."""
    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
    return " ".join(str(message).split())[:1000]


def _log_internal_error(exc: BaseException, request_id: str) -> None:
    """Log ``exc`` with its full traceback (an explicit limit: ``sys.tracebacklimit`` may
    be 0 in this process, see :func:`hide_reply_tracebacks`)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=1000))
    log.error("request %s: internal error\n%s", request_id, text.rstrip())


def _typed_only(server: SamplingServer, params: dict[str, Any], reader: Any, writer: Any,
                call: dict[str, Any], context: fl.ServerCallContext) -> int:
    """The answer of a typed store to the one-relation operations."""
    raise ValueError(f"the store is typed ({len(server.typed.graph.edge_types)} relations): it "
                     f"serves 'sample_typed' only (not {call['op']!r})")


def serve_until_signalled(server: SamplingServer, *, drain_timeout: float = 60.0,
                          signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT),
                          ready: Callable[[], None] | None = None) -> bool:
    """Block until one of ``signals``, then drain: refuse new calls, wait (at most
    ``drain_timeout`` seconds) for the calls in flight. Must run in the main thread.
    ``ready`` is called once the signal handlers are installed (e.g. to announce the
    address: a signal sent after that is always a clean drain).

    Calls that only wait for their client's next request (held sample streams) do not
    hold the drain up: once every call left is such, it returns (the caller exits; those
    clients see the connection close), with :attr:`SamplingServer.closed` still False.

    Returns:
        True when every call in flight finished or waits idle, False when the timeout expired.
    """
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda signum, frame: stop.set()) for sig in signals}
    try:
        if ready is not None:
            ready()
        while not stop.wait(0.5):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("signal received: draining %d call(s) in flight", server.in_flight)
    closer = threading.Thread(target=server.close, name="graphpipe-serve-drain", daemon=True)
    closer.start()
    deadline = time.monotonic() + drain_timeout
    idle_polls = 0
    while closer.is_alive() and time.monotonic() < deadline:
        closer.join(0.05)
        # every call left waits for a request that would be refused
        idle_polls = idle_polls + 1 if server.only_idle_calls() else 0
        if idle_polls >= 4:
            log.info("drained; closing %d idle stream(s) (their clients get UNAVAILABLE); exiting",
                     server.in_flight)
            server.arenas.close()
            return True
    if closer.is_alive():
        log.warning("drain timed out after %.0f s with %d call(s) in flight", drain_timeout,
                    server.in_flight)
        return False
    log.info("drained; exiting")
    return True
