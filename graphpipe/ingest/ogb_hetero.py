"""Reader of OGB's heterogeneous raw layout (ogbn-mag as OGB ships it) into a typed store.

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

Everything large streams: each relation's edge list through the out-of-core CSC
builder (:mod:`graphpipe.ingest.typed_csc`), feature rows block by block into the
store. Every file is checked against the counts (rows of features, years and labels
against ``N_t``; edges against ``num-edge-list``; IDs against their type's count;
split IDs in range, each once, splits disjoint); a failure is one
:class:`IngestError` naming the file (and line), and no store is left behind.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.ogb import _labels_from_float, iter_csv_rows, read_csv_table
from graphpipe.ingest.textio import iter_line_blocks
from graphpipe.ingest.typed_csc import build_relation, build_reverse, check_reverse
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError
from graphpipe.store.writer import TypedStoreWriter

ProgressFn = Callable[[str, int, int], None]
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


def write_relation(writer: TypedStoreWriter, folder: HeteroFolder, etype: ts.EdgeType, *,
                   memory_limit: int | None, progress: ProgressFn | None,
                   reverse: bool = False) -> int:
    """One relation folder into the store; returns its edge count."""
    rel = folder.raw / "relations" / ts.etype_key(etype)
    declared = _single_count(folder, rel / "num-edge-list.csv.gz")
    num_edges = build_relation(writer, etype, edge_chunks(folder, rel / "edge.csv.gz"),
                               memory_limit=memory_limit, expected_edges=declared,
                               expected_from=folder.rel(rel / "num-edge-list.csv.gz"),
                               progress=progress)
    feat_path = rel / "edge-feat.csv.gz"
    if feat_path.is_file():
        feat = read_csv_table(feat_path, np.float32, display=folder.rel(feat_path))
        if feat.shape[0] != num_edges:
            raise IngestError(f"{folder.rel(feat_path)}: {feat.shape[0]} rows, but the relation has "
                              f"{num_edges} edges")
        writer.write_edge_arrays(etype, edge_feat=feat)
    if reverse:
        rev = build_reverse(writer, etype, edge_chunks(folder, rel / "edge.csv.gz"),
                            memory_limit=memory_limit)
        if feat_path.is_file():
            writer.write_edge_arrays(rev, edge_feat=feat)
    return num_edges


def write_features(writer: TypedStoreWriter, folder: HeteroFolder, ntype: str, path: Path, *,
                   dtype: np.dtype, allow_nonfinite: bool) -> None:
    """Stream ``node-feat.csv.gz`` of ``ntype`` into its feature array (rows must be ``N_t``)."""
    where, n = folder.rel(path), writer.num_nodes_dict[ntype]
    rows_writer, done = None, 0
    for first_line, rows in iter_csv_rows(path, np.float32, display=where):
        if rows_writer is None:
            rows_writer = writer.feature_rows(ntype, rows.shape[1], dtype)
        if done + rows.shape[0] > n:
            raise IngestError(f"{where}: line {first_line + n - done}: more rows than the {n} "
                              f"{ntype!r} nodes of num-node-dict.csv.gz")
        if not allow_nonfinite and not np.isfinite(rows).all():
            r, c = np.argwhere(~np.isfinite(rows))[0]
            raise IngestError(f"{where}: line {first_line + r}, column {c + 1}: non-finite value "
                              f"{rows[r, c]} (pass --allow-nonfinite to keep it)")
        rows_writer.write(rows.astype(dtype, copy=False))
        done += rows.shape[0]
    if done != n or rows_writer is None:
        raise IngestError(f"{where}: {done} rows, but num-node-dict.csv.gz has {n} {ntype!r} nodes")
    rows_writer.close()


def _node_column(folder: HeteroFolder, path: Path, n: int, ntype: str) -> np.ndarray:
    where = folder.rel(path)
    values = read_csv_table(path, np.float64, display=where)
    if values.shape[0] != n or values.shape[1] != 1:
        raise IngestError(f"{where}: {values.shape[0]} rows of {values.shape[1]} value(s), expected "
                          f"{n} rows of 1 ({ntype!r} nodes)")
    return values


def write_node_years(writer: TypedStoreWriter, folder: HeteroFolder, ntype: str) -> str | None:
    """``node_year.csv.gz`` of ``ntype`` (OGB's place first) as its node times."""
    for path in (folder.raw / "node-feat" / ntype / "node_year.csv.gz",
                 folder.raw / "node_year" / ntype / "node_year.csv.gz"):
        if path.is_file():
            years = _node_column(folder, path, writer.num_nodes_dict[ntype], ntype)
            if not (np.isfinite(years).all() and (years == np.round(years)).all()):
                raise IngestError(f"{folder.rel(path)}: years must be integers")
            writer.write_node_array(ntype, "time", years[:, 0].astype(np.int64))
            return folder.rel(path)
    return None


def write_labels(writer: TypedStoreWriter, folder: HeteroFolder, ntype: str) -> bool:
    """``node-label.csv.gz`` of ``ntype`` (NaN: unlabelled, -1); False when there is none."""
    path = folder.raw / "node-label" / ntype / "node-label.csv.gz"
    if not path.is_file():
        return False
    where = folder.rel(path)
    labels = _labels_from_float(_node_column(folder, path, writer.num_nodes_dict[ntype], ntype))
    if labels.dtype.kind != "i" or (labels.size and labels.min() < -1):
        raise IngestError(f"{where}: labels must be integer classes >= 0 (NaN or -1: unlabelled)")
    writer.write_node_array(ntype, "label", labels)
    return True


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


def write_splits(writer: TypedStoreWriter, folder: HeteroFolder, split: str | None) -> list[str]:
    """``split/<name>/<type>/{train,valid,test}.csv.gz`` of every type that has them."""
    base = split_dir(folder, split)
    if base is None:
        return []
    typed = []
    for ntype in writer.num_nodes_dict:
        if not (base / ntype).is_dir():
            continue
        for name in SPLIT_NAMES:
            path = folder.need(base / ntype / f"{name}.csv.gz")
            ids = read_csv_table(path, np.int64, display=folder.rel(path))
            if ids.shape[1] != 1:
                raise IngestError(f"{folder.rel(path)}: expected 1 column, found {ids.shape[1]}")
            try:
                writer.write_split(ntype, name, ids[:, 0])
            except StoreError as exc:
                raise IngestError(f"{folder.rel(path)}: {exc}") from None
        typed.append(ntype)
    return typed


def ingest_ogb_hetero(folder: str | os.PathLike, dest: str | os.PathLike, *, name: str | None = None,
                      overwrite: bool = False, split: str | None = None,
                      target_type: str | None = None, memory_limit: int | None = None,
                      feature_dtype: str = "float32", allow_nonfinite: bool = False,
                      add_reverse_edges: bool = False, progress: ProgressFn | None = None) -> Path:
    """Write the OGB heterogeneous folder ``folder`` as a typed store at ``dest`` (module
    docstring); returns ``dest``. ``target_type`` defaults to the type with labels;
    ``add_reverse_edges`` adds ``(dst, rev_<rel>, src)`` for every relation."""
    ogb = HeteroFolder(folder)
    counts = read_num_nodes(ogb)
    etypes = read_relations(ogb, counts)
    if add_reverse_edges:
        check_reverse(etypes, ogb.rel(ogb.raw))
    if target_type is not None and target_type not in counts:
        raise IngestError(f"--target-type {target_type!r} is not a node type of "
                          f"{ogb.rel(ogb.raw / 'num-node-dict.csv.gz')} ({sorted(counts)})")
    report = progress or (lambda stage, done, total: None)
    with TypedStoreWriter(dest, counts, name=name or ogb.folder.name, overwrite=overwrite) as writer:
        for i, etype in enumerate(etypes):
            report("relations", i, len(etypes))
            write_relation(writer, ogb, etype, memory_limit=memory_limit, progress=None,
                           reverse=add_reverse_edges)
        report("relations", len(etypes), len(etypes))
        labelled, years = [], {}
        for ntype in counts:
            feat = ogb.raw / "node-feat" / ntype / "node-feat.csv.gz"
            if feat.is_file():
                report(f"{ntype} features", 0, 1)
                write_features(writer, ogb, ntype, feat, dtype=np.dtype(feature_dtype),
                               allow_nonfinite=allow_nonfinite)
            years[ntype] = write_node_years(writer, ogb, ntype)
            if write_labels(writer, ogb, ntype):
                labelled.append(ntype)
        with_splits = write_splits(writer, ogb, split)
        writer.target_type = target_type or _target(labelled, with_splits, ogb)
        writer.manifest["provenance"] = {
            "source_format": "ogb-hetero-raw", "source_path": str(ogb.folder),
            "ignored_files": "raw/relations/*/edge_reltype.csv.gz (the relation's index, one per edge)",
        }
        return writer.commit()


def _target(labelled: list[str], with_splits: list[str], ogb: HeteroFolder) -> str | None:
    """The only labelled type (else the only type with splits); None when there is none."""
    for candidates in (labelled, with_splits):
        if len(candidates) == 1:
            return candidates[0]
        if len(candidates) > 1:
            raise IngestError(f"{ogb.rel(ogb.raw)}: several labelled node types {candidates}; "
                              f"choose one with --target-type")
    return None
