"""Wire format of ``sample_typed``: typed (heterogeneous) samples as Arrow record batches.

Request: the ``sample`` request schema (``seeds: list<int64>``, ``key: int64``; one row per
seed batch, the seeds all of the node type named by the ``ntype`` parameter).

Response: one record batch of one row per request row, in order, with list<int64>
columns (every node type ``t`` and relation ``e = "src___rel___dst"`` of the server's
graph, in the order ``info`` lists them under ``typed``):

- ``n_id/<t>``: the sample's nodes of type ``t`` (global IDs of that type), seeds first;
- ``nodes/<t>``: PyG's ``num_sampled_nodes[t]`` (seeds, then new nodes of each hop);
- ``row/<e>``, ``col/<e>``: each sampled edge's local source / destination ID (positions
  in ``n_id/<src>`` / ``n_id/<dst>``); ``eid/<e>``: its CSC slot in the relation;
- ``edges/<e>``: ``num_sampled_edges[e]`` per hop.

The row decodes to the :class:`graphpipe.ops.sampling.HeteroSampleOutput` the local
sampler returns for the same graph, seeds, fanouts and key.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from graphpipe.ops.sampling.types import EdgeType, HeteroSampleOutput, etype_str

__all__ = ["decode_typed_rows", "encode_typed_output", "typed_response_schema"]

_INT_LIST = pa.list_(pa.int64())


def typed_response_schema(node_types: Sequence[str], edge_types: Sequence[EdgeType]) -> pa.Schema:
    """The response schema of a server whose graph has these types and relations."""
    names = [f"{k}/{t}" for t in node_types for k in ("n_id", "nodes")]
    names += [f"{k}/{etype_str(e)}" for e in edge_types for k in ("row", "col", "eid", "edges")]
    return pa.schema([(n, _INT_LIST) for n in names])


def _column(values: np.ndarray | Sequence[int]) -> pa.Array:
    flat = pa.array(np.ascontiguousarray(values, dtype=np.int64))
    return pa.ListArray.from_arrays(pa.array([0, len(flat)], pa.int32()), flat)


def encode_typed_output(out: HeteroSampleOutput, schema: pa.Schema) -> pa.RecordBatch:
    """One typed sample as a one-row record batch of ``schema``."""
    columns = []
    for name in schema.names:
        kind, key = name.split("/", 1)
        if kind in ("n_id", "nodes"):
            value = out.n_id[key] if kind == "n_id" else out.num_sampled_nodes.get(key, [])
        else:
            et = tuple(key.split("___"))
            value = {"row": out.row, "col": out.col, "eid": out.edge_ids}[kind][et] \
                if kind != "edges" else out.num_sampled_edges.get(et, [])
        columns.append(_column(value))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _list_row(column: pa.Array, row: int) -> np.ndarray:
    offsets = column.offsets.to_numpy()
    return np.array(column.values.to_numpy(zero_copy_only=False)[offsets[row]:offsets[row + 1]],
                    dtype=np.int64)


def decode_typed_rows(batch: pa.RecordBatch, frontier: str = "new") -> list[HeteroSampleOutput]:
    """The :class:`HeteroSampleOutput` of every row of a response record batch."""
    outs = []
    for row in range(batch.num_rows):
        parts: dict[str, dict] = {"n_id": {}, "nodes": {}, "row": {}, "col": {}, "eid": {}, "edges": {}}
        for name, column in zip(batch.schema.names, batch.columns):
            kind, key = name.split("/", 1)
            if kind not in parts:
                raise ValueError(f"unexpected column {name!r} in a sample_typed response")
            parts[kind][key if kind in ("n_id", "nodes") else tuple(key.split("___"))] = \
                _list_row(column, row)
        seeds = {t: int(v[0]) if v.size else 0 for t, v in parts["nodes"].items()}
        outs.append(HeteroSampleOutput(
            n_id=parts["n_id"], row=parts["row"], col=parts["col"], edge_ids=parts["eid"],
            num_seeds=seeds, num_sampled_nodes={t: v.tolist() for t, v in parts["nodes"].items()},
            num_sampled_edges={e: v.tolist() for e, v in parts["edges"].items()}, frontier=frontier))
    return outs
