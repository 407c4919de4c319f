"""Keys of the sampler's random streams: one SplitMix64 stream per (batch seed, hop,
destination global ID), so a destination's draws do not depend on thread count, batch
order, local-ID order or backend.

``batch_key(seed)`` -> ``hop_key(key, hop)`` -> ``stream_keys(hkey, dst_global)`` (the
initial state of each destination's stream; ``_stream_key`` is the Numba twin used inside
kernels, ``_stream_key_py`` the Python one used by the reference).

One tree per seed (disjoint and temporal sampling): tree ``i`` of a batch with key ``key``
samples as a batch of its own with key ``tree_key(key, i)``; :func:`tree_hop_keys` gives
every tree's hop keys at once.
"""

from __future__ import annotations

import numba
import numpy as np

from graphpipe.ops._core.rng import GOLDEN_I as _GOLDEN_I
from graphpipe.ops._core.rng import M1 as _M1
from graphpipe.ops._core.rng import M1_I as _M1_I
from graphpipe.ops._core.rng import U64_MASK as _U64
from graphpipe.ops._core.rng import mix64 as _mix64
from graphpipe.ops._core.rng import mix64_np as _mix64_np
from graphpipe.ops._core.rng import mix64_py as _mix64_py

__all__ = ["batch_key", "hop_key", "stream_keys", "tree_hop_keys", "tree_key"]


def batch_key(seed: int) -> int:
    """64-bit key of one batch's random stream from the user's integer ``seed``."""
    return _mix64_py((int(seed) & _U64) ^ 0x5EED5EED5EED5EED)


def hop_key(key: int, hop: int) -> int:
    """64-bit key of hop ``hop`` (0-based, seed hop 0) under batch key ``key``."""
    return _mix64_py(int(key) ^ _mix64_py((hop + 1) * _GOLDEN_I))


def tree_key(key: int, position: int) -> int:
    """Random key of the tree of the seed at ``position`` in a batch of key ``key``."""
    return _mix64_py(int(key) ^ _mix64_py(int(position) + 1)) >> 1


def tree_hop_keys(key: int, num_trees: int, num_hops: int) -> np.ndarray:
    """uint64 ``(num_trees, num_hops)``: ``hop_key(batch_key(tree_key(key, i)), h)``.

    >>> int(tree_hop_keys(7, 3, 2)[2, 1]) == hop_key(batch_key(tree_key(7, 2)), 1)
    True
    """
    with np.errstate(over="ignore"):
        pos = np.arange(1, num_trees + 1, dtype=np.uint64)
        trees = _mix64_np(np.uint64(int(key) & _U64) ^ _mix64_np(pos)) >> np.uint64(1)
        batches = _mix64_np(trees ^ np.uint64(0x5EED5EED5EED5EED))
        hops = np.array([_mix64_py((h + 1) * _GOLDEN_I) for h in range(num_hops)], dtype=np.uint64)
        return np.ascontiguousarray(_mix64_np(batches[:, None] ^ hops[None, :]))


def _stream_key_py(hkey: int, node: int) -> int:
    return _mix64_py(hkey ^ ((int(node) * _M1_I) & _U64))


def stream_keys(hkey: int, dst_global: np.ndarray) -> np.ndarray:
    """uint64 (num_dst,) initial SplitMix64 state of each destination's stream in a hop."""
    nodes = np.asarray(dst_global, dtype=np.int64).astype(np.uint64)
    return _stream_keys_kernel(np.uint64(hkey), nodes)


@numba.njit(cache=True, nogil=True, inline="always")
def _stream_key(hkey, node):
    return _mix64(hkey ^ (np.uint64(node) * _M1))


@numba.njit(cache=True, nogil=True)
def _stream_keys_kernel(hkey, nodes):
    out = np.empty(nodes.shape[0], dtype=np.uint64)
    for i in range(nodes.shape[0]):
        out[i] = _stream_key(hkey, nodes[i])
    return out
