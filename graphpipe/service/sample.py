"""The sampling handlers of the service: ``sample`` and ``sample_typed`` (protocol:
:mod:`graphpipe.service`, wire format: :mod:`graphpipe.service.protocol`).

One protocol: ``sample_typed`` samples any served graph with typed rows, and a one-type
store is the one-relation case ``(_N, _E, _N)`` (:data:`~graphpipe.ops.sampling.DEFAULT_ETYPE`),
whose draws are exactly ``sample``'s. ``sample`` is the one-relation fast path with
DGL-style blocks, feature rows and shared-memory arenas. A typed store is served with its
relations plus their reverses (PyG's ``ToUndirected``, what the typed trainer samples;
``typed_reverse=False`` keeps the stored relations only).

Every request batch is bounded before any work: seed IDs in range and unique, at most
``--max-seeds`` seeds, and an upper bound of the bytes sampling it may take under
``--max-request-bytes`` (:func:`graphpipe.service.limits.sample_bytes_bound`,
:func:`graphpipe.service.limits.typed_bytes_bound`); each response row under
``--max-response-bytes``. Each handler is a function of the
:class:`~graphpipe.service.server.SamplingServer` that calls it and of the call's request
reader and response writer.
"""

from __future__ import annotations

import functools
import json
from concurrent.futures import Future
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.ops.sampling import (
    DEFAULT_ETYPE,
    DEFAULT_NTYPE,
    EdgeType,
    HeteroCSC,
    etype_str,
    sample_neighbors,
    sample_neighbors_batches,
)
from graphpipe.service import limits, protocol
from graphpipe.service.arena import ServerArena
from graphpipe.service.requests import (
    check_ids,
    check_response,
    flag,
    only,
    owner,
    request_batches,
    spec_bytes,
)

__all__ = ["TypedSampling", "sample", "sample_typed", "served_graph"]


# -- sample: one relation, blocks ---------------------------------------------------------------
def sample(server: Any, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
           writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
           context: fl.ServerCallContext) -> int:
    """``sample``: one response row per seed batch (one batch in the call's thread, more on
    the server's pool), rows sent in order as they are ready."""
    only(params, ("fanouts", "replace", "features", "labels", "arena"), "sample")
    fanouts = limits.check_fanouts(params.get("fanouts"))
    if "arena" in params and not isinstance(params["arena"], str):
        raise ValueError(f"'arena' must be a string (got {params['arena']!r:.40})")
    arena = server.arenas.get(params["arena"], owner=owner(context)) if "arena" in params else None
    replace = flag(params, "replace")
    want_x, want_y = flag(params, "features"), flag(params, "labels")
    if want_x and server.feature_spec is None:
        raise ValueError("'features' is true but the store has no node features")
    if want_y and server.label_spec is None:
        raise ValueError("'labels' is true but the store has no labels")
    schema = protocol.sample_response_schema(len(fanouts), id_type=server.id_type,
                                             feature=server.feature_spec if want_x else None,
                                             label=server.label_spec if want_y else None)
    kernel_fanouts = limits.effective_fanouts(fanouts, replace, server.shape.max_degree)
    row_bytes = spec_bytes(server.feature_spec) if want_x else 0
    seed_row_bytes = spec_bytes(server.label_spec) if want_y else 0
    writer.begin(schema)
    schema_bytes = schema.serialize().size if arena is not None else 0
    total = 0
    for batch, metadata in request_batches(server, reader, protocol.sample_request_schema(), "sample",
                                           with_metadata=True):
        _free_segments(arena, metadata)
        seed_batches, keys = _seed_batches(batch, server.max_seeds, server.num_nodes)
        total += sum(len(b) for b in seed_batches)
        bound = sum(limits.sample_bytes_bound(server.shape, b, kernel_fanouts, replace, row_bytes,
                                              seed_row_bytes) for b in seed_batches)
        if bound > server.max_request_bytes:
            raise ValueError(
                f"sample request of {len(seed_batches)} batch(es), {total} seeds, fanouts {fanouts} "
                f"could take up to {bound} bytes; this server's limit is --max-request-bytes "
                f"{server.max_request_bytes} per request batch; use fewer seeds or smaller fanouts")
        call["bytes"] = max(call["bytes"], bound)
        args = (schema, kernel_fanouts, replace, want_x, want_y, arena, schema_bytes)
        if len(seed_batches) == 1:  # no hand-off to the pool for a single batch
            _send_rows([_sample_one(server, seed_batches[0], keys[0], *args)], writer, arena)
            continue
        jobs = [server.pool.submit(_sample_one, server, seeds, key, *args, row)
                for row, (seeds, key) in enumerate(zip(seed_batches, keys))]
        _send_rows(jobs, writer, arena)
    return total


def _sample_one(server: Any, seeds: np.ndarray, key: int, schema: pa.Schema, fanouts: list[int],
                replace: bool, want_x: bool, want_y: bool, arena: ServerArena | None = None,
                schema_bytes: int = 0, row: int = 0) -> pa.RecordBatch | tuple[int, int]:
    """Sample one seed batch (at most ``threads`` at a time over all calls) and encode it
    as a one-row response record batch (at most ``max_response_bytes``); with ``arena``
    written into one of its segments when it fits: ``(offset, length)``."""
    with server.slots:
        out = sample_neighbors(server.indptr, server.indices, seeds, fanouts, replace=replace, seed=key)
        nbytes = out.n_id.nbytes + sum(b.indptr.nbytes + b.indices.nbytes + b.edge_ids.nbytes
                                       for b in out.blocks)
        if want_x and server.feature_spec is not None:
            nbytes += len(out.n_id) * spec_bytes(server.feature_spec)
        check_response(nbytes, server.max_response_bytes, f"sample response of batch {row} "
                       f"({len(seeds)} seeds)", "use fewer seeds per batch or smaller fanouts")
        x = server.store.features(out.n_id) if want_x else None
        y = np.take(server.store.labels, seeds, axis=0) if want_y else None
        batch = protocol.encode_sample_output(out, schema, x=x, y=y)
    if arena is not None:
        segment = arena.write_batch(batch, schema_bytes)
        if segment is not None:
            return segment
    return batch


def _seed_batches(batch: pa.RecordBatch, max_seeds: int, num_nodes: int, ntype: str = ""
                  ) -> tuple[list[np.ndarray], list[int]]:
    """The seed batches and keys of a ``sample`` (``sample_typed``: seeds of ``ntype``)
    request batch: at most ``max_seeds`` seeds, no nulls, keys >= 0, seeds dense IDs in
    ``[0, num_nodes)``, unique per batch."""
    seeds_col, keys_col = batch.column(0), batch.column(1)
    if len(seeds_col) > max_seeds:
        raise ValueError(f"request has {len(seeds_col)} seed batches; this server's limit is "
                         f"--max-seeds {max_seeds} per request batch")
    if seeds_col.null_count or seeds_col.values.null_count:
        raise ValueError("'seeds' must not contain nulls")
    if keys_col.null_count:
        raise ValueError("'key' must not contain nulls")
    total = int(seeds_col.offsets[-1].as_py() - seeds_col.offsets[0].as_py()) if len(seeds_col) else 0
    if total > max_seeds:
        raise ValueError(f"request has {total} seeds; this server's limit is "
                         f"--max-seeds {max_seeds} per request batch")
    keys = keys_col.to_numpy()
    if keys.size and keys.min() < 0:
        raise ValueError(f"'key' must be >= 0 (got {int(keys.min())})")
    offsets = seeds_col.offsets.to_numpy()
    flat = seeds_col.values.to_numpy()
    out = []
    for row in range(len(seeds_col)):
        seeds = flat[offsets[row]:offsets[row + 1]]
        check_ids(seeds, num_nodes, "seeds", f" (batch {row}{', ' + ntype if ntype else ''})")
        if seeds.size > 1:
            ordered = np.sort(seeds)
            dup = np.flatnonzero(ordered[1:] == ordered[:-1])
            if dup.size:
                raise ValueError(f"'seeds' (batch {row}) must be unique "
                                 f"(got {int(ordered[dup[0]])} more than once)")
        out.append(seeds)
    return out, [int(k) for k in keys]


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


# -- sample_typed: every graph, typed rows ------------------------------------------------------
def served_graph(store: Any, topology: tuple[np.ndarray, np.ndarray] | None, reverse: bool
                 ) -> tuple[HeteroCSC, bool]:
    """``(graph, reverse)``: what ``sample_typed`` samples. A one-type store's checked
    ``topology`` is the one relation :data:`~graphpipe.ops.sampling.DEFAULT_ETYPE` (no
    reverse); a typed store's relations come with their reverses when ``reverse``."""
    if topology is not None:
        indptr, indices = topology
        graph = HeteroCSC(num_nodes={DEFAULT_NTYPE: int(indptr.shape[0]) - 1},
                          edge_types=[DEFAULT_ETYPE], csc={DEFAULT_ETYPE: (indptr, indices)},
                          checked=True)  # the store's topology, checked when it was opened
        return graph, False
    from graphpipe.loaders.graph_data import GraphData, add_reverse_relations

    data = GraphData.from_store(store)
    return (add_reverse_relations(data) if reverse else data).graph, bool(reverse)


_TYPED_PARAMS = ("ntype", "fanouts", "replace", "frontier")


class TypedSampling:
    """``sample_typed`` over one graph (see the module docstring).

    Args:
        graph: the checked graph to sample (:func:`served_graph`).
        reverse: whether its reverse relations were added (reported by :meth:`info`).
        max_degree: the largest in-degree of each relation (computed when not given).
        max_seeds, max_request_bytes, max_response_bytes: the server's limits.
    """

    def __init__(self, graph: HeteroCSC, reverse: bool, *, max_degree: dict[EdgeType, int] | None = None,
                 max_seeds: int, max_request_bytes: int, max_response_bytes: int):
        self.graph, self.reverse = graph, bool(reverse)
        self.max_seeds = int(max_seeds)
        self.max_request_bytes, self.max_response_bytes = int(max_request_bytes), int(max_response_bytes)
        self.max_degree = max_degree or {et: limits.GraphShape(ip).max_degree
                                         for et, (ip, _) in graph.csc.items()}
        self.schema = protocol.typed_response_schema(list(graph.num_nodes), graph.edge_types)

    def info(self) -> dict[str, Any]:
        """``{"node_types": {t: N_t}, "edge_types": ["src___rel___dst", ...], "reverse": bool}``:
        the graph ``sample_typed`` samples (what the client's graph must equal)."""
        return {"node_types": dict(self.graph.num_nodes),
                "edge_types": [etype_str(e) for e in self.graph.edge_types], "reverse": self.reverse}

    def _fanouts(self, value: Any) -> dict[EdgeType, list[int]]:
        if isinstance(value, dict):
            names = {etype_str(e): e for e in self.graph.edge_types}
            bad = [k for k in value if k not in names]
            if bad or len(value) != len(names):
                raise ValueError(f"'fanouts' must name every relation of the graph "
                                 f"({', '.join(names)}) (got {sorted(value)!r:.200})")
            out = {names[k]: limits.check_fanouts(v) for k, v in value.items()}
            if len({len(v) for v in out.values()}) > 1:
                raise ValueError("'fanouts' must give every relation the same number of hops")
            return out
        hops = limits.check_fanouts(value)
        return {e: list(hops) for e in self.graph.edge_types}

    def handle(self, params: dict[str, Any], batches: Any, writer: Any, call: dict[str, Any],
               threads: int) -> int:
        """Answer the request batches of one call (``batches``: an iterator of them),
        sampling each window on ``threads`` threads."""
        bad = [k for k in params if k not in _TYPED_PARAMS]
        if bad:
            raise ValueError(f"unknown sample_typed parameter(s) {bad!r:.80}; known: {list(_TYPED_PARAMS)}")
        ntype = params.get("ntype")
        if ntype not in self.graph.num_nodes:
            raise ValueError(f"'ntype' must be one of {list(self.graph.num_nodes)} (got {ntype!r:.40})")
        fanouts = self._fanouts(params.get("fanouts"))
        replace, frontier = params.get("replace", False), params.get("frontier", "new")
        if not isinstance(replace, bool) or frontier not in ("new", "all"):
            raise ValueError("'replace' must be a bool and 'frontier' 'new' or 'all'")
        writer.begin(self.schema)
        total = 0
        for batch in batches:
            seed_batches, keys = _seed_batches(batch, self.max_seeds, self.graph.num_nodes[ntype], ntype)
            total += sum(len(s) for s in seed_batches)
            bound = sum(limits.typed_bytes_bound(self.graph.num_nodes, self.max_degree, ntype, len(s),
                                                 fanouts) for s in seed_batches)
            if bound > self.max_request_bytes:
                raise ValueError(f"sample_typed request of {total} seeds could take up to {bound} "
                                 f"bytes; this server's limit is --max-request-bytes "
                                 f"{self.max_request_bytes}; use fewer seeds or smaller fanouts")
            call["bytes"] = max(call["bytes"], bound)
            outs = sample_neighbors_batches(self.graph, [{ntype: s} for s in seed_batches], fanouts,
                                            seeds=keys, replace=replace, frontier=frontier,
                                            num_threads=threads)
            for row, out in enumerate(outs):
                record = protocol.encode_typed_output(out, self.schema)
                if record.nbytes > self.max_response_bytes:
                    raise ValueError(f"sample_typed response of batch {row} would be {record.nbytes} "
                                     f"bytes; this server's limit is --max-response-bytes "
                                     f"{self.max_response_bytes}")
                writer.write_batch(record)
        return total


def sample_typed(server: Any, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                 writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                 context: fl.ServerCallContext) -> int:
    """``sample_typed`` on ``server.typed`` (one sampling slot for the call's windows)."""
    del context
    batches = request_batches(server, reader, protocol.sample_request_schema(), "sample_typed")
    with server.slots:
        return server.typed.handle(params, batches, writer, call, server.threads)
