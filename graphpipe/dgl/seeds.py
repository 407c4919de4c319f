"""Default random seeds of the DGL / GraphBolt faces: drawn from nothing a script's own
random streams use (DGL's and GraphBolt's loaders leave torch's generator alone too), yet
fixed by ``torch.manual_seed``: ``torch.initial_seed()`` mixed with the object's creation
order in the process, so a script seeded that way samples the same way every run."""

from __future__ import annotations

import itertools

import numpy as np
import torch

__all__ = ["creation_seed"]

_CREATED = itertools.count()


def creation_seed() -> int:
    """A 62-bit seed from ``torch.initial_seed()`` and this call's rank in the process.

    >>> _ = torch.manual_seed(0)
    >>> a, b = creation_seed(), creation_seed()
    >>> a != b and 0 <= a < 2 ** 62
    True
    """
    state = np.random.SeedSequence([torch.initial_seed(), next(_CREATED)]).generate_state(1, np.uint64)
    return int(state[0] >> np.uint64(2))
