"""DGL's ``dgl.dataloading.DataLoader`` on graphpipe's loader: the same arguments, the same
``(input_nodes, output_nodes, blocks)`` per batch, so a DGL script changes its import only.

Batches are cut as DGL 2.1 cuts them: ``indices`` in the order given, or, with
``shuffle=True``, a permutation kept from epoch to epoch and shuffled in place by NumPy's
global generator when an epoch starts (``np.random.shuffle``, as DGL's
``TensorizedDataset``), so ``np.random.seed(s)`` gives DGL's seed batches. Nothing is drawn
from torch's generator, so a script's model initialisation and dropout draw what they
draw under DGL. Sampling is graphpipe's (:class:`graphpipe.loaders.NeighborLoader`:
sampling threads, feature gather, prefetch in a background thread) with DGL's rule
(``frontier="all"``); its random stream is graphpipe's own, keyed by ``seed`` (None: from
``torch.initial_seed()`` and the loader's creation order, so a script seeded with
``torch.manual_seed`` samples the same way each run).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from graphpipe.dgl.block import to_blocks
from graphpipe.dgl.graph import resolve_graph
from graphpipe.dgl.sampler import NeighborSampler
from graphpipe.dgl.seeds import creation_seed
from graphpipe.loaders.neighbor_loader import NeighborLoader

__all__ = ["DataLoader"]

_NO_EFFECT = {  # DGL / torch DataLoader options that change nothing a batch holds: no-op value
    "num_workers": 0, "persistent_workers": False, "pin_memory": False, "prefetch_factor": None,
    "timeout": 0, "worker_init_fn": None, "multiprocessing_context": None, "pin_memory_device": "",
    "use_prefetch_thread": None, "use_alternate_streams": None, "pin_prefetcher": None,
    "use_uva": False, "gpu_cache": None, "ddp_seed": 0, "use_cpu_worker_affinity": False,
    "cpu_worker_affinity_cores": None}


class _InOrderLoader(NeighborLoader):
    """A :class:`NeighborLoader` whose epoch takes the input nodes in ``order`` (set by
    :class:`DataLoader` before each epoch), cut in batches as given."""

    order: np.ndarray | None = None

    def _cut(self, ids: np.ndarray, epoch: int) -> list[np.ndarray]:
        return super()._cut(ids if self.order is None else ids[self.order], epoch)


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    unknown = sorted(set(kwargs) - set(_NO_EFFECT))
    if unknown:
        raise TypeError(f"DataLoader() got unexpected keyword argument(s) {', '.join(unknown)}")
    changed = [k for k, noop in _NO_EFFECT.items() if k in kwargs and kwargs[k] != noop]
    if changed and changed != ["num_workers"]:
        warnings.warn(f"graphpipe.dgl.DataLoader ignores {', '.join(changed)}: graphpipe samples and "
                      "gathers in its own threads", UserWarning, stacklevel=3)


class DataLoader:
    """DGL's ``DataLoader(graph, indices, graph_sampler, device=None, batch_size=1,
    shuffle=False, drop_last=False, ...)``: batches of ``indices`` with their sampled
    blocks, ``(input_nodes, output_nodes, blocks)`` (module docstring for the order).

    Args:
        graph: a homogeneous ``dgl.DGLGraph`` (CSC built in memory, features from
            ``g.ndata``), a :class:`graphpipe.store.GraphStore` or a store path
            (:mod:`graphpipe.dgl.graph`).
        indices: int node IDs (a tensor or array) of the seeds; dicts (typed graphs) are
            refused.
        graph_sampler: a :class:`graphpipe.dgl.NeighborSampler` or
            :class:`graphpipe.dgl.MultiLayerFullNeighborSampler`.
        device: where batches go; None: the graph's device.
        batch_size, shuffle, drop_last: DGL's.
        use_ddp: False only (shard with :class:`graphpipe.loaders.SeedShard` instead).
        seed: graphpipe's: the sampling seed (None: module docstring).
        use_uva, num_workers and DGL's other transfer options: accepted, no effect (a
            warning names those set to something else than their default).
        **kwargs: passed to :class:`graphpipe.loaders.NeighborLoader` when they are its
            own options (``prefetch``, ``num_threads``, ``cache``, ...).

    Yields:
        ``input_nodes`` int64 ``(num_src of blocks[0],)``, ``output_nodes`` the batch's
        seeds, ``blocks`` one per layer, input layer first: ``dgl.create_block`` blocks
        when DGL imports, else :class:`graphpipe.dgl.Block`; ``blocks[0].srcdata`` holds
        the ``prefetch_node_feats``, ``blocks[-1].dstdata`` the ``prefetch_labels``, every
        ``srcdata`` / ``dstdata`` ``NID`` and ``edata`` ``EID`` (and ``prefetch_edge_feats``).

    A six-node ring as a store (a ``DGLGraph`` works the same; node ``i`` hears from
    ``i - 1`` and ``i + 1``), two layers of every in-neighbour of seeds 0 and 3:

    >>> import os, tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.dgl import MultiLayerFullNeighborSampler
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "ring.npz")
    >>> np.savez(npz, src=np.array([1, 2, 3, 4, 5, 0, 5, 0, 1, 2, 3, 4]), dst=np.arange(12) % 6,
    ...          x=np.eye(6, dtype=np.float32), y=np.arange(6) % 2)
    >>> store = ingest(npz, os.path.join(tmp.name, "ring"))
    >>> sampler = MultiLayerFullNeighborSampler(2, prefetch_node_feats=["feat"], prefetch_labels=["label"])
    >>> loader = DataLoader(store, torch.tensor([0, 3]), sampler, batch_size=2)
    >>> input_nodes, output_nodes, blocks = next(iter(loader))
    >>> output_nodes.tolist(), sorted(input_nodes.tolist())
    ([0, 3], [0, 1, 2, 3, 4, 5])
    >>> [(b.num_src_nodes(), b.num_dst_nodes(), b.num_edges()) for b in blocks]
    [(6, 6, 12), (6, 2, 4)]
    >>> blocks[0].srcdata["feat"].shape, blocks[-1].dstdata["label"].tolist()
    (torch.Size([6, 6]), [0, 1])
    >>> tmp.cleanup()
    """

    def __init__(self, graph: Any, indices: Any, graph_sampler: NeighborSampler, device: Any = None,
                 use_ddp: bool = False, batch_size: int = 1, drop_last: bool = False,
                 shuffle: bool = False, *, seed: int | None = None, **kwargs: Any):
        if not isinstance(graph_sampler, NeighborSampler):
            raise ValueError("'graph_sampler' must be a graphpipe.dgl.NeighborSampler or "  # noqa: TRY004 - the project reports bad arguments as ValueError
                             f"MultiLayerFullNeighborSampler (got {type(graph_sampler).__name__})")
        if use_ddp:
            raise ValueError("use_ddp=True is not supported: give each rank its seeds with "
                             "graphpipe.loaders.SeedShard")
        if isinstance(indices, dict):
            raise ValueError("'indices' per node type (heterogeneous graphs) is not supported")  # noqa: TRY004 - the project reports bad arguments as ValueError
        own = {k: kwargs.pop(k) for k in list(kwargs) if k not in _NO_EFFECT}
        _check_kwargs(kwargs)
        self.graph, self.indices, self.graph_sampler = graph, indices, graph_sampler
        self.batch_size, self.drop_last, self.shuffle = batch_size, bool(drop_last), bool(shuffle)
        self._source = resolve_graph(graph, graph_sampler)
        self.device = torch.device(device) if device is not None else self._source.device
        self._loader = _InOrderLoader(
            self._source.data, graph_sampler.seed_first_fanouts, input_nodes=indices,
            batch_size=batch_size, drop_last=drop_last, shuffle=False,
            seed=creation_seed() if seed is None else seed, replace=graph_sampler.replace,
            frontier="all", features=self._source.gathers, device=self.device, **own)
        self._order = np.arange(self._loader.input_nodes.shape[0], dtype=np.int64)

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, list]]:
        if self.shuffle:  # DGL 2.1: the same permutation, shuffled again in place
            np.random.shuffle(self._order)
            self._loader.order = self._order.copy()
        for batch in self._loader:
            yield to_blocks(batch, self._source.block_data)

    def __repr__(self) -> str:
        return (f"DataLoader(graph_sampler={self.graph_sampler!r}, batch_size={self.batch_size}, "
                f"batches={len(self)}, shuffle={self.shuffle}, device={str(self.device)!r})")
