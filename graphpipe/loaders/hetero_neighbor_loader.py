"""The typed :class:`HeteroNeighborLoader`: PyG's heterogeneous ``NeighborLoader`` on
graphpipe's typed Fused-Map sampler (:func:`graphpipe.ops.sampling.sample_hetero_neighbors`)
with per-type feature gathers from row sources (:mod:`graphpipe.loaders.rows`), an optional
degree cache per type, and prefetch in a background thread."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.hetero_graph_data import HeteroGraphData, resolve_hetero_data
from graphpipe.loaders.prefetch import data_loader_kwargs, draw_seed, prefetched
from graphpipe.loaders.rows import ChunkedRows, DegreeCachedRows, RowSource
from graphpipe.loaders.stages.gather import RowCounts, TypedGather
from graphpipe.loaders.stages.reorder import typed_reorder
from graphpipe.loaders.typed_batch import HeteroMiniBatch
from graphpipe.ops.features.degree import degree_order
from graphpipe.ops.sampling.cpu import sample_hetero_neighbors_batches
from graphpipe.ops.sampling.types import HeteroSampleOutput, check_frontier, resolve_fanouts

__all__ = ["HeteroNeighborLoader"]


class HeteroNeighborLoader:
    """Mini-batches of sampled typed neighbourhoods with their features, like PyG's
    ``NeighborLoader`` on a ``HeteroData`` (iterable, ``len()``).

    Per epoch the input nodes (all of one node type) are optionally shuffled and cut into
    batches of ``batch_size`` seeds; each window of ``window`` batches is sampled in
    parallel threads (each hop expands, over every relation into a node type, that
    type's nodes the hop before reached first: PyG's semantics), then each batch's
    feature rows are gathered per node type (``x[t]`` equals ``X_t[n_id[t]]`` bit for bit).
    With ``prefetch > 0`` this runs that many batches ahead in a background thread.
    PyG's DataLoader options (``num_workers``, ``pin_memory``, ...) change nothing a batch
    holds here and are ignored with one warning (as :class:`graphpipe.loaders.NeighborLoader`).

    Args:
        data: a :class:`HeteroGraphData`, a typed :class:`graphpipe.store.GraphStore` or
            its path, or a PyG ``HeteroData``.
        num_neighbors: one list for every relation (``[15, 10]``, seed hop first) or
            ``{etype: list}`` for each relation (PyG's rules); ``-1`` all, ``0`` none.
            ``fanouts=`` is the same (give one of them).
        input_nodes: ``(ntype, ids)`` with ``ids`` int IDs of that type, a boolean mask,
            a split name (``"train"``) or None (every node of the type); a node type
            name alone; None: every node of ``data.target_type``.
        batch_size: seeds per batch.
        shuffle: reshuffle the input nodes every epoch (False: input order).
        drop_last: drop the last, incomplete batch.
        seed: random seed of shuffling and sampling (equal seeds, equal batches); None:
            drawn from torch's generator every epoch (``torch.manual_seed`` fixes runs).
        replace: sample with replacement.
        frontier: ``"new"`` (PyG, default) or ``"all"`` (DGL: every known node re-expanded).
        window: batches sampled together (in parallel threads).
        num_threads: sampling threads (default: Numba's thread count).
        features: gather feature rows (False: ``x`` stays empty).
        cache: None, or ``"degree"``: per node type, the rows of the highest in-degree
            nodes (summed over relations into the type) held in memory.
        cache_rows: the cache budget per type: rows (int) or a fraction (float in [0, 1]).
        prefetch: batches prepared ahead in a background thread (0: in the caller's).
        device: where batches go.
        sampler: None (the local typed sampler), or one that samples elsewhere with the
            same results, e.g. :class:`graphpipe.service.typed_client.RemoteHeteroSampler`
            (``sample(seed_dicts, fanouts, keys, replace=, frontier=)``, ``check_graph``).
        match_reorder: False (default): every row read from the row sources; ``"match"``:
            per node type, rows the batch before held are copied from its ``x`` (Match);
            True: Match, and with ``shuffle=True`` each window's batches reordered so that
            consecutive batches share the most row bytes (Greedy Reorder over all typed
            node sets). No setting changes what a batch holds (Reorder only permutes the
            batches of a shuffled epoch); :attr:`stats` counts the rows each tier served.

    Attributes:
        data: the :class:`HeteroGraphData` read.
        rows: ``{ntype: RowSource}`` per type with features.
        fanouts: ``{etype: [per hop]}`` resolved.
        stats: :class:`graphpipe.loaders.stages.gather.RowCounts` of the current (or last)
            epoch: rows per type read from the row sources, reused (Match), held (cache).

    Two papers cite each other, two authors write them; seeds are papers:

    >>> import numpy as np, torch
    >>> data = HeteroGraphData.from_dicts(
    ...     {"paper": 2, "author": 2},
    ...     {("paper", "cites", "paper"): (np.array([0, 1]), np.array([1, 0])),
    ...      ("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 1]))},
    ...     x={"paper": np.arange(4, dtype=np.float32).reshape(2, 2)},
    ...     y={"paper": np.array([1, 0])}, splits={"paper": {"train": np.array([1])}})
    >>> loader = HeteroNeighborLoader(data, [2, 2], input_nodes=("paper", "train"),
    ...                               batch_size=1, seed=0)
    >>> batch = next(iter(loader))
    >>> batch.batch_size, batch.seeds.tolist(), batch.y.tolist()
    (1, [1], [0, 1])
    >>> {t: v.tolist() for t, v in batch.n_id.items()}
    {'paper': [1, 0], 'author': [1, 0]}
    >>> batch.edge_index[("paper", "cites", "paper")].tolist()   # 0 -> 1, then 1 -> 0
    [[1, 0], [0, 1]]
    >>> torch.equal(batch.x["paper"], torch.tensor([[2.0, 3.0], [0.0, 1.0]])), list(batch.x)
    (True, ['paper'])
    """

    def __init__(self, data: Any, num_neighbors: Sequence[int] | Mapping[Any, Sequence[int]] | None = None,
                 input_nodes: Any = None, *, fanouts: Sequence[int] | Mapping[Any, Sequence[int]] | None = None,
                 batch_size: int = 1, shuffle: bool = False,
                 drop_last: bool = False, seed: int | None = None, replace: bool = False,
                 frontier: str = "new", window: int = 8, num_threads: int | None = None,
                 features: bool = True, cache: str | None = None, cache_rows: float = 0.1,
                 prefetch: int = 2, device: str | torch.device = "cpu",
                 match_reorder: bool | str = False, sampler: Any = None, **loader_kwargs: Any):
        prefetch, self._generator = data_loader_kwargs(loader_kwargs, prefetch)
        if match_reorder not in (False, True, "match"):
            raise ValueError(f"'match_reorder' must be False, True or 'match' (got {match_reorder!r})")
        self.match_reorder = match_reorder
        if (num_neighbors is None) == (fanouts is None):
            raise ValueError("give the fanouts once: 'num_neighbors' (PyG's name) or 'fanouts'")
        self.data = data  # the caller's object, as PyG keeps it
        self.graph: HeteroGraphData = resolve_hetero_data(data)
        self.fanouts = resolve_fanouts(num_neighbors if fanouts is None else fanouts, self.graph.edge_types)
        self.frontier = check_frontier(frontier)
        self.batch_size = _positive("batch_size", batch_size)
        self.window = _positive("window", window)
        self.prefetch = _positive("prefetch", prefetch, minimum=0)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"'seed' must be a non-negative integer or None (got {seed!r})")
        if cache not in (None, "degree"):
            raise ValueError(f"'cache' must be None or 'degree' (got {cache!r})")
        self.shuffle, self.drop_last, self.replace = bool(shuffle), bool(drop_last), bool(replace)
        self.num_threads = num_threads
        self.fixed_seed = seed is not None
        self.seed = int(seed) if seed is not None else draw_seed(self._generator)
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"'device' is not a torch device (got {device!r})") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"'device' is {device!r} but CUDA is not available")
        self.target_type, self.input_nodes, self._input_by_node = _resolve_input(self.graph, input_nodes)
        self.rows: dict[str, RowSource] = (
            {t: self._row_source(t, cache, cache_rows) for t in self.graph.features} if features else {})
        self.gather = TypedGather(self.rows, match=match_reorder in (True, "match"))
        self.sampler = sampler  # None: the local typed sampler; else e.g. RemoteHeteroSampler
        if sampler is not None:
            sampler.check_graph(self.graph.num_nodes_dict, self.graph.edge_types)
        self._epoch = 0

    def _row_source(self, ntype: str, cache: str | None, cache_rows: float) -> RowSource:
        feat = self.graph.features[ntype]
        rows: RowSource = ChunkedRows([feat], max(1, feat.shape[0]))
        if cache == "degree":
            budget = _budget(cache_rows, feat.shape[0])
            rows = DegreeCachedRows(rows, degree_order(self.graph.in_degrees(ntype))[:budget])
        return rows

    # -- sizes and plan -------------------------------------------------------------------------
    def __len__(self) -> int:
        n = int(self.input_nodes.shape[0])
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    @property
    def dataset(self) -> range:
        """``range(len(input_nodes))``, PyG's (``len(loader.dataset)`` counts the seeds)."""
        return range(int(self.input_nodes.shape[0]))

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` run epoch ``epoch`` (batches depend on ``(seed, epoch)``)."""
        self._epoch = _positive("epoch", epoch, minimum=0)

    def epoch_positions(self, epoch: int) -> list[np.ndarray]:
        """Per batch of ``epoch``, the positions of its seeds in :attr:`input_nodes`."""
        n = int(self.input_nodes.shape[0])
        pos = np.random.default_rng([self.seed, epoch, 0]).permutation(n) if self.shuffle else np.arange(n)
        batches = [pos[i:i + self.batch_size] for i in range(0, n, self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def batch_keys(self, epoch: int, count: int) -> list[int]:
        """The sampler's random key of each batch of ``epoch``."""
        state = np.random.SeedSequence([self.seed, epoch, 1]).generate_state(max(1, count), np.uint64)
        return [int(v >> np.uint64(1)) for v in state[:count]]

    # -- one epoch --------------------------------------------------------------------------------
    @property
    def stats(self) -> RowCounts:
        """Rows per node type of the current (or last) epoch, by where they came from."""
        return self.gather.counts

    def _produce(self, epoch: int) -> Iterator[HeteroMiniBatch]:
        batches = self.epoch_positions(epoch)
        keys = self.batch_keys(epoch, len(batches))
        for s in range(0, len(batches), self.window):
            window = batches[s:s + self.window]
            seed_dicts = [{self.target_type: self.input_nodes[p]} for p in window]
            if self.sampler is not None:
                outs = self.sampler.sample(seed_dicts, self.fanouts, keys[s:s + self.window],
                                           replace=self.replace, frontier=self.frontier)
            else:
                outs = sample_hetero_neighbors_batches(
                    self.graph.graph, seed_dicts, self.fanouts, seeds=keys[s:s + self.window],
                    replace=self.replace, frontier=self.frontier, num_threads=self.num_threads)
            order = range(len(outs))
            if self.match_reorder is True and self.shuffle and len(outs) > 2 and self.rows:
                order = typed_reorder([o.n_id for o in outs], {
                    t: r.dim * np.dtype(r.dtype).itemsize for t, r in self.rows.items()}).tolist()
            for i in order:
                yield self._assemble(outs[i], window[i])

    def _assemble(self, out: HeteroSampleOutput, pos: np.ndarray) -> HeteroMiniBatch:
        """A batch from a sample: feature rows and labels per type, PyG's edge layout."""
        x = self.gather(out.n_id)
        y_dict = {t: torch.from_numpy(np.asarray(labels[out.n_id[t]]))
                  for t, labels in self.graph.labels.items()}
        order = self.graph.edge_order
        seeds = self.input_nodes[pos]
        batch = HeteroMiniBatch(
            n_id={t: torch.from_numpy(v) for t, v in out.n_id.items()}, x=x,
            y=y_dict.get(self.target_type), batch_size=int(pos.shape[0]), target_type=self.target_type,
            edge_index={et: torch.from_numpy(np.stack([out.row[et], out.col[et]])) for et in out.row},
            e_id={et: torch.from_numpy(order[et][e] if et in order else e) for et, e in out.edge_ids.items()},
            num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges,
            input_id=torch.from_numpy(seeds if self._input_by_node else pos.astype(np.int64)),
            y_dict=y_dict, edge_attr={et: torch.from_numpy(np.asarray(f[out.edge_ids[et]]))
                                      for et, f in self.graph.edge_features.items()})
        return batch if self.device.type == "cpu" else batch.to(self.device)

    def __iter__(self) -> Iterator[HeteroMiniBatch]:
        epoch = self._epoch
        self._epoch += 1
        if not self.fixed_seed:
            self.seed = draw_seed(self._generator)
        self.gather.reset()
        producer = self._produce(epoch)
        return prefetched(producer, self.prefetch, "graphpipe-hetero-prefetch") if self.prefetch else producer

    def __repr__(self) -> str:
        return (f"HeteroNeighborLoader(target_type={self.target_type!r}, batch_size={self.batch_size}, "
                f"batches={len(self)}, relations={len(self.fanouts)}, prefetch={self.prefetch})")


def _positive(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"'{name}' must be an integer >= {minimum} (got {value!r})")
    return int(value)


def _budget(cache_rows: float, num_rows: int) -> int:
    if isinstance(cache_rows, (int, np.integer)) and not isinstance(cache_rows, bool) and cache_rows >= 0:
        return min(int(cache_rows), num_rows)
    if isinstance(cache_rows, (float, np.floating)) and 0.0 <= cache_rows <= 1.0:
        return round(float(cache_rows) * num_rows)
    raise ValueError(f"'cache_rows' must be a row count >= 0 or a fraction in [0, 1] (got {cache_rows!r})")


def _resolve_input(data: HeteroGraphData, input_nodes: Any) -> tuple[str, np.ndarray, bool]:
    """``(node type, int64 seed IDs, input_id by node ID)`` of ``input_nodes``."""
    if input_nodes is None:
        if data.target_type is None:
            raise ValueError("'input_nodes' is needed: the data names no target type")
        ntype, spec = data.target_type, None
    elif isinstance(input_nodes, str):
        ntype, spec = input_nodes, None
    elif isinstance(input_nodes, (tuple, list)) and len(input_nodes) == 2 and isinstance(input_nodes[0], str):
        ntype, spec = input_nodes
    else:
        raise ValueError("'input_nodes' must be None, a node type, or (node type, IDs | mask | "
                         f"split name | None) (got {type(input_nodes).__name__})")
    if ntype not in data.num_nodes_dict:
        raise ValueError(f"'input_nodes' names an unknown node type {ntype!r} (known: {data.node_types})")
    n = data.num_nodes_dict[ntype]
    if spec is None:
        return ntype, np.arange(n, dtype=np.int64), True
    if isinstance(spec, str):
        return ntype, data.typed_split(ntype, spec), False
    ids = spec.detach().cpu().numpy() if isinstance(spec, torch.Tensor) else np.asarray(spec)
    if ids.dtype == np.bool_:
        if ids.shape != (n,):
            raise ValueError(f"'input_nodes' mask must have {n} entries (got {ids.shape})")
        return ntype, np.flatnonzero(ids).astype(np.int64), True
    if ids.ndim != 1 or (ids.size and ids.dtype.kind not in "iu"):
        raise ValueError(f"'input_nodes' IDs must be a 1-D integer array (got {ids.dtype}, ndim {ids.ndim})")
    ids = ids.astype(np.int64)
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise ValueError(f"'input_nodes' IDs of {ntype!r} must lie in [0, {n})")
    if np.unique(ids).shape[0] != ids.shape[0]:
        raise ValueError("'input_nodes' IDs must be distinct")
    return ntype, ids, False
