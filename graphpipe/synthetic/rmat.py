"""R-MAT (Graph500 Kronecker) power-law topologies: :func:`rmat_edges` (Numba-parallel),
:func:`rmat_vertex_permutation` and :func:`rmat_graph` (with random features, labels
and splits: a benchmark input, not a learnable task).

Edge direction: ``(src[i], dst[i])`` is an edge from ``src[i]`` to ``dst[i]``
(``src[i]`` is an in-neighbour of ``dst[i]``), as in an OGB ``edge.csv.gz`` row
``"src,dst"``.

Every generator is deterministic for a seed, whatever the number of threads.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np

from graphpipe.synthetic.graph import SyntheticGraph, random_normal, random_splits

# ---------------------------------------------------------------------------
# counter-based random numbers (same value for an index whatever thread computes it)

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(inline="always")
def _splitmix(z):
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@contextmanager
def _threads(num_threads: int | None):
    """Run the Numba kernels inside with ``num_threads`` threads (all of them when None)."""
    if num_threads is None:
        yield
        return
    if num_threads < 1:
        raise ValueError(f"'num_threads' must be positive (got {num_threads})")
    previous = numba.get_num_threads()
    numba.set_num_threads(min(int(num_threads), numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


# ---------------------------------------------------------------------------
# R-MAT


_PERMUTE_ROUNDS = 4


@numba.njit(inline="always")
def _permute_id(x, mask, shift, keys, mults):
    # A seeded bijection of [0, 2**scale): rounds of xor-key, multiply by an odd
    # number, xor-shift, each invertible modulo 2**scale.
    for r in range(_PERMUTE_ROUNDS):
        x = ((x ^ keys[r]) * mults[r]) & mask
        x = x ^ (x >> shift)
    return x


@numba.njit(parallel=True, nogil=True, cache=True)
def _rmat_kernel(scale, key, t_a, t_ab, t_abc, permute, perm_keys, perm_mults, first, src, dst):
    num_edges = src.shape[0]
    block = 1 << 14
    num_blocks = (num_edges + block - 1) // block
    mask32 = np.uint64(0xFFFFFFFF)
    mask = (np.uint64(1) << np.uint64(scale)) - np.uint64(1)
    shift = np.uint64((scale + 1) // 2)
    for b in numba.prange(num_blocks):
        start = b * block
        stop = min(num_edges, start + block)
        for e in range(start, stop):
            state = _splitmix(key ^ (np.uint64(first + e) * _GOLDEN))
            s = np.uint64(0)
            d = np.uint64(0)
            bits = np.uint64(0)
            for level in range(scale):
                if level % 2 == 0:
                    state = state + _GOLDEN
                    bits = _splitmix(state)
                    u = bits & mask32
                else:
                    u = bits >> np.uint64(32)
                # quadrants [0,a) [a,a+b) [a+b,a+b+c) [a+b+c,1) -> (s,d) bits 00 01 10 11,
                # branch-free: s = u>=a+b, d = (u>=a) ^ (u>=a+b) ^ (u>=a+b+c)
                x1 = np.uint64(u >= t_a)
                x2 = np.uint64(u >= t_ab)
                x3 = np.uint64(u >= t_abc)
                s = (s << np.uint64(1)) | x2
                d = (d << np.uint64(1)) | (x1 ^ x2 ^ x3)
            if permute:
                s = _permute_id(s, mask, shift, perm_keys, perm_mults)
                d = _permute_id(d, mask, shift, perm_keys, perm_mults)
            src[e] = np.int64(s)
            dst[e] = np.int64(d)


def rmat_vertex_permutation(scale: int, seed: int = 0) -> np.ndarray:
    """The vertex relabelling :func:`rmat_edges` applies with ``permute=True``:
    ``perm[v]`` is the ID written for generated vertex ``v`` (a bijection of ``0..2**scale-1``)."""
    keys, mults = _permutation_keys(seed)
    ids = np.arange(1 << int(scale), dtype=np.uint64)
    return _permute_all(ids, int(scale), keys, mults).astype(np.int64)


@numba.njit(cache=True)
def _permute_all(ids, scale, keys, mults):
    mask = (np.uint64(1) << np.uint64(scale)) - np.uint64(1)
    shift = np.uint64((scale + 1) // 2)
    out = np.empty_like(ids)
    for i in range(ids.shape[0]):
        out[i] = _permute_id(ids[i], mask, shift, keys, mults)
    return out


def _permutation_keys(seed: int) -> tuple[np.ndarray, np.ndarray]:
    state = np.random.SeedSequence([int(seed), 0x7065726D]).generate_state(
        2 * _PERMUTE_ROUNDS, dtype=np.uint64)
    keys = state[:_PERMUTE_ROUNDS].copy()
    mults = state[_PERMUTE_ROUNDS:] | np.uint64(1)
    return keys, mults


def rmat_edges(
    scale: int,
    edge_factor: int,
    *,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    seed: int = 0,
    permute: bool = True,
    num_threads: int | None = None,
    first: int = 0,
    count: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """An R-MAT (Graph500 Kronecker) directed edge list.

    ``2**scale`` nodes and ``edge_factor * 2**scale`` edges.

    Each edge descends ``scale`` levels of the adjacency matrix, picking the
    quadrant top-left / top-right / bottom-left / bottom-right with
    probabilities ``a, b, c, 1-a-b-c`` (row = source, column = destination).
    Duplicate edges and self-loops are kept, as in Graph500. With ``permute``
    (the default, as Graph500 does) vertex IDs go through a seeded pseudo-random
    permutation (:func:`rmat_vertex_permutation`, a bijective hash computed in
    registers rather than a stored table) so the hubs are spread over the ID
    range instead of sitting at 0.

    Returns ``(src, dst)``, int64 arrays. The result depends only on the
    arguments, never on ``num_threads`` (threads used; all when None).
    ``first`` / ``count`` return only edges ``first .. first+count-1`` of that list
    (default: all), so a large edge list can be made block by block:

    >>> src, dst = rmat_edges(4, 2, seed=1)
    >>> part = rmat_edges(4, 2, seed=1, first=5, count=3)
    >>> bool((part[0] == src[5:8]).all() and (part[1] == dst[5:8]).all())
    True
    """
    if not 1 <= int(scale) <= 40:
        raise ValueError(f"'scale' must be in 1..40 (got {scale})")
    if int(edge_factor) < 0:
        raise ValueError(f"'edge_factor' must be non-negative (got {edge_factor})")
    d = 1.0 - a - b - c
    if min(a, b, c) < 0 or d < -1e-12:
        raise ValueError(f"'a', 'b', 'c' must be >= 0 with a+b+c <= 1 (got {a}, {b}, {c})")
    num_nodes = 1 << int(scale)
    total = int(edge_factor) * num_nodes
    first = int(first)
    num_edges = total - first if count is None else int(count)
    if first < 0 or num_edges < 0 or first + num_edges > total:
        raise ValueError(f"edges {first}..{first + num_edges - 1} are outside 0..{total - 1}")
    # thresholds on a 32-bit uniform integer
    t_a = np.uint64(min(2**32, round(a * 2**32)))
    t_ab = np.uint64(min(2**32, round((a + b) * 2**32)))
    t_abc = np.uint64(min(2**32, round((a + b + c) * 2**32)))
    key = np.uint64(np.random.SeedSequence(int(seed)).generate_state(1, dtype=np.uint64)[0])
    perm_keys, perm_mults = _permutation_keys(seed)
    src = np.empty(num_edges, dtype=np.int64)
    dst = np.empty(num_edges, dtype=np.int64)
    with _threads(num_threads):
        _rmat_kernel(int(scale), key, t_a, t_ab, t_abc, bool(permute), perm_keys, perm_mults,
                     np.int64(first), src, dst)
    return src, dst


def rmat_graph(
    scale: int,
    edge_factor: int,
    *,
    feature_dim: int = 100,
    num_classes: int = 10,
    train_frac: float = 0.6,
    valid_frac: float = 0.2,
    seed: int = 0,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    permute: bool = True,
    num_threads: int | None = None,
) -> SyntheticGraph:
    """R-MAT topology (:func:`rmat_edges`) with random standard-normal features, uniform
    random labels and random splits: a benchmark input, not a learnable task."""
    src, dst = rmat_edges(scale, edge_factor, a=a, b=b, c=c, seed=seed, permute=permute,
                          num_threads=num_threads)
    num_nodes = 1 << int(scale)
    children = np.random.SeedSequence([int(seed), 0x6E6F6465]).spawn(3)
    features = None
    if feature_dim > 0:
        features = random_normal((num_nodes, feature_dim), seed=children[0],
                                 num_threads=num_threads)
    labels = None
    if num_classes > 0:
        labels = np.random.default_rng(children[1]).integers(0, num_classes, num_nodes)
    splits = random_splits(num_nodes, train_frac=train_frac, valid_frac=valid_frac,
                           seed=np.random.default_rng(children[2]))
    params = {"generator": "rmat", "scale": int(scale), "edge_factor": int(edge_factor),
              "a": a, "b": b, "c": c, "permute": permute, "feature_dim": int(feature_dim),
              "num_classes": int(num_classes), "train_frac": train_frac,
              "valid_frac": valid_frac, "seed": int(seed)}
    return SyntheticGraph(src, dst, features, labels, splits, num_nodes,
                          num_classes=int(num_classes) if num_classes > 0 else None,
                          params=params)
