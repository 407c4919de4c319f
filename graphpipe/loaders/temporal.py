"""Temporal sampling in the loaders (PyG's ``time_attr`` / ``input_time`` /
``temporal_strategy``): :class:`TemporalSampler`, a :class:`BaseSampler` that samples one
tree per seed with only edges no newer than the seed's time
(:mod:`graphpipe.ops.sampling.temporal`), and :func:`resolve_times`, which finds the
timestamps ``time_attr`` names in a loader's data.

``time_attr`` on a store: ``"time"`` (the node times ``nodes/time`` if the store has them,
else the edge times ``csc/time``), ``"node_time"`` / ``"nodes/time"`` or ``"edge_time"`` /
``"csc/time"``. On a PyG ``Data``: the name of a node attribute (node-level time) or of an
edge attribute (edge-level time), as PyG decides with ``Data.is_node_attr``.

Seed times: ``input_time`` when given (one per input node), else the seeds' node times
(PyG's default); edge-level time without node times needs ``input_time``.

Typed graphs (:func:`resolve_typed_times`, :func:`build_typed_temporal_graph`): on a PyG
``HeteroData`` ``time_attr`` names an attribute of node types (node-level time, per type)
or of relations (edge-level time, per relation), never both (PyG's rule); on a typed store
``"time"`` (the node times ``typed/<ntype>/time`` if any type has them, else the relations'
``rel/<etype>/time``), ``"node_time"`` or ``"edge_time"``. A type or relation without
times is not filtered (:mod:`graphpipe.ops.sampling.temporal_typed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from graphpipe.loaders.sampler import BaseSampler
from graphpipe.ops.sampling import SampleOutput
from graphpipe.ops.sampling.temporal import (
    STRATEGIES,
    TemporalGraph,
    check_seed_time,
    sample_temporal_batches,
    temporal_graph,
)
from graphpipe.ops.sampling.temporal_typed import TypedTemporalGraph, typed_temporal_graph

__all__ = ["STRATEGIES", "TemporalSampler", "build_temporal_sampler", "build_typed_temporal_graph",
           "check_temporal_options", "resolve_input_time", "resolve_times", "resolve_typed_times"]

_NODE_NAMES = ("node_time", "nodes/time")
_EDGE_NAMES = ("edge_time", "csc/time")


class TemporalSampler(BaseSampler):
    """Temporal neighbour sampling, one tree per seed (PyG's temporal ``NeighborLoader``).

    Args:
        graph: a :class:`graphpipe.ops.sampling.temporal.TemporalGraph`
            (:func:`~graphpipe.ops.sampling.temporal.temporal_graph`).
        fanouts: neighbours per hop, seed hop first (``-1``: every valid edge).
        strategy: ``"uniform"`` or ``"last"`` (the most recent valid edges).
        replace: sample with replacement (``"uniform"`` only).
        node_time: int64 ``(N,)`` node times: the seeds' times when the loader gives none.
        num_threads: threads per window (default: Numba's thread count).

    It declares ``supports_time``: :meth:`sample_from_nodes` takes ``seed_times`` (one
    int64 array per batch). A batch's sample is a pure function of (graph, seeds, their
    times, key). Seed 0 of a star whose in-edges from 1, 2, 3 have times 5, 1, 3:

    >>> import numpy as np
    >>> from graphpipe.ops.sampling.temporal import temporal_graph
    >>> g = temporal_graph(np.array([0, 3, 3, 3, 3]), np.array([1, 2, 3]), edge_time=np.array([5, 1, 3]))
    >>> sampler = TemporalSampler(g, [2], strategy="last")
    >>> out = sampler.sample_from_nodes([np.array([0, 0])], [7], seed_times=[np.array([2, 6])])[0]
    >>> out.n_id.tolist(), out.batch.tolist(), out.seed_time.tolist()
    ([0, 0, 2, 3, 1], [0, 1, 0, 1, 1], [2, 6])
    """

    def __init__(self, graph: TemporalGraph, fanouts: Sequence[int], *, strategy: str = "uniform",
                 replace: bool = False, node_time: np.ndarray | None = None,
                 num_threads: int | None = None):
        if not isinstance(graph, TemporalGraph):
            raise ValueError(f"'graph' must be a TemporalGraph (got {type(graph).__name__})")  # noqa: TRY004 - the project reports bad arguments as ValueError
        self.graph = graph
        self.fanouts = [int(f) for f in fanouts]
        self.strategy = strategy
        self.replace = bool(replace)
        self.node_time = None if node_time is None else check_seed_time(node_time, graph.num_nodes)
        self.num_threads = num_threads

    @property
    def supports_time(self) -> bool:
        return True

    def sample_from_nodes(self, seed_batches: Sequence[np.ndarray], seeds: Sequence[int],
                          seed_times: Sequence[np.ndarray] | None = None) -> list[SampleOutput]:
        if seed_times is None:
            if self.node_time is None:
                raise ValueError("edge-level temporal sampling needs the seeds' times ('input_time')")
            seed_times = [self.node_time[np.asarray(b, dtype=np.int64)] for b in seed_batches]
        return sample_temporal_batches(self.graph, seed_batches, seed_times, self.fanouts,
                                       strategy=self.strategy, replace=self.replace, keys=seeds,
                                       num_threads=self.num_threads)

    def __repr__(self) -> str:
        return (f"TemporalSampler(fanouts={self.fanouts}, strategy={self.strategy!r}, "
                f"replace={self.replace}, level={self.graph.level!r})")


def _store_times(store: Any, time_attr: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    node, edge = store.node_time(), store.edge_time()
    if time_attr == "time":
        if node is None and edge is None:
            raise ValueError(f"time_attr='time': the store {store.path} has no timestamps "
                             f"(nodes/time or csc/time; ingest them with --time-column or node_year)")
        return (node, None) if node is not None else (None, edge)
    if time_attr in _NODE_NAMES:
        if node is None:
            raise ValueError(f"time_attr={time_attr!r}: the store {store.path} has no nodes/time")
        return node, None
    if time_attr in _EDGE_NAMES:
        if edge is None:
            raise ValueError(f"time_attr={time_attr!r}: the store {store.path} has no csc/time")
        return None, edge
    raise ValueError(f"time_attr on a store must be 'time', 'node_time' or 'edge_time' (got {time_attr!r})")


def resolve_times(data: Any, time_attr: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``(node_time (N,), edge_time (E,) in CSC order)`` named by ``time_attr`` in ``data``
    (a :class:`graphpipe.loaders.graph_data.GraphData`); exactly one is not None."""
    if not isinstance(time_attr, str):
        raise ValueError(f"'time_attr' must be a string (got {time_attr!r})")  # noqa: TRY004 - the project reports bad arguments as ValueError
    if data.store is not None:
        return _store_times(data.store, time_attr)
    attrs = data.attrs
    if time_attr in attrs.node_attrs:
        return np.asarray(attrs.node_attrs[time_attr]).reshape(-1), None
    if time_attr in attrs.edge_attrs:   # input edge order -> CSC slots
        slots = np.arange(data.indices.shape[0], dtype=np.int64)
        rows = attrs.edge_rows(attrs.input_edges(slots))
        return None, np.asarray(attrs.edge_attrs[time_attr]).reshape(-1)[rows]
    raise ValueError(f"The time attribute {time_attr!r} is neither a node-level nor an edge-level "
                     f"attribute of 'data'")


def _hetero_times(data: Any, graph: Any, time_attr: str) -> tuple[dict | None, dict | None]:
    """A ``HeteroData``'s node times per type or edge times per relation (CSC order)."""
    nodes = {t: data[t][time_attr] for t in data.node_types if time_attr in data[t]}
    edges = {tuple(et): data[et][time_attr] for et in data.edge_types if time_attr in data[et]}
    if nodes and edges:
        raise ValueError(f"The time attribute '{time_attr}' holds both node-level and edge-level information")
    if not nodes and not edges:
        raise ValueError(f"The time attribute '{time_attr}' is neither a node-level nor an edge-level "
                         f"attribute of 'data'")
    as_np = {k: np.asarray(v.detach().cpu().numpy() if hasattr(v, "detach") else v).reshape(-1)
             for k, v in (nodes or edges).items()}
    if nodes:
        return as_np, None
    return None, {et: t[graph.edge_order[et]] if et in graph.edge_order else t for et, t in as_np.items()}


def _typed_store_times(graph: Any, time_attr: str) -> tuple[dict | None, dict | None]:
    """A typed store's node times per type or edge times per relation."""
    nodes = {t: v for t in graph.node_types if (v := graph.typed_node_time(t)) is not None}
    edges = {et: v for et in graph.edge_types if (v := graph.typed_edge_time(et)) is not None}
    where = getattr(graph.store, "path", "the data")
    if time_attr == "time":
        if not nodes and not edges:
            raise ValueError(f"time_attr='time': {where} has no timestamps (typed/<ntype>/time or "
                             "rel/<etype>/time)")
        return (nodes, None) if nodes else (None, edges)
    if time_attr in _NODE_NAMES:
        if not nodes:
            raise ValueError(f"time_attr={time_attr!r}: {where} has no node timestamps (typed/<ntype>/time)")
        return nodes, None
    if time_attr in _EDGE_NAMES:
        if not edges:
            raise ValueError(f"time_attr={time_attr!r}: {where} has no edge timestamps (rel/<etype>/time)")
        return None, edges
    raise ValueError(f"time_attr on a typed store must be 'time', 'node_time' or 'edge_time' (got {time_attr!r})")


def resolve_typed_times(data: Any, graph: Any, time_attr: str) -> tuple[dict | None, dict | None]:
    """``(node times {ntype: (N_t,)}, edge times {etype: (E_r,)} in CSC order)`` named by
    ``time_attr`` in a typed loader's ``data`` (a ``HeteroData``, else the typed
    :class:`graphpipe.loaders.graph_data.GraphData` ``graph`` read from a store); one is None."""
    if not isinstance(time_attr, str):
        raise ValueError(f"'time_attr' must be a string (got {time_attr!r})")  # noqa: TRY004 - the project reports bad arguments as ValueError
    if type(data).__name__ == "HeteroData":
        return _hetero_times(data, graph, time_attr)
    if graph.store is None:
        raise ValueError(f"time_attr={time_attr!r}: the typed graph has no timestamps (give a HeteroData "
                         "or a typed store with typed/<ntype>/time or rel/<etype>/time)")
    return _typed_store_times(graph, time_attr)


def build_typed_temporal_graph(data: Any, graph: Any, time_attr: str) -> TypedTemporalGraph:
    """The :class:`TypedTemporalGraph` of a typed loader over ``data`` (rows sorted by time once).

    >>> import torch
    >>> from torch_geometric.data import HeteroData
    >>> from graphpipe.loaders.graph_data import GraphData
    >>> hetero = HeteroData()
    >>> hetero["paper"].num_nodes, hetero["author"].num_nodes = 1, 2
    >>> hetero["author"].time = torch.tensor([4, 2])
    >>> hetero["author", "writes", "paper"].edge_index = torch.tensor([[0, 1], [0, 0]])
    >>> tg = build_typed_temporal_graph(hetero, GraphData.from_pyg(hetero), "time")
    >>> tg.level, tg.relations[("author", "writes", "paper")].key.tolist()
    ('node', [2, 4])
    """
    node_time, edge_time = resolve_typed_times(data, graph, time_attr)
    return typed_temporal_graph(graph.graph, node_time=node_time, edge_time=edge_time)


def build_temporal_sampler(data: Any, time_attr: str, fanouts: Sequence[int], *, strategy: str,
                           replace: bool, num_threads: int | None) -> TemporalSampler:
    """The :class:`TemporalSampler` of a loader over ``data`` (graph sorted by time once)."""
    node_time, edge_time = resolve_times(data, time_attr)
    graph = temporal_graph(data.indptr, data.indices, node_time=node_time, edge_time=edge_time)
    return TemporalSampler(graph, fanouts, strategy=strategy, replace=replace, node_time=node_time,
                           num_threads=num_threads)


def check_temporal_options(time_attr: str | None, input_time: Any, strategy: Any, *, sampler: Any,
                           shard: Any, frontier: str | None, replace: bool, backend: str = "auto",
                           output: str = "minibatch") -> None:
    """A loader's temporal options, before any work: PyG's rules (``input_time`` needs
    ``time_attr``), and what temporal sampling does not combine with here."""
    if strategy not in STRATEGIES:
        raise ValueError(f"'temporal_strategy' must be one of {STRATEGIES} (got {strategy!r})")
    if time_attr is None:
        if input_time is not None:
            raise ValueError("Received conflicting 'input_time' and 'time_attr' arguments: "
                             "'input_time' is set while 'time_attr' is not set.")
        return
    if sampler is not None:
        raise ValueError("'time_attr' builds the loader's temporal sampler; pass no 'sampler'")
    if shard is not None:
        raise ValueError("temporal sampling ('time_attr') with a 'shard' is not supported")
    if frontier not in (None, "new"):
        raise ValueError(f"temporal sampling expands PyG's frontier 'new' (got frontier={frontier!r})")
    if strategy == "last" and replace:
        raise ValueError("'replace=True' has no meaning with temporal_strategy='last'")
    if backend not in ("auto", "cpu"):
        raise ValueError(f"temporal sampling runs on the CPU (got sampler_backend={backend!r})")
    if output != "minibatch":
        raise ValueError(f"temporal sampling yields MiniBatches (got output={output!r})")


def resolve_input_time(input_time: Any, input_nodes: np.ndarray, seed_node_time: np.ndarray | None
                       ) -> np.ndarray | None:
    """int64 ``(len(input_nodes),)`` seed times from ``input_time`` (a tensor or array), or
    None to use the seeds' node times ``seed_node_time`` (refused when it is None: the
    data has only edge times, or none for the seeds' type)."""
    if input_time is None:
        if seed_node_time is None:
            raise ValueError("edge-level temporal sampling needs 'input_time' (the time of each input "
                             "node), as the data has no node timestamps")
        return None
    if hasattr(input_time, "detach"):
        input_time = input_time.detach().cpu().numpy()
    times = np.asarray(input_time)
    if times.ndim != 1 or times.shape[0] != input_nodes.shape[0]:
        raise ValueError(f"'input_time' must have one time per input node, shape ({input_nodes.shape[0]},) "
                         f"(got {times.shape})")
    return check_seed_time(times, input_nodes.shape[0])
