"""The drop-in :class:`NeighborLoader`: Fused-Map sampling, Match-Reorder, feature gather
with reuse and a static degree cache, prefetch in a background thread."""

from __future__ import annotations

import contextlib
import threading
import time
import weakref
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import torch

from graphpipe.allocator import tune_allocator
from graphpipe.loaders.dgl_blocks import (
    import_dgl,
    seed_first_fanouts,
    to_dgl_blocks,
    to_dgl_typed_blocks,
)
from graphpipe.loaders.disjoint import DisjointSampler, sample_disjoint_typed
from graphpipe.loaders.feature_tier import auto_match_reorder, choose_tier, feature_source, row_tier
from graphpipe.loaders.graph_data import (
    GraphData,
    is_mask,
    is_typed_data,
    node_ids,
    resolve_graph_data,
    resolve_typed_input,
)
from graphpipe.loaders.minibatch import MiniBatch
from graphpipe.loaders.prefetch import END, Prefetcher, data_loader_kwargs, draw_seed
from graphpipe.loaders.prepared import PreparedBatch
from graphpipe.loaders.rows import DegreeCachedRows, QuantizedRowSource, RowSource
from graphpipe.loaders.sampler import (
    BaseSampler,
    LocalSampler,
    SamplerInput,
    resolve_sampler_backend,
    warm_sampling_kernels,
)
from graphpipe.loaders.shard import BaseShard
from graphpipe.loaders.stages import GatherStage, ReorderStage, SampleStage, TransferStage
from graphpipe.loaders.stages.gather import RowCounts, TypedGather
from graphpipe.loaders.stages.reorder import check_criterion, typed_reorder
from graphpipe.loaders.stats import LoaderStats, StatsRef
from graphpipe.loaders.temporal import (
    build_temporal_sampler,
    build_typed_temporal_graph,
    check_temporal_options,
    resolve_input_time,
)
from graphpipe.loaders.typed_batch import HeteroMiniBatch, typed_batch_from_sample
from graphpipe.loaders.typed_tier import typed_feature_sources
from graphpipe.ops._core.checks import check_fanouts as _check_fanouts
from graphpipe.ops.features.degree import degree_order
from graphpipe.ops.sampling import sample_neighbors_batches
from graphpipe.ops.sampling.temporal_typed import sample_temporal_typed_batches
from graphpipe.ops.sampling.types import check_frontier, resolve_fanouts

__all__ = ["HeteroNeighborLoader", "NeighborLoader"]

class NeighborLoader:
    """Mini-batches of sampled neighbourhoods with their features, like
    ``torch_geometric.loader.NeighborLoader`` (iterable, ``len()``), read from a graphpipe store.

    Per epoch the input nodes are (optionally) shuffled and cut into batches of
    ``batch_size`` seeds. The pipeline, per window of ``window`` batches:

    1. ``sample``: the window's batches are sampled together (``sampler``; by default
       uniform Fused-Map sampling in parallel threads);
    2. ``reorder``: with ``shuffle=True`` only, Greedy Reorder puts each batch after the
       one it shares most input nodes with (the first batch of a window stays first);
    3. ``gather``: each batch's feature rows come from the static cache, else from the
       batch before it (whatever window or epoch that was), else from the store;
    4. ``transfer``: to ``device``.

    Batch order: a loader never reorders batches unless the caller asked for an
    order-free epoch (``shuffle=True``). With ``shuffle=False`` batches come in input
    order whatever the other options (``match_reorder``, ``window``, ``cache``), so
    ``torch.cat([b.n_id[:b.batch_size] for b in loader])`` equals the input nodes and
    PyG's layer-wise inference (``input_nodes=None, num_neighbors=[-1]``, concatenating
    ``out[:batch_size]``) lines up with node IDs; Match (reuse of the previous batch's
    rows) still applies, it does not change what a batch holds.

    Steps 1–3 run ``prefetch`` batches ahead in a background thread, and the next
    window is sampled in a second thread while the current one is gathered.

    PyG's signature and defaults: ``NeighborLoader(data, num_neighbors, input_nodes=None,
    batch_size=1, shuffle=False, replace=False, ...)``, so a PyG script runs with the
    import changed. DataLoader options (``num_workers``, ``persistent_workers``,
    ``pin_memory``, ...) change nothing a batch holds here and are ignored with one
    warning; ``prefetch_factor`` sets ``prefetch`` and ``generator`` the torch generator
    unseeded loaders draw from; options that would change the batches (``transform``,
    ``collate_fn``, weighted sampling, ``subgraph_type`` other than ``"directional"``) are
    refused with ``ValueError``. Temporal sampling is PyG's (``time_attr``, ``input_time``,
    ``temporal_strategy``; :mod:`graphpipe.loaders.temporal`).

    Args:
        data: a ``torch_geometric.data.Data`` (``x``, ``y``, ``edge_index``, ``edge_attr``
            and other node/edge tensors; the CSC is built in memory), a
            :class:`graphpipe.store.GraphStore`, a store path, a dict
            ``{"indptr", "indices", "x", "y", "splits"}`` or a tuple
            ``(indptr, indices, x, y)`` (CSC by destination; ``x`` ``(N, dim)``).
        num_neighbors: neighbours per hop, seed hop first (``[15, 10, 5]``); ``-1`` = all. With
            ``fanout_order="dgl"``, input layer first as DGL's ``NeighborSampler`` lists them.
        input_nodes: None (all nodes, PyG's default), int node IDs (distinct, a tensor or
            an array), a boolean mask of length ``N``, or a split name (``"train"``: a
            store's split, or the ``train_mask`` / ``val_mask`` / ``test_mask`` of a
            ``Data`` as ``"train"`` / ``"valid"`` / ``"test"``).
        batch_size: seeds per batch.
        shuffle: reshuffle the input nodes every epoch (and allow Reorder). False
            (default): batches in input order.
        drop_last: drop the last, incomplete batch.
        seed: random seed of shuffling and sampling; two loaders with the same seed
            yield the same batches (epoch by epoch). None: each epoch draws its seed from
            torch's generator when iteration starts (``generator=``, else the global
            one), so ``torch.manual_seed(s)`` makes runs reproducible, as with PyG.
        replace: sample with replacement (default sampler only).
        disjoint: one sampled tree per seed (PyG's): a node reached from two seeds appears
            once per tree, ``batch.batch`` gives each node's tree
            (:class:`graphpipe.loaders.disjoint.DisjointSampler`).
        subgraph_type, directed: PyG's; only ``"directional"`` and ``directed=True`` (the
            defaults) are supported.
        frontier: which nodes hops after the first expand (default sampler only):
            ``"new"`` (PyG: only the nodes the hop before reached first) or ``"all"``
            (DGL: every node known so far, seeds included, re-sampled);
            :data:`graphpipe.ops.sampling.FRONTIERS`. None (default): ``"new"``, or
            ``"all"`` when ``fanout_order`` or ``output`` is ``"dgl"`` (DGL's sampler).
        fanouts: the same as ``num_neighbors`` (give one of them).
        match_reorder: ``"auto"`` (default): the fastest of the settings below measured
            for the loader's row tier and device
            (:func:`graphpipe.loaders.feature_tier.auto_match_reorder`): False on a CPU
            device (rows in memory or on the disk tier), True on a GPU device;
            :attr:`match_reorder` holds the result. True: Match + Reorder (Reorder only with
            ``shuffle=True``, else as ``"match"``); ``"match"``: Match only (batches in
            sample order); False: neither (every uncached row read from the store). No
            setting changes what a batch holds: Match copies the same rows, Reorder only
            permutes the batches of a shuffled epoch.
        window: batches sampled (and reordered) together.
        cache: None, or ``"degree"``: a static cache of the rows of highest in-degree.
        cache_rows: the cache's budget in rows (int) or as a fraction of the nodes (float
            in [0, 1]).
        prefetch: batches prepared ahead in a background thread (0: in the caller's thread).
        device: where batches go (``"cpu"``, ``"cuda"``, ...).
        progress: show a progress bar (rich).
        sampler: a :class:`graphpipe.loaders.BaseSampler`; default :class:`LocalSampler`.
        features: gather feature rows (``MiniBatch.x``); False leaves ``x`` None. True
            (``"auto"``) reads them from memory, or from disk with ``pread`` behind a CLOCK
            cache when the store's features do not fit in the memory this process may use;
            ``"memory"`` / ``"disk"`` force a tier (:mod:`graphpipe.loaders.feature_tier`).
        num_threads: sampling threads per window (default sampler only).
        reorder_by: ``"match"`` (FastGL's match degree) or ``"overlap"`` (raw shared-node
            counts, which minimise the rows loaded directly); on a typed graph both weigh
            each type's rows by their bytes. None (default): ``"match"``, and ``"overlap"``
            on a typed graph (the order each loader had).
        feature_bits: None (rows as stored) or 8, 4, 2, 1: low-bit feature transfer
            (per-row stochastic quantization, :mod:`graphpipe.ops.features.quantize`). Store rows
            are quantized as they are gathered (rounding seeded per batch from ``seed``,
            so equal seeds give equal batches), the static cache once at build time;
            Match reuses the previous batch's quantized rows (so reused rows equal what
            that batch delivered); ``transfer`` dequantizes to float32 on ``device``.
            ``|x - X[n_id]| <= scale`` per row, ``scale = (max - min) / (2^bits - 1)``.
        sampler_backend: where the default sampler runs: ``"auto"`` (on the GPU when
            ``device`` is a CUDA device and numba.cuda works, else the CPU), ``"cpu"`` or
            ``"cuda"`` (the topology is copied to the GPU once). Same batches on each.
            ``stats.feature_bytes_gathered`` / ``feature_bytes_full`` count the bytes.
        fanout_order: how ``fanouts`` is listed: ``"seed"`` (seed hop first, PyG's order) or
            ``"dgl"`` (input layer first: DGL's ``NeighborSampler([5, 10, 15])`` samples 15
            neighbours of each seed; the same list here samples the same way).
        output: what iterating yields: ``"minibatch"`` (:class:`MiniBatch`) or ``"dgl"``:
            DGL's ``(input_nodes, output_nodes, blocks)`` with ``DGLBlock``s, ``dgl.NID`` /
            ``dgl.EID`` (the edge's position in the input edge list: a store's original edge
            IDs, a ``Data``'s ``edge_index`` column), ``blocks[0].srcdata["feat"]`` and
            ``blocks[-1].dstdata["label"]`` (:meth:`MiniBatch.to_dgl`; needs ``dgl``); on a
            typed graph typed blocks and ``{ntype: IDs}`` dicts, as DGL's loader over a
            heterograph (:func:`graphpipe.loaders.dgl_blocks.to_dgl_typed_blocks`).
        shard: None (all input nodes), or this rank's share of every epoch for
            data-parallel training (:mod:`graphpipe.loaders.shard`):
            :class:`~graphpipe.loaders.shard.SeedShard` (``DistributedSampler``'s split of
            the epoch's permutation, padded by wrapping or dropped so that every rank
            gets the same number of batches) or
            :class:`~graphpipe.loaders.shard.PartitionShard` (the seeds of the rank's
            METIS parts). Give every rank the same ``seed``: the permutation is drawn from
            it. Rank ``r`` of ``W`` samples its batch ``i`` with the key an unsharded
            loader gives batch ``i * W + r``.
        time_attr: None (default: no temporal sampling, batches exactly as without these
            three options), or the timestamps to sample by (PyG's): on a store ``"time"``
            (``nodes/time``, else ``csc/time``), ``"node_time"`` or ``"edge_time"``; on a
            ``Data`` a node or edge attribute's name. Then only edges no newer than the
            seed's time are sampled (edge time, or the neighbour's node time), one tree per
            seed (PyG's ``disjoint=True``, implied), every node inheriting its seed's time;
            ``batch.seed_time`` holds the seeds' times. ``input_nodes`` may repeat a node
            (one tree per occurrence, ``input_id`` its position; the node ID for a mask).
        input_time: int ``(len(input_nodes),)`` time of each input node (PyG's); None:
            the seeds' node times (edge-level time without node times needs it).
        temporal_strategy: ``"uniform"`` (PyG's default) or ``"last"`` (the most recent
            valid edges); only with ``time_attr``.

    Attributes:
        data: ``data`` as given (PyG's: a ``Data`` stays the caller's object; deleting its
            ``x`` / ``y``, as PyG's layer-wise inference does, leaves them out of the batches).
        graph: the :class:`graphpipe.loaders.graph_data.GraphData` the loader reads.
        dataset: ``range(len(input_nodes))`` (PyG's: ``len(loader.dataset)`` counts the seeds).
        match_reorder: the setting in use (``"auto"`` resolved: True, ``"match"`` or False).
        stats: :class:`LoaderStats` of the current (or last) epoch.
        rows: the :class:`graphpipe.loaders.rows.RowSource` the gather stage reads (the
            store's rows, wrapped in the degree cache and in quantization when asked),
            None with ``features=False``.
        cache: the :class:`graphpipe.loaders.rows.DegreeCachedRows` of ``cache="degree"``.

    A six-node ring (node ``i`` hears from ``i - 1`` and ``i + 1``), given as arrays; a
    store path or :class:`graphpipe.store.GraphStore` works the same:

    >>> import numpy as np, torch
    >>> indptr = np.array([0, 2, 4, 6, 8, 10, 12])
    >>> indices = np.array([1, 5, 0, 2, 1, 3, 2, 4, 3, 5, 4, 0])
    >>> x = np.arange(12, dtype=np.float32).reshape(6, 2)
    >>> y = np.array([0, 1, 0, 1, 0, 1])
    >>> loader = NeighborLoader((indptr, indices, x, y), [2, 1], batch_size=2, seed=0)
    >>> len(loader)                                          # input_nodes=None: all nodes
    3
    >>> batch = next(iter(loader))
    >>> batch.seeds.tolist(), batch.n_id.tolist()
    ([0, 1], [0, 1, 5, 2, 4])
    >>> batch.num_sampled_nodes, batch.num_sampled_edges     # hop 2 expands nodes 5, 2 only
    ([2, 2, 1], [4, 2])
    >>> [(b.num_dst, b.num_src) for b in batch.blocks]       # input layer first
    [(4, 5), (2, 4)]
    >>> torch.equal(batch.x, torch.from_numpy(x)[batch.n_id]), batch.y.tolist()
    (True, [0, 1, 1, 0, 0])
    >>> [b.seeds.tolist() for b in loader]                   # one epoch, in input order
    [[0, 1], [2, 3], [4, 5]]

    A PyG ``Data`` works as it is (its CSC is built with each node's in-neighbours sorted,
    so node 5's row is ``[0, 4]`` and draws may differ from the arrays above); ``e_id``
    indexes ``data.edge_index``:

    >>> from torch_geometric.data import Data
    >>> edge_index = torch.stack([torch.from_numpy(indices), torch.arange(6).repeat_interleave(2)])
    >>> data = Data(x=torch.from_numpy(x), y=torch.from_numpy(y), edge_index=edge_index)
    >>> pyg_batch = next(iter(NeighborLoader(data, [2, 1], batch_size=2, seed=0)))
    >>> pyg_batch.n_id.tolist(), pyg_batch.y.tolist()
    ([0, 1, 5, 2], [0, 1, 1, 0])
    >>> torch.equal(data.edge_index[:, pyg_batch.e_id], pyg_batch.n_id[pyg_batch.edge_index])
    True

    Temporal sampling (PyG's ``time_attr``): node 0 hears from 1, 2, 3 at times 5, 1, 3
    (an edge attribute ``stamp``); seeded twice, at times 4 and 9, with the two most recent
    edges each time (one tree per seed, ``batch.batch``):

    >>> data = Data(edge_index=torch.tensor([[1, 2, 3], [0, 0, 0]]), num_nodes=4,
    ...             stamp=torch.tensor([5, 1, 3]))
    >>> loader = NeighborLoader(data, [2], input_nodes=torch.tensor([0, 0]), batch_size=2,
    ...                         time_attr="stamp", input_time=torch.tensor([4, 9]),
    ...                         temporal_strategy="last", features=False)
    >>> batch = next(iter(loader))
    >>> batch.n_id.tolist(), batch.batch.tolist(), batch.stamp.tolist(), batch.seed_time.tolist()
    ([0, 0, 2, 3, 3, 1], [0, 1, 0, 0, 1, 1], [1, 3, 3, 5], [4, 9])

    Typed graphs (a PyG ``HeteroData``, a typed store or its path, a
    typed :class:`graphpipe.loaders.GraphData`), as PyG's loader serves ``HeteroData``:
    ``num_neighbors`` is one list for every relation or ``{relation: list}``;
    ``input_nodes`` is ``(node type, IDs | mask | split name | None)``, a node type, or None
    (the data's target type); each hop expands, over every relation into a type, that
    type's nodes the hop before reached first; rows are gathered per type (``x[t]`` equals
    ``X_t[n_id[t]]``), Match per type, Greedy Reorder on byte-weighted typed overlaps
    (``match_reorder="auto"`` is False), a degree cache per type (in-degree summed over
    relations); a feature tier per type (``features``: ``"memory"``, ``"disk"``, ``"auto"``
    planned across types, or ``{ntype: tier}``; :mod:`graphpipe.loaders.typed_tier`;
    :attr:`feature_tier` holds each type's) and ``feature_bits`` per type (codes moved to
    ``device``, dequantized there); types without features are untouched; ``sampler`` may
    be a :class:`graphpipe.service.RemoteHeteroSampler`;
    :attr:`stats` counts rows per type. It yields :class:`graphpipe.loaders.HeteroMiniBatch`
    es (HeteroData's face), or typed DGL blocks (``output="dgl"``); ``disjoint=True`` gives
    one tree per seed (``batch[t].batch``) and ``reorder_by`` the Reorder criterion, each
    equal on one node type to what the homogeneous path gives, as is ``shard`` (data
    parallel: each rank its share of the target type's seeds; a
    :class:`~graphpipe.loaders.shard.PartitionShard` over that type's nodes). ``time_attr``
    is PyG's on ``HeteroData``: an attribute of node types (node times per type) or of
    relations (edge times per relation), or on a typed store ``"time"`` / ``"node_time"`` /
    ``"edge_time"`` (:func:`graphpipe.loaders.temporal.resolve_typed_times`); seeds' times
    on ``batch[target].seed_time``, trees on ``batch[t].batch``
    (:mod:`graphpipe.ops.sampling.temporal_typed`). ``sampler_backend="cuda"`` samples on the
    GPU (the relation loop over the CUDA hop kernels,
    :mod:`graphpipe.ops.sampling.cuda_typed`), the CPU's batches bit for bit. Two papers
    cite each other, two authors write them; seeds are papers:

    >>> from graphpipe.loaders import GraphData
    >>> data = GraphData.from_dicts(
    ...     {"paper": 2, "author": 2},
    ...     {("paper", "cites", "paper"): (np.array([0, 1]), np.array([1, 0])),
    ...      ("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 1]))},
    ...     x={"paper": np.arange(4, dtype=np.float32).reshape(2, 2)},
    ...     y={"paper": np.array([1, 0])}, splits={"paper": {"train": np.array([1])}})
    >>> loader = NeighborLoader(data, [2, 2], input_nodes=("paper", "train"), batch_size=1, seed=0)
    >>> batch = next(iter(loader))
    >>> batch["paper"].batch_size, batch.seeds.tolist(), batch["paper"].y.tolist()
    (1, [1], [0, 1])
    >>> {t: v.tolist() for t, v in batch.n_id_dict.items()}
    {'paper': [1, 0], 'author': [1, 0]}
    >>> batch.edge_index_dict[("paper", "cites", "paper")].tolist()   # 0 -> 1, then 1 -> 0
    [[1, 0], [0, 1]]
    >>> torch.equal(batch.x_dict["paper"], torch.tensor([[2.0, 3.0], [0.0, 1.0]])), list(batch.x_dict)
    (True, ['paper'])
    """

    def __init__(self, data: Any, num_neighbors: Sequence[int] | None = None,
                 input_nodes: str | np.ndarray | torch.Tensor | None = None, *, batch_size: int = 1,
                 shuffle: bool = False, drop_last: bool = False, seed: int | None = None,
                 replace: bool = False, subgraph_type: str = "directional", disjoint: bool = False,
                 directed: bool = True, frontier: str | None = None, fanouts: Sequence[int] | None = None,
                 match_reorder: bool | str = "auto", window: int = 8, cache: str | None = None,
                 cache_rows: float = 0.1, prefetch: int = 2, device: str | torch.device = "cpu",
                 progress: bool = False, sampler: BaseSampler | None = None,
                 features: bool | str = True, num_threads: int | None = None,
                 reorder_by: str | None = None, feature_bits: int | None = None,
                 sampler_backend: str = "auto", fanout_order: str = "seed",
                 output: str = "minibatch", shard: BaseShard | None = None,
                 time_attr: str | None = None, input_time: Any = None, temporal_strategy: str = "uniform",
                 **loader_kwargs: Any):
        self.typed = is_typed_data(data)
        self.temporal = time_attr is not None
        check_temporal_options(time_attr, input_time, temporal_strategy, sampler=sampler, shard=shard,
                               frontier=frontier, replace=replace, backend=sampler_backend, output=output)
        spec = _resolve_fanouts(num_neighbors, fanouts, typed=self.typed)
        _check_pyg_options(subgraph_type, disjoint, directed)
        prefetch, generator = data_loader_kwargs(loader_kwargs, prefetch)
        self._generator = generator
        # DGL's sampler expands every node of a layer; PyG's only the new frontier
        frontier = check_frontier(frontier or ("all" if "dgl" in (fanout_order, output) else "new"))
        if feature_bits is not None and (isinstance(feature_bits, bool) or
                                         not isinstance(feature_bits, (int, np.integer)) or
                                         int(feature_bits) not in (1, 2, 4, 8)):
            raise ValueError(f"'feature_bits' must be None, 8, 4, 2 or 1 (got {feature_bits!r})")
        self.feature_bits = None if feature_bits is None else int(feature_bits)
        if output not in ("minibatch", "dgl"):
            raise ValueError(f"'output' must be 'minibatch' or 'dgl' (got {output!r})")
        self.output = output
        if output == "dgl":
            import_dgl()
        self.batch_size = _positive("batch_size", batch_size)
        self.window = _positive("window", window)
        self.prefetch = _positive("prefetch", prefetch, minimum=0)
        from graphpipe.omp import warn_if_too_late

        warn_if_too_late()  # torch's OpenMP threads spin-wait (torch imported first), machine busy
        if match_reorder not in (True, False, "match", "auto"):
            raise ValueError(f"'match_reorder' must be 'auto', True, False or 'match' (got {match_reorder!r})")
        if match_reorder not in ("match", "auto"):
            match_reorder = bool(match_reorder)
        if cache not in (None, "degree"):
            raise ValueError(f"'cache' must be None or 'degree' (got {cache!r})")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                                 or seed < 0):
            raise ValueError(f"'seed' must be a non-negative integer or None (got {seed!r})")
        try:
            self.device = torch.device(device)
        except (RuntimeError, TypeError):
            raise ValueError(f"'device' is not a torch device (got {device!r})") from None
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"'device' is {device!r} but CUDA is not available")
        if shard is not None and not isinstance(shard, BaseShard):
            raise ValueError(f"'shard' must be a graphpipe.loaders.shard.BaseShard "
                             f"(got {type(shard).__name__})")
        self.shard = shard
        self.shuffle = bool(shuffle)
        self.drop_last = bool(drop_last)
        self.progress = bool(progress)
        self.fixed_seed = seed is not None
        self.seed = int(seed) if seed is not None else draw_seed(self._generator)
        self.data = data  # the caller's object, as PyG keeps it (layer-wise inference edits it)
        self.features = features is not False
        self._stats = StatsRef()
        options = {"replace": replace, "frontier": frontier, "num_threads": num_threads,
                   "cache": cache, "cache_rows": cache_rows, "match_reorder": match_reorder, "sampler": sampler}
        if reorder_by is not None:
            check_criterion(reorder_by)
        if self.typed:  # Reorder by byte-weighted overlaps unless asked (the order typed loaders had)
            self._build_typed(spec, fanout_order, input_nodes, features=features, disjoint=disjoint,
                              reorder_by=reorder_by or "overlap", sampler_backend=sampler_backend,
                              temporal=(time_attr, input_time, temporal_strategy), **options)
        else:
            self._build_homogeneous(seed_first_fanouts(spec, fanout_order), input_nodes, features=features,
                                    disjoint=disjoint, reorder_by=reorder_by or "match",
                                    sampler_backend=sampler_backend,
                                    temporal=(time_attr, input_time, temporal_strategy), **options)
        self._epoch = 0
        self._active: weakref.ref | None = None
        self._handed_out: tuple[torch.Tensor, int] | None = None  # last x given out, its version
        self._input_pos: np.ndarray | None = None  # node ID -> position in input_nodes (input_id)

    def _build_homogeneous(self, fanouts: list[int], input_nodes: Any, *, features: bool | str, disjoint: bool,
                           reorder_by: str, sampler_backend: str, temporal: tuple, replace: bool, frontier: str,
                           num_threads: int | None, cache: str | None, cache_rows: float,
                           match_reorder: bool | str, sampler: BaseSampler | None) -> None:
        """The four stages over one node type and one relation (:class:`GraphData`)."""
        time_attr, input_time, temporal_strategy = temporal
        self.fanouts = fanouts
        self.graph: GraphData = resolve_graph_data(self.data)
        self.feature_tier = features if self.features else False
        if self.features and self.graph.feature_chunks is None:
            raise ValueError("'data' has no node features ('node/feat' or 'x'); "
                             "pass features=False to load topology and labels only")
        self.input_nodes = node_ids(input_nodes, self.graph.num_nodes, self.graph.split, repeats=self.temporal)
        # input_id indexes input_nodes as given, as PyG's: a mask (or None) by node ID
        self._input_by_node = input_nodes is None or is_mask(input_nodes)
        # DGL's EID: the edge's position in the input edge list (a store's csc/edge_id, a Data's edge_index)
        self._edge_id = self.graph.attrs.edge_order if self.output == "dgl" else None
        self.cache: DegreeCachedRows | None = None
        if (self.features and sampler is None and not self.temporal and sampler_backend != "cuda"
                and choose_tier(self.graph, self.feature_tier) == "disk"):  # cold start: overlap the fill
            warm_sampling_kernels(self.graph.indptr, self.graph.indices, fanouts, replace=replace,
                                  frontier=frontier)
            self._plan_first_epoch()
        self.rows = self._row_source(cache, cache_rows)
        if match_reorder == "auto":  # the fastest setting measured for this tier and device
            match_reorder = auto_match_reorder(row_tier(self.rows), self.device.type)
        self.match_reorder = match_reorder

        self.input_time: np.ndarray | None = None   # with time_attr: each input node's time
        if self.temporal:
            self.sampler = build_temporal_sampler(self.graph, time_attr, self.fanouts, strategy=temporal_strategy,
                                                  replace=replace, num_threads=num_threads)
            self.input_time = resolve_input_time(input_time, self.input_nodes, self.sampler.node_time)
        else:
            self.sampler = sampler if sampler is not None else LocalSampler(
                self.graph.indptr, self.graph.indices, self.fanouts, replace=replace, num_threads=num_threads,
                backend=sampler_backend, device=self.device, frontier=frontier)
        if not isinstance(self.sampler, BaseSampler):
            raise ValueError(f"'sampler' must be a graphpipe.loaders.BaseSampler "  # noqa: TRY004 - the project reports bad arguments as ValueError
                             f"(got {type(sampler).__name__})")
        if sampler is not None and self.sampler.supports_bind_fanouts:  # e.g. RemoteSampler
            self.sampler.bind_fanouts(self.fanouts, replace)
        self.disjoint = bool(disjoint) or self.temporal  # temporal: one tree per seed already
        if self.disjoint and not self.temporal:  # one tree per seed: batch.batch names each node's tree
            self.sampler = DisjointSampler(self.sampler)

        self.sample = SampleStage(self.sampler, self._stats)
        # Reorder permutes batches: only in an order-free (shuffled) epoch.
        self.reorder = ReorderStage(match_reorder is True and self.shuffle, self._stats, reorder_by)
        self.gather = GatherStage(self.rows, self.graph.num_nodes, self.graph.typed_labels(self.graph.target_type),
                                  match_reorder in (True, "match"), self._stats,
                                  on_device=self.device.type != "cpu",
                                  pin_memory=self.device.type == "cuda", seed=self.seed,
                                  attrs=self.graph.attrs)
        self.transfer = TransferStage(self.device, self.rows, self._stats)

    def _build_typed(self, spec: Any, fanout_order: str, input_nodes: Any, *, features: Any, disjoint: bool,
                     reorder_by: str, sampler_backend: str, temporal: tuple, replace: bool, frontier: str,
                     num_threads: int | None,
                     cache: str | None, cache_rows: float, match_reorder: bool | str, sampler: Any) -> None:
        """The typed path (a typed :class:`GraphData`): one fanout list per relation, seeds of
        one node type, rows gathered per type from each type's tier (memory or disk,
        :mod:`graphpipe.loaders.typed_tier`; :class:`TypedGather`, Match per type,
        ``feature_bits`` per type), Greedy Reorder on byte-weighted typed overlaps
        (``reorder_by``), one tree per seed with ``disjoint`` (and with ``time_attr``:
        :mod:`graphpipe.ops.sampling.temporal_typed`); ``match_reorder="auto"`` is False here."""
        self.graph: GraphData = resolve_graph_data(self.data)
        if sampler is None:   # sampled here: the homogeneous LocalSampler's malloc tuning
            tune_allocator()
        fanouts = resolve_fanouts(spec, self.graph.edge_types)
        self.fanouts = {et: seed_first_fanouts(f, fanout_order) for et, f in fanouts.items()}
        self.replace, self.frontier, self.num_threads = bool(replace), frontier, num_threads
        self.disjoint, self.cache, self.input_time, self.sampler = bool(disjoint), None, None, sampler
        self.reorder_by = reorder_by
        self.match_reorder = False if match_reorder == "auto" else match_reorder
        self.target_type, self.input_nodes, self._input_by_node = resolve_typed_input(
            self.graph, input_nodes, repeats=self.temporal)
        self._temporal_graph, self.temporal_strategy = None, temporal[2]
        if self.temporal:   # one tree per seed, edges no newer than the seed's time
            self._temporal_graph = build_typed_temporal_graph(self.data, self.graph, temporal[0])
            self.input_time = resolve_input_time(temporal[1], self.input_nodes,
                                                 self._temporal_graph.node_time.get(self.target_type))
            self.disjoint = True
        # the GPU sampler: every relation's CSC copied once, the CPU's samples (cuda_typed)
        self.sampler_backend = "cpu" if sampler is not None else resolve_sampler_backend(sampler_backend, self.device)
        self._device_relations = None
        if self.sampler_backend == "cuda" and not self.temporal:
            from graphpipe.ops.sampling.cuda_typed import device_relations

            self._device_relations = device_relations(self.graph.graph)
        sources = typed_feature_sources(self.graph, features) if self.features else {}
        self.feature_tier = {t: row_tier(r) for t, r in sources.items()}
        self.rows: Any = {t: self._typed_rows(t, r, cache, cache_rows) for t, r in sources.items()}
        self.gather = TypedGather(self.rows, match=self.match_reorder in (True, "match"), seed=self.seed,
                                  device=self.device)
        if sampler is not None:  # e.g. RemoteHeteroSampler: samples elsewhere, same results
            if not callable(getattr(sampler, "check_graph", None)):
                raise ValueError("'sampler' on a typed graph must sample typed batches (e.g. "
                                 f"graphpipe.service.RemoteHeteroSampler; got {type(sampler).__name__})")
            sampler.check_graph(self.graph.num_nodes_dict, self.graph.edge_types)

    def _typed_rows(self, ntype: str, rows: RowSource, cache: str | None, cache_rows: float) -> RowSource:
        """``ntype``'s feature rows (its tier), wrapped in its degree cache (in-degree over
        relations) and in quantization (``feature_bits``)."""
        if cache == "degree":
            budget = _cache_budget(cache_rows, rows.num_rows)
            rows = DegreeCachedRows(rows, degree_order(self.graph.in_degrees(ntype))[:budget])
        if self.feature_bits is not None:
            rows = QuantizedRowSource(rows, self.feature_bits, seed=self.seed)
        return rows

    def input_id(self, seeds: np.ndarray) -> np.ndarray:
        """int64 index of each of ``seeds`` in ``input_nodes`` as given (PyG's ``input_id``):
        the position in a tensor / array / split, the node ID for a mask or None."""
        if self._input_by_node:
            return np.asarray(seeds, dtype=np.int64)
        if self._input_pos is None:  # no N-length table: a split is sorted, search it in place
            ids = self.input_nodes
            if ids.shape[0] < 2 or bool(np.all(ids[1:] > ids[:-1])):
                self._input_pos = (ids, None)
            else:  # an unsorted ID tensor: its sort order, O(len(input_nodes))
                order = np.argsort(ids, kind="stable")
                self._input_pos = (ids[order], order)
        sorted_ids, order = self._input_pos
        pos = np.searchsorted(sorted_ids, seeds)
        return pos.astype(np.int64, copy=False) if order is None else order[pos]

    def _row_source(self, cache: str | None, cache_rows: float) -> RowSource | None:
        """The feature rows the gather stage reads: the store's, wrapped in the degree cache
        (``cache="degree"``, kept as :attr:`cache`) and in quantization (``feature_bits``)."""
        budget = _cache_budget(cache_rows, self.graph.num_nodes) if cache is not None else 0
        if not self.features:
            return None
        rows: RowSource = feature_source(self.graph, self.feature_tier)
        if cache == "degree":
            rows = self.cache = DegreeCachedRows.by_degree(rows, self.graph.indptr, budget,
                                                           store=self.graph.store)
        if self.feature_bits is not None:
            rows = QuantizedRowSource(rows, self.feature_bits, seed=self.seed)
        return rows

    # -- sizes --------------------------------------------------------------------------------
    def __len__(self) -> int:
        n = int(self.input_nodes.shape[0]) if self.shard is None else self.shard.count(self.input_nodes)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    @property
    def dataset(self) -> range:
        """``range(len(input_nodes))``: what PyG's loader iterates over (the positions of its
        seeds), so ``len(loader.dataset)`` counts the seeds (progress bars)."""
        return range(int(self.input_nodes.shape[0]))

    @property
    def stats(self) -> LoaderStats | RowCounts:
        """Counters of the current (or last) epoch; on a typed graph the rows per node type
        by where they came from (:class:`graphpipe.loaders.stages.gather.RowCounts`)."""
        return self.gather.counts if self.typed else self._stats.current

    @property
    def epoch(self) -> int:
        """Epochs started so far."""
        return self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make the next ``iter()`` run epoch ``epoch`` (its batches and sampling keys depend
        only on ``(seed, epoch)``), e.g. to resume a run from a checkpoint."""
        if int(epoch) < 0:
            raise ValueError(f"'epoch' must be >= 0 (got {epoch})")
        self._epoch = int(epoch)

    # -- epoch plan ---------------------------------------------------------------------------
    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """The seed batches of ``epoch`` in sample order (int64 global IDs)."""
        if self.temporal:
            return [self.input_nodes[p] for p in self.epoch_positions(epoch)]
        planned, self._planned = self._planned, None
        if planned is not None and epoch == 0 and planned[0] == (self.seed, self.shard):
            planned[1].join()
            if "batches" in planned[2]:
                return planned[2]["batches"]
        return self._cut(self.input_nodes, epoch)

    _planned: tuple | None = None   # ((seed, shard), thread, result) of _plan_first_epoch

    def _plan_first_epoch(self) -> None:
        """Cut epoch 0's batches now, in a background thread, for a loader with a fixed
        seed whose start waits on the disk anyway (the disk tier's hot-set fill): the
        shuffle of the input nodes (NumPy's, the GIL released) takes ~0.8 s for 8.4M seeds
        on a loaded core, half of a cold start's first 24 batches. The first
        ``epoch_batches(0)`` takes them when the seed and shard are still those planned
        with; the batches are those :meth:`_cut` gives."""
        if not self.fixed_seed:   # the seed is drawn at iter(), from torch's RNG
            return
        result: dict[str, Any] = {}

        def work() -> None:
            with contextlib.suppress(Exception):   # the call at iter() reports errors
                result["batches"] = self._cut(self.input_nodes, 0)

        thread = threading.Thread(target=work, name="graphpipe-plan-ahead", daemon=True)
        thread.start()
        self._planned = ((self.seed, self.shard), thread, result)

    def epoch_positions(self, epoch: int) -> list[np.ndarray]:
        """The batches of ``epoch`` as positions in ``input_nodes`` (their ``input_id``)."""
        return self._cut(np.arange(self.input_nodes.shape[0], dtype=np.int64), epoch)

    def _cut(self, ids: np.ndarray, epoch: int) -> list[np.ndarray]:
        """``ids`` shuffled for ``epoch`` (if ``shuffle``), this rank's share, in batches."""
        if self.shuffle:
            ids = np.random.default_rng([self.seed, epoch, 0]).permutation(ids)
        if self.shard is not None:  # this rank's share of the epoch (same permutation on every rank)
            ids = self.shard.select(ids)
        batches = [ids[i:i + self.batch_size] for i in range(0, len(ids), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def batch_keys(self, epoch: int, count: int) -> list[int]:
        """The sampler's random key of each batch of ``epoch`` (sample order); with a
        ``shard``, rank ``r`` of ``W`` takes keys ``r, r + W, ...`` of the unsharded sequence."""
        rank, step = (0, 1) if self.shard is None else (self.shard.rank, self.shard.world_size)
        total = max(1, count * step)
        state = np.random.SeedSequence([self.seed, epoch, 1]).generate_state(total, np.uint64)
        return [int(v >> np.uint64(1)) for v in state[rank:count * step:step]]

    def _produce(self, epoch: int, sample_ahead: bool = False) -> Iterator[PreparedBatch]:
        """Steps 1–3 of one epoch: sample each window, reorder it, gather each batch.

        With ``sample_ahead`` the next window is sampled in a helper thread while the
        batches of the current one are gathered, or, when the sampler declares
        ``supports_stream``, the next windows are streamed through it.
        """
        if self.typed:
            yield from self._produce_typed(epoch, sample_ahead)
            return
        batches, times, positions = self._epoch_plan(epoch)
        keys = self.batch_keys(epoch, len(batches))
        starts = range(0, len(batches), self.window)
        windows = [SamplerInput(batches[s:s + self.window], keys[s:s + self.window]) for s in starts]
        # temporal sampling: each window's seed times and input positions (None otherwise)
        win_times = [None if times is None else times[s:s + self.window] for s in starts]
        win_pos = [None if positions is None else positions[s:s + self.window] for s in starts]
        if not windows:
            return
        if not sample_ahead:
            for w, (seed_batches, window_keys) in enumerate(windows):
                outputs = self.sample(seed_batches, window_keys, win_times[w])
                yield from self._reorder_and_gather(outputs, window_keys, win_pos[w])
            return
        if self.sampler.supports_stream:  # the sampler keeps windows in flight itself
            stream = self.sample.stream(windows)
            try:
                for (_seed_batches, window_keys), outputs in zip(windows, stream):
                    yield from self._reorder_and_gather(outputs, window_keys)
            finally:
                stream.close()
            return
        with ThreadPoolExecutor(1, thread_name_prefix="graphpipe-sample-ahead") as pool:
            pending = pool.submit(self.sample, *windows[0], win_times[0])
            for w in range(len(windows)):
                outputs = pending.result()
                if w + 1 < len(windows):
                    pending = pool.submit(self.sample, *windows[w + 1], win_times[w + 1])
                yield from self._reorder_and_gather(outputs, windows[w][1], win_pos[w])

    def _produce_typed(self, epoch: int, sample_ahead: bool = False) -> Iterator[HeteroMiniBatch]:
        """One epoch on a typed graph: each window sampled in parallel threads (or by
        ``sampler``), reordered (Match-Reorder, shuffled epochs only), rows gathered per type.
        With ``sample_ahead`` the next window is sampled in a helper thread while the
        current one is gathered (the disk tier's reads and the sampling overlap)."""
        batches, times, positions = self._epoch_plan(epoch)  # this rank's share with a shard
        if self.temporal:   # each batch's seed times: input_time's, else the seeds' node times
            times = self._typed_seed_times(batches, times)
        keys = self.batch_keys(epoch, len(batches))
        stats = self._stats.current
        starts = list(range(0, len(batches), self.window))

        def sample(s: int) -> list:
            seed_dicts = [{self.target_type: seeds} for seeds in batches[s:s + self.window]]
            t0 = time.perf_counter()
            if self.temporal:   # one tree per seed, edges no newer than the seed's time
                outs = sample_temporal_typed_batches(
                    self._temporal_graph, seed_dicts, times[s:s + self.window], self.fanouts,
                    strategy=self.temporal_strategy, replace=self.replace, keys=keys[s:s + self.window],
                    num_threads=self.num_threads)
            elif self.disjoint:  # one tree per seed, PyG's disjoint=True
                outs = sample_disjoint_typed(self._sample_typed, seed_dicts, keys[s:s + self.window])
            else:
                outs = self._sample_typed(seed_dicts, keys[s:s + self.window])
            stats.sample_s += time.perf_counter() - t0
            return outs

        plan = (batches, keys, times, positions)
        if not sample_ahead or len(starts) < 2:
            for s in starts:
                yield from self._gather_typed_window(sample(s), plan, s)
            return
        with ThreadPoolExecutor(1, thread_name_prefix="graphpipe-sample-ahead") as pool:
            pending = pool.submit(sample, starts[0])
            for w, s in enumerate(starts):
                outs = pending.result()
                if w + 1 < len(starts):
                    pending = pool.submit(sample, starts[w + 1])
                yield from self._gather_typed_window(outs, plan, s)

    def _gather_typed_window(self, outs: list, plan: tuple, s: int) -> Iterator[HeteroMiniBatch]:
        """The typed batches of the window starting at batch ``s`` of the epoch's ``plan``
        ``(batches, keys, seed times, input positions)`` (the last two None unless temporal):
        reordered (shuffled epochs only), rows gathered per type."""
        batches, keys, times, positions = plan
        stats = self._stats.current
        window, window_keys = batches[s:s + self.window], keys[s:s + self.window]
        order = range(len(outs))
        if self.match_reorder is True and self.shuffle and len(outs) > 2 and self.rows:
            order = typed_reorder([o.n_id for o in outs], {
                t: r.dim * np.dtype(r.dtype).itemsize for t, r in self.rows.items()}, self.reorder_by).tolist()
        for i in order:
            t0 = time.perf_counter()
            input_id = self.input_id(window[i]) if positions is None else self._temporal_input_id(positions[s + i])
            batch = typed_batch_from_sample(outs[i], self.gather(outs[i].n_id, window_keys[i]),
                                            self.graph, self.target_type, input_id)
            if times is not None:   # PyG's: the seeds' times on the input type
                batch[self.target_type].seed_time = torch.from_numpy(times[s + i])
            stats.gather_s += time.perf_counter() - t0
            yield batch if self.device.type == "cpu" else batch.to(self.device)

    def _typed_seed_times(self, batches: list[np.ndarray], times: list[np.ndarray] | None) -> list[np.ndarray]:
        """Each batch's seed times: ``input_time``'s, else the seeds' node times."""
        if times is not None:
            return times
        node_time = self._temporal_graph.node_time[self.target_type]
        return [node_time[seeds] for seeds in batches]

    def _temporal_input_id(self, positions: np.ndarray) -> np.ndarray:
        """``input_id`` of a temporal batch: the input positions (the node ID for a mask)."""
        pos = np.asarray(positions, dtype=np.int64)
        return self.input_nodes[pos] if self._input_by_node else pos

    def _sample_typed(self, seed_dicts: list[dict[str, np.ndarray]], keys: Sequence[int]) -> list:
        """The typed samples of a window's seed batches (``sampler``, else threads here)."""
        if self.sampler is not None:
            return self.sampler.sample(seed_dicts, self.fanouts, keys, replace=self.replace, frontier=self.frontier)
        if self._device_relations is not None:   # on the GPU, batch after batch
            from graphpipe.ops.sampling.cuda_typed import sample_typed_cuda

            return [sample_typed_cuda(self.graph.graph, d, self.fanouts, replace=self.replace, seed=int(k),
                                      frontier=self.frontier, relations=self._device_relations)
                    for d, k in zip(seed_dicts, keys)]
        return sample_neighbors_batches(self.graph.graph, seed_dicts, self.fanouts, seeds=keys,
                                        replace=self.replace, frontier=self.frontier, num_threads=self.num_threads)

    def _epoch_plan(self, epoch: int) -> tuple[list[np.ndarray], list | None, list | None]:
        """``(seed batches, their seed times, their input positions)`` of ``epoch``; the
        last two are None without temporal sampling (times None: the seeds' node times)."""
        if not self.temporal:
            return self.epoch_batches(epoch), None, None
        positions = self.epoch_positions(epoch)
        times = None if self.input_time is None else [self.input_time[p] for p in positions]
        return [self.input_nodes[p] for p in positions], times, positions

    def _reorder_and_gather(self, outputs: list, keys: Sequence[int],
                            positions: Sequence[np.ndarray] | None = None) -> Iterator[PreparedBatch]:
        for i in self.reorder(outputs):
            prepared = self.gather(outputs[int(i)], key=int(keys[int(i)]))
            if positions is not None:  # temporal: from the input position (nodes may repeat)
                ids = self._temporal_input_id(positions[int(i)])   # PyG: the node ID for a mask
                prepared.batch.input_id = torch.from_numpy(np.ascontiguousarray(ids))
            yield prepared
            outputs[int(i)] = None  # free the subgraph once used

    def _deliver(self, batch: MiniBatch) -> Any:
        """What iteration yields for ``batch`` (``output``)."""
        if self.output == "dgl":
            return to_dgl_typed_blocks(batch) if self.typed else to_dgl_blocks(batch, self._edge_id)
        return batch

    # -- iteration ----------------------------------------------------------------------------
    def __iter__(self) -> _LoaderIterator:
        active = self._active() if self._active is not None else None
        if active is not None:
            active.close()
        epoch = self._epoch
        self._epoch += 1
        if not self.fixed_seed:  # a new draw from torch's RNG per epoch, as PyG's DataLoader
            self.seed = self.gather.seed = draw_seed(self._generator)
        self._stats.current = LoaderStats(epoch=epoch)
        if self.typed:
            self.gather.reset()  # the row counts (the batch before stays resident)
        else:
            self._follow_data_edits()
        it = _LoaderIterator(self, epoch)
        self._active = weakref.ref(it)
        return it

    def _follow_data_edits(self) -> None:
        """PyG's layer-wise inference deletes ``x`` / ``y`` from ``loader.data`` (a ``Data``)
        so that batches leave them out: then none are gathered, as PyG's loader does; put
        back, they are gathered again (the batch before is forgotten, Match restarts)."""
        if not hasattr(self.data, "is_node_attr"):  # a PyG Data (a store cannot lose x)
            return
        features = self.rows is not None and "x" in self.data
        if features != self.gather.features:
            self.gather.reset()
            self.gather.features = features
        self.gather.labels = self.graph.typed_labels(self.graph.target_type) if "y" in self.data else None

    def __repr__(self) -> str:
        if self.typed:
            return (f"NeighborLoader(target_type={self.target_type!r}, batch_size={self.batch_size}, "
                    f"batches={len(self)}, relations={len(self.fanouts)}, prefetch={self.prefetch})")
        return (f"NeighborLoader(num_neighbors={self.fanouts}, batch_size={self.batch_size}, "
                f"batches={len(self)}, match_reorder={self.match_reorder!r}, window={self.window}, "
                f"cache={len(self.cache) if self.cache is not None else None}, prefetch={self.prefetch}, "
                f"device={str(self.device)!r}, feature_bits={self.feature_bits})")


class _LoaderIterator:
    """One epoch of a :class:`NeighborLoader`. Abandoning it (or calling :meth:`close`)
    stops and joins the prefetch thread."""

    def __init__(self, loader: NeighborLoader, epoch: int):
        self._loader = loader
        self._stats = loader._stats.current
        self._transfer = None if loader.typed else loader.transfer  # typed: moved as assembled
        self._remaining = len(loader)
        self._done = False
        self._bar = _progress_bar(len(loader), epoch) if loader.progress else None
        self._bar_finalizer = weakref.finalize(self, self._bar[0].stop) if self._bar else None
        producer = loader._produce(epoch, sample_ahead=loader.prefetch > 0)
        if loader.prefetch > 0:
            self._fetch: Prefetcher | None = Prefetcher(producer, loader.prefetch,
                                                        name=f"graphpipe-prefetch-{epoch}")
            self._producer = None
        else:
            self._fetch = None
            self._producer = producer

    def __iter__(self) -> _LoaderIterator:
        return self

    def __len__(self) -> int:
        return self._remaining

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        t0 = time.perf_counter()
        if self._fetch is not None:
            try:
                item = self._fetch.get()
            except BaseException:
                self.close()
                raise
        else:
            item = next(self._producer, END)
        self._stats.wait_s += time.perf_counter() - t0
        if item is END:
            self.close()
            raise StopIteration
        batch = item if self._transfer is None else self._prepared(item)
        self._remaining -= 1
        self._stats.batches += 1
        if self._bar is not None:
            self._bar[0].update(self._bar[1], advance=1, hit=f"{self._stats.hit_rate:.0%}")
        return self._loader._deliver(batch)

    def _prepared(self, item: PreparedBatch) -> MiniBatch:
        """A gathered batch transferred, its ``input_id`` set, Match's guard checked."""
        batch = self._transfer(item)
        if batch.input_id is None:  # temporal sampling set it already (the input positions)
            seeds = item.batch.n_id[:item.batch.batch_size].numpy()  # host copy, before transfer
            batch.input_id = torch.from_numpy(self._loader.input_id(seeds)).to(batch.n_id.device)
        self._check_previous_untouched(item.reused_rows)
        if batch.x is not None:
            self._loader._handed_out = (batch.x, batch.x._version)
        return batch

    def _check_previous_untouched(self, reused_rows: int) -> None:
        """Match copies rows of the previous batch's ``x`` into this one. If the caller
        modified that ``x`` in place (its tensor version moved), the copied rows may be
        wrong: fail loudly instead of training on them."""
        handed = self._loader._handed_out
        if reused_rows and handed is not None and handed[0]._version != handed[1]:
            self.close()
            raise RuntimeError(
                "MiniBatch.x of the previous batch was modified in place, but the loader reuses "
                "its rows for the next batch (Match). Clone x before in-place operations "
                "(x = batch.x.clone()), or build the loader with match_reorder=False.")

    def close(self) -> None:
        """Stop the prefetch thread (if any) and the progress bar."""
        self._done = True
        if self._fetch is not None:
            self._fetch.close()
        if self._producer is not None:
            self._producer.close()
        if self._bar_finalizer is not None:
            self._bar_finalizer()  # stops the bar (and its refresh thread) once
            self._bar = None


def _progress_bar(total: int, epoch: int) -> tuple[Any, Any]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("[bold]epoch {task.fields[epoch]}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("hit {task.fields[hit]}"), TimeRemainingColumn(), transient=False)
    task = bar.add_task("batches", total=total, epoch=epoch, hit="-")
    bar.start()
    return bar, task


# -- argument checks ----------------------------------------------------------------------------
def _resolve_fanouts(num_neighbors: Any, fanouts: Any, typed: bool = False) -> Any:
    """``num_neighbors`` (PyG's name) or ``fanouts`` (the same thing), not both: a list, or
    on a typed graph also ``{relation: list}`` (checked against the relations later)."""
    if num_neighbors is not None and fanouts is not None:
        raise ValueError("give the fanouts once: 'num_neighbors' or 'fanouts' (the same thing), not both")
    chosen = num_neighbors if num_neighbors is not None else fanouts
    if chosen is None:
        raise ValueError("'num_neighbors' is required (neighbours per hop, seed hop first)")
    if isinstance(chosen, Mapping):
        if typed:
            return chosen
        raise ValueError("'num_neighbors' as a dict (one list per relation) needs a typed graph "
                         "(a HeteroData or a typed store)")
    return _check_fanouts(chosen)


def _positive(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        kind = "a positive integer" if minimum == 1 else "a non-negative integer"
        raise ValueError(f"'{name}' must be {kind} (got {value!r})")
    return int(value)


def _check_pyg_options(subgraph_type: Any, disjoint: bool, directed: bool) -> None:
    """PyG's sampling options graphpipe does not implement are refused, never ignored."""
    kind = getattr(subgraph_type, "value", subgraph_type)
    if kind != "directional":
        raise ValueError(f"'subgraph_type' must be 'directional' (got {kind!r}; 'bidirectional' "
                         "and 'induced' are not supported)")
    if not directed:
        raise ValueError("'directed=False' (PyG's 'bidirectional' subgraphs) is not supported")


def _cache_budget(cache_rows: float, num_nodes: int) -> int:
    if isinstance(cache_rows, bool):
        raise ValueError(f"'cache_rows' must be a row count or a fraction (got {cache_rows!r})")  # noqa: TRY004 - the project reports bad arguments as ValueError
    if isinstance(cache_rows, (int, np.integer)):
        if cache_rows < 0:
            raise ValueError(f"'cache_rows' must be >= 0 (got {cache_rows})")
        return min(int(cache_rows), num_nodes)
    if isinstance(cache_rows, (float, np.floating)):
        if not 0.0 <= cache_rows <= 1.0:
            raise ValueError(f"'cache_rows' as a fraction must be in [0, 1] (got {cache_rows})")
        return round(cache_rows * num_nodes)
    raise ValueError(f"'cache_rows' must be a row count or a fraction (got {cache_rows!r})")


HeteroNeighborLoader = NeighborLoader
"""The name graphpipe's typed loader had: :class:`NeighborLoader` serves typed graphs itself
(as PyG's ``NeighborLoader`` serves ``HeteroData``); kept as an alias for existing code."""
