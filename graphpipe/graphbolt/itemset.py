"""GraphBolt's ``ItemSet``: the items an :class:`~graphpipe.graphbolt.ItemSampler` cuts in
batches (node IDs, with their labels), each part named (``"seed_nodes"``, ``"labels"``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from graphpipe.dgl.block import as_tensor

__all__ = ["ItemSet"]


class ItemSet:
    """Items: ``n`` (an int: ``0 .. n-1``), one tensor, or a tuple of equally long tensors;
    ``names`` names each part.

    Attributes:
        names: a tuple of part names.
        _items: the parts as a tuple of tensors (GraphBolt scripts read
            ``test_set._items[0]``).

    >>> items = ItemSet((torch.tensor([4, 2, 7]), torch.tensor([1, 0, 1])), names=("seed_nodes", "labels"))
    >>> len(items), items.names, items[1:]
    (3, ('seed_nodes', 'labels'), (tensor([2, 7]), tensor([0, 1])))
    >>> ItemSet(3, names="seed_nodes")[torch.tensor([2, 0])]
    tensor([2, 0])
    """

    def __init__(self, items: int | Any, names: str | tuple[str, ...] | None = None):
        if isinstance(items, (int, np.integer)) and not isinstance(items, bool):
            parts: tuple[torch.Tensor, ...] = (torch.arange(int(items), dtype=torch.int64),)
        elif isinstance(items, tuple):
            parts = tuple(as_tensor(v) for v in items)
        else:
            parts = (as_tensor(items),)
        if len({p.shape[0] for p in parts}) != 1:
            raise ValueError(f"the parts of an ItemSet must be equally long (got {[p.shape[0] for p in parts]})")
        names = (names,) if isinstance(names, str) else names
        if names is not None and len(names) != len(parts):
            raise ValueError(f"{len(parts)} item parts but {len(names)} names ({names})")
        self._items = parts
        self.names = tuple(names) if names is not None else None

    def __len__(self) -> int:
        return int(self._items[0].shape[0])

    def __getitem__(self, index: Any) -> Any:
        picked = tuple(p[index] for p in self._items)
        return picked[0] if len(picked) == 1 else picked

    def __repr__(self) -> str:
        return f"ItemSet(items={len(self)}, names={self.names})"
