"""A link-prediction dataset in OGB's link-property layout (ogbl-collab-like or
ogbl-citation2-like), for tests, demos and benchmarks.

The graph is a latent-space model: node ``i`` has a hidden unit vector ``z_i``; each
node links to partners drawn mostly from the ``pool`` nodes whose ``z`` is closest to
its own (the rest uniformly), and its features are a noisy linear image of ``z_i``.
So features carry the link signal but only noisily (averaging over neighbours helps),
while two linked nodes rarely share neighbours (pools are large next to degrees): a GNN
link predictor can beat the common-neighbours heuristic there.

Layouts (:func:`write_ogb_link`), as OGB ships them (``ogb/linkproppred/master.csv``):

- ``collab``: undirected pairs; ``raw/edge.csv.gz`` holds the training pairs once
  (OGB adds the inverse edges), ``raw/edge_weight.csv.gz`` and ``raw/edge_year.csv.gz``
  one value per pair; ``split/time/{train,valid,test}.pt`` dicts of tensors
  ``{'edge': (n, 2), 'weight': (n,), 'year': (n,)}`` (+ ``'edge_neg': (m, 2)`` for valid
  and test); train is every pair before the last two years, valid and test those years.
- ``citation2``: directed edges ``source -> target``; ``raw/node_year.csv.gz``; the
  ``.pt`` dicts hold NumPy arrays ``{'source_node', 'target_node'}`` (+
  ``'target_node_neg': (n, K)`` for valid and test), valid and test a random sample.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["LINK_STYLES", "LinkDataset", "link_dataset", "ogb_link_meta_dict", "write_ogb_link"]

LINK_STYLES = ("collab", "citation2")


@dataclass
class LinkDataset:
    """A generated link dataset (before it is cut into splits).

    Attributes:
        x: float32 ``(N, F)`` node features.
        src, dst: int64 ``(E,)`` edges (each pair once; ``src`` chose ``dst``).
        weight: int64 ``(E,)`` edge weights (>= 1).
        year: int64 ``(E,)`` edge years.
        node_year: int64 ``(N,)`` node years.
    """

    x: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray
    year: np.ndarray
    node_year: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.x.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.src.shape[0])


def _pools(z: np.ndarray, pool: int, block: int = 1024) -> np.ndarray:
    """int64 ``(N, pool)``: each node's ``pool`` nearest nodes by ``z`` (itself excluded)."""
    n = z.shape[0]
    out = np.empty((n, pool), dtype=np.int64)
    for start in range(0, n, block):
        sim = z[start:start + block] @ z.T
        sim[np.arange(sim.shape[0]), np.arange(start, start + sim.shape[0])] = -np.inf
        out[start:start + block] = np.argpartition(-sim, pool - 1, axis=1)[:, :pool]
    return out


def link_dataset(num_nodes: int = 4000, *, avg_degree: float = 6.0, feature_dim: int = 32,
                 latent_dim: int = 16, pool: int = 100, local: float = 0.9, noise: float = 1.0,
                 years: tuple[int, int] = (2000, 2020), seed: int = 0) -> LinkDataset:
    """Generate a latent-space link dataset (see the module docstring).

    >>> d = link_dataset(200, avg_degree=4, feature_dim=8, pool=20, seed=1)
    >>> d.x.shape, d.num_edges > 300, bool((d.src != d.dst).all())
    ((200, 8), True, True)
    >>> int(d.year.min()) >= 2000 and int(d.year.max()) < 2020, int(d.weight.min()) >= 1
    (True, True)
    """
    if num_nodes < 4 or pool < 1 or pool >= num_nodes:
        raise ValueError(f"need num_nodes >= 4 and 1 <= pool < num_nodes (got {num_nodes}, {pool})")
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((num_nodes, latent_dim))
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    proj = rng.standard_normal((latent_dim, feature_dim)) / np.sqrt(latent_dim)
    x = (z @ proj + noise * rng.standard_normal((num_nodes, feature_dim)) / np.sqrt(feature_dim) * 2)
    choices = rng.poisson(max(avg_degree / 2 - 1, 0), num_nodes) + 1
    u = np.repeat(np.arange(num_nodes, dtype=np.int64), choices)
    pools = _pools(z, pool)
    near = pools[u, rng.integers(0, pool, u.shape[0])]
    far = rng.integers(0, num_nodes, u.shape[0])
    v = np.where(rng.random(u.shape[0]) < local, near, far)
    keep = u != v
    u, v = u[keep], v[keep]
    key = np.minimum(u, v) * num_nodes + np.maximum(u, v)
    _, first = np.unique(key, return_index=True)
    first.sort()
    u, v = u[first], v[first]
    weight = rng.geometric(0.6, u.shape[0]).astype(np.int64)
    year = rng.integers(years[0], years[1], u.shape[0]).astype(np.int64)
    node_year = rng.integers(years[0], years[1], num_nodes).astype(np.int64)
    return LinkDataset(x.astype(np.float32), u, v, weight, year, node_year)


def _write_csv_gz(path: Path, values: np.ndarray, fmt: str) -> None:
    values = np.asarray(values)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        np.savetxt(fh, values.reshape(values.shape[0], -1), fmt=fmt, delimiter=",")


def _random_pairs(rng: np.random.Generator, n: int, count: int, taken: np.ndarray) -> np.ndarray:
    """int64 ``(count, 2)`` pairs ``u != v`` whose undirected key is not in ``taken`` (sorted)."""
    out = np.empty((0, 2), dtype=np.int64)
    while out.shape[0] < count:
        pairs = rng.integers(0, n, (2 * count, 2))
        key = np.minimum(pairs[:, 0], pairs[:, 1]) * n + np.maximum(pairs[:, 0], pairs[:, 1])
        ok = (pairs[:, 0] != pairs[:, 1]) & ~np.isin(key, taken)
        out = np.concatenate([out, pairs[ok]])
    return out[:count]


def _collab_splits(d: LinkDataset, rng: np.random.Generator, num_neg: int) -> tuple[np.ndarray, dict]:
    import torch

    last = int(d.year.max())
    parts = {"train": d.year < last - 1, "valid": d.year == last - 1, "test": d.year == last}
    taken = np.sort(np.minimum(d.src, d.dst) * d.num_nodes + np.maximum(d.src, d.dst))
    splits = {}
    for name, mask in parts.items():
        entry = {"edge": torch.from_numpy(np.stack([d.src[mask], d.dst[mask]], 1)),
                 "weight": torch.from_numpy(d.weight[mask]), "year": torch.from_numpy(d.year[mask])}
        if name != "train":
            entry["edge_neg"] = torch.from_numpy(_random_pairs(rng, d.num_nodes, num_neg, taken))
        splits[name] = entry
    return parts["train"], splits


def _citation2_splits(d: LinkDataset, rng: np.random.Generator, neg_per_source: int,
                      eval_frac: float) -> tuple[np.ndarray, dict]:
    order = rng.permutation(d.num_edges)
    k = max(1, int(eval_frac * d.num_edges))
    train = np.ones(d.num_edges, dtype=bool)
    train[order[:2 * k]] = False
    splits = {"train": {"source_node": d.src[train], "target_node": d.dst[train]}}
    for name, idx in (("valid", np.sort(order[:k])), ("test", np.sort(order[k:2 * k]))):
        splits[name] = {"source_node": d.src[idx], "target_node": d.dst[idx],
                        "target_node_neg": rng.integers(0, d.num_nodes, (idx.shape[0], neg_per_source))}
    return train, splits


def write_ogb_link(folder: str | os.PathLike, d: LinkDataset, *, style: str = "collab",
                   num_neg: int = 3000, neg_per_source: int = 100, eval_frac: float = 0.05,
                   seed: int = 0) -> Path:
    """Write ``d`` under ``folder`` in OGB's link-property layout of ``style``
    (``"collab"`` or ``"citation2"``, see the module docstring); returns ``folder``.

    >>> import tempfile, torch
    >>> tmp = tempfile.TemporaryDirectory()
    >>> path = write_ogb_link(tmp.name + "/collab", link_dataset(200, pool=20), num_neg=50)
    >>> sorted(p.name for p in (path / "raw").iterdir())  # doctest: +NORMALIZE_WHITESPACE
    ['edge.csv.gz', 'edge_weight.csv.gz', 'edge_year.csv.gz', 'node-feat.csv.gz',
     'num-edge-list.csv.gz', 'num-node-list.csv.gz']
    >>> sorted(torch.load(path / "split/time/valid.pt", weights_only=True))
    ['edge', 'edge_neg', 'weight', 'year']
    >>> tmp.cleanup()
    """
    import torch

    if style not in LINK_STYLES:
        raise ValueError(f"'style' must be one of {LINK_STYLES} (got {style!r})")
    folder = Path(folder)
    raw, split_dir = folder / "raw", folder / "split" / "time"
    for directory in (raw, split_dir, folder / "processed"):
        directory.mkdir(parents=True, exist_ok=True)
    (folder / "RELEASE_v1.txt").write_text(f"# {folder.name}\n\n### v1: generated by graphpipe ({style})\n")
    rng = np.random.default_rng([seed, 17])
    if style == "collab":
        train, splits = _collab_splits(d, rng, num_neg)
    else:
        train, splits = _citation2_splits(d, rng, neg_per_source, eval_frac)
    _write_csv_gz(raw / "edge.csv.gz", np.stack([d.src[train], d.dst[train]], 1), "%d")
    _write_csv_gz(raw / "num-node-list.csv.gz", np.array([d.num_nodes]), "%d")
    _write_csv_gz(raw / "num-edge-list.csv.gz", np.array([int(train.sum())]), "%d")
    _write_csv_gz(raw / "node-feat.csv.gz", d.x, "%.6f")
    if style == "collab":
        _write_csv_gz(raw / "edge_weight.csv.gz", d.weight[train], "%d")
        _write_csv_gz(raw / "edge_year.csv.gz", d.year[train], "%d")
    else:
        _write_csv_gz(raw / "node_year.csv.gz", d.node_year, "%d")
    for name, entry in splits.items():
        torch.save(entry, split_dir / f"{name}.pt")
    return folder


def ogb_link_meta_dict(folder: str | os.PathLike, style: str = "collab") -> dict[str, Any]:
    """The ``meta_dict`` for ``ogb.linkproppred.LinkPropPredDataset(name, meta_dict=...)``
    on a folder written by :func:`write_ogb_link` (the values OGB's ``master.csv`` has for
    ogbl-collab or ogbl-citation2, as strings where OGB compares strings)."""
    collab = style == "collab"
    return {"dir_path": str(folder), "download_name": Path(folder).name, "version": 1,
            "url": None, "task type": "link prediction",
            "eval metric": "hits@50" if collab else "mrr", "is hetero": "False", "binary": "False",
            "add_inverse_edge": "True" if collab else "False",
            "additional node files": "None" if collab else "node_year",
            "additional edge files": "edge_weight,edge_year" if collab else "None",
            "has_node_attr": "True", "has_edge_attr": "False", "split": "time"}
