"""GraphBolt's ``ItemSampler``: an :class:`ItemSet` cut in batches (shuffled each epoch
with ``shuffle=True``), each batch a :class:`MiniBatch` whose fields are the item set's
names (``seed_nodes`` / ``seeds``, ``labels``). The first stage of a datapipe."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from graphpipe.dgl.seeds import creation_seed
from graphpipe.graphbolt.base import Datapipe
from graphpipe.graphbolt.itemset import ItemSet
from graphpipe.graphbolt.minibatch import MiniBatch

__all__ = ["ItemSampler"]

_FIELDS = {"seed_nodes": "seed_nodes", "seeds": "seed_nodes", "labels": "labels"}


def _minibatch(parts: tuple[torch.Tensor, ...], names: tuple[str, ...] | None) -> MiniBatch:
    names = names or ("seed_nodes",)
    unknown = [n for n in names if n not in _FIELDS]
    if unknown:
        raise ValueError(f"item names {unknown} are not supported (node classification: "
                         f"'seed_nodes' or 'seeds', and 'labels')")
    return MiniBatch(**{_FIELDS[n]: p for n, p in zip(names, parts)})


class ItemSampler(Datapipe):
    """Batches of ``item_set`` in order, or reshuffled every epoch (``shuffle=True``).

    Args:
        item_set: an :class:`ItemSet`.
        batch_size: items per batch; drop_last: drop the last, shorter batch.
        shuffle: a new permutation every epoch, drawn from graphpipe's ``seed`` (None:
            from ``torch.initial_seed()`` and the sampler's creation order; GraphBolt's
            own draws from fresh OS entropy).
        minibatcher, use_indexing, buffer_size: GraphBolt's; only their defaults.

    >>> items = ItemSet((torch.arange(5), torch.arange(5) % 2), names=("seed_nodes", "labels"))
    >>> [(b.seed_nodes.tolist(), b.labels.tolist()) for b in ItemSampler(items, batch_size=2)]
    [([0, 1], [0, 1]), ([2, 3], [0, 1]), ([4], [0])]
    >>> len(list(ItemSampler(items, batch_size=2, drop_last=True, shuffle=True)))
    2
    """

    def __init__(self, item_set: ItemSet, batch_size: int, minibatcher: object = None,
                 drop_last: bool = False, shuffle: bool = False, use_indexing: bool = True,
                 buffer_size: int = -1, *, seed: int | None = None):
        if not isinstance(item_set, ItemSet):
            raise ValueError(f"'item_set' must be a graphpipe.graphbolt.ItemSet (got {type(item_set).__name__})")  # noqa: TRY004 - the project reports bad arguments as ValueError
        if minibatcher is not None or not use_indexing or buffer_size != -1:
            raise ValueError("'minibatcher', 'use_indexing' and 'buffer_size' are supported with "
                             "their defaults only")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"'batch_size' must be a positive integer (got {batch_size!r})")
        self.item_set, self.batch_size = item_set, int(batch_size)
        self.drop_last, self.shuffle = bool(drop_last), bool(shuffle)
        self.seed = creation_seed() if seed is None else int(seed)
        self._epoch = 0

    def __len__(self) -> int:
        n = len(self.item_set)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self) -> Iterator[MiniBatch]:
        epoch, self._epoch = self._epoch, self._epoch + 1
        n = len(self.item_set)
        order = (torch.from_numpy(np.random.default_rng([self.seed, epoch]).permutation(n))
                 if self.shuffle else None)
        for start in range(0, len(self) * self.batch_size, self.batch_size):
            stop = min(start + self.batch_size, n)
            index = slice(start, stop) if order is None else order[start:stop]
            yield _minibatch(tuple(p[index] for p in self.item_set._items), self.item_set.names)
