"""The typed half of the service: ``sample_typed`` over a typed store.

A :class:`graphpipe.service.SamplingServer` started on a typed store builds one
:class:`TypedSampling`: the store's relations plus their reverses (PyG's
``ToUndirected``, what :class:`graphpipe.train.typed_trainer.TypedTrainer` trains on;
``reverse=False`` keeps the stored relations only), checked once so the Numba kernels
trust them. Parameters of ``sample_typed``: ``ntype`` (the seeds' node type), ``fanouts``
(a list for every relation, or ``{"src___rel___dst": list}``), ``replace`` (bool),
``frontier`` (``"new"`` or ``"all"``). Every request is bounded before any work: seed
IDs in range and unique, at most ``max_seeds`` per request batch, and an upper bound of
the bytes the sample may take (:func:`typed_bytes_bound`) under ``max_request_bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from graphpipe.loaders.graph_data import HeteroGraphData, add_reverse_relations
from graphpipe.ops.sampling.cpu import sample_hetero_neighbors_batches
from graphpipe.ops.sampling.types import EdgeType, HeteroCSC, etype_str
from graphpipe.service import limits, protocol
from graphpipe.service.typed_protocol import encode_typed_output, typed_response_schema

__all__ = ["TypedSampling", "typed_bytes_bound"]

_PARAMS = ("ntype", "fanouts", "replace", "frontier")


def typed_bytes_bound(graph: HeteroCSC, max_degree: dict[EdgeType, int], ntype: str, seeds: int,
                      fanouts: dict[EdgeType, list[int]]) -> int:
    """Upper bound of the bytes one typed sample of ``seeds`` seeds of ``ntype`` takes
    (its ``n_id``, edges and hop counts, 8 bytes each): per hop, every relation's edges
    are at most its destination frontier times its fanout (or its largest in-degree),
    and a type's next frontier at most the edges leaving it and its node count.
    Python integers: no overflow whatever the request says."""
    frontier = {t: 0 for t in graph.num_nodes}
    frontier[ntype] = seeds
    nodes, edges = seeds, 0
    hops = len(next(iter(fanouts.values()), []))
    for hop in range(hops):
        nxt = {t: 0 for t in graph.num_nodes}
        for et, per_hop in fanouts.items():
            f = per_hop[hop]
            width = max_degree[et] if f < 0 else min(f, max_degree[et]) if f else 0
            e = frontier[et[2]] * width
            edges += e
            nxt[et[0]] += e
        frontier = {t: min(n, graph.num_nodes[t]) for t, n in nxt.items()}
        nodes += sum(frontier.values())
    return 8 * (2 * nodes + 4 * edges) + 64 * len(fanouts)


class TypedSampling:
    """``sample_typed`` for one typed store (see the module docstring).

    Args:
        store: an opened typed :class:`graphpipe.store.GraphStore`.
        reverse: add the reverse relations (the default, as the typed trainer does).
        threads, max_seeds, max_request_bytes, max_response_bytes: the server's limits.
    """

    def __init__(self, store: Any, *, reverse: bool = True, threads: int = 1,
                 max_seeds: int, max_request_bytes: int, max_response_bytes: int):
        data = HeteroGraphData.from_store(store)
        self.data = add_reverse_relations(data) if reverse else data
        self.graph, self.reverse = self.data.graph, bool(reverse)
        self.threads, self.max_seeds = int(threads), int(max_seeds)
        self.max_request_bytes, self.max_response_bytes = int(max_request_bytes), int(max_response_bytes)
        self.max_degree = {et: int(np.diff(np.asarray(ip)).max(initial=0))
                           for et, (ip, _) in self.graph.csc.items()}
        self.schema = typed_response_schema(list(self.graph.num_nodes), self.graph.edge_types)

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

    def _seeds(self, batch: pa.RecordBatch, ntype: str) -> tuple[list[np.ndarray], list[int]]:
        seeds_col, keys_col = batch.column(0), batch.column(1)
        if seeds_col.null_count or seeds_col.values.null_count or keys_col.null_count:
            raise ValueError("'seeds' and 'key' must not contain nulls")
        offsets, flat = seeds_col.offsets.to_numpy(), seeds_col.values.to_numpy()
        if flat.shape[0] > self.max_seeds or len(seeds_col) > self.max_seeds:
            raise ValueError(f"request has {flat.shape[0]} seeds; this server's limit is "
                             f"--max-seeds {self.max_seeds} per request batch")
        keys = keys_col.to_numpy()
        if keys.size and keys.min() < 0:
            raise ValueError(f"'key' must be >= 0 (got {int(keys.min())})")
        n = self.graph.num_nodes[ntype]
        out = []
        for row in range(len(seeds_col)):
            seeds = np.asarray(flat[offsets[row]:offsets[row + 1]], dtype=np.int64)
            if seeds.size and (int(seeds.min()) < 0 or int(seeds.max()) >= n):
                raise ValueError(f"'seeds' (batch {row}) must be {ntype} IDs in [0, {n})")
            if np.unique(seeds).size != seeds.size:
                raise ValueError(f"'seeds' (batch {row}) must be unique")
            out.append(seeds)
        return out, [int(k) for k in keys]

    def handle(self, params: dict[str, Any], batches: Any, writer: Any, call: dict[str, Any]) -> int:
        """Answer the request batches of one call (``batches``: an iterator of them)."""
        bad = [k for k in params if k not in _PARAMS]
        if bad:
            raise ValueError(f"unknown sample_typed parameter(s) {bad!r:.80}; known: {list(_PARAMS)}")
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
            seed_batches, keys = self._seeds(batch, ntype)
            total += sum(len(s) for s in seed_batches)
            bound = sum(typed_bytes_bound(self.graph, self.max_degree, ntype, len(s), fanouts)
                        for s in seed_batches)
            if bound > self.max_request_bytes:
                raise ValueError(f"sample_typed request of {total} seeds could take up to {bound} "
                                 f"bytes; this server's limit is --max-request-bytes "
                                 f"{self.max_request_bytes}; use fewer seeds or smaller fanouts")
            call["bytes"] = max(call["bytes"], bound)
            outs = sample_hetero_neighbors_batches(
                self.graph, [{ntype: s} for s in seed_batches], fanouts, seeds=keys,
                replace=replace, frontier=frontier, num_threads=self.threads)
            for row, out in enumerate(outs):
                record = encode_typed_output(out, self.schema)
                if record.nbytes > self.max_response_bytes:
                    raise ValueError(f"sample_typed response of batch {row} would be {record.nbytes} "
                                     f"bytes; this server's limit is --max-response-bytes "
                                     f"{self.max_response_bytes}")
                writer.write_batch(record)
        return total


def request_schema() -> pa.Schema:
    """``sample_typed``'s request schema: the ``sample`` one."""
    return protocol.sample_request_schema()
