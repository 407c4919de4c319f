"""Reader of OGB's heterogeneous raw layout (ogbn-mag as OGB ships it): a :class:`~graphpipe.ingest.source.TypedSource`.

Layout (what ``ogb.io.read_graph_raw.read_csv_heterograph_raw`` reads; ``<etype>`` is
``src___rel___dst``)::

    raw/num-node-dict.csv.gz                header: node types; one row of counts
    raw/triplet-type-list.csv.gz            "src,rel,dst" per relation (else: the relations/ folders)
    raw/relations/<etype>/edge.csv.gz       "src,dst" local IDs per edge
    raw/relations/<etype>/num-edge-list.csv.gz   E
    raw/relations/<etype>/edge-feat.csv.gz  optional edge features (stored in CSC order)
    raw/relations/<etype>/edge_reltype.csv.gz    the relation's index per edge: not stored
    raw/node-feat/<type>/node-feat.csv.gz   optional features
    raw/node-feat/<type>/node_year.csv.gz   optional node years (also raw/node_year/<type>/)
    raw/node-label/<type>/node-label.csv.gz optional labels (NaN: unlabelled, stored as -1)
    split/<name>/<type>/{train,valid,test}.csv.gz

Everything large streams: each relation's edge list to the out-of-core CSC builder
(:mod:`graphpipe.ingest.typed_build`), feature rows block by block into the store. Every file is checked against the counts (rows of features, years and labels
against ``N_t``; edges against ``num-edge-list``; IDs against their type's count;
split IDs in range, each once, splits disjoint); a failure is one
:class:`IngestError` naming the file (and line), and no store is left behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.labels import class_labels
from graphpipe.ingest.ogb import iter_csv_rows, read_csv_table
from graphpipe.ingest.source import RowBlock, TypedNodes, TypedRelation, TypedSource
from graphpipe.ingest.textio import iter_line_blocks
from graphpipe.ingest.timestamps import as_year_values
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError

SPLIT_NAMES = ("train", "valid", "test")
_SMALL_FILE_BYTES = 1 << 20


def is_ogb_hetero_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` (or its ``raw/``) holds ``num-node-dict.csv.gz``,
    ``triplet-type-list.csv.gz`` or a ``relations/`` folder."""
    path = Path(path)
    marks = ("num-node-dict.csv.gz", "triplet-type-list.csv.gz", "relations")
    return path.is_dir() and any((p / m).exists() for p in (path / "raw", path) for m in marks)


class HeteroFolder:
    """Paths of an OGB heterogeneous folder; messages name files relative to it."""

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        self.raw = self.folder / "raw"
        if not self.raw.is_dir() and (self.folder / "relations").is_dir():
            self.raw, self.folder = self.folder, self.folder.parent
        if not (self.raw / "num-node-dict.csv.gz").is_file():
            raise IngestError(f"{self.raw / 'num-node-dict.csv.gz'}: file not found")

    def rel(self, path: Path) -> str:
        try:
            return str(Path(self.folder.name) / path.relative_to(self.folder))
        except ValueError:
            return str(path)

    def need(self, path: Path) -> Path:
        if not path.is_file():
            raise IngestError(f"{self.rel(path)}: file not found")
        return path


def _text_lines(folder: HeteroFolder, path: Path) -> list[str]:
    """Non-empty lines of a small text file (gzip or not), decoded strictly."""
    data = b"".join(iter_line_blocks(folder.need(path), 1 << 16))
    if len(data) > _SMALL_FILE_BYTES:
        raise IngestError(f"{folder.rel(path)}: {len(data)} bytes, too large for a metadata file")
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        raise IngestError(f"{folder.rel(path)}: not UTF-8 text ({exc.reason})") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def _name(value: str, what: str, where: str) -> str:
    try:
        return ts.check_name(value, what)
    except StoreError as exc:
        raise IngestError(f"{where}: {exc}") from None


def read_num_nodes(folder: HeteroFolder) -> dict[str, int]:
    """``{ntype: count}`` from ``raw/num-node-dict.csv.gz`` (one graph)."""
    path = folder.raw / "num-node-dict.csv.gz"
    where = folder.rel(path)
    lines = _text_lines(folder, path)
    if len(lines) != 2:
        raise IngestError(f"{where}: expected a header of node types and one row of counts, "
                          f"found {len(lines)} line(s) (only single-graph datasets are supported)")
    names = [_name(n.strip(), "node type", where) for n in lines[0].split(",")]
    values = lines[1].split(",")
    if len(values) != len(names) or len(set(names)) != len(names):
        raise IngestError(f"{where}: line 2: {len(values)} counts for {len(names)} node types")
    counts = {}
    for name, value in zip(names, values):
        try:
            count = int(value.strip())
        except ValueError:
            raise IngestError(f"{where}: line 2: count {value.strip()!r} of {name!r} is not an integer") from None
        if count < 0:
            raise IngestError(f"{where}: line 2: negative count {count} for {name!r}")
        counts[name] = count
    return counts


def read_relations(folder: HeteroFolder, counts: dict[str, int]) -> list[ts.EdgeType]:
    """The relations, sorted as OGB sorts them (``triplet-type-list.csv.gz``, else the folders)."""
    path = folder.raw / "triplet-type-list.csv.gz"
    if path.is_file():
        where = folder.rel(path)
        triplets = []
        for i, line in enumerate(_text_lines(folder, path), 1):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) != 3:
                raise IngestError(f"{where}: line {i}: expected src,rel,dst, found {line!r}")
            triplets.append(tuple(_name(p, w, f"{where}: line {i}")
                                  for p, w in zip(parts, ("node type", "relation", "node type"))))
    else:
        rel_dir = folder.raw / "relations"
        if not rel_dir.is_dir():
            raise IngestError(f"{folder.rel(path)}: file not found (and no raw/relations/ folder)")
        where = folder.rel(rel_dir)
        try:
            triplets = [ts.parse_etype(p.name) for p in rel_dir.iterdir() if p.is_dir()]
        except StoreError as exc:
            raise IngestError(f"{where}: {exc}") from None
    for etype in triplets:
        for ntype in (etype[0], etype[2]):
            if ntype not in counts:
                raise IngestError(f"{where}: relation {ts.etype_key(etype)} names node type "
                                  f"{ntype!r}, not in num-node-dict.csv.gz")
    if len(set(triplets)) != len(triplets):
        raise IngestError(f"{where}: a relation is listed twice")
    return sorted(triplets)


def _single_count(folder: HeteroFolder, path: Path) -> int:
    where = folder.rel(path)
    values = read_csv_table(folder.need(path), np.int64, display=where)
    if values.shape != (1, 1):
        raise IngestError(f"{where}: expected one count, found {values.shape[0]} row(s) of "
                          f"{values.shape[1]} value(s)")
    if values[0, 0] < 0:
        raise IngestError(f"{where}: line 1: negative count {int(values[0, 0])}")
    return int(values[0, 0])


def edge_chunks(folder: HeteroFolder, path: Path) -> Iterator[EdgeChunk]:
    """A relation's ``edge.csv.gz`` as :class:`EdgeChunk` runs."""
    where, row = folder.rel(path), 0
    for first_line, rows in iter_csv_rows(folder.need(path), np.int64, ncols=2, display=where):
        yield EdgeChunk(np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1]),
                        row, where, first_line)
        row += rows.shape[0]


def relation(folder: HeteroFolder, etype: ts.EdgeType) -> TypedRelation:
    """One relation folder: its edges, declared count and edge features."""
    rel = folder.raw / "relations" / ts.etype_key(etype)
    count_file = rel / "num-edge-list.csv.gz"
    out = TypedRelation(etype, partial(edge_chunks, folder, rel / "edge.csv.gz"),
                        num_edges=_single_count(folder, count_file), num_edges_from=folder.rel(count_file))
    feat_path = rel / "edge-feat.csv.gz"
    if feat_path.is_file():
        out.edge_features = partial(read_csv_table, feat_path, np.float32, display=folder.rel(feat_path))
        out.edge_features_from = folder.rel(feat_path)
    return out


def feature_blocks(folder: HeteroFolder, path: Path) -> Iterator[RowBlock]:
    """``node-feat.csv.gz`` of a type as row blocks."""
    where, done = folder.rel(path), 0
    for first_line, rows in iter_csv_rows(path, np.float32, display=where):
        yield RowBlock(done, rows, where, first_line)
        done += rows.shape[0]


def read_column(check: Callable[[np.ndarray, str], np.ndarray], folder: HeteroFolder, path: Path,
                n: int, ntype: str) -> np.ndarray:
    """A per-node one-column file of ``ntype`` (years, labels) read whole, through ``check``."""
    where = folder.rel(path)
    values = read_csv_table(path, np.float64, display=where)
    if values.shape[0] != n or values.shape[1] != 1:
        raise IngestError(f"{where}: {values.shape[0]} rows of {values.shape[1]} value(s), expected "
                          f"{n} rows of 1 ({ntype!r} nodes)")
    return check(values, where)


def node_type(folder: HeteroFolder, ntype: str, n: int) -> TypedNodes:
    """Features, years (OGB's place first) and labels of ``ntype`` where the folder has them."""
    node = TypedNodes(n, where=folder.rel(folder.raw / "num-node-dict.csv.gz"))
    feat = folder.raw / "node-feat" / ntype / "node-feat.csv.gz"
    if feat.is_file():
        node.features = partial(feature_blocks, folder, feat)
    for path in (folder.raw / "node-feat" / ntype / "node_year.csv.gz",
                 folder.raw / "node_year" / ntype / "node_year.csv.gz"):
        if path.is_file():
            node.time = partial(read_column, as_year_values, folder, path, n, ntype)
            break
    label = folder.raw / "node-label" / ntype / "node-label.csv.gz"
    if label.is_file():
        node.labels = partial(read_column, class_labels, folder, label, n, ntype)
    return node


def split_dir(folder: HeteroFolder, split: str | None) -> Path | None:
    """``split/<name>/`` (``split`` or the only one); None when there is no split folder."""
    base = folder.folder / "split"
    if not base.is_dir():
        return None
    names = sorted(p.name for p in base.iterdir() if p.is_dir())
    if split is None:
        if len(names) > 1:
            raise IngestError(f"{folder.rel(base)}: several splits {names}; choose one with --split NAME")
        split = names[0] if names else None
    if split is None:
        return None
    if split not in names:
        raise IngestError(f"{folder.rel(base)}: no split {split!r} (found {names})")
    return base / split


def read_splits(folder: HeteroFolder, base: Path) -> Iterator[tuple[str, np.ndarray, str]]:
    """``{train,valid,test}.csv.gz`` of one type's split folder ``base``."""
    for name in SPLIT_NAMES:
        path = folder.need(base / f"{name}.csv.gz")
        ids = read_csv_table(path, np.int64, display=folder.rel(path))
        if ids.shape[1] != 1:
            raise IngestError(f"{folder.rel(path)}: expected 1 column, found {ids.shape[1]}")
        yield name, ids[:, 0], folder.rel(path)


def read_ogb_hetero(folder: str | os.PathLike, *, split: str | None = None,
                    target_type: str | None = None) -> TypedSource:
    """The OGB heterogeneous folder ``folder`` (module docstring) as a typed source;
    ``target_type`` defaults to the type with labels (else the one with splits).

    >>> import os, tempfile
    >>> from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
    >>> tmp = tempfile.TemporaryDirectory()
    >>> folder = write_ogb_mag(os.path.join(tmp.name, "mag"), mag_dataset(
    ...     papers=50, authors=30, institutions=3, fields=8, num_classes=3, feature_dim=4))
    >>> source = read_ogb_hetero(folder)
    >>> source.target_type, len(source.relations), source.node_types["paper"].count
    ('paper', 4, 50)
    >>> tmp.cleanup()
    """
    ogb = HeteroFolder(folder)
    counts = read_num_nodes(ogb)
    relations = [relation(ogb, etype) for etype in read_relations(ogb, counts)]
    nodes = {ntype: node_type(ogb, ntype, n) for ntype, n in counts.items()}
    base = split_dir(ogb, split)
    with_splits = [t for t in counts if base is not None and (base / t).is_dir()]
    for ntype in with_splits:
        nodes[ntype].splits = partial(read_splits, ogb, base / ntype)
    labelled = [t for t, node in nodes.items() if node.labels is not None]
    return TypedSource(ogb.folder.name, "ogb-hetero-raw", str(ogb.folder), nodes, relations,
                       target_type or _target(labelled, with_splits, ogb), extra={
                           "ignored_files": "raw/relations/*/edge_reltype.csv.gz (the relation's "
                                            "index, one per edge)"})


def _target(labelled: list[str], with_splits: list[str], ogb: HeteroFolder) -> str | None:
    """The only labelled type (else the only type with splits); None when there is none."""
    for candidates in (labelled, with_splits):
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            raise IngestError(f"{ogb.rel(ogb.raw)}: several labelled node types {candidates}; "
                              f"choose one with --target-type")
    return None
