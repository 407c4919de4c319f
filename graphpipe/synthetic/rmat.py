"""Synthetic graphs: R-MAT power-law topologies and labelled community graphs.

Edge direction: ``(src[i], dst[i])`` is an edge from ``src[i]`` to ``dst[i]``
(``src[i]`` is an in-neighbour of ``dst[i]``), as in an OGB ``edge.csv.gz`` row
``"src,dst"``.

Every generator is deterministic for a seed, whatever the number of threads.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np

from graphpipe.synthetic.text import default_workers

# ---------------------------------------------------------------------------
# the result type


@dataclass
class SyntheticGraph:
    """A generated node-classification graph.

    Attributes:
        src: int64 ``(E,)`` source node of each edge (dense IDs ``0..N-1``).
        dst: int64 ``(E,)`` destination node of each edge.
        features: float32 ``(N, F)`` node features, or None.
        labels: int64 ``(N,)`` class of each node (``0..num_classes-1``), or None.
        splits: split name (``"train"``, ``"valid"``, ``"test"``) -> sorted int64 node IDs.
        num_nodes: N (nodes without edges count too).
        num_classes: number of classes (``labels.max() + 1`` unless given).
        edge_feat: float32 ``(E, D)`` edge features, or None.
        params: the generator and its arguments, for provenance.
    """

    src: np.ndarray
    dst: np.ndarray
    features: np.ndarray | None
    labels: np.ndarray | None
    splits: dict[str, np.ndarray]
    num_nodes: int
    num_classes: int | None = None
    edge_feat: np.ndarray | None = None
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.src = np.asarray(self.src, dtype=np.int64)
        self.dst = np.asarray(self.dst, dtype=np.int64)
        if self.src.shape != self.dst.shape or self.src.ndim != 1:
            raise ValueError(
                f"'src' and 'dst' must be 1-D of one length (got {self.src.shape} and "
                f"{self.dst.shape})"
            )
        self.num_nodes = int(self.num_nodes)
        if self.labels is not None:
            self.labels = np.asarray(self.labels, dtype=np.int64)
            if self.num_classes is None:
                self.num_classes = int(self.labels.max()) + 1 if self.labels.size else 0
        self.splits = {name: np.asarray(ids, dtype=np.int64) for name, ids in self.splits.items()}

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])

    @property
    def feature_dim(self) -> int:
        return 0 if self.features is None else int(self.features.shape[1])

    @property
    def edge_index(self) -> np.ndarray:
        """int64 ``(2, E)``: row 0 sources, row 1 destinations (a new array)."""
        return np.stack([self.src, self.dst])


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
def _rmat_kernel(scale, key, t_a, t_ab, t_abc, permute, perm_keys, perm_mults, src, dst):
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
            state = _splitmix(key ^ (np.uint64(e) * _GOLDEN))
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
    """
    if not 1 <= int(scale) <= 40:
        raise ValueError(f"'scale' must be in 1..40 (got {scale})")
    if int(edge_factor) < 0:
        raise ValueError(f"'edge_factor' must be non-negative (got {edge_factor})")
    d = 1.0 - a - b - c
    if min(a, b, c) < 0 or d < -1e-12:
        raise ValueError(f"'a', 'b', 'c' must be >= 0 with a+b+c <= 1 (got {a}, {b}, {c})")
    num_nodes = 1 << int(scale)
    num_edges = int(edge_factor) * num_nodes
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
                     src, dst)
    return src, dst


# ---------------------------------------------------------------------------
# random node data


def random_normal(
    shape: tuple[int, int], *, seed: int | np.random.SeedSequence = 0, dtype=np.float32,
    num_threads: int | None = None,
) -> np.ndarray:
    """Standard-normal array filled by several threads, the same whatever their number.

    Rows are cut into fixed blocks, each with its own child seed, so the
    result depends only on ``shape``, ``seed`` and ``dtype``.
    """
    rows, cols = int(shape[0]), int(shape[1])
    out = np.empty((rows, cols), dtype=dtype)
    block = max(1, (1 << 20) // max(1, cols))
    starts = list(range(0, rows, block))
    seq = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(int(seed))
    # children derived without spawn(), which would change ``seq`` for the next caller
    children = [np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, i))
                for i in range(len(starts))]

    def fill(i: int) -> None:
        start = starts[i]
        rng = np.random.default_rng(children[i])
        rng.standard_normal(out=out[start : start + block], dtype=dtype)

    workers = num_threads or default_workers()
    if workers > 1 and len(starts) > 1:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            list(pool.map(fill, range(len(starts))))
    else:
        for i in range(len(starts)):
            fill(i)
    return out


def random_splits(
    num_nodes: int,
    *,
    train_frac: float = 0.6,
    valid_frac: float = 0.2,
    test_frac: float | None = None,
    seed: int | np.random.Generator = 0,
) -> dict[str, np.ndarray]:
    """Disjoint random ``train`` / ``valid`` / ``test`` node sets, each sorted.

    ``test_frac`` defaults to everything left over.
    """
    rest = test_frac is None
    if rest:
        test_frac = max(0.0, 1.0 - train_frac - valid_frac)
    for name, value in (("train_frac", train_frac), ("valid_frac", valid_frac),
                        ("test_frac", test_frac)):
        if value < 0:
            raise ValueError(f"'{name}' must be non-negative (got {value})")
    if train_frac + valid_frac + test_frac > 1.0 + 1e-9:
        raise ValueError(
            f"split fractions add up to more than 1 (got {train_frac} + {valid_frac} + {test_frac})"
        )
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    order = rng.permutation(int(num_nodes))
    n_train = round(train_frac * num_nodes)
    n_valid = round(valid_frac * num_nodes)
    n_test = num_nodes - n_train - n_valid
    if not rest:
        n_test = min(round(test_frac * num_nodes), n_test)
    bounds = np.cumsum([0, n_train, n_valid, n_test])
    return {
        name: np.sort(order[bounds[i] : bounds[i + 1]]).astype(np.int64)
        for i, name in enumerate(("train", "valid", "test"))
    }


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


# ---------------------------------------------------------------------------
# community graph


class _ClassSampler:
    """Draws nodes of a given class with probability proportional to a weight."""

    def __init__(self, labels: np.ndarray, weights: np.ndarray, num_classes: int):
        self.order = np.argsort(labels, kind="stable")
        self.cum = np.cumsum(weights[self.order])
        counts = np.bincount(labels, minlength=num_classes)
        ends = np.cumsum(counts)
        starts = ends - counts
        cum0 = np.concatenate([[0.0], self.cum])
        self.low = cum0[starts]
        self.high = cum0[ends]
        self.size = counts

    def draw(self, classes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        r = self.low[classes] + rng.random(len(classes)) * (self.high[classes] - self.low[classes])
        pos = np.searchsorted(self.cum, r, side="right")
        return self.order[np.minimum(pos, len(self.order) - 1)]


def _other_classes(classes: np.ndarray, num_classes: int, rng: np.random.Generator) -> np.ndarray:
    if num_classes < 2:
        return classes.copy()
    return (classes + rng.integers(1, num_classes, len(classes))) % num_classes


def _class_centroids(num_classes: int, feature_dim: int, rng: np.random.Generator) -> np.ndarray:
    """Class centres at distance ``sqrt(2 * feature_dim)`` from each other (orthogonal when
    ``feature_dim >= num_classes``, random directions of that norm otherwise)."""
    gauss = rng.standard_normal((feature_dim, num_classes))
    if feature_dim >= num_classes:
        q, r = np.linalg.qr(gauss)
        q = q * np.sign(np.diag(r))  # a uniquely defined Q
        return (q.T * math.sqrt(feature_dim)).astype(np.float64)
    directions = gauss.T / np.linalg.norm(gauss.T, axis=1, keepdims=True)
    return directions * math.sqrt(feature_dim)


def community_graph(
    num_nodes: int,
    num_classes: int,
    *,
    avg_degree: float = 10,
    feature_dim: int = 100,
    homophily: float = 0.8,
    feature_noise: float = 0.8,
    degree_skew: float = 1.0,
    undirected: bool = True,
    train_frac: float = 0.6,
    valid_frac: float = 0.2,
    seed: int = 0,
) -> SyntheticGraph:
    """A degree-corrected stochastic block model whose features carry a noisy class signal.

    - Labels: uniform over ``num_classes``.
    - Topology: each node gets a weight ``w ~ LogNormal(0, degree_skew)``. Every
      node first draws one partner (so no node is isolated), then further
      pairs are drawn with both ends proportional to ``w``. A pair stays inside
      the first node's class with probability ``homophily`` (partner drawn
      ∝ ``w`` within the class), otherwise it goes to another class. Self-loops
      and duplicate pairs are dropped. With ``undirected`` each pair gives an
      edge both ways, so every node's in-neighbours are its neighbours.
      ``avg_degree`` is the mean in-degree: there are ``round(num_nodes *
      avg_degree)`` edges (an even number when ``undirected``), so the edge
      homophily (fraction of edges joining one class) is close to ``homophily``.
    - Features: ``centroid[label] + noise``, centroids ``sqrt(2 * feature_dim)``
      apart and noise of standard deviation ``feature_noise * sqrt(feature_dim / 2)``
      per dimension, so the margin between two classes is ``1 / feature_noise``
      noise deviations whatever ``feature_dim``; then scaled to unit variance.
      With the defaults and 10 classes (20,000 nodes, 64 features), features
      alone give about 58-60% test accuracy (a 2-layer MLP; nearest class
      centroid the same) and a 2-layer GraphSAGE about 95%; ``feature_noise``
      1.0 gives about 46% and 95%.
    - Splits: random, ``train_frac`` / ``valid_frac`` / the rest.
    """
    num_nodes = int(num_nodes)
    num_classes = int(num_classes)
    if num_nodes < 2:
        raise ValueError(f"'num_nodes' must be at least 2 (got {num_nodes})")
    if num_classes < 1:
        raise ValueError(f"'num_classes' must be positive (got {num_classes})")
    if not 0.0 <= homophily <= 1.0:
        raise ValueError(f"'homophily' must be in [0, 1] (got {homophily})")
    if avg_degree < 0:
        raise ValueError(f"'avg_degree' must be non-negative (got {avg_degree})")
    if feature_noise < 0 or degree_skew < 0:
        raise ValueError(
            f"'feature_noise' and 'degree_skew' must be non-negative (got {feature_noise}, "
            f"{degree_skew})"
        )
    seeds = np.random.SeedSequence([int(seed), 0x636F6D6D]).spawn(5)
    rng_labels, rng_edges, rng_feat, rng_split = (np.random.default_rng(s) for s in seeds[:4])

    labels = rng_labels.integers(0, num_classes, num_nodes).astype(np.int64)
    weights = rng_edges.lognormal(0.0, degree_skew, num_nodes)
    sampler = _ClassSampler(labels, weights, num_classes)
    if num_classes == 1:
        homophily = 1.0

    total_edges = round(num_nodes * avg_degree)
    num_pairs = total_edges // 2 if undirected else total_edges

    def partners(first: np.ndarray) -> np.ndarray:
        cls = labels[first]
        same = rng_edges.random(len(first)) < homophily
        cls = np.where(same, cls, _other_classes(cls, num_classes, rng_edges))
        return sampler.draw(cls, rng_edges)

    def canonical(u: np.ndarray, v: np.ndarray) -> np.ndarray:
        keep = u != v
        u, v = u[keep], v[keep]
        if undirected:
            u, v = np.minimum(u, v), np.maximum(u, v)
        return u * num_nodes + v

    # every node once as the first end (when the budget allows), then pairs ∝ weight
    keys = np.empty(0, dtype=np.int64)
    if num_pairs >= num_nodes:
        base = np.arange(num_nodes, dtype=np.int64)
        keys = np.unique(canonical(base, partners(base)))
    if len(keys) > num_pairs:
        keys = rng_edges.choice(keys, num_pairs, replace=False)
    extra = np.empty(0, dtype=np.int64)
    max_pairs = num_nodes * (num_nodes - 1) // (2 if undirected else 1)
    wanted = min(num_pairs, max_pairs)
    for _attempt in range(50):
        missing = wanted - len(keys) - len(extra)
        if missing <= 0:
            break
        draw = int(missing * 1.1) + 16
        first = sampler.order[np.minimum(
            np.searchsorted(sampler.cum, rng_edges.random(draw) * sampler.cum[-1], side="right"),
            num_nodes - 1)]
        new = np.unique(canonical(first, partners(first)))
        new = new[~np.isin(new, keys, assume_unique=True)]
        new = np.union1d(extra, new)
        if len(new) > wanted - len(keys):
            new = np.sort(rng_edges.choice(new, wanted - len(keys), replace=False))
        extra = new
    keys = np.concatenate([keys, extra])
    u, v = np.divmod(keys, num_nodes)
    if undirected:
        src, dst = np.concatenate([u, v]), np.concatenate([v, u])
    else:
        src, dst = u, v
    order = rng_edges.permutation(len(src))
    src, dst = src[order], dst[order]

    features = None
    if feature_dim > 0:
        centroids = _class_centroids(num_classes, feature_dim, rng_feat).astype(np.float32)
        sigma = feature_noise * math.sqrt(feature_dim / 2.0)
        features = random_normal((num_nodes, feature_dim), seed=seeds[4])
        features *= np.float32(sigma)
        features += centroids[labels]
        per_dim_var = float(np.mean(centroids.astype(np.float64) ** 2)) + sigma**2
        features *= np.float32(1.0 / math.sqrt(per_dim_var))

    splits = random_splits(num_nodes, train_frac=train_frac, valid_frac=valid_frac,
                           seed=rng_split)
    params = {"generator": "community", "num_nodes": num_nodes, "num_classes": num_classes,
              "avg_degree": avg_degree, "feature_dim": int(feature_dim),
              "homophily": homophily, "feature_noise": feature_noise,
              "degree_skew": degree_skew, "undirected": undirected,
              "train_frac": train_frac, "valid_frac": valid_frac, "seed": int(seed)}
    return SyntheticGraph(src.astype(np.int64), dst.astype(np.int64), features, labels, splits,
                          num_nodes, num_classes=num_classes, params=params)


# ---------------------------------------------------------------------------
# external IDs


def external_ids(num_nodes: int, kind: str = "sparse-int", *, seed: int = 0,
                 prefix: str = "user_") -> np.ndarray:
    """External IDs for dense nodes ``0..N-1``: ``ids[d]`` names node ``d``; all distinct.

    Kinds:
      - ``"dense"``: ``0..N-1`` itself (int64).
      - ``"sparse-int"``: random distinct int64 values in ``[0, 2**62)`` (unsorted).
      - ``"string"``: ``prefix`` + zero-padded number, the numbers a random
        permutation of ``0..N-1`` (``"user_000123"``); a numpy ``str`` array.
    """
    num_nodes = int(num_nodes)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x6964]))
    if kind == "dense":
        return np.arange(num_nodes, dtype=np.int64)
    if kind == "sparse-int":
        ids = rng.integers(0, 2**62, num_nodes, dtype=np.int64)
        while True:
            uniq, first = np.unique(ids, return_index=True)
            if len(uniq) == num_nodes:
                return ids
            dup = np.ones(num_nodes, dtype=bool)
            dup[first] = False
            ids[dup] = rng.integers(0, 2**62, int(dup.sum()), dtype=np.int64)
    if kind == "string":
        width = max(6, len(str(max(0, num_nodes - 1))))
        numbers = rng.permutation(num_nodes).astype(str)
        return np.char.add(prefix, np.char.zfill(numbers, width))
    raise ValueError(f"'kind' must be 'dense', 'sparse-int' or 'string' (got {kind!r})")
