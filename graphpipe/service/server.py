"""The Arrow Flight server of the sampling / ID-map service (protocol: :mod:`graphpipe.service`).

:class:`SamplingServer` serves one store, opened read-only and memory-mapped.
At most ``threads`` seed batches are sampled at a time over all calls (the Numba
kernels release the GIL): a request of one batch is sampled in the call's own
thread, the batches of a larger request on a shared pool of ``threads`` workers,
each response row written as soon as it and the rows before it are ready. :func:`serve_until_signalled`
blocks until SIGTERM/SIGINT, then drains the calls in flight and returns.
"""

from __future__ import annotations

import functools
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
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.allocator import release_free_memory
from graphpipe.ops.sampling import sample_neighbors
from graphpipe.service import limits, protocol
from graphpipe.service.arena import ArenaRegistry, ServerArena
from graphpipe.service.idindex import StringIdIndex
from graphpipe.store import GraphStore, open_store

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
            (:mod:`graphpipe.service.typed_server`).

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
        self.typed = None
        if self.store.is_typed:  # a typed store answers sample_typed (service/typed_server.py)
            from graphpipe.service.typed_server import TypedSampling

            self.typed = TypedSampling(self.store, reverse=typed_reverse, threads=self.threads,
                                       max_seeds=self.max_seeds, max_request_bytes=self.max_request_bytes,
                                       max_response_bytes=self.max_response_bytes)
        else:
            self._init_homogeneous()
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="graphpipe-serve")
        self._slots = threading.BoundedSemaphore(self.threads)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._idle = 0  # calls in flight waiting for their client's next request batch
        self.draining = False
        self.closed = False
        self._handlers: dict[str, Callable[..., int]] = {
            "sample": self._sample, "lookup": self._lookup,
            "reverse_lookup": self._reverse_lookup, "features": self._features,
            "sample_typed": self._sample_typed,
        }
        if self.typed is not None:
            self._handlers = {op: self._typed_only for op in self._handlers}
            self._handlers["sample_typed"] = self._sample_typed
        self.arenas = ArenaRegistry(int(shared_memory_bytes), shared_memory_dir)
        middleware = {"auth": BearerTokenMiddlewareFactory(token)} if token is not None else None
        super().__init__(location, middleware=middleware, tls_certificates=tls_certificates or [])

    def _init_homogeneous(self) -> None:
        """Topology, feature/label shapes and ID map of a one-type store (checked once)."""
        indptr, indices = self.store.topology()  # checked once: the sampling kernels trust it
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.asarray(indices)
        self.num_nodes = self.store.num_nodes
        if self.indptr.shape[0] != self.num_nodes + 1:
            raise ValueError(f"'store' csc/indptr has {self.indptr.shape[0]} entries for "
                             f"{self.num_nodes} nodes")
        self._feature = None
        if self.store.has_features:
            views, _ = self.store.feature_chunks()
            self._feature = (views[0].dtype, int(views[0].shape[1]) if views[0].ndim > 1 else None)
        self._label = None
        if self.store.has_labels:
            labels = self.store.labels
            self._label = (labels.dtype, int(labels.shape[1]) if labels.ndim > 1 else None)
        self._id_map = self.store.id_map
        self._string_index: StringIdIndex | None = None  # built on the first string lookup
        self._index_lock = threading.Lock()
        self._id_type = protocol.id_type_for(self.num_nodes, self.indices.shape[0])
        self._shape = limits.GraphShape(self.indptr)  # the request bound's view of the graph
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
            return self._handlers[op](params, reader, writer, call, context)

        self._call(context, "exchange", work)

    def do_action(self, context: fl.ServerCallContext, action: fl.Action) -> list[bytes]:
        result: list[bytes] = []

        def work(call: dict[str, Any]) -> int:
            if action.type == "info":
                result.append(json.dumps(self.info()).encode())
            elif action.type == "health":
                result.append(json.dumps(self.health()).encode())
            elif action.type == "attach_arena":
                result.append(json.dumps(self._attach_arena(action.body, _owner(context))).encode())
            elif action.type == "detach_arena":
                params = _action_params(action.body, ("arena",), "detach_arena")
                detached = self.arenas.detach(params.get("arena"), owner=_owner(context))
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
        """The manifest plus a ``server`` section (protocol version, limits, threads); for a
        typed store a ``typed`` section (the graph ``sample_typed`` samples) instead of the
        one-type fields."""
        if self.typed is not None:
            return {**self.store.manifest, "typed": self.typed.info(),
                    "server": {"protocol_version": protocol.PROTOCOL_VERSION,
                               "max_seeds": self.max_seeds, "max_request_bytes": self.max_request_bytes,
                               "max_response_bytes": self.max_response_bytes,
                               "threads": self.threads, "operations": ["sample_typed"],
                               "actions": ["info", "health"]}}
        return {**self.store.manifest,
                "server": {"protocol_version": protocol.PROTOCOL_VERSION, "max_seeds": self.max_seeds,
                           "max_rows": self.max_rows, "max_response_bytes": self.max_response_bytes,
                           "max_request_bytes": self.max_request_bytes,
                           "threads": self.threads,
                           "operations": list(protocol.DATA_OPS), "actions": list(protocol.ACTIONS),
                           "id_map_type": self._id_map.external_type,
                           "sample_id_type": str(self._id_type),
                           "shared_memory": {"enabled": self.arenas.enabled,
                                             "max_bytes": self.arenas.max_bytes,
                                             "directory": self.arenas.directory}}}

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
        self._pool.shutdown(wait=True)
        self.arenas.close()
        self.closed = True

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
        params = _action_params(body, ("bytes", "pid"), "attach_arena")
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

    # -- sample ---------------------------------------------------------------------------------
    def _sample(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                context: fl.ServerCallContext) -> int:
        _only(params, ("fanouts", "replace", "features", "labels", "arena"), "sample")
        fanouts = limits.check_fanouts(params.get("fanouts"))
        if "arena" in params and not isinstance(params["arena"], str):
            raise ValueError(f"'arena' must be a string (got {params['arena']!r:.40})")
        arena = self.arenas.get(params["arena"], owner=_owner(context)) if "arena" in params else None
        replace = _flag(params, "replace")
        want_x, want_y = _flag(params, "features"), _flag(params, "labels")
        if want_x and self._feature is None:
            raise ValueError("'features' is true but the store has no node features")
        if want_y and self._label is None:
            raise ValueError("'labels' is true but the store has no labels")
        schema = protocol.sample_response_schema(len(fanouts), id_type=self._id_type,
                                                 feature=self._feature if want_x else None,
                                                 label=self._label if want_y else None)
        kernel_fanouts = limits.effective_fanouts(fanouts, replace, self._shape.max_degree)
        row_bytes = _row_bytes(self._feature) if want_x else 0
        seed_row_bytes = _row_bytes(self._label) if want_y else 0
        writer.begin(schema)
        schema_bytes = schema.serialize().size if arena is not None else 0
        total = 0
        for batch, metadata in _request_batches(self, reader, protocol.sample_request_schema(), "sample",
                                                with_metadata=True):
            _free_segments(arena, metadata)
            seed_batches, keys = self._seed_batches(batch)
            total += sum(len(b) for b in seed_batches)
            bound = sum(limits.sample_bytes_bound(self._shape, b, kernel_fanouts, replace, row_bytes,
                                                  seed_row_bytes) for b in seed_batches)
            if bound > self.max_request_bytes:
                raise ValueError(
                    f"sample request of {len(seed_batches)} batch(es), {total} seeds, fanouts {fanouts} "
                    f"could take up to {bound} bytes; this server's limit is --max-request-bytes "
                    f"{self.max_request_bytes} per request batch; use fewer seeds or smaller fanouts")
            call["bytes"] = max(call["bytes"], bound)
            args = (schema, kernel_fanouts, replace, want_x, want_y, arena, schema_bytes)
            if len(seed_batches) == 1:  # no hand-off to the pool for a single batch
                _send_rows([self._sample_one(seed_batches[0], keys[0], *args)], writer, arena)
                continue
            jobs = [self._pool.submit(self._sample_one, seeds, key, *args, row)
                    for row, (seeds, key) in enumerate(zip(seed_batches, keys))]
            _send_rows(jobs, writer, arena)
        return total

    def _sample_one(self, seeds: np.ndarray, key: int, schema: pa.Schema, fanouts: list[int],
                    replace: bool, want_x: bool, want_y: bool, arena: ServerArena | None = None,
                    schema_bytes: int = 0, row: int = 0) -> pa.RecordBatch | tuple[int, int]:
        """Sample one seed batch (at most ``threads`` at a time over all calls) and encode it
        as a one-row response record batch (at most ``max_response_bytes``); with ``arena``
        written into one of its segments when it fits: ``(offset, length)``."""
        with self._slots:
            out = sample_neighbors(self.indptr, self.indices, seeds, fanouts, replace=replace, seed=key)
            nbytes = out.n_id.nbytes + sum(b.indptr.nbytes + b.indices.nbytes + b.edge_ids.nbytes
                                           for b in out.blocks)
            if want_x and self._feature is not None:
                dtype, dim = self._feature
                nbytes += len(out.n_id) * np.dtype(dtype).itemsize * (dim or 1)
            self._check_response(nbytes, f"sample response of batch {row} ({len(seeds)} seeds)",
                                 "use fewer seeds per batch or smaller fanouts")
            x = self.store.features(out.n_id) if want_x else None
            y = np.take(self.store.labels, seeds, axis=0) if want_y else None
            batch = protocol.encode_sample_output(out, schema, x=x, y=y)
        if arena is not None:
            segment = arena.write_batch(batch, schema_bytes)
            if segment is not None:
                return segment
        return batch

    def _sample_typed(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                      writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                      context: fl.ServerCallContext) -> int:
        if self.typed is None:
            raise ValueError("'sample_typed' needs a typed store; this store has one node type "
                             "(use 'sample')")
        batches = _request_batches(self, reader, protocol.sample_request_schema(), "sample_typed")
        with self._slots:
            return self.typed.handle(params, batches, writer, call)

    def _typed_only(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                    writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                    context: fl.ServerCallContext) -> int:
        raise ValueError(f"the store is typed: it serves 'sample_typed' only (not {call['op']!r})")

    def _check_response(self, nbytes: int, what: str, hint: str) -> None:
        if nbytes > self.max_response_bytes:
            raise ValueError(f"{what} would be {nbytes} bytes; this server's limit is "
                             f"--max-response-bytes {self.max_response_bytes} per response batch; {hint}")

    def _seed_batches(self, batch: pa.RecordBatch) -> tuple[list[np.ndarray], list[int]]:
        seeds_col, keys_col = batch.column(0), batch.column(1)
        if len(seeds_col) > self.max_seeds:
            raise ValueError(f"request has {len(seeds_col)} seed batches; this server's limit is "
                             f"--max-seeds {self.max_seeds} per request batch")
        if seeds_col.null_count or seeds_col.values.null_count:
            raise ValueError("'seeds' must not contain nulls")
        if keys_col.null_count:
            raise ValueError("'key' must not contain nulls")
        total = int(seeds_col.offsets[-1].as_py() - seeds_col.offsets[0].as_py()) if len(seeds_col) else 0
        if total > self.max_seeds:
            raise ValueError(f"request has {total} seeds; this server's limit is "
                             f"--max-seeds {self.max_seeds} per request batch")
        keys = keys_col.to_numpy()
        if keys.size and keys.min() < 0:
            raise ValueError(f"'key' must be >= 0 (got {int(keys.min())})")
        offsets = seeds_col.offsets.to_numpy()
        flat = seeds_col.values.to_numpy()
        out = []
        for row in range(len(seeds_col)):
            seeds = flat[offsets[row]:offsets[row + 1]]
            _check_ids(seeds, self.num_nodes, "seeds", f" (batch {row})")
            if seeds.size > 1:
                ordered = np.sort(seeds)
                dup = np.flatnonzero(ordered[1:] == ordered[:-1])
                if dup.size:
                    raise ValueError(f"'seeds' (batch {row}) must be unique "
                                     f"(got {int(ordered[dup[0]])} more than once)")
            out.append(seeds)
        return out, [int(k) for k in keys]

    # -- ID map and features ---------------------------------------------------------------------
    def _lookup(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                context: fl.ServerCallContext) -> int:
        del call, context
        _only(params, ("strict",), "lookup")
        strict = _flag(params, "strict", True)
        expected = protocol.lookup_request_schema(self._id_map.external_type)
        out_schema = pa.schema([("node_id", pa.int64())])
        writer.begin(out_schema)
        total = 0
        for batch in _request_batches(self, reader, expected, "lookup"):
            column = batch.column(0)
            total += self._check_rows(len(column), "lookup")
            if column.null_count:
                raise ValueError("'external_id' must not contain nulls")
            if pa.types.is_string(column.type):
                dense = self._string_ids().to_dense(column)
            else:
                dense = self._id_map.to_dense(column.to_numpy(), strict=False)
            unknown = np.flatnonzero(dense < 0)
            first = [column[int(i)].as_py() for i in unknown[:5]]
            if strict and unknown.size:
                raise KeyError(f"{unknown.size} unknown external ID(s), first: {first}")
            meta = json.dumps({"unknown": int(unknown.size), "first_unknown": first}).encode()
            writer.write_with_metadata(pa.record_batch([pa.array(dense)], schema=out_schema),
                                       pa.py_buffer(meta))
        return total

    def _string_ids(self) -> StringIdIndex:
        """The sorted index of the string ID map (built once, on first use)."""
        with self._index_lock:
            if self._string_index is None:
                self._string_index = StringIdIndex(self._id_map.external_ids)
            return self._string_index

    def _reverse_lookup(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                        writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                        context: fl.ServerCallContext) -> int:
        del call, context
        _only(params, (), "reverse_lookup")
        kind = pa.string() if self._id_map.external_type == "string" else pa.int64()
        out_schema = pa.schema([("external_id", kind)])
        writer.begin(out_schema)
        total = 0
        for batch in _request_batches(self, reader, protocol.node_id_schema(), "reverse_lookup"):
            ids = self._node_ids(batch, "reverse_lookup")
            total += len(ids)
            external = self._id_map.to_external(ids).cast(kind)
            writer.write_batch(pa.record_batch([external], schema=out_schema))
        return total

    def _features(self, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                  writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                  context: fl.ServerCallContext) -> int:
        del context
        _only(params, ("labels",), "features")
        want_y = _flag(params, "labels")
        if self._feature is None:
            raise ValueError("the store has no node features ('node/feat')")
        if want_y and self._label is None:
            raise ValueError("'labels' is true but the store has no labels")
        fields = [("x", protocol._value_type(*self._feature))]
        if want_y:
            fields.append(("y", protocol._value_type(*self._label)))
        out_schema = pa.schema(fields)
        writer.begin(out_schema)
        total = 0
        for batch in _request_batches(self, reader, protocol.node_id_schema(), "features"):
            ids = self._node_ids(batch, "features")
            total += len(ids)
            row_bytes = np.dtype(self._feature[0]).itemsize * (self._feature[1] or 1)
            if want_y:
                row_bytes += np.dtype(self._label[0]).itemsize * (self._label[1] or 1)
            self._check_response(len(ids) * row_bytes, f"features response of {len(ids)} rows",
                                 "ask for fewer rows per request batch")
            call["bytes"] = max(call["bytes"], len(ids) * row_bytes)
            cols = [protocol.fixed_rows(self.store.features(ids))]
            if want_y:
                cols.append(protocol.fixed_rows(np.take(self.store.labels, ids, axis=0)))
            writer.write_batch(pa.record_batch(cols, schema=out_schema))
        return total

    def _check_rows(self, rows: int, op: str) -> int:
        if rows > self.max_rows:
            raise ValueError(f"{op} request has {rows} rows; this server's limit is "
                             f"--max-rows {self.max_rows} per request batch")
        return rows

    def _node_ids(self, batch: pa.RecordBatch, op: str) -> np.ndarray:
        column = batch.column(0)
        self._check_rows(len(column), op)
        if column.null_count:
            raise ValueError("'node_id' must not contain nulls")
        ids = column.to_numpy()
        _check_ids(ids, self.num_nodes, "node_id")
        return ids


# -- helpers ------------------------------------------------------------------------------------
def _flight_error(exc: BaseException, request_id: str) -> BaseException:
    """The Flight status of a handler error: INVALID_ARGUMENT (ValueError, TypeError,
    IndexError), NOT_FOUND (KeyError), Flight's own errors as raised; anything else is
    INTERNAL with only ``request_id`` in the reply (the traceback goes to the log)."""
    if isinstance(exc, fl.FlightError):
        return exc
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


def _request_batches(server: SamplingServer, reader: fl.MetadataRecordBatchReader, expected: pa.Schema,
                     op: str, *, with_metadata: bool = False):
    """The request record batches of a call, after checking their schema against ``expected``
    (``with_metadata``: pairs ``(batch, app_metadata bytes or None)``). While it waits for
    the client's next batch the call counts as idle (:meth:`SamplingServer.only_idle_calls`); a batch
    after the first one that arrives while the server drains is refused (UNAVAILABLE)."""
    checked = False
    count = 0
    while True:
        with server._lock:
            server._idle += 1
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            return
        finally:
            with server._lock:
                server._idle -= 1
        batch = chunk.data
        if batch is None:
            continue
        count += 1
        if count > 1 and server.draining:
            raise fl.FlightUnavailableError("the server is shutting down; send this request to another "
                                            "server or after the restart")
        if not checked:
            if not _schema_matches(batch.schema, expected):
                raise ValueError(f"{op} request schema must be {_schema_text(expected)} "
                                 f"(got {_schema_text(batch.schema)})")
            checked = True
        if with_metadata:
            meta = chunk.app_metadata
            yield batch, (meta.to_pybytes() if meta is not None else None)
        else:
            yield batch


def _schema_matches(got: pa.Schema, expected: pa.Schema) -> bool:
    """Same column names and types; nullability, metadata and list child names ignored,
    ``large_list`` accepted for ``list``."""
    if got.names != expected.names:
        return False
    for field, want in zip(got, expected):
        if pa.types.is_list(want.type):
            if not (pa.types.is_list(field.type) or pa.types.is_large_list(field.type)) \
                    or field.type.value_type != want.type.value_type:
                return False
        elif field.type != want.type:
            return False
    return True


def _schema_text(schema: pa.Schema) -> str:
    return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"


def _send_rows(rows: list[Future | pa.RecordBatch | tuple[int, int]], writer: fl.MetadataRecordBatchWriter,
               arena: ServerArena | None) -> None:
    """Send sampled rows in order, each as soon as it is ready: a record batch as such, an
    arena segment ``(offset, length)`` as a metadata-only message ``{"segment": [...]}``.
    On failure the pending jobs are cancelled and the segments not sent are freed."""
    sent = 0
    try:
        for row in rows:
            item = row.result() if isinstance(row, Future) else row
            if isinstance(item, pa.RecordBatch):
                writer.write_batch(item)
            else:
                writer.write_metadata(pa.py_buffer(json.dumps({"segment": list(item)}).encode()))
            sent += 1
    finally:
        for row in rows[sent:]:
            if isinstance(row, Future):
                if not row.cancel() and arena is not None:  # running or done: free its segment
                    row.add_done_callback(functools.partial(_free_job_segment, arena))
            elif isinstance(row, tuple) and arena is not None:
                arena.free(row[0])


def _free_job_segment(arena: ServerArena, job: Future) -> None:
    """Done-callback of a sampling job whose row was not sent: return its segment."""
    if not job.cancelled() and job.exception() is None and isinstance(job.result(), tuple):
        arena.free(job.result()[0])


def _free_segments(arena: ServerArena | None, metadata: bytes | None) -> None:
    """Apply a request's ``{"free": [offset, ...]}`` app_metadata to ``arena`` (ignored when
    the arena is gone: its client gets its batches over Flight from now on)."""
    if not metadata:
        return
    doc = limits.parse_json(metadata, "request app_metadata", max_bytes=limits.MAX_METADATA_BYTES,
                            expected='JSON like {"free": [offset, ...]}')
    offsets = doc.get("free", []) if isinstance(doc, dict) else None
    if not isinstance(offsets, list) or not all(isinstance(o, int) and not isinstance(o, bool)
                                                for o in offsets):
        raise ValueError(f"request app_metadata 'free' must be a list of integer offsets (got {doc!r:.80})")
    if arena is not None:
        for offset in offsets:
            arena.free(offset)


def _action_params(body: bytes, allowed: tuple[str, ...], action: str) -> dict[str, Any]:
    """The JSON object body of an action, with only ``allowed`` keys."""
    params = limits.parse_json(bytes(body) or b"{}", f"{action} body", expected="a JSON object")
    if not isinstance(params, dict):
        raise ValueError(f"{action} body must be a JSON object (got {params!r:.60})")  # noqa: TRY004
    _only(params, allowed, action)
    return params


def _owner(context: fl.ServerCallContext) -> str:
    """Who a call comes from, for arena ownership: the connection (gRPC peer address,
    e.g. ``ipv4:127.0.0.1:53616``), and the authenticated identity when there is one."""
    identity = context.peer_identity()
    return context.peer() + (f" {identity.decode(errors='replace')}" if identity else "")


def _row_bytes(spec: tuple[np.dtype, int | None]) -> int:
    """Bytes of one feature or label row of ``(dtype, width or None)``."""
    return np.dtype(spec[0]).itemsize * (spec[1] or 1)


def _check_ids(ids: np.ndarray, num_nodes: int, name: str, where: str = "") -> None:
    if ids.size:
        lo, hi = int(ids.min()), int(ids.max())
        if lo < 0 or hi >= num_nodes:
            raise ValueError(f"'{name}'{where} must be dense node IDs in [0, {num_nodes}) "
                             f"(got {lo if lo < 0 else hi})")


def _only(params: dict[str, Any], allowed: tuple[str, ...], op: str) -> None:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"{op} takes parameters {list(allowed)} (got unknown {unknown})")


def _flag(params: dict[str, Any], name: str, default: bool = False) -> bool:
    value = params.get(name, default)
    if not isinstance(value, bool):
        raise ValueError(f"'{name}' must be true or false (got {value!r})")  # noqa: TRY004 - invalid argument
    return value


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
