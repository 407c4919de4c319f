"""The unit readers hand to the topology builder: a chunk of the edge list."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class EdgeChunk:
    """A consecutive run of edges from a source file, in edge-list order.

    Attributes:
        src: int64 ``(n,)`` dense source node IDs.
        dst: int64 ``(n,)`` dense destination node IDs.
        first_row: 0-based position of ``src[0]`` in the whole edge list (over all files).
        source: the file the edges came from, as shown in error messages.
        first_line: 1-based line (or row) number of ``src[0]`` within ``source``.
    """

    src: np.ndarray
    dst: np.ndarray
    first_row: int
    source: str
    first_line: int

    def __len__(self) -> int:
        return int(self.src.shape[0])
