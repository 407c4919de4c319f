"""An ogbn-papers100M-like dataset in OGB's ``papers100M-bin`` layout, at any size,
written in bounded memory.

The layout is what ``ogb.io.DatasetSaver`` writes and OGB ships::

    folder/RELEASE_v1.txt
    folder/raw/data.npz          np.savez_compressed: edge_index (2, E) int64,
                                 node_feat (N, dim) float32, node_year (N, 1) int64,
                                 num_nodes_list [N], num_edges_list [E]
    folder/raw/node-label.npz    node_label (N, 1) float32: a class for labelled nodes,
                                 NaN for the others (~98.6%)
    folder/split/time/{train,valid,test}.csv.gz   labelled node IDs by year
    folder/processed/            empty; OGB caches what it parsed there

The content is a function of :class:`PapersSpec` alone, made block by block:

- edges: the first ``N * edges_per_node`` edges of an R-MAT graph on ``2**scale >= N``
  vertices (:func:`~graphpipe.synthetic.rmat.rmat_edges`, permuted IDs), IDs folded
  into ``0..N-1`` by ``id mod N``;
- features: standard normal, one seeded stream per block of :data:`NODE_BLOCK` rows;
- classes: ``argmax(x @ W)`` for a seeded ``(dim, num_classes)`` matrix ``W`` — a
  function of the node's features that a model can learn;
- years: ``2020 - floor(Exponential(13))`` (at least 1950); ``label_frac`` of the nodes
  are labelled, split by year as papers100M is (train <= 2017, valid 2018, test >= 2019).

:func:`write_papers100m_bin` streams the npz members (:class:`NpzStreamWriter`),
so its memory is a few blocks plus ``N * 6`` bytes (labels and years kept for the
second file), whatever the size of the features.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from graphpipe.synthetic.npz_stream import NpzStreamWriter
from graphpipe.synthetic.rmat import rmat_edges
from graphpipe.synthetic.text import write_csv

NODE_BLOCK = 1 << 15
"""Rows per generated block of node data (each block has its own seeded streams)."""
EDGE_BLOCK = 1 << 22
"""Edges generated at a time."""
LAST_YEAR = 2020
FIRST_YEAR = 1950
SPLIT_YEARS = {"train": (FIRST_YEAR, 2017), "valid": (2018, 2018), "test": (2019, LAST_YEAR)}
_FEAT_TAG, _NODE_TAG, _CLASS_TAG = 0x66656174, 0x6E6F6465, 0x636C6173

ProgressFn = Callable[[str, int, int], None]


@dataclass(frozen=True)
class PapersSpec:
    """What :func:`write_papers100m_bin` generates (the real ogbn-papers100M: 111,059,956
    nodes, 1,615,685,872 edges, 128 features, 172 classes, 1.39% labelled)."""

    num_nodes: int
    edges_per_node: int = 5
    dim: int = 128
    num_classes: int = 172
    label_frac: float = 0.014
    seed: int = 0

    def __post_init__(self) -> None:
        if self.num_nodes < 2:
            raise ValueError(f"'num_nodes' must be at least 2 (got {self.num_nodes})")
        if self.edges_per_node < 0 or self.dim < 1 or self.num_classes < 1:
            raise ValueError("'edges_per_node' must be >= 0, 'dim' and 'num_classes' >= 1 "
                             f"(got {self.edges_per_node}, {self.dim}, {self.num_classes})")
        if not 0.0 <= self.label_frac <= 1.0:
            raise ValueError(f"'label_frac' must be in [0, 1] (got {self.label_frac})")

    @property
    def num_edges(self) -> int:
        return self.num_nodes * self.edges_per_node

    @property
    def scale(self) -> int:
        return max(1, math.ceil(math.log2(self.num_nodes)))


@dataclass
class NodeBlock:
    """Rows ``start .. start+len(feat)-1``: ``feat`` float32 (R, dim), ``year`` int64 (R,),
    ``label`` float32 (R,) (NaN where unlabelled)."""

    start: int
    feat: np.ndarray
    year: np.ndarray
    label: np.ndarray


def edge_blocks(spec: PapersSpec, block: int = EDGE_BLOCK) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(src, dst)`` int64 blocks of the edge list, in order."""
    for first in range(0, spec.num_edges, block):
        count = min(block, spec.num_edges - first)
        src, dst = rmat_edges(spec.scale, spec.edges_per_node, seed=spec.seed, first=first,
                              count=count)
        yield src % spec.num_nodes, dst % spec.num_nodes


def class_weights(spec: PapersSpec) -> np.ndarray:
    """float32 ``(dim, num_classes)``: the class of a node is ``argmax(x @ W)``."""
    rng = np.random.default_rng(np.random.SeedSequence([spec.seed, _CLASS_TAG]))
    return rng.standard_normal((spec.dim, spec.num_classes), dtype=np.float32)


def node_blocks(spec: PapersSpec) -> Iterator[NodeBlock]:
    """The node data in blocks of :data:`NODE_BLOCK` rows, in order."""
    weights = class_weights(spec)
    for index, start in enumerate(range(0, spec.num_nodes, NODE_BLOCK)):
        rows = min(NODE_BLOCK, spec.num_nodes - start)
        feat_rng = np.random.default_rng(np.random.SeedSequence([spec.seed, _FEAT_TAG, index]))
        feat = feat_rng.standard_normal((rows, spec.dim), dtype=np.float32)
        node_rng = np.random.default_rng(np.random.SeedSequence([spec.seed, _NODE_TAG, index]))
        age = np.floor(node_rng.exponential(13.0, rows)).astype(np.int64)
        year = np.maximum(LAST_YEAR - age, FIRST_YEAR)
        labelled = node_rng.random(rows) < spec.label_frac
        label = np.full(rows, np.nan, dtype=np.float32)
        label[labelled] = np.argmax(feat[labelled] @ weights, axis=1)
        yield NodeBlock(start, feat, year, label)


def time_splits(year: np.ndarray, label: np.ndarray) -> dict[str, np.ndarray]:
    """Labelled node IDs per split by year (as papers100M's ``split/time``), sorted int64."""
    labelled = ~np.isnan(label)
    return {name: np.flatnonzero(labelled & (year >= lo) & (year <= hi)).astype(np.int64)
            for name, (lo, hi) in SPLIT_YEARS.items()}


def papers100m_arrays(spec: PapersSpec) -> dict[str, np.ndarray]:
    """The whole dataset in memory (small sizes; tests): ``edge_index`` (2, E) int64,
    ``node_feat`` (N, dim) float32, ``node_year`` (N, 1) int64, ``node_label`` (N, 1)
    float32 and ``train`` / ``valid`` / ``test`` ID arrays.

    >>> arrays = papers100m_arrays(PapersSpec(1000, dim=8, num_classes=4, label_frac=0.5))
    >>> arrays["edge_index"].shape, arrays["node_feat"].shape, arrays["node_label"].shape
    ((2, 5000), (1000, 8), (1000, 1))
    """
    parts = list(edge_blocks(spec))
    src = np.concatenate([p[0] for p in parts]) if parts else np.empty(0, np.int64)
    dst = np.concatenate([p[1] for p in parts]) if parts else np.empty(0, np.int64)
    blocks = list(node_blocks(spec))
    year = np.concatenate([b.year for b in blocks])
    label = np.concatenate([b.label for b in blocks])
    return {"edge_index": np.stack([src, dst]), "node_feat": np.concatenate([b.feat for b in blocks]),
            "node_year": year.reshape(-1, 1), "node_label": label.reshape(-1, 1),
            **time_splits(year, label)}


def write_papers100m_bin(folder: str | os.PathLike, spec: PapersSpec, *, compresslevel: int = 1,
                         progress: ProgressFn | None = None, name: str = "ogbn-papers100M") -> Path:
    """Write ``spec``'s dataset into ``folder`` (created) in the ``papers100M-bin`` layout.

    Members are deflated (as ``np.savez_compressed``) at zlib level ``compresslevel``
    (1: fastest; the format is the same at every level). Memory: a few blocks plus
    ``6 * N`` bytes. Returns ``folder``.

    >>> import tempfile
    >>> out = write_papers100m_bin(Path(tempfile.mkdtemp()) / "p", PapersSpec(300, dim=4))
    >>> with np.load(out / "raw" / "data.npz") as data:
    ...     data["node_feat"].shape, data["edge_index"].shape, data["node_year"].shape
    ((300, 4), (2, 1500), (300, 1))
    """
    folder = Path(folder)
    raw, split_dir = folder / "raw", folder / "split" / "time"
    for directory in (raw, split_dir, folder / "processed"):
        directory.mkdir(parents=True, exist_ok=True)
    note = f"# Release note for {name}\n\n### v1: generated by graphpipe {asdict(spec)}"
    (folder / "RELEASE_v1.txt").write_text(note)
    n, e = spec.num_nodes, spec.num_edges
    year = np.empty(n, dtype=np.int16)
    label = np.empty(n, dtype=np.float32)
    with NpzStreamWriter(raw / "data.npz", compresslevel=compresslevel) as npz:
        npz.write("num_nodes_list", np.array([n], dtype=np.int64))
        npz.write_blocks("edge_index", (2, e), np.int64,
                         _edge_rows(spec, progress))
        npz.write("num_edges_list", np.array([e], dtype=np.int64))
        npz.write_blocks("node_feat", (n, spec.dim), np.float32,
                         _feature_rows(spec, year, label, progress))
        npz.write_blocks("node_year", (n, 1), np.int64,
                         (year[i:i + EDGE_BLOCK].astype(np.int64) for i in range(0, n, EDGE_BLOCK)))
    with NpzStreamWriter(raw / "node-label.npz", compresslevel=compresslevel) as npz:
        npz.write("node_label", label.reshape(-1, 1))
    for split, ids in time_splits(year, label).items():
        write_csv(split_dir / f"{split}.csv.gz", ids.reshape(-1, 1), level=compresslevel, workers=1)
    return folder


def _edge_rows(spec: PapersSpec, progress: ProgressFn | None) -> Iterator[np.ndarray]:
    """Row 0 (sources) then row 1 (destinations) of ``edge_index``: two passes over the
    blocks, each regenerated (cheaper than keeping E sources)."""
    done = 0
    for row in (0, 1):
        for block in edge_blocks(spec):
            yield block[row]
            done += len(block[row])
            if progress is not None:
                progress("edge_index", done, 2 * spec.num_edges)


def _feature_rows(spec: PapersSpec, year: np.ndarray, label: np.ndarray,
                  progress: ProgressFn | None) -> Iterator[np.ndarray]:
    for block in node_blocks(spec):
        stop = block.start + len(block.feat)
        year[block.start:stop] = block.year
        label[block.start:stop] = block.label
        yield block.feat
        if progress is not None:
            progress("node_feat", stop, spec.num_nodes)
