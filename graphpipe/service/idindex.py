"""A lookup index over a store's string external IDs, built once per server.

``IdMap.to_dense`` resolves strings with ``pyarrow.compute.index_in``, which hashes the
whole ID map again on every call (seconds per call for millions of IDs). The server
keeps the IDs sorted once as fixed-width bytes and binary-searches each request instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["StringIdIndex"]

#: the sorted copy is kept only when it needs at most this many bytes (else: index_in per call)
MAX_INDEX_BYTES = 1 << 30


class StringIdIndex:
    """Dense IDs of string external IDs by binary search over a sorted fixed-width copy.

    Args:
        external: the string external ID of each dense ID (``IdMap.external_ids``).
        max_bytes: largest sorted copy to keep; beyond it (or when an ID ends in a NUL
            byte, which fixed-width bytes cannot tell apart) every call falls back to
            ``pyarrow.compute.index_in``.
    """

    def __init__(self, external: pa.Array, *, max_bytes: int = MAX_INDEX_BYTES):
        if isinstance(external, pa.ChunkedArray):
            external = external.combine_chunks()
        self._external = external
        self._keys: np.ndarray | None = None
        self._pos: np.ndarray | None = None
        binary = external.cast(pa.large_binary() if pa.types.is_large_string(external.type) else pa.binary())
        lengths = pc.binary_length(binary)
        width = max(1, int(pc.max(lengths).as_py() or 0)) if len(binary) else 1
        if len(binary) * width > max_bytes or external.null_count:
            return
        if _any_trailing_nul(binary):
            return
        keys = np.asarray(binary.to_numpy(zero_copy_only=False), dtype=f"S{width}")
        order = np.argsort(keys, kind="stable")
        self._keys, self._pos, self.width = keys[order], order.astype(np.int64), width

    @property
    def indexed(self) -> bool:
        """Whether lookups binary-search the sorted copy (else ``index_in`` per call)."""
        return self._keys is not None

    def to_dense(self, values: pa.Array) -> np.ndarray:
        """int64 dense ID of each string of ``values`` (no nulls), -1 when unknown."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        if not self.indexed or not len(values):
            return _index_in(values, self._external)
        if not len(self._keys):
            return np.full(len(values), -1, dtype=np.int64)
        binary = values.cast(pa.large_binary() if pa.types.is_large_string(values.type) else pa.binary())
        lengths = pc.binary_length(binary).to_numpy(zero_copy_only=False)
        too_long = lengths > self.width
        if too_long.any():  # cannot be in the map
            binary = pc.if_else(pa.array(too_long), pa.scalar(b"", binary.type), binary)
        if _any_trailing_nul(binary):
            return _index_in(values, self._external)
        query = np.asarray(binary.to_numpy(zero_copy_only=False), dtype=f"S{self.width}")
        at = np.minimum(np.searchsorted(self._keys, query), len(self._keys) - 1)
        found = (self._keys[at] == query) & ~too_long
        return np.where(found, self._pos[at], -1).astype(np.int64)


def _any_trailing_nul(binary: pa.Array) -> bool:
    return bool(pc.any(pc.ends_with(binary, b"\0")).as_py() or False) if len(binary) else False


def _index_in(values: pa.Array, external: pa.Array) -> np.ndarray:
    dense = pc.index_in(values, value_set=external).to_numpy(zero_copy_only=False)
    if dense.dtype.kind == "f":
        dense = np.where(np.isnan(dense), -1, dense)
    return np.asarray(dense, dtype=np.int64)
