"""The sampling / ID-map service (Arrow Flight): ``graphpipe serve STORE``.

Python users call it through :class:`Client` and plug :class:`RemoteSampler` into
:class:`graphpipe.loaders.NeighborLoader` (:class:`RemoteHeteroSampler` on a typed
graph); the protocol below is plain Arrow Flight,
so any language with a Flight client can call it. Rooms: :mod:`.server` (the Flight server,
calls, errors, drain), its handlers :mod:`.sample` (``sample``, ``sample_typed``) and
:mod:`.lookup` (``lookup``, ``reverse_lookup``, ``features``) over :mod:`.requests`
(reading and checking a request) and :mod:`.limits` (request bounds), the wire format
:mod:`.protocol`, the client :mod:`.client`, shared memory :mod:`.arena`, replicas
:mod:`.replicas`.

Protocol (version 1)
--------------------

Transport: Arrow Flight over gRPC, ``grpc://HOST:PORT``, or ``grpc+tls://HOST:PORT`` when
the server has a certificate (``--tls-cert``/``--tls-key``; clients pass the roots to
trust, ``Client(url, tls_root_certs=PEM)``). When the server has a token
(``--token-file``), every call must carry the header ``authorization: Bearer <token>``;
otherwise it fails with status UNAUTHENTICATED.

Data operations use **DoExchange**. The FlightDescriptor is a *command* whose bytes
are UTF-8 JSON ``{"op": NAME, ...parameters}``. The client writes request record
batches (the schema below, exactly), then closes its side; the server answers in
request order, streaming: each request batch is answered as soon as it is read, so a
client may also keep the stream open and send its next request after reading the
previous answer (:meth:`Client.sample_stream` holds a few such streams to keep
windows in flight). Unknown parameters, wrong schemas, nulls, out-of-range or
duplicate IDs, bad fanouts, JSON over 64 KiB or nested deeper than 4 levels, and
requests over the limits (``--max-seeds``, ``--max-rows``, ``--max-request-bytes`` for
an upper bound, computed before any work, of what one ``sample`` request batch makes
the server allocate, and ``--max-response-bytes`` for a response record batch: one
sampled batch with its feature rows, or one ``features`` batch) fail the call with
status INVALID_ARGUMENT and a message naming the field, the value and the limit; the
server keeps serving. Error replies carry no traceback and no server path; an
unexpected server error is status INTERNAL with only ``internal error, request id
ID``, and the server's log has the traceback under that ID.

``sample`` — parameters ``fanouts`` (1 to 16 ints in [-1, 2**31-1], seed hop first,
-1 = all neighbours), ``replace`` (bool, default false), ``features`` (bool, default false),
``labels`` (bool, default false).
  Request: ``seeds: list<int64>`` (unique dense IDs of one batch), ``key: int64``
  (>= 0, the batch's random key); one row per seed batch, at most ``--max-seeds`` seeds
  per record batch.
  Response: one record batch of one row per request row, in order. ``ID`` below is
  int64 (``info`` → ``server.sample_id_type``; a client should also accept int32 ID
  columns and widen them). Columns
  ``n_id: list<ID>`` (global IDs, seeds first), ``batch_size: int64``,
  ``num_sampled_nodes: list<int64>``, ``num_sampled_edges: list<int64>``, and for every
  layer ``l`` (``l = 0`` the input layer, ``l = L-1`` the seed layer):
  ``block{l}_indptr: list<ID>`` (local CSC offsets, ``num_dst+1``),
  ``block{l}_indices: list<ID>`` (local source IDs), ``block{l}_edge_ids: list<ID>``
  (positions in the store's CSC ``indices``), ``block{l}_num_dst: int64``,
  ``block{l}_num_src: int64``; with ``features`` an ``x: list<fixed_size_list<float, dim>>``
  column (rows of ``n_id``), with ``labels`` a ``y: list<label type>`` column (labels of
  the seeds). The sample is a pure function of (store, seeds, fanouts, replace, key):
  exactly :func:`graphpipe.ops.sampling.sample_neighbors` with ``seed=key``.

``sample_typed`` — parameters ``ntype`` (the seeds' node type), ``fanouts`` (one list for
every relation, or ``{"src___rel___dst": list}`` naming each), ``replace`` (bool),
``frontier`` (``"new"`` or ``"all"``). One protocol for every store: ``info`` → ``typed``
names the graph it samples (``node_types``, ``edge_types``, ``reverse``): a typed store's
relations (plus their reverses unless served with ``typed_reverse=False``), or for a
one-type store the type ``_N`` and the one relation ``_N____E____N`` (``("_N", "_E", "_N")``), whose samples draw
exactly what ``sample`` draws. A typed store answers only ``sample_typed``.
  Request: the ``sample`` request (seeds all of type ``ntype``), bounded the same way
  (``--max-seeds``, ``--max-request-bytes`` for an upper bound of the sample computed
  before any work).
  Response: one row per request row with list<int64> columns ``n_id/<type>``,
  ``nodes/<type>``, ``row/<relation>``, ``col/<relation>``, ``eid/<relation>``,
  ``edges/<relation>`` (:mod:`graphpipe.service.protocol`); exactly
  :func:`graphpipe.ops.sampling.sample_neighbors` on the typed graph with ``seed=key``.

``lookup`` — parameter ``strict`` (bool, default true).
  Request: ``external_id: int64`` or ``external_id: utf8`` (the type of the store's ID
  map, see ``info`` → ``server.id_map_type``; a store without an ID map uses int64
  identity IDs); at most ``--max-rows`` rows per record batch.
  Response: ``node_id: int64`` per row; unknown IDs are -1 when not strict, and each
  response batch's app_metadata is JSON ``{"unknown": COUNT, "first_unknown": [...]}``;
  when strict, any unknown ID fails the call with status NOT_FOUND naming how many and
  the first five by value.

``reverse_lookup`` — no parameters. Request ``node_id: int64`` → response
``external_id`` (int64 or utf8).

``features`` — parameter ``labels`` (bool, default false). Request ``node_id: int64``
(repeats allowed) → response ``x: fixed_size_list<float, dim>`` (and ``y``), one row
per request row.

Metadata operations use **DoAction**; the result is one UTF-8 JSON body: ``info``
(empty body) → the store's manifest plus ``server`` (protocol version, limits
``max_seeds``, ``max_rows``, ``max_response_bytes``, threads, ``id_map_type``,
``shared_memory``); ``health`` (empty body) → ``{"status": "ready", "in_flight": N,
"arenas": N, "arena_bytes_in_use": BYTES}``.

Shared memory (same host, optional; :mod:`graphpipe.service.arena`). A client on the
server's host may receive ``sample`` responses without the network copies:

- DoAction ``attach_arena`` with body ``{"bytes": N}`` → ``{"arena": ID,
  "path": FILE, "bytes": N, "nonce": HEX}``: the server created ``FILE`` (under
  ``/dev/shm``, mode 0600, all ``N`` bytes allocated; at most ``--shared-memory-mib``
  over all clients, else INVALID_ARGUMENT naming the limit). The client maps it
  read-write, checks that it starts with the nonce, and unlinks it. The arena belongs
  to the connection that attached it (only loopback peers of the server's own user get
  one; a ``"pid"`` in the body is ignored): other connections that name it get no arena.
  DoAction ``detach_arena`` ``{"arena": ID}`` gives it back; the server also drops the
  arenas whose connection closed and those no call used for 10 minutes, and removes
  on start the arena files of its dead predecessors.
- ``sample`` with the parameter ``"arena": ID``: each response row that fits in a free
  segment of the arena is written there as an Arrow IPC stream (the response schema and
  a one-row record batch) and announced by a metadata-only message (no record batch)
  whose app_metadata is ``{"segment": [OFFSET, LENGTH]}`` (bytes from the start of the
  file); other rows come as record batches, as without the parameter, in the same order.
  A segment stays the client's until it reports it free in the app_metadata of a later
  request batch: ``{"free": [OFFSET, ...]}``. An unknown arena ID means Flight for every
  row; a ``free`` offset that is not a segment in use is INVALID_ARGUMENT.

The server logs one line per call (peer, operation, request size, milliseconds) at
info level; SIGTERM stops accepting calls, drains those in flight and exits 0.
"""

from graphpipe.service.client import (
    Client,
    LookupResult,
    RemoteHeteroSampler,
    RemoteSampler,
    SampleResult,
)
from graphpipe.service.server import SamplingServer, serve_until_signalled

__all__ = ["Client", "LookupResult", "RemoteHeteroSampler", "RemoteSampler", "SampleResult",
           "SamplingServer", "serve_until_signalled"]
