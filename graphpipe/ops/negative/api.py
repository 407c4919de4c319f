"""``negative_sample``: nodes drawn uniformly or in proportion to a weight (the degree,
say), for the negative edges of link prediction; one entry point, the same draws on every
backend (``"reference"``: :mod:`.reference`, the contract; ``"cpu"``: :mod:`.cpu`;
``"auto"``: ``"cpu"``).

Like PyG's ``NegativeSampling`` (``torch.randint`` / ``torch.multinomial(weight,
replacement=True)``) the draws are approximate negatives: a drawn pair may be an edge.
"""

from __future__ import annotations

import numpy as np

from graphpipe.ops._core.backend import check_backend
from graphpipe.ops._core.checks import check_int
from graphpipe.ops._core.rng import U64_MASK
from graphpipe.ops.negative.cpu import negative_sample_cpu
from graphpipe.ops.negative.reference import negative_sample_reference

__all__ = ["BACKENDS", "degree_weight", "negative_sample"]

BACKENDS = ("auto", "reference", "cpu")


def degree_weight(indptr: np.ndarray) -> np.ndarray:
    """float64 ``(N,)`` in-degree of each node of a CSC ``indptr`` (``(N+1,)``): the weight
    of degree-proportional negatives (on a graph with inverse edges, the degree).

    >>> w = degree_weight(np.array([0, 2, 2, 5]))
    >>> w.tolist(), w.dtype
    ([2.0, 0.0, 3.0], dtype('float64'))
    >>> sorted(set(negative_sample(100, 3, seed=0, weight=w).tolist()))  # node 1 has no in-edge
    [0, 2]
    """
    return np.diff(np.asarray(indptr, dtype=np.int64)).astype(np.float64)


def _cdf(weight: np.ndarray, num_nodes: int) -> tuple[np.ndarray, int]:
    w = np.asarray(weight)
    if w.shape != (num_nodes,) or w.dtype.kind not in "iuf":
        raise ValueError(f"'weight' must be a numeric ({num_nodes},) array (got {w.dtype} {w.shape})")
    w = w.astype(np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("'weight' must be finite and non-negative")
    positive = np.flatnonzero(w > 0)
    if positive.size == 0:
        raise ValueError("'weight' must have a positive entry")
    return np.cumsum(w), int(positive[-1])


def negative_sample(num_samples: int, num_nodes: int, *, seed: int, weight: np.ndarray | None = None,
                    backend: str = "auto") -> np.ndarray:
    """int64 ``(num_samples,)`` node IDs in ``[0, num_nodes)``: uniform, or node ``v`` with
    probability ``weight[v] / weight.sum()`` (``weight``: ``(num_nodes,)``, non-negative).
    A pure function of its arguments (the RNG contract of :mod:`.reference`).

    >>> negative_sample(6, 10, seed=3).tolist()
    [7, 3, 4, 4, 7, 4]
    >>> negative_sample(8, 4, seed=5, weight=np.array([0.0, 1.0, 0.0, 3.0])).tolist()
    [3, 1, 3, 3, 3, 1, 3, 3]
    >>> bool((negative_sample(50, 10, seed=1, backend="reference")
    ...       == negative_sample(50, 10, seed=1, backend="cpu")).all())
    True
    """
    check_backend(backend, BACKENDS)
    num_samples = check_int("num_samples", num_samples, 0)
    num_nodes = check_int("num_nodes", num_nodes, 1)
    if num_nodes >= 1 << 32:
        raise ValueError(f"'num_nodes' must be below 2**32 (got {num_nodes})")
    seed = int(seed) & U64_MASK
    cdf, last = (None, -1) if weight is None else _cdf(weight, num_nodes)
    if backend == "reference":
        return negative_sample_reference(num_samples, num_nodes, seed, cdf, last)
    return negative_sample_cpu(num_samples, num_nodes, seed, cdf, last)
