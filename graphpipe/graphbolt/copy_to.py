"""GraphBolt's ``copy_to`` stage: every tensor of each batch moved to a device."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from graphpipe.graphbolt.base import Datapipe, functional_datapipe
from graphpipe.graphbolt.minibatch import MiniBatch

__all__ = ["CopyTo"]


@functional_datapipe("copy_to")
class CopyTo(Datapipe):
    """``datapipe.copy_to(device)``; ``extra_attrs`` is accepted (every field moves).

    >>> from graphpipe.graphbolt import ItemSampler, ItemSet
    >>> pipe = ItemSampler(ItemSet(4, names="seed_nodes"), batch_size=4).copy_to("cpu")
    >>> next(iter(pipe)).seed_nodes.device.type
    'cpu'
    """

    def __init__(self, datapipe: Iterable[MiniBatch], device: torch.device | str,
                 extra_attrs: Any = None):
        self.datapipe, self.device = datapipe, torch.device(device)

    def __iter__(self) -> Iterator[MiniBatch]:
        for batch in self.datapipe:
            yield batch.to(self.device)
