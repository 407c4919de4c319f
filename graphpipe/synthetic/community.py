"""Labelled community graphs: a degree-corrected stochastic block model whose features
carry a noisy class signal, on which neighbour aggregation clearly beats features alone.

Edge direction: ``(src[i], dst[i])`` is an edge from ``src[i]`` to ``dst[i]``.
Deterministic for a seed.
"""

from __future__ import annotations

import math

import numpy as np

from graphpipe.synthetic.graph import SyntheticGraph, random_normal, random_splits

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
