"""Wire format of the sampling / ID-map service: operation names, request and response
schemas, and the conversions between them and graphpipe's in-memory types.

``sample`` answers a graph of one relation with DGL-style blocks
(:class:`~graphpipe.ops.sampling.SampleOutput`); ``sample_typed`` answers any graph, the
one-relation one (``_N____E____N``) included, with typed rows
(:class:`~graphpipe.ops.sampling.HeteroSampleOutput`). Both take the same request: the
``sample`` request schema (``seeds: list<int64>``, ``key: int64``; one row per seed batch,
for ``sample_typed`` the seeds all of the node type named by its ``ntype`` parameter).

``sample_typed`` response: one record batch of one row per request row, in order, with
list<int64> columns (every node type ``t`` and relation ``e = "src___rel___dst"`` of the
server's graph, in the order ``info`` lists them under ``typed``):

- ``n_id/<t>``: the sample's nodes of type ``t`` (global IDs of that type), seeds first;
- ``nodes/<t>``: PyG's ``num_sampled_nodes[t]`` (seeds, then new nodes of each hop);
- ``row/<e>``, ``col/<e>``: each sampled edge's local source / destination ID (positions
  in ``n_id/<src>`` / ``n_id/<dst>``); ``eid/<e>``: its CSC slot in the relation;
- ``edges/<e>``: ``num_sampled_edges[e]`` per hop.

The row decodes to the :class:`~graphpipe.ops.sampling.HeteroSampleOutput` the local
sampler returns for the same graph, seeds, fanouts and key.

Shared by :mod:`graphpipe.service.server` and :mod:`graphpipe.service.client`; the
protocol itself is described in :mod:`graphpipe.service` (module docstring).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from graphpipe.ops.sampling import (
    EdgeType,
    HeteroSampleOutput,
    SampledBlock,
    SampleOutput,
    etype_str,
)
from graphpipe.service.limits import parse_json

__all__ = [
    "ACTIONS",
    "DATA_OPS",
    "PROTOCOL_VERSION",
    "decode_sample_row",
    "decode_sample_rows",
    "decode_typed_rows",
    "encode_command",
    "encode_sample_output",
    "encode_typed_output",
    "fixed_rows",
    "id_type_for",
    "lookup_request_schema",
    "node_id_schema",
    "parse_command",
    "received_numpy",
    "rows_of_fixed",
    "sample_request_batch",
    "sample_request_schema",
    "sample_response_schema",
    "typed_response_schema",
]

PROTOCOL_VERSION = 1

#: operations carried by DoExchange (request and response are Arrow record batches)
DATA_OPS = ("sample", "lookup", "reverse_lookup", "features", "sample_typed")
#: operations carried by DoAction (JSON result body)
ACTIONS = ("info", "health", "attach_arena", "detach_arena")


# -- commands ---------------------------------------------------------------------------------
def encode_command(op: str, **params: Any) -> bytes:
    """The DoExchange descriptor command: UTF-8 JSON ``{"op": op, **params}``."""
    return json.dumps({"op": op, **params}, separators=(",", ":")).encode()


def parse_command(command: bytes) -> tuple[str, dict[str, Any]]:
    """``(op, params)`` of a descriptor command; ValueError naming what is wrong (not
    UTF-8 JSON, over :data:`~graphpipe.service.limits.MAX_JSON_BYTES` or nested deeper
    than :data:`~graphpipe.service.limits.MAX_JSON_DEPTH`)."""
    doc = parse_json(command, "descriptor command", expected='UTF-8 JSON like {"op": "sample", ...}')
    if not isinstance(doc, dict) or not isinstance(doc.get("op"), str):
        raise ValueError(  # noqa: TRY004 - reported to the caller as an invalid argument
            f"descriptor command must be a JSON object with a string 'op' (got {doc!r:.80})")
    op = doc.pop("op")
    if op not in DATA_OPS:
        raise ValueError(f"'op' must be one of {list(DATA_OPS)} (got {op!r})")
    return op, doc


# -- schemas ----------------------------------------------------------------------------------
def sample_request_schema() -> pa.Schema:
    """One row per seed batch: ``seeds`` list<int64> (unique dense IDs), ``key`` int64 (>= 0)."""
    return pa.schema([("seeds", pa.list_(pa.int64())), ("key", pa.int64())])


def node_id_schema() -> pa.Schema:
    """Requests of ``features`` and ``reverse_lookup``: one dense ID (int64) per row."""
    return pa.schema([("node_id", pa.int64())])


def lookup_request_schema(external_type: str) -> pa.Schema:
    """Requests of ``lookup``: one external ID per row, int64 or utf8."""
    return pa.schema([("external_id", pa.string() if external_type == "string" else pa.int64())])


def _value_type(dtype: np.dtype, width: int | None) -> pa.DataType:
    base = pa.from_numpy_dtype(np.dtype(dtype))
    return base if width is None else pa.list_(base, width)


def id_type_for(num_nodes: int, num_edges: int) -> pa.DataType:
    """The wire type of ID arrays in ``sample`` responses: int64, the type of
    :class:`SampleOutput`'s arrays, so neither side converts (measured on loopback:
    less CPU per batch than int32 on the wire plus the conversions). Clients also accept
    int32 ID columns (widened)."""
    del num_nodes, num_edges
    return pa.int64()


def sample_response_schema(num_layers: int, *, id_type: pa.DataType | None = None,
                           feature: tuple[np.dtype, int] | None = None,
                           label: tuple[np.dtype, int | None] | None = None) -> pa.Schema:
    """Schema of a ``sample`` response (one row per seed batch).

    Columns (``ID`` = ``id_type``, see :func:`id_type_for`): ``n_id`` list<ID>;
    ``batch_size`` int64; ``num_sampled_nodes`` and ``num_sampled_edges`` list<int64>;
    per layer ``l`` (``blocks[l]``, 0 = input layer) ``block{l}_indptr``,
    ``block{l}_indices``, ``block{l}_edge_ids`` list<ID> and ``block{l}_num_dst``,
    ``block{l}_num_src`` int64; with ``feature=(dtype, dim)`` an
    ``x`` column list<fixed_size_list<dtype, dim>> (rows of ``n_id``); with
    ``label=(dtype, tasks or None)`` a ``y`` column list<dtype> (or list of
    fixed_size_list for multi-task labels) of the seeds' labels.
    """
    i64 = pa.int64()
    ids = pa.list_(id_type if id_type is not None else i64)
    fields = [("n_id", ids), ("batch_size", i64),
              ("num_sampled_nodes", pa.list_(i64)), ("num_sampled_edges", pa.list_(i64))]
    for layer in range(num_layers):
        fields += [(f"block{layer}_indptr", ids), (f"block{layer}_indices", ids),
                   (f"block{layer}_edge_ids", ids), (f"block{layer}_num_dst", i64),
                   (f"block{layer}_num_src", i64)]
    if feature is not None:
        fields.append(("x", pa.list_(_value_type(feature[0], feature[1]))))
    if label is not None:
        fields.append(("y", pa.list_(_value_type(label[0], label[1]))))
    return pa.schema(fields)


# -- arrays -----------------------------------------------------------------------------------
_ONE_ROW_OFFSETS: dict[int, pa.Buffer] = {}


def _primitive(values: np.ndarray) -> pa.Array:
    """A primitive Arrow array over a contiguous 1-D numpy array (no copy, no checks)."""
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def _one_list(values: np.ndarray | pa.Array) -> pa.Array:
    """A one-row list array holding ``values`` (zero-copy for contiguous numpy; built from
    buffers, without the validation ``ListArray.from_arrays`` does)."""
    if not isinstance(values, pa.Array):
        values = np.ascontiguousarray(values)
        values = _primitive(values) if values.ndim == 1 and values.dtype.kind in "iuf" \
            else pa.array(values)
    n = len(values)
    offsets = pa.py_buffer(np.array([0, n], dtype=np.int32))
    return pa.Array.from_buffers(pa.list_(values.type), 1, [None, offsets], children=[values])


def fixed_rows(rows: np.ndarray) -> pa.Array:
    """``(n, dim)`` numpy rows → fixed_size_list<dtype, dim> array of length ``n`` (zero-copy);
    1-D ``(n,)`` → a plain array."""
    rows = np.ascontiguousarray(rows)
    if rows.ndim == 1:
        return pa.array(rows)
    flat = pa.array(rows.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, int(rows.shape[1]))


class _ReceivedBuffer:
    """Hands the data buffer of a received Arrow array to numpy as a *writable* array
    without copying, and keeps the array (hence the received message) alive as the numpy
    array's base. Only for arrays this process received and holds alone (the decoded
    response of a call), never for arrays shared with other code."""

    def __init__(self, values: pa.Array, dtype: np.dtype):
        data = values.buffers()[1]
        self._values = values
        self.__array_interface__ = {
            "data": (data.address + values.offset * dtype.itemsize, False),
            "shape": (len(values),), "typestr": dtype.str, "version": 3}


def received_numpy(values: pa.Array) -> np.ndarray:
    """A writable numpy view (no copy) of a received primitive Arrow array without nulls."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    dtype = np.dtype(values.type.to_pandas_dtype())
    if values.null_count or len(values) == 0 or dtype.kind not in "iuf" or values.buffers()[1] is None:
        return np.array(values.to_numpy(zero_copy_only=False), dtype=dtype, copy=True)
    return np.asarray(_ReceivedBuffer(values, dtype))


def rows_of_fixed(column: pa.Array | pa.ChunkedArray, *, copy: bool = False) -> np.ndarray:
    """Inverse of :func:`fixed_rows`: a writable ``(n, dim)`` (or ``(n,)``) numpy array
    over the received buffer (``copy``: a fresh array)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_fixed_size_list(column.type):
        out = received_numpy(column.flatten()).reshape(-1, column.type.list_size)
    else:
        out = received_numpy(column)
    return np.array(out, copy=True) if copy else out


def sample_request_batch(seed_batches: Sequence[np.ndarray], keys: Sequence[int]) -> pa.RecordBatch:
    """The request record batch of a window: one row per seed batch."""
    lengths = np.fromiter((len(b) for b in seed_batches), dtype=np.int64, count=len(seed_batches))
    offsets = np.zeros(len(seed_batches) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = (np.concatenate([np.asarray(b, dtype=np.int64).ravel() for b in seed_batches])
            if len(seed_batches) else np.zeros(0, np.int64))
    seeds = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat))
    return pa.RecordBatch.from_arrays([seeds, pa.array(np.asarray(list(keys), dtype=np.int64))],
                                      schema=sample_request_schema())


def encode_sample_output(out: SampleOutput, schema: pa.Schema, *, x: np.ndarray | None = None,
                         y: np.ndarray | None = None) -> pa.RecordBatch:
    """One :class:`SampleOutput` as a one-row record batch of ``schema`` (ID arrays cast
    to the schema's ID type, zero-copy when they already have it)."""
    i64 = pa.int64()
    id_dtype = np.dtype(schema.field("n_id").type.value_type.to_pandas_dtype())

    def ids(values: np.ndarray, offsets: bool = False) -> pa.Array:
        # node and edge IDs fit the ID type by its choice; a block's local offsets may not
        values = np.asarray(values)
        if values.dtype != id_dtype:
            if offsets and id_dtype == np.int32 and values.size and int(values[-1]) >= (1 << 31):
                raise ValueError(f"a sampled block has {int(values[-1])} edges, more than the "
                                 "int32 wire format holds; use smaller batches or fanouts")
            values = values.astype(id_dtype)
        return _one_list(values)

    cols: list[pa.Array] = [
        ids(out.n_id),
        pa.array([out.batch_size], i64),
        _one_list(np.asarray(out.num_sampled_nodes, dtype=np.int64)),
        _one_list(np.asarray(out.num_sampled_edges, dtype=np.int64)),
    ]
    for block in out.blocks:
        cols += [ids(block.indptr, offsets=True), ids(block.indices), ids(block.edge_ids),
                 pa.array([block.num_dst], i64), pa.array([block.num_src], i64)]
    if x is not None:
        cols.append(_one_list(fixed_rows(x)))
    if y is not None:
        cols.append(_one_list(fixed_rows(y)))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _column_rows(column: pa.Array | pa.ChunkedArray, copy: bool, ints: bool = False) -> list[np.ndarray]:
    """The numpy value array of every row of a list column: views (no copy) of one array
    over the column's received values buffer, or fresh arrays with ``copy``. int32 IDs
    from another server are widened to int64 (``ints``)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    n = len(column)
    buffers = column.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if pa.types.is_large_list(column.type) else np.int32,
                            count=n + 1, offset=column.offset * (8 if pa.types.is_large_list(column.type) else 4))
    values = column.values
    if pa.types.is_fixed_size_list(values.type):
        flat = rows_of_fixed(values)
    elif ints and values.type != pa.int64():
        flat = values.to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        flat = received_numpy(values)
    bounds = offsets.tolist()
    rows = [flat[bounds[r]:bounds[r + 1]] for r in range(n)]
    return [np.array(r, copy=True) for r in rows] if copy else rows


def decode_sample_rows(batch: pa.RecordBatch, *, copy: bool = False
                       ) -> list[tuple[SampleOutput, np.ndarray | None, np.ndarray | None]]:
    """``(SampleOutput, x or None, y or None)`` of every row of a ``sample`` response.

    The arrays are writable int64 numpy arrays over the received Arrow buffers (no copy;
    the batch must be one this process received and holds alone; rows do not overlap);
    with ``copy`` fresh arrays. int32 ID columns are widened to int64. Each column is
    converted once for all rows (no per-row Arrow scalars).
    """
    names = batch.schema.names
    col = {name: batch.column(i) for i, name in enumerate(names)}
    num_layers = sum(1 for n in names if n.endswith("_num_dst"))

    def ints(name: str) -> list[np.ndarray]:
        return _column_rows(col[name], copy, ints=True)

    def scalars(name: str) -> list[int]:
        return col[name].to_numpy(zero_copy_only=False).tolist()

    n_id, nodes, edges = ints("n_id"), ints("num_sampled_nodes"), ints("num_sampled_edges")
    batch_size = scalars("batch_size")
    layers = [(ints(f"block{layer}_indptr"), ints(f"block{layer}_indices"), ints(f"block{layer}_edge_ids"),
               scalars(f"block{layer}_num_dst"), scalars(f"block{layer}_num_src"))
              for layer in range(num_layers)]
    xs = _column_rows(col["x"], copy) if "x" in col else [None] * batch.num_rows
    ys = _column_rows(col["y"], copy) if "y" in col else [None] * batch.num_rows
    out = []
    for row in range(batch.num_rows):
        blocks = [SampledBlock(indptr=ip[row], indices=ix[row], num_dst=nd[row], num_src=ns[row],
                               edge_ids=eid[row])
                  for ip, ix, eid, nd, ns in layers]
        sample = SampleOutput(n_id=n_id[row], blocks=blocks, batch_size=batch_size[row],
                              num_sampled_nodes=nodes[row].tolist(), num_sampled_edges=edges[row].tolist())
        out.append((sample, xs[row], ys[row]))
    return out


def decode_sample_row(batch: pa.RecordBatch, row: int = 0, *, copy: bool = False
                      ) -> tuple[SampleOutput, np.ndarray | None, np.ndarray | None]:
    """``(SampleOutput, x or None, y or None)`` of row ``row`` of a ``sample`` response
    (see :func:`decode_sample_rows`)."""
    return decode_sample_rows(batch.slice(row, 1), copy=copy)[0]


# -- sample_typed -----------------------------------------------------------------------------
def typed_response_schema(node_types: Sequence[str], edge_types: Sequence[EdgeType]) -> pa.Schema:
    """The ``sample_typed`` response schema of a server whose graph has these types and
    relations (module docstring)."""
    names = [f"{k}/{t}" for t in node_types for k in ("n_id", "nodes")]
    names += [f"{k}/{etype_str(e)}" for e in edge_types for k in ("row", "col", "eid", "edges")]
    return pa.schema([(n, pa.list_(pa.int64())) for n in names])


def encode_typed_output(out: HeteroSampleOutput, schema: pa.Schema) -> pa.RecordBatch:
    """One typed sample as a one-row record batch of ``schema``."""
    columns = []
    for name in schema.names:
        kind, key = name.split("/", 1)
        if kind == "n_id":
            value = out.n_id[key]
        elif kind == "nodes":
            value = out.num_sampled_nodes.get(key, [])
        else:
            et = tuple(key.split("___"))
            value = out.num_sampled_edges.get(et, []) if kind == "edges" else \
                {"row": out.row, "col": out.col, "eid": out.edge_ids}[kind][et]
        columns.append(_one_list(np.ascontiguousarray(value, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def decode_typed_rows(batch: pa.RecordBatch, frontier: str = "new", *, copy: bool = False
                      ) -> list[HeteroSampleOutput]:
    """The :class:`HeteroSampleOutput` of every row of a ``sample_typed`` response (arrays
    over the received buffers unless ``copy``, as :func:`decode_sample_rows`)."""
    columns: dict[str, dict[Any, list[np.ndarray]]] = {
        k: {} for k in ("n_id", "nodes", "row", "col", "eid", "edges")}
    for name, column in zip(batch.schema.names, batch.columns):
        kind, key = name.split("/", 1) if "/" in name else (name, "")
        if kind not in columns:
            raise ValueError(f"unexpected column {name!r} in a sample_typed response")
        columns[kind][key if kind in ("n_id", "nodes") else tuple(key.split("___"))] = \
            _column_rows(column, copy, ints=True)
    pick = lambda kind, row: {k: rows[row] for k, rows in columns[kind].items()}
    outs = []
    for row in range(batch.num_rows):
        nodes = pick("nodes", row)
        outs.append(HeteroSampleOutput(
            n_id=pick("n_id", row), row=pick("row", row), col=pick("col", row),
            edge_ids=pick("eid", row), num_seeds={t: int(v[0]) if v.size else 0 for t, v in nodes.items()},
            num_sampled_nodes={t: v.tolist() for t, v in nodes.items()},
            num_sampled_edges={e: v.tolist() for e, v in pick("edges", row).items()},
            frontier=frontier))
    return outs
