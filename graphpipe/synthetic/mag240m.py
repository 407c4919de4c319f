"""A MAG240M-like dataset (OGB-LSC layout), for tests, demos and benchmarks.

The graph is :func:`graphpipe.synthetic.mag.mag_dataset`'s without fields of study
(MAG240M's relations: ``author writes paper``, ``author affiliated_with institution``,
``paper cites paper``), with float16 paper features and labels on a fraction of the
papers only (NaN elsewhere, as MAG240M labels only its arXiv papers); train / valid /
test are the labelled papers before 2018, of 2018 and of 2019. Layout written by
:func:`write_mag240m` (what ``ogb.lsc.MAG240MDataset(root)`` reads)::

    root/mag240m_kddcup2021/RELEASE_v1.txt
    root/mag240m_kddcup2021/meta.pt          {"paper": N, "author": N, "institution": N, "num_classes": C}
    root/mag240m_kddcup2021/split_dict.pt    {"train", "valid", "test-whole", "test-dev",
                                              "test-challenge": int64 tensors}
    root/mag240m_kddcup2021/processed/<src>___<rel>___<dst>/edge_index.npy   (2, E) int64
    root/mag240m_kddcup2021/processed/paper/{node_feat.npy (float16), node_label.npy, node_year.npy}

``test-dev`` / ``test-challenge`` are the test papers at positions ``i % 5 < 3`` / the
rest, OGB's own cut (``ogb.lsc.utils.split_test``). The feature file is written a row
block at a time (:func:`write_feature_npy`), so a file larger than memory can be made:
``write_mag240m(root, data, feature_dim=768)`` generates the paper rows block by block
(unit noise plus the class prototype, as :func:`graphpipe.synthetic.mag.mag_dataset`
makes them) instead of writing ``data.x``, so only the topology is held in memory.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np

from graphpipe.synthetic.mag import HAS_TOPIC, LAST_YEAR, HeteroDataset, mag_dataset

__all__ = ["DIR_NAME", "block_features", "mag240m_dataset", "write_feature_npy", "write_mag240m"]

DIR_NAME = "mag240m_kddcup2021"


def mag240m_dataset(papers: int = 20000, authors: int = 30000, institutions: int = 500,
                    num_classes: int = 20, feature_dim: int = 64, *, label_frac: float = 0.3,
                    seed: int = 0, **kwargs) -> HeteroDataset:
    """A MAG240M-like typed graph (module docstring); labels of unlabelled papers are -1.

    >>> data = mag240m_dataset(papers=50, authors=30, institutions=3, num_classes=3, feature_dim=4)
    >>> sorted(data.num_nodes_dict), len(data.edges), data.x.dtype
    (['author', 'institution', 'paper'], 3, dtype('float16'))
    >>> sorted(data.splits)
    ['test-challenge', 'test-dev', 'train', 'valid']
    """
    if not 0 < label_frac <= 1:
        raise ValueError(f"'label_frac' must be in (0, 1] (got {label_frac})")
    data = mag_dataset(papers, authors, institutions, max(1, papers // 10), num_classes,
                       feature_dim, seed=seed, **kwargs)
    rng = np.random.default_rng(seed + 1)
    labelled = rng.random(papers) < label_frac
    y = np.where(labelled, data.y, -1)
    year = data.year
    splits = {"train": np.flatnonzero(labelled & (year < LAST_YEAR - 1)),
              "valid": np.flatnonzero(labelled & (year == LAST_YEAR - 1))}
    test = np.flatnonzero(labelled & (year == LAST_YEAR))
    position = np.arange(test.shape[0])
    splits["test-dev"], splits["test-challenge"] = test[position % 5 < 3], test[position % 5 >= 3]
    counts = {t: n for t, n in data.num_nodes_dict.items() if t != "field_of_study"}
    edges = {e: v for e, v in data.edges.items() if e != HAS_TOPIC}
    return replace(data, num_nodes_dict=counts, edges=edges, x=data.x.astype(np.float16), y=y,
                   splits=splits, params={**data.params, "generator": "mag240m",
                                          "label_frac": label_frac})


def write_feature_npy(path: str | os.PathLike, rows: int, dim: int, block_rows: int,
                      make_block, dtype=np.float16) -> Path:
    """Write ``(rows, dim)`` ``.npy`` at ``path``, ``make_block(start, count)`` giving each
    block of rows, through a memory map of the file (never the whole matrix in memory)."""
    path = Path(path)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(rows, dim))
    for start in range(0, rows, block_rows):
        count = min(block_rows, rows - start)
        out[start:start + count] = make_block(start, count)
        out.flush()
    del out
    return path


def block_features(y: np.ndarray, num_classes: int, dim: int, *, signal: float = 0.12,
                   seed: int = 0):
    """``make_block(start, count)`` for :func:`write_feature_npy`: float16 rows of unit
    Gaussian noise plus ``signal`` times the class prototype of ``y[start:start+count]``
    (classes below 0, unlabelled papers, get prototype 0); deterministic per block.

    >>> make = block_features(np.array([0, 1, -1]), 2, 4)
    >>> make(0, 3).shape, make(1, 2).dtype, bool((make(0, 3) == make(0, 3)).all())
    ((3, 4), dtype('float16'), True)
    """
    prototypes = np.random.default_rng([seed, 1]).standard_normal((num_classes, dim), dtype=np.float32)

    def make_block(start: int, count: int) -> np.ndarray:
        rng = np.random.default_rng([seed, 2, start])
        x = rng.standard_normal((count, dim), dtype=np.float32)
        cls = np.asarray(y[start:start + count])
        labelled = cls >= 0
        x[labelled] += signal * prototypes[cls[labelled]]
        return x.astype(np.float16)

    return make_block


def write_mag240m(root: str | os.PathLike, data: HeteroDataset, *, feature_dim: int | None = None) -> Path:
    """Write ``data`` under ``root/mag240m_kddcup2021/`` (module docstring); returns that folder.
    ``feature_dim``: generate ``(N_paper, feature_dim)`` float16 rows a block at a time
    (:func:`block_features` over ``data.y``) instead of writing ``data.x``."""
    import torch

    base = Path(root) / DIR_NAME
    processed = base / "processed"
    for etype, (src, dst) in data.edges.items():
        (processed / "___".join(etype)).mkdir(parents=True, exist_ok=True)
        np.save(processed / "___".join(etype) / "edge_index.npy", np.stack([src, dst]).astype(np.int64))
    paper = processed / data.target_type
    paper.mkdir(parents=True, exist_ok=True)
    if feature_dim is None:
        write_feature_npy(paper / "node_feat.npy", data.x.shape[0], data.x.shape[1], 1 << 16,
                          lambda start, count: data.x[start:start + count], dtype=data.x.dtype)
    else:
        write_feature_npy(paper / "node_feat.npy", data.y.shape[0], int(feature_dim), 1 << 14,
                          block_features(data.y, int(data.num_classes), int(feature_dim)))
    np.save(paper / "node_label.npy", np.where(data.y >= 0, data.y, np.nan).astype(np.float32))
    np.save(paper / "node_year.npy", data.year.astype(np.int64))
    torch.save({**data.num_nodes_dict, "num_classes": int(data.num_classes)}, base / "meta.pt")
    splits = dict(data.splits)
    if "test-dev" in splits and "test-challenge" in splits:
        whole = np.empty(splits["test-dev"].shape[0] + splits["test-challenge"].shape[0], np.int64)
        position = np.arange(whole.shape[0])
        whole[position % 5 < 3], whole[position % 5 >= 3] = splits["test-dev"], splits["test-challenge"]
        splits["test-whole"] = whole
    torch.save({k: torch.from_numpy(v.astype(np.int64)) for k, v in splits.items()},
               base / "split_dict.pt")
    (base / "RELEASE_v1.txt").write_text("# MAG240M-like dataset generated by graphpipe\n")
    return base
