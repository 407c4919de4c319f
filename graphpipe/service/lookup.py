"""The ID-map and feature handlers of the service: ``lookup``, ``reverse_lookup`` and
``features`` (protocol: :mod:`graphpipe.service`). Each is a function of the
:class:`~graphpipe.service.server.SamplingServer` that calls it (its store, ID map, feature
and label shapes and limits) and of the call's request reader and response writer; every
request batch is bounded (``--max-rows``, ``--max-response-bytes``) before any work."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.flight as fl

from graphpipe.service import protocol
from graphpipe.service.idindex import StringIdIndex
from graphpipe.service.requests import (
    check_ids,
    check_response,
    flag,
    only,
    request_batches,
    spec_bytes,
)

__all__ = ["features", "lookup", "reverse_lookup"]


def lookup(server: Any, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
           writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
           context: fl.ServerCallContext) -> int:
    """``lookup``: external IDs to dense node IDs (-1 or NOT_FOUND for unknown ones)."""
    del call, context
    only(params, ("strict",), "lookup")
    strict = flag(params, "strict", True)
    expected = protocol.lookup_request_schema(server.id_map.external_type)
    out_schema = pa.schema([("node_id", pa.int64())])
    writer.begin(out_schema)
    total = 0
    for batch in request_batches(server, reader, expected, "lookup"):
        column = batch.column(0)
        total += _check_rows(server, len(column), "lookup")
        if column.null_count:
            raise ValueError("'external_id' must not contain nulls")
        if pa.types.is_string(column.type):
            dense = _string_ids(server).to_dense(column)
        else:
            dense = server.id_map.to_dense(column.to_numpy(), strict=False)
        unknown = np.flatnonzero(dense < 0)
        first = [column[int(i)].as_py() for i in unknown[:5]]
        if strict and unknown.size:
            raise KeyError(f"{unknown.size} unknown external ID(s), first: {first}")
        meta = json.dumps({"unknown": int(unknown.size), "first_unknown": first}).encode()
        writer.write_with_metadata(pa.record_batch([pa.array(dense)], schema=out_schema),
                                   pa.py_buffer(meta))
    return total


def _string_ids(server: Any) -> StringIdIndex:
    """The sorted index of the string ID map (built once, on first use)."""
    with server.index_lock:
        if server.string_index is None:
            server.string_index = StringIdIndex(server.id_map.external_ids)
        return server.string_index


def reverse_lookup(server: Any, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
                   writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
                   context: fl.ServerCallContext) -> int:
    """``reverse_lookup``: dense node IDs to external IDs."""
    del call, context
    only(params, (), "reverse_lookup")
    kind = pa.string() if server.id_map.external_type == "string" else pa.int64()
    out_schema = pa.schema([("external_id", kind)])
    writer.begin(out_schema)
    total = 0
    for batch in request_batches(server, reader, protocol.node_id_schema(), "reverse_lookup"):
        ids = _node_ids(server, batch, "reverse_lookup")
        total += len(ids)
        external = server.id_map.to_external(ids).cast(kind)
        writer.write_batch(pa.record_batch([external], schema=out_schema))
    return total


def features(server: Any, params: dict[str, Any], reader: fl.MetadataRecordBatchReader,
             writer: fl.MetadataRecordBatchWriter, call: dict[str, Any],
             context: fl.ServerCallContext) -> int:
    """``features``: the feature rows (and labels) of dense node IDs."""
    del context
    only(params, ("labels",), "features")
    want_y = flag(params, "labels")
    if server.feature_spec is None:
        raise ValueError("the store has no node features ('node/feat')")
    if want_y and server.label_spec is None:
        raise ValueError("'labels' is true but the store has no labels")
    fields = [("x", protocol._value_type(*server.feature_spec))]
    if want_y:
        fields.append(("y", protocol._value_type(*server.label_spec)))
    out_schema = pa.schema(fields)
    writer.begin(out_schema)
    total = 0
    for batch in request_batches(server, reader, protocol.node_id_schema(), "features"):
        ids = _node_ids(server, batch, "features")
        total += len(ids)
        row_bytes = spec_bytes(server.feature_spec) + (spec_bytes(server.label_spec) if want_y else 0)
        check_response(len(ids) * row_bytes, server.max_response_bytes,
                       f"features response of {len(ids)} rows", "ask for fewer rows per request batch")
        call["bytes"] = max(call["bytes"], len(ids) * row_bytes)
        cols = [protocol.fixed_rows(server.store.features(ids))]
        if want_y:
            cols.append(protocol.fixed_rows(np.take(server.store.labels, ids, axis=0)))
        writer.write_batch(pa.record_batch(cols, schema=out_schema))
    return total


def _check_rows(server: Any, rows: int, op: str) -> int:
    if rows > server.max_rows:
        raise ValueError(f"{op} request has {rows} rows; this server's limit is "
                         f"--max-rows {server.max_rows} per request batch")
    return rows


def _node_ids(server: Any, batch: pa.RecordBatch, op: str) -> np.ndarray:
    column = batch.column(0)
    _check_rows(server, len(column), op)
    if column.null_count:
        raise ValueError("'node_id' must not contain nulls")
    ids = column.to_numpy()
    check_ids(ids, server.num_nodes, "node_id")
    return ids
