"""An ogbn-mag-like heterogeneous dataset, in OGB's heterogeneous raw layout.

Node types ``paper``, ``author``, ``institution``, ``field_of_study`` and the four
relations of ogbn-mag (``author writes paper``, ``author affiliated_with institution``,
``paper cites paper``, ``paper has_topic field_of_study``). The class signal lives in
the typed neighbourhoods: every institution and every field has a class; a paper of
class ``y`` draws most of its authors from institutions of class ``y``, most of its
fields among fields of class ``y`` and most of its citations among papers of class
``y``. Paper features are a weak signal (a class prototype scaled by
``feature_signal`` plus unit noise), so a model that reads the relations (R-GCN)
beats one that reads paper features alone (an MLP) by a clear margin. Degrees are
skewed: author productivity, institution size, field popularity and citation counts
follow Pareto weights. Paper years are 2010..2019; split ``time`` as ogbn-mag:
train before 2018, valid 2018, test 2019.

Layout written by :func:`write_ogb_mag` (what ``ogb.io.read_graph_raw.read_csv_heterograph_raw``
and ``NodePropPredDataset`` with ``is hetero`` read; node and relation lists sorted as
OGB sorts them)::

    RELEASE_v2.txt
    raw/num-node-dict.csv.gz          header: node types; one row of counts
    raw/triplet-type-list.csv.gz      one "src,rel,dst" per relation
    raw/nodetype-has-label.csv.gz     header: node types; one row True/False
    raw/relations/<src>___<rel>___<dst>/{edge.csv.gz, num-edge-list.csv.gz, edge_reltype.csv.gz}
    raw/node-feat/paper/node-feat.csv.gz
    raw/node-feat/paper/node_year.csv.gz      (OGB's "additional node file" node_year)
    raw/node-label/paper/node-label.csv.gz
    split/time/nodetype-has-split.csv.gz
    split/time/paper/{train,valid,test}.csv.gz
    processed/                        empty; OGB caches what it parsed there

>>> data = mag_dataset(papers=60, authors=40, institutions=4, fields=10, num_classes=3,
...                    feature_dim=4, seed=0)
>>> sorted(data.num_nodes_dict.items())
[('author', 40), ('field_of_study', 10), ('institution', 4), ('paper', 60)]
>>> [etype for etype in sorted(data.edges)]  # doctest: +NORMALIZE_WHITESPACE
[('author', 'affiliated_with', 'institution'), ('author', 'writes', 'paper'),
 ('paper', 'cites', 'paper'), ('paper', 'has_topic', 'field_of_study')]
>>> data.x.shape, data.y.shape, sorted(data.splits)
((60, 4), (60,), ['test', 'train', 'valid'])
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.synthetic.text import write_csv

__all__ = ["MAG_RELATIONS", "HeteroDataset", "mag_dataset", "mag_meta_dict", "write_ogb_mag"]

WRITES = ("author", "writes", "paper")
AFFILIATED = ("author", "affiliated_with", "institution")
CITES = ("paper", "cites", "paper")
HAS_TOPIC = ("paper", "has_topic", "field_of_study")
MAG_RELATIONS = (AFFILIATED, WRITES, CITES, HAS_TOPIC)
SPLIT_NAME = "time"
FIRST_YEAR, LAST_YEAR = 2010, 2019


@dataclass
class HeteroDataset:
    """A generated typed graph.

    Attributes:
        num_nodes_dict: ``{ntype: N_t}``.
        edges: ``{(src, rel, dst): (src_ids, dst_ids)}`` int64 local IDs, edge-list order.
        x: float32 ``(N_paper, F)`` features of the target type.
        y: int64 ``(N_paper,)`` classes of the target type.
        year: int64 ``(N_paper,)`` years of the target type.
        splits: ``{"train"|"valid"|"test": int64 local IDs of the target type}``.
        num_classes: number of classes.
        target_type: the labelled type (``"paper"``).
        params: the generator's arguments.
    """

    num_nodes_dict: dict[str, int]
    edges: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]
    x: np.ndarray
    y: np.ndarray
    year: np.ndarray
    splits: dict[str, np.ndarray]
    num_classes: int
    target_type: str = "paper"
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def num_edges(self) -> int:
        return int(sum(s.shape[0] for s, _ in self.edges.values()))


def _pareto_weights(rng: np.random.Generator, n: int, shape: float) -> np.ndarray:
    """Heavy-tailed positive weights (Pareto with tail index ``shape``)."""
    return rng.pareto(shape, n) + 1.0


class _ClassSampler:
    """Draws members of a class with probability proportional to their weights."""

    def __init__(self, classes: np.ndarray, weights: np.ndarray, num_classes: int):
        self.order = np.argsort(classes, kind="stable")
        cum = np.cumsum(weights[self.order])
        self.cum = cum
        counts = np.bincount(classes, minlength=num_classes)
        ends = np.cumsum(counts)
        starts = ends - counts
        self.lo = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0.0)
        self.hi = np.where(counts > 0, cum[np.maximum(ends - 1, 0)], self.lo)
        self.empty = counts == 0

    def draw(self, rng: np.random.Generator, classes: np.ndarray) -> np.ndarray:
        """One member per entry of ``classes`` (an empty class draws from all members)."""
        lo = np.where(self.empty[classes], 0.0, self.lo[classes])
        hi = np.where(self.empty[classes], self.cum[-1], self.hi[classes])
        u = lo + rng.random(classes.shape[0]) * (hi - lo)
        pos = np.minimum(np.searchsorted(self.cum, u, side="right"), self.cum.shape[0] - 1)
        return self.order[pos]


def _mixed_classes(rng: np.random.Generator, own: np.ndarray, homophily: float,
                   num_classes: int) -> np.ndarray:
    """``own`` with probability ``homophily``, otherwise a uniformly random class."""
    keep = rng.random(own.shape[0]) < homophily
    return np.where(keep, own, rng.integers(0, num_classes, own.shape[0]))


def _unique_pairs(src: np.ndarray, dst: np.ndarray, drop_loops: bool = False) -> tuple:
    """Each ``(src, dst)`` pair once, in order of first appearance."""
    keys = src.astype(np.int64) * (int(dst.max(initial=0)) + 1) + dst
    _, first = np.unique(keys, return_index=True)
    first = np.sort(first)
    src, dst = src[first], dst[first]
    if drop_loops:
        keep = src != dst
        src, dst = src[keep], dst[keep]
    return src.astype(np.int64), dst.astype(np.int64)


def _paper_links(rng: np.random.Generator, y: np.ndarray, per_paper: float, sampler: _ClassSampler,
                 homophily: float, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """``(paper, other)`` pairs: ``1 + Poisson(per_paper - 1)`` per paper, drawn by class."""
    counts = 1 + rng.poisson(max(0.0, per_paper - 1.0), y.shape[0])
    papers = np.repeat(np.arange(y.shape[0]), counts)
    classes = _mixed_classes(rng, y[papers], homophily, num_classes)
    return papers, sampler.draw(rng, classes)


def mag_dataset(papers: int = 20000, authors: int = 30000, institutions: int = 500,
                fields: int = 2000, num_classes: int = 20, feature_dim: int = 64, *,
                authors_per_paper: float = 3.0, fields_per_paper: float = 4.0,
                cites_per_paper: float = 5.0, homophily: float = 0.75,
                feature_signal: float = 0.12, seed: int = 0) -> HeteroDataset:
    """Generate an ogbn-mag-like typed graph (module docstring); deterministic for ``seed``.

    >>> data = mag_dataset(papers=30, authors=20, institutions=2, fields=5, num_classes=2,
    ...                    feature_dim=3, seed=1)
    >>> data.num_nodes_dict["paper"], data.x.shape, int(data.y.max()) < 2
    (30, (30, 3), True)
    >>> src, dst = data.edges[("author", "writes", "paper")]
    >>> bool(src.max() < 20 and dst.max() < 30)
    True
    """
    for name, value in (("papers", papers), ("authors", authors), ("institutions", institutions),
                        ("fields", fields), ("num_classes", num_classes), ("feature_dim", feature_dim)):
        if value < 1:
            raise ValueError(f"'{name}' must be at least 1 (got {value})")
    rng = np.random.default_rng(seed)
    inst_class = rng.integers(0, num_classes, institutions)
    inst_of_author = _ClassSampler(np.zeros(institutions, np.int64),
                                   _pareto_weights(rng, institutions, 1.2), 1).draw(
        rng, np.zeros(authors, np.int64))
    author_class = inst_class[inst_of_author]
    field_class = rng.integers(0, num_classes, fields)
    prior = 1.0 / np.arange(1, num_classes + 1) ** 0.5
    y = rng.choice(num_classes, papers, p=prior / prior.sum()).astype(np.int64)
    year = rng.integers(FIRST_YEAR, LAST_YEAR + 1, papers).astype(np.int64)

    author_sampler = _ClassSampler(author_class, _pareto_weights(rng, authors, 1.5), num_classes)
    w_paper, w_author = _paper_links(rng, y, authors_per_paper, author_sampler, homophily, num_classes)
    w_author, w_paper = _unique_pairs(w_author, w_paper)
    field_sampler = _ClassSampler(field_class, _pareto_weights(rng, fields, 1.2), num_classes)
    t_paper, t_field = _unique_pairs(*_paper_links(rng, y, fields_per_paper, field_sampler,
                                                   homophily, num_classes))
    paper_sampler = _ClassSampler(y, _pareto_weights(rng, papers, 1.3), num_classes)
    c_src, c_dst = _unique_pairs(*_paper_links(rng, y, cites_per_paper, paper_sampler,
                                               homophily, num_classes), drop_loops=True)
    affiliations = _affiliations(rng, inst_of_author, author_class, inst_class, num_classes)
    x = _features(rng, y, num_classes, feature_dim, feature_signal)
    splits = {"train": np.flatnonzero(year < LAST_YEAR - 1), "valid": np.flatnonzero(year == LAST_YEAR - 1),
              "test": np.flatnonzero(year == LAST_YEAR)}
    counts = {"paper": papers, "author": authors, "institution": institutions, "field_of_study": fields}
    edges = {AFFILIATED: affiliations, WRITES: (w_author, w_paper), CITES: (c_src, c_dst),
             HAS_TOPIC: (t_paper, t_field)}
    params = {"generator": "mag", "papers": papers, "authors": authors,
              "institutions": institutions, "fields": fields, "num_classes": num_classes,
              "feature_dim": feature_dim, "homophily": homophily,
              "feature_signal": feature_signal, "seed": seed}
    return HeteroDataset(counts, edges, x, y, year, {k: v.astype(np.int64) for k, v in splits.items()},
                         num_classes, params=params)


def _affiliations(rng: np.random.Generator, inst_of_author: np.ndarray, author_class: np.ndarray,
                  inst_class: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Every author's institution, and a second one (mostly of its class) for one in ten."""
    n = inst_of_author.shape[0]
    second = np.flatnonzero(rng.random(n) < 0.1)
    sampler = _ClassSampler(inst_class, np.ones(inst_class.shape[0]), num_classes)
    other = sampler.draw(rng, author_class[second])
    src = np.concatenate([np.arange(n), second])
    dst = np.concatenate([inst_of_author, other])
    order = np.argsort(src, kind="stable")
    return _unique_pairs(src[order], dst[order])


def _features(rng: np.random.Generator, y: np.ndarray, num_classes: int, dim: int,
              signal: float) -> np.ndarray:
    """Unit Gaussian noise plus ``signal`` times the class prototype (weak on purpose)."""
    prototypes = rng.standard_normal((num_classes, dim))
    x = rng.standard_normal((y.shape[0], dim)) + signal * prototypes[y]
    return x.astype(np.float32)


# ---------------------------------------------------------------------------
# OGB heterogeneous raw layout


def _etype_dir(etype: tuple[str, str, str]) -> str:
    return "___".join(etype)


def _small_csv(path: Path, values: np.ndarray, level: int, header: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_csv(path, np.asarray(values, dtype=np.int64).reshape(len(values), -1), header=header,
              level=level, workers=1)


def _text_gz(path: Path, text: str, level: int) -> None:
    import gzip

    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb", compresslevel=level) as fh:
        fh.write(text.encode())


def write_ogb_mag(folder: str | os.PathLike, data: HeteroDataset, *, compresslevel: int = 1,
                  feat_format: str = "%.6f", workers: int | None = None) -> Path:
    """Write ``data`` in OGB's heterogeneous raw layout (module docstring) under ``folder``.

    >>> import tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> data = mag_dataset(papers=30, authors=20, institutions=2, fields=5, num_classes=2, feature_dim=3)
    >>> folder = write_ogb_mag(tmp.name + "/mag", data)
    >>> sorted(p.name for p in (folder / "raw" / "relations").iterdir())  # doctest: +NORMALIZE_WHITESPACE
    ['author___affiliated_with___institution', 'author___writes___paper',
     'paper___cites___paper', 'paper___has_topic___field_of_study']
    >>> tmp.cleanup()
    """
    folder = Path(folder)
    raw = folder / "raw"
    ntypes = sorted(data.num_nodes_dict)
    etypes = sorted(data.edges)
    (folder / "processed").mkdir(parents=True, exist_ok=True)
    (folder / "RELEASE_v2.txt").write_text(f"# Release note for {folder.name}\n\n"
                                           "### v2: generated by graphpipe (ogbn-mag-like)\n")
    counts = ",".join(str(data.num_nodes_dict[t]) for t in ntypes)
    _text_gz(raw / "num-node-dict.csv.gz", f"{','.join(ntypes)}\n{counts}\n", compresslevel)
    _text_gz(raw / "triplet-type-list.csv.gz", "".join(f"{','.join(e)}\n" for e in etypes), compresslevel)
    has = ",".join(str(t == data.target_type) for t in ntypes)
    _text_gz(raw / "nodetype-has-label.csv.gz", f"{','.join(ntypes)}\n{has}\n", compresslevel)
    for reltype, etype in enumerate(etypes):
        src, dst = data.edges[etype]
        rel = raw / "relations" / _etype_dir(etype)
        rel.mkdir(parents=True, exist_ok=True)
        write_csv(rel / "edge.csv.gz", np.stack([src, dst], axis=1), level=compresslevel,
                  workers=workers)
        _small_csv(rel / "num-edge-list.csv.gz", np.array([src.shape[0]]), compresslevel)
        _small_csv(rel / "edge_reltype.csv.gz", np.full(src.shape[0], reltype), compresslevel)
    target = data.target_type
    feat_dir = raw / "node-feat" / target
    feat_dir.mkdir(parents=True, exist_ok=True)
    write_csv(feat_dir / "node-feat.csv.gz", data.x, float_format=feat_format, level=compresslevel,
              workers=workers)
    _small_csv(feat_dir / "node_year.csv.gz", data.year, compresslevel)
    _small_csv(raw / "node-label" / target / "node-label.csv.gz", data.y, compresslevel)
    split = folder / "split" / SPLIT_NAME
    _text_gz(split / "nodetype-has-split.csv.gz", f"{','.join(ntypes)}\n{has}\n", compresslevel)
    for name in ("train", "valid", "test"):
        _small_csv(split / target / f"{name}.csv.gz", data.splits[name], compresslevel)
    return folder


def mag_meta_dict(folder: str | os.PathLike, num_classes: int) -> dict[str, Any]:
    """The ``meta_dict`` for ``ogb.nodeproppred.NodePropPredDataset(name, meta_dict=...)`` on a
    folder written by :func:`write_ogb_mag` (the values of ogbn-mag's ``master.csv`` row)."""
    return {
        "version": 2, "dir_path": str(folder), "download_name": "mag", "url": "",
        "num tasks": 1, "num classes": int(num_classes), "task type": "multiclass classification",
        "eval metric": "acc", "add_inverse_edge": "False", "split": SPLIT_NAME,
        "has_node_attr": "True", "has_edge_attr": "False", "additional node files": "node_year",
        "additional edge files": "edge_reltype", "is hetero": "True", "binary": "False",
    }
