""":class:`LinkNeighborLoader`: mini-batches of supervision edges with the sampled
neighbourhoods of their endpoints, like ``torch_geometric.loader.LinkNeighborLoader``.

Per batch: ``batch_size`` positive edges (shuffled per epoch with ``shuffle=True``),
their negatives (:mod:`graphpipe.loaders.link_seeds`), the unique endpoints as seeds of
one Fused-Map pass of the loader's sampler (the same pipeline as
:class:`~graphpipe.loaders.NeighborLoader`: sample, gather, transfer, prefetch), then,
with ``exclude_seed_edges=True``, the positives removed from the sampled graph in both
directions (:mod:`graphpipe.loaders.link_exclude`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.graph_data import is_typed_data
from graphpipe.loaders.link_edges import EdgeBatches, edge_pairs
from graphpipe.loaders.link_exclude import MAX_PAIR_NODES, exclude_seed_edges
from graphpipe.loaders.link_seeds import LinkSeeds, plan_link_batch, resolve_negatives
from graphpipe.loaders.link_temporal import (
    exclude_edges_anywhere,
    plan_temporal_link_batch,
    resolve_edge_label_time,
    setup_temporal_link,
)
from graphpipe.loaders.minibatch import MiniBatch
from graphpipe.loaders.neighbor_loader import NeighborLoader
from graphpipe.loaders.prepared import PreparedBatch
from graphpipe.loaders.temporal import check_temporal_options

__all__ = ["LinkMiniBatch", "LinkNeighborLoader"]

_LINK_FIELDS = ("edge_label_index", "edge_label", "src_index", "dst_pos_index", "dst_neg_index",
                "edge_label_time")


@dataclass
class LinkMiniBatch(MiniBatch):
    """A :class:`MiniBatch` of a link loader. ``n_id[:batch_size]`` are the unique seed
    nodes (sorted); ``input_id`` indexes the positives in the loader's
    ``edge_label_index``. Local IDs below index ``n_id``.

    Attributes:
        edge_label_index: int64 ``(2, P + M)`` positives then negatives (binary mode, or
            no negatives); None in triplet mode.
        edge_label: ``(P + M,)`` float 1/0 (binary), the given labels, or None.
        src_index, dst_pos_index: int64 ``(P,)`` (triplet mode), else None.
        dst_neg_index: int64 ``(P,)`` or ``(P, amount)`` (triplet mode), else None.
        edge_label_time: int64 times of the label edges (``edge_label_time`` given:
            ``(P + M,)``, triplet ``(P,)``), else None.
    """

    edge_label_index: torch.Tensor | None = None
    edge_label: torch.Tensor | None = None
    src_index: torch.Tensor | None = None
    dst_pos_index: torch.Tensor | None = None
    dst_neg_index: torch.Tensor | None = None
    edge_label_time: torch.Tensor | None = None

    def _map(self, fn: Any) -> LinkMiniBatch:
        base = MiniBatch._map(self, fn)
        extra = {k: None if getattr(self, k) is None else fn(getattr(self, k)) for k in _LINK_FIELDS}
        return LinkMiniBatch(**{f.name: getattr(base, f.name) for f in fields(MiniBatch)}, **extra)

    def to_pyg(self) -> Any:
        """As the ``Data`` PyG's ``LinkNeighborLoader`` yields (no ``batch_size``)."""
        data = MiniBatch.to_pyg(self)
        del data.batch_size
        for name in _LINK_FIELDS:
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data


def _as_link(batch: MiniBatch, seeds: LinkSeeds) -> LinkMiniBatch:
    device = batch.n_id.device

    def put(value: Any) -> torch.Tensor | None:
        if value is None:
            return None
        value = value if isinstance(value, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(value))
        return value.to(device)

    extra = {name: put(getattr(seeds, name, None)) for name in _LINK_FIELDS}
    base = {f.name: getattr(batch, f.name) for f in fields(MiniBatch)}
    out = LinkMiniBatch(**base, **extra)
    # the iterator sets input_id from the node seeds after transfer; _deliver restores this
    out.__dict__["_edge_input_id"] = put(seeds.input_id)
    return out


class _LinkTransfer:
    """The loader's transfer stage, then the batch's link attributes on the same device."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __call__(self, prepared: PreparedBatch) -> LinkMiniBatch:
        return _as_link(self.inner(prepared), prepared.link)


def _resolve_edges(edge_label_index: Any, data: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` of the supervision edges: a link split name of a store, ``(src, dst)``,
    a ``(2, P)`` array / tensor, or None (every edge of the graph)."""
    if edge_label_index is None:
        indptr = np.asarray(data.indptr)
        dst = np.repeat(np.arange(data.num_nodes, dtype=np.int64), np.diff(indptr))
        return np.asarray(data.indices, dtype=np.int64), dst
    if isinstance(edge_label_index, str):
        from graphpipe.store.link import link_split_names, read_link_split

        if data.store is None:
            raise ValueError(f"'edge_label_index'={edge_label_index!r} names a link split: "
                             "'data' must be a store")
        if edge_label_index not in link_split_names(data.store):
            raise ValueError(f"'edge_label_index' names an unknown link split {edge_label_index!r}; "
                             f"link splits: {link_split_names(data.store)}")
        link = read_link_split(data.store, edge_label_index)
        return link.src, link.dst
    src, dst = edge_pairs(edge_label_index, "(src, dst), a (2, P) array or a link split name")
    for arr in (src, dst):
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= data.num_nodes):
            raise ValueError(f"'edge_label_index' must hold node IDs in [0, {data.num_nodes})")
    return src, dst


def _resolve_label(edge_label: Any, num_pos: int, neg: Any) -> torch.Tensor | None:
    if edge_label is None:
        return None
    label = edge_label if isinstance(edge_label, torch.Tensor) else torch.as_tensor(np.asarray(edge_label))
    if label.shape[0] != num_pos:
        raise ValueError(f"'edge_label' has {label.shape[0]} entries for {num_pos} edges")
    if neg is not None and neg.mode == "triplet":
        raise ValueError("'edge_label' must be None for 'triplet' negative sampling (PyG's rule)")
    if neg is not None and label.numel() and label.min() == 0:  # PyG: label 0 is the negatives'
        label = label + 1
    return label


class LinkNeighborLoader(EdgeBatches, NeighborLoader):
    """Mini-batches of edges with their endpoints' sampled neighbourhoods, PyG's
    ``LinkNeighborLoader`` API and batch attributes, read from a graphpipe store (or any
    ``data`` a :class:`~graphpipe.loaders.NeighborLoader` takes).

    Args:
        data, num_neighbors: as :class:`~graphpipe.loaders.NeighborLoader`.
        edge_label_index: the supervision edges: ``(src, dst)``, a ``(2, P)`` tensor or
            array, a link split of a store (``"train"``: ``link/train/src,dst``), or None
            (every edge of the graph, PyG's default).
        edge_label: ``(P,)`` labels of those edges, or None (PyG's rules: in binary mode
            labels that start at 0 are shifted by one, 0 marks negatives).
        neg_sampling: None, ``"binary"``, ``"triplet"``, a dict ``{"mode", "amount",
            "weight"}`` (``weight``: ``"uniform"``, ``"degree"`` or an ``(N,)`` array; or
            ``src_weight`` / ``dst_weight``) or a PyG ``NegativeSampling``.
        neg_sampling_ratio: PyG's older spelling of ``{"mode": "binary", "amount": ratio}``
            (given and non-zero, it replaces ``neg_sampling``, as in PyG).
        batch_size: positive edges per batch.
        shuffle, drop_last, seed: as :class:`~graphpipe.loaders.NeighborLoader` (over edges;
            negatives are drawn from each batch's key, so equal seeds give equal batches).
        exclude_seed_edges: remove each batch's positive edges (both directions) from its
            sampled graph, so a model cannot read its labels off the messages (default False,
            PyG's behaviour).
        **kwargs: the other options of :class:`~graphpipe.loaders.NeighborLoader`
            (``features``, ``device``, ``prefetch``, ``match_reorder``, ``sampler``...):
            ``sampler=RemoteSampler(url)`` samples the endpoints on a graphpipe service
            (seed-edge exclusion happens here, on what it returns).
        edge_label_time, time_attr, temporal_strategy: temporal link prediction (PyG's):
            ``time_attr`` names the graph's timestamps as for
            :class:`~graphpipe.loaders.NeighborLoader`; ``edge_label_time`` is an int
            ``(P,)`` time per supervision edge (or, with a link split, None or the split's
            name: its ``link/<split>/year``). Each endpoint, and each negative drawn for an
            edge, is sampled as its own tree with only edges no newer than that edge's time
            (:mod:`graphpipe.loaders.link_temporal`, PyG's disjoint layout).

    A four-node ring (both directions) and two positive edges per batch, one binary
    negative each:

    >>> import numpy as np
    >>> indptr, indices = np.array([0, 2, 4, 6, 8]), np.array([1, 3, 0, 2, 1, 3, 0, 2])
    >>> x = np.eye(4, dtype=np.float32)
    >>> loader = LinkNeighborLoader((indptr, indices, x), [2], edge_label_index=(np.array([0, 1]),
    ...     np.array([1, 2])), neg_sampling="binary", batch_size=2, seed=0, exclude_seed_edges=True)
    >>> batch = next(iter(loader))
    >>> batch.n_id[batch.edge_label_index].tolist(), batch.edge_label.tolist()
    ([[0, 1, 3, 1], [1, 2, 3, 0]], [1.0, 1.0, 0.0, 0.0])
    >>> pairs = batch.n_id[batch.edge_index].T.tolist()   # sampled (src, dst), seeds excluded
    >>> sorted(pairs), [0, 1] in pairs or [1, 0] in pairs
    ([[0, 3], [2, 3], [3, 0], [3, 2]], False)

    Temporal link prediction: the ring's edges carry times (``stamp``); the supervision
    edge ``0 -> 1`` at time 2 samples each endpoint as its own tree with only edges no
    newer than 2:

    >>> import torch
    >>> from torch_geometric.data import Data
    >>> ring = Data(x=torch.eye(4), edge_index=torch.tensor([[1, 3, 0, 2, 1, 3, 0, 2],
    ...     [0, 0, 1, 1, 2, 2, 3, 3]]), stamp=torch.tensor([1, 5, 2, 5, 5, 5, 5, 5]), num_nodes=4)
    >>> loader = LinkNeighborLoader(ring, [-1], edge_label_index=torch.tensor([[0], [1]]),
    ...     edge_label_time=torch.tensor([2]), time_attr="stamp", batch_size=1, seed=0)
    >>> batch = next(iter(loader))
    >>> batch.n_id.tolist(), batch.batch.tolist(), batch.stamp.tolist(), batch.seed_time.tolist()
    ([0, 1, 1, 0], [0, 1, 0, 1], [1, 2], [2, 2])
    """

    def __new__(cls, data: Any, *args: Any, **kwargs: Any) -> Any:
        """A typed graph (``HeteroData``, a typed store) gets a
        :class:`~graphpipe.loaders.TypedLinkNeighborLoader` (``edge_label_index=(relation,
        edges)``, as PyG's loader takes it on ``HeteroData``)."""
        if cls is LinkNeighborLoader and is_typed_data(data):
            from graphpipe.loaders.typed_link_loader import TypedLinkNeighborLoader

            return TypedLinkNeighborLoader(data, *args, **kwargs)
        return super().__new__(cls)

    def __init__(self, data: Any, num_neighbors: Sequence[int] | None = None, *,
                 edge_label_index: Any = None, edge_label: Any = None, neg_sampling: Any = None,
                 neg_sampling_ratio: float | None = None, batch_size: int = 1,
                 exclude_seed_edges: bool = False, edge_label_time: Any = None,
                 time_attr: str | None = None, temporal_strategy: str = "uniform", **kwargs: Any):
        if is_typed_data(data):
            raise ValueError(f"{type(self).__name__} does not support typed graphs: use "
                             "LinkNeighborLoader or TypedLinkNeighborLoader")
        for refused in ("input_nodes", "disjoint", "output", "input_time"):
            if kwargs.get(refused) not in (None, False, "minibatch"):
                raise ValueError(f"LinkNeighborLoader does not support {refused!r}")
            kwargs.pop(refused, None)
        if time_attr is None:   # PyG's rule; a strategy alone is checked and has no effect, as there
            check_temporal_options(None, None, temporal_strategy, sampler=None, shard=None, frontier=None,
                                   replace=False)
            if edge_label_time is not None:
                raise ValueError("Received conflicting 'edge_label_time' and 'time_attr' arguments: "
                                 "'edge_label_time' is set while 'time_attr' is not set")
        super().__init__(data, num_neighbors, None, batch_size=batch_size, **kwargs)
        self.edge_time: np.ndarray | None = None   # temporal: each supervision edge's time
        if neg_sampling_ratio:  # PyG: the older spelling wins over neg_sampling
            neg_sampling = {"mode": "binary", "amount": neg_sampling_ratio}
        self.neg_sampling = resolve_negatives(neg_sampling, self.graph.indptr, self.graph.num_nodes)
        self.edge_src, self.edge_dst = _resolve_edges(edge_label_index, self.graph)
        self.edge_label = _resolve_label(edge_label, self.edge_src.shape[0], self.neg_sampling)
        self.exclude_seed_edges = bool(exclude_seed_edges)
        if self.exclude_seed_edges and self.graph.num_nodes > MAX_PAIR_NODES:
            raise ValueError(f"'exclude_seed_edges' supports up to {MAX_PAIR_NODES} nodes")
        self.transfer = _LinkTransfer(self.transfer)
        if time_attr is not None:
            setup_temporal_link(self, time_attr, temporal_strategy, kwargs)
            self.edge_time = resolve_edge_label_time(edge_label_time, edge_label_index, self.graph,
                                                     self.edge_src.shape[0])

    def plan(self, positions: np.ndarray, key: int) -> LinkSeeds:
        """The :class:`LinkSeeds` of the positives at ``positions`` (negatives from ``key``)."""
        label = None if self.edge_label is None else self.edge_label[torch.from_numpy(positions)]
        if self.edge_time is not None:
            return plan_temporal_link_batch(positions, self.edge_src[positions], self.edge_dst[positions],
                                            self.edge_time[positions], label, self.neg_sampling,
                                            self.graph.num_nodes, key, self.sampler.node_time)
        return plan_link_batch(positions, self.edge_src[positions], self.edge_dst[positions], label,
                               self.neg_sampling, self.graph.num_nodes, key)

    def _sample_window(self, positions: Sequence[np.ndarray], keys: Sequence[int]) -> tuple[list, list]:
        plans = [self.plan(p, k) for p, k in zip(positions, keys)]
        times = None if self.edge_time is None else [p.seed_time for p in plans]
        outputs = self.sample([p.nodes for p in plans], keys, times)
        if self.exclude_seed_edges:
            exclude = exclude_seed_edges if self.edge_time is None else exclude_edges_anywhere
            outputs = [exclude(o, p.pos_src, p.pos_dst, self.graph.num_nodes)
                       for o, p in zip(outputs, plans)]
        return plans, outputs

    def _gather_window(self, plans: list, outputs: list, keys: Sequence[int]) -> Iterator[PreparedBatch]:
        for i in self.reorder(outputs):
            prepared = self.gather(outputs[int(i)], key=int(keys[int(i)]))
            prepared.link = plans[int(i)]
            outputs[int(i)] = None
            yield prepared

    def _produce(self, epoch: int, sample_ahead: bool = False) -> Iterator[PreparedBatch]:
        batches = self.epoch_edge_batches(epoch)
        keys = self.batch_keys(epoch, len(batches))
        windows = [(batches[s:s + self.window], keys[s:s + self.window])
                   for s in range(0, len(batches), self.window)]
        if not sample_ahead or len(windows) < 2:
            for positions, window_keys in windows:
                yield from self._gather_window(*self._sample_window(positions, window_keys), window_keys)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="graphpipe-link-sample-ahead") as pool:
            pending = pool.submit(self._sample_window, *windows[0])
            for w in range(len(windows)):
                plans, outputs = pending.result()
                if w + 1 < len(windows):
                    pending = pool.submit(self._sample_window, *windows[w + 1])
                yield from self._gather_window(plans, outputs, windows[w][1])

    def _deliver(self, batch: LinkMiniBatch) -> LinkMiniBatch:
        """The batch with ``input_id`` indexing ``edge_label_index`` (PyG's), not the nodes."""
        batch.input_id = batch.__dict__.pop("_edge_input_id")
        return batch

    def __repr__(self) -> str:
        mode = None if self.neg_sampling is None else self.neg_sampling.mode
        return (f"LinkNeighborLoader(num_neighbors={self.fanouts}, batch_size={self.batch_size}, "
                f"edges={self.edge_src.shape[0]}, neg_sampling={mode!r}, "
                f"exclude_seed_edges={self.exclude_seed_edges})")
