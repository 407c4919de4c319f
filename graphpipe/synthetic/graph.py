"""The generated-graph type and the random node data every generator uses.

- :class:`SyntheticGraph`: edges ``(src[i], dst[i])`` (an edge from ``src[i]`` to
  ``dst[i]``, as in an OGB ``edge.csv.gz`` row ``"src,dst"``), features, labels,
  splits and the generator's parameters;
- :func:`random_normal`: a standard-normal matrix filled by threads, the same
  whatever their number; :func:`random_splits`: disjoint random train/valid/test
  node sets; :func:`external_ids`: distinct external IDs for dense node IDs.

Everything is deterministic for a seed, whatever the number of threads.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

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
