"""A store as an OGB / PyG dataset: the face a PyG script reads from
``PygNodePropPredDataset`` (``get_idx_split()``, ``dataset[0]``, ``len(dataset)``,
``num_features``, ``num_classes``) and from its graph (``data.x``, ``data.y``).

:class:`DatasetFace` is a mixin of :class:`graphpipe.store.GraphStore`: a store is a
one-graph dataset whose graph is the store itself, so ``data = dataset[0]`` goes to
graphpipe's ``NeighborLoader`` as a store. ``torch`` is imported inside the methods.
"""

from __future__ import annotations

import warnings
from functools import cached_property
from typing import Any

import numpy as np

from graphpipe.store import arrays as _arrays
from graphpipe.store.generation import confirm

__all__ = ["DatasetFace"]


class DatasetFace:
    """OGB's node-property dataset interface over a store (mixed into ``GraphStore``)."""

    def get_idx_split(self: Any) -> dict[str, Any]:
        """The store's splits as OGB's ``get_idx_split()``: ``{name: int64 tensor}`` (sorted
        dense node IDs, ``"train"`` / ``"valid"`` / ``"test"``), equal to :meth:`split`.

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]),
        ...          train_idx=np.array([0, 1]), test_idx=np.array([2]))
        >>> dataset = ingest(npz, os.path.join(tmp.name, "tri"))
        >>> dataset.get_idx_split()
        {'train': tensor([0, 1]), 'test': tensor([2])}
        >>> tmp.cleanup()
        """
        import torch

        return {name: torch.from_numpy(np.array(self.split(name), dtype=np.int64))
                for name in self.split_names}

    def __len__(self) -> int:
        """One graph, as an OGB node-property dataset."""
        return 1

    def __getitem__(self: Any, idx: int) -> Any:
        """``dataset[0]``: the graph, which is this store (``.x``, ``.y``, and what
        graphpipe's ``NeighborLoader`` takes); any other index raises ``IndexError``.

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> from graphpipe.loaders import NeighborLoader
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]),
        ...          x=np.eye(3, dtype=np.float32))
        >>> dataset = ingest(npz, os.path.join(tmp.name, "tri"))
        >>> data = dataset[0]
        >>> data is dataset, len(dataset), dataset.num_features, dataset.num_classes
        (True, 1, 3, 3)
        >>> batch = next(iter(NeighborLoader(data, num_neighbors=[-1], batch_size=3)))
        >>> batch.n_id.tolist(), batch.y.tolist()
        ([0, 1, 2], [0, 2, 1])
        >>> tmp.cleanup()
        """
        if isinstance(idx, bool) or not isinstance(idx, (int, np.integer)) or idx not in (0, -1):
            raise IndexError(f"a graphpipe store is a dataset of one graph: index 0 (got {idx!r})")
        return self

    @property
    def num_features(self: Any) -> int:
        """Features per node (``x.size(-1)``; 0 without features), as PyG's dataset."""
        return self.feature_dim if self.has_features else 0

    @cached_property
    def x(self: Any) -> Any:
        """All node features as one torch tensor ``(N, dim)``, bit for bit the stored rows
        (built on first access, then kept): this maps or loads the whole feature array.

        * one uncompressed chunk file (stores up to 64 MiB of features, or written with one
          chunk): a copy-on-write memory map of it, zero-copy; pages are read as touched,
          so it works for features larger than memory (as fast as the disk then);
        * opened with ``node/feat`` in memory (``GraphStore.open(in_memory=...)``): the
          store's in-memory array itself, shared (treat the tensor as read-only);
        * otherwise (several chunk files, compressed): read into memory, ``N * dim`` items.
          For such stores larger than memory, do not touch ``x``: use the loaders, which
          read the rows each batch needs (the disk tier, ``NeighborLoader(features="disk")``).

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]),
        ...          x=np.arange(6, dtype=np.float32).reshape(3, 2))
        >>> ingest(npz, os.path.join(tmp.name, "tri"))[0].x
        tensor([[0., 1.],
                [2., 3.],
                [4., 5.]])
        >>> tmp.cleanup()
        """
        import torch

        array = self.array("node/feat") if self.has_features else None
        if array is None:
            raise AttributeError(f"{self.path}: store has no node features ('node/feat')")
        if array.flags.writeable:  # a private array already (chunks joined, or decoded)
            return torch.from_numpy(array)
        if "node/feat" in self.in_memory_arrays:
            with warnings.catch_warnings():  # heap memory flagged read-only: shared as it is
                warnings.filterwarnings("ignore", "The given NumPy array is not writable")
                return torch.from_numpy(array)
        return torch.from_numpy(_copy_on_write_map(self.path, "node/feat"))

    @cached_property
    def y(self: Any) -> Any:
        """All labels as a torch tensor, as stored and as batches carry them: ``(N,)`` for
        one task (OGB's ``(N, 1)`` is ``y.view(-1, 1)``, what ``Evaluator`` takes), ``(N, tasks)``
        for several; -1 marks unlabelled nodes (a copy: ``N`` items).

        >>> import os, tempfile
        >>> import numpy as np
        >>> from graphpipe.ingest import ingest
        >>> tmp = tempfile.TemporaryDirectory()
        >>> npz = os.path.join(tmp.name, "tri.npz")
        >>> np.savez(npz, edge_index=np.array([[0, 1, 2], [1, 2, 0]]), y=np.array([0, 2, 1]))
        >>> ingest(npz, os.path.join(tmp.name, "tri"))[0].y.view(-1, 1).tolist()
        [[0], [2], [1]]
        >>> tmp.cleanup()
        """
        import torch

        if not self.has_labels:
            raise AttributeError(f"{self.path}: store has no labels ('node/label')")
        return torch.from_numpy(np.array(self.labels))


def _copy_on_write_map(root: Any, key: str) -> np.ndarray:
    """The one chunk file of uncompressed array ``key`` mapped copy-on-write: writable,
    writes private to this process (the file never changes)."""
    raw = _arrays.raw_chunk_files(root, key)
    if raw is None or len(raw[0]) != 1:
        raise AssertionError(f"{root}: {key!r} is not one uncompressed chunk")  # read_array's cases
    paths, chunk_rows, shape, dtype = raw
    mapped = np.memmap(paths[0], dtype=dtype, mode="c", shape=(chunk_rows,) + tuple(shape[1:]))
    confirm(root)  # mapped from the store this reader opened (generation.py)
    return mapped[: shape[0]].view(np.ndarray)
