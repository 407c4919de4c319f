"""Reader for OGB node-property datasets as OGB ships them (and as OGB processes them).

Accepted layouts of ``folder``:

- raw CSV: ``raw/edge.csv.gz`` (rows ``src,dst``), ``raw/num-node-list.csv.gz``,
  ``raw/num-edge-list.csv.gz``, optional ``raw/node-feat.csv.gz``,
  ``raw/edge-feat.csv.gz``, ``raw/node-label.csv.gz``;
- raw binary: ``raw/data.npz`` (``edge_index``, ``num_nodes_list``,
  ``num_edges_list``, ``node_feat``, ``edge_feat``) and ``raw/node-label.npz``;
- processed: ``processed/data_processed`` written by ``NodePropPredDataset``;
- splits: ``split/<name>/{train,valid,test}.csv.gz`` or ``split/<name>/split_dict.pt``;
- node timestamps (ogbn-arxiv's publication years): ``raw/node_year.csv.gz``, the
  ``node_year`` member of ``raw/data.npz`` or of the processed graph -> ``nodes/time``.

Everything large is streamed: the edge list as :class:`EdgeChunk` runs and the
features as :class:`RowBlock` runs, parsed by :mod:`graphpipe.ingest.csvparse`
while the next block is inflated in another thread (CSV), or read member by member
from ``raw/data.npz`` by :mod:`graphpipe.ingest.npz_stream` (binary: the layout
``ogb.io.DatasetSaver`` writes, e.g. ogbn-papers100M's ``papers100M-bin``; members
other than ``edge_index``, ``node_feat``, ``edge_feat``, ``node_year`` and the count
lists are listed in the provenance's ``ignored_keys``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csvparse import (
    ParseFailure,
    count_columns,
    count_lines,
    first_nonempty_line,
    line_of_row,
    parse_block_exact,
)
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.labels import UNLABELED, stream_labels
from graphpipe.ingest.npz_stream import (
    NpyMember,
    check_edge_index,
    iter_edge_blocks,
    iter_row_blocks,
    list_members,
    read_whole,
)
from graphpipe.ingest.safe_load import load_torch_file
from graphpipe.ingest.source import DatasetSource, RowBlock
from graphpipe.ingest.textio import DEFAULT_BLOCK_BYTES, iter_line_blocks

SPLIT_NAMES = ("train", "valid", "test")


_BOM = b"\xef\xbb\xbf"


def is_ogb_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an OGB dataset folder (``raw/``, ``processed/``, ``split/`` or
    ``edge.csv.gz`` in it).

    >>> import tempfile
    >>> is_ogb_folder(tempfile.gettempdir() + "/no-such-folder")
    False
    """
    path = Path(path)
    return path.is_dir() and any((path / rel).exists()
                                 for rel in ("raw", "processed", "edge.csv.gz", "split"))


def iter_csv_rows(path: Path, dtype: np.dtype | type, *, ncols: int | None = None,
                  display: str | None = None,
                  block_bytes: int = DEFAULT_BLOCK_BYTES) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(first_line, rows)`` for consecutive blocks of a headerless numeric CSV file.

    ``first_line`` is the 1-based line number of ``rows[0]``; every row must have
    ``ncols`` fields (default: as many as the first non-empty line). Lines end in
    ``\\n``, ``\\r\\n`` or ``\\r``; empty lines are skipped and a UTF-8 byte-order
    mark at the start of the file is ignored, as pyarrow and pandas read such files.
    """
    display = display or str(path)
    line = 1  # physical line number at the start of the block
    for index, block in enumerate(iter_line_blocks(path, block_bytes)):
        if index == 0:
            block = block.removeprefix(_BOM)
        if ncols is None:
            head = first_nonempty_line(block)
            try:
                ncols = count_columns(head) if head is not None else None
            except ValueError as exc:
                raise IngestError(f"{display}: line {line + line_of_row(block, 0)}: {exc}") from None
        if ncols is not None:
            try:
                rows = parse_block_exact(block, ncols, dtype)
            except ParseFailure as fail:
                raise IngestError(f"{display}: line {line + fail.line}: {fail.describe(ncols)}") from None
            if rows.shape[0]:
                yield line + line_of_row(block, 0), rows
        line += count_lines(block)


def read_csv_table(path: Path, dtype: np.dtype | type, *, display: str | None = None,
                   ncols: int | None = None, block_bytes: int = DEFAULT_BLOCK_BYTES) -> np.ndarray:
    """A whole (small) headerless numeric CSV file as a ``(rows, cols)`` array."""
    parts = [rows for _line, rows in iter_csv_rows(path, dtype, display=display, ncols=ncols,
                                                   block_bytes=block_bytes)]
    if not parts:
        return np.zeros((0, 1), dtype=dtype)
    return np.concatenate(parts, axis=0)


def _labels_from_float(values: np.ndarray) -> np.ndarray:
    """OGB reads labels with pandas: integral columns stay integers, others are floats.

    NaN marks an unlabelled node (ogbn-papers100M): when every other value is an integer
    the labels are classes, and NaN becomes -1 (:data:`graphpipe.ingest.labels.UNLABELED`).
    """
    known = values[~np.isnan(values)]
    if known.size and np.isfinite(known).all() and (known == np.round(known)).all() \
            and np.abs(known).max() <= 2.0 ** 53:
        values = np.where(np.isnan(values), UNLABELED, values).astype(np.int64)
    return values[:, 0] if values.ndim == 2 and values.shape[1] == 1 else values


class OgbRawFolder:
    """Paths and small metadata of an OGB node-property folder."""

    def __init__(self, folder: str | os.PathLike, *, from_raw: bool = False):
        self.folder = Path(folder)
        self.from_raw = from_raw
        if not self.folder.exists():
            raise IngestError(f"{self.folder}: no such folder")
        if not self.folder.is_dir():
            raise IngestError(f"{self.folder}: not a folder (expected an OGB dataset folder with raw/)")
        self.raw = self.folder / "raw"
        if not self.raw.is_dir() and (self.folder / "edge.csv.gz").is_file():
            self.raw = self.folder  # the raw folder itself was given
        self.processed = self.folder / "processed" / "data_processed"

    def rel(self, path: Path) -> str:
        try:
            return str(path.relative_to(self.folder.parent if self.raw == self.folder else self.folder))
        except ValueError:
            return str(path)

    @property
    def kind(self) -> str:
        if (self.raw / "edge.csv.gz").is_file():
            return "ogb-raw"
        if (self.raw / "data.npz").is_file():
            return "ogb-raw-npz"
        if self.processed.is_file() and not self.from_raw:
            return "ogb-processed"
        if self.from_raw:
            raise IngestError(f"{self.folder}: --from-raw: found neither raw/edge.csv.gz nor raw/data.npz")
        raise IngestError(
            f"{self.folder}: not an OGB node-property folder: found none of raw/edge.csv.gz, "
            f"raw/data.npz, processed/data_processed"
        )

    def split_dir(self, split: str | None) -> Path | None:
        base = self.folder / "split"
        if not base.is_dir():
            return None
        names = sorted(p.name for p in base.iterdir() if p.is_dir())
        if split is None:
            if not names:
                return None
            if len(names) > 1:
                raise IngestError(f"{base}: several splits {names}; choose one with --split NAME")
            split = names[0]
        if split not in names:
            raise IngestError(f"{base}: no split {split!r} (found {names})")
        return base / split


def _read_count_list(folder: OgbRawFolder, name: str) -> int:
    path = folder.raw / name
    if not path.is_file():
        raise IngestError(f"{folder.rel(path)}: file not found")
    values = read_csv_table(path, np.int64, display=folder.rel(path))
    if values.shape[0] != 1:
        raise IngestError(
            f"{folder.rel(path)}: {values.shape[0]} graphs listed; only single-graph "
            f"node-property datasets are supported"
        )
    count = int(values[0, 0])
    if count < 0:
        raise IngestError(f"{folder.rel(path)}: line 1: negative count {count}")
    return count


def _read_split_dict(folder: OgbRawFolder, dict_path: Path, csv_present: bool) -> tuple[dict, dict]:
    """``split_dict.pt`` (a dict of index arrays), read without unpickling code."""
    display = folder.rel(dict_path)
    way_out = ("--from-raw reads the train/valid/test.csv.gz beside it instead" if csv_present
               else "delete it and provide split/<name>/{train,valid,test}.csv.gz instead")
    loaded = load_torch_file(dict_path, display, way_out=way_out)
    if not isinstance(loaded, dict):
        raise IngestError(f"{display}: expected a dict of index arrays, found {type(loaded).__name__}")
    splits = {}
    for key, value in loaded.items():
        value = np.asarray(value)
        if value.dtype.kind not in "iu" and not (value.dtype.kind == "f" and np.all(value == np.round(value))):
            raise IngestError(f"{display}: split {key!r}: dtype {value.dtype}, expected integer node IDs")
        splits[str(key)] = value.astype(np.int64).ravel()
    return splits, {k: display for k in splits}


def _read_splits(folder: OgbRawFolder, split: str | None, num_nodes: int) -> tuple[dict, dict]:
    split_dir = folder.split_dir(split)
    if split_dir is None:
        return {}, {}
    dict_path = split_dir / "split_dict.pt"
    csv_present = all((split_dir / f"{n}.csv.gz").is_file() for n in SPLIT_NAMES)
    if dict_path.is_file() and not (folder.from_raw and csv_present):
        return _read_split_dict(folder, dict_path, csv_present)
    splits, sources = {}, {}
    for name in SPLIT_NAMES:
        path = split_dir / f"{name}.csv.gz"
        if not path.is_file():
            raise IngestError(f"{folder.rel(path)}: file not found")
        ids = read_csv_table(path, np.int64, display=folder.rel(path))
        if ids.shape[1] != 1:
            raise IngestError(f"{folder.rel(path)}: expected 1 column, found {ids.shape[1]}")
        splits[name], sources[name] = ids[:, 0], folder.rel(path)
    return splits, sources


def read_ogb(folder: str | os.PathLike, *, split: str | None = None, name: str | None = None,
             from_raw: bool = False) -> DatasetSource:
    """Open an OGB node-property dataset folder as a :class:`DatasetSource`.

    ``from_raw``: read only ``raw/`` (never ``processed/``) and prefer the split CSV
    files to ``split_dict.pt``.
    """
    ogb = OgbRawFolder(folder, from_raw=from_raw)
    kind = ogb.kind
    name = name or ogb.folder.name
    if kind == "ogb-raw":
        return _read_raw_csv(ogb, kind, split, name)
    if kind == "ogb-raw-npz":
        return _read_raw_npz(ogb, kind, split, name)
    return _read_processed(ogb, kind, split, name)


def _read_raw_csv(ogb: OgbRawFolder, kind: str, split: str | None, name: str) -> DatasetSource:
    num_nodes = _read_count_list(ogb, "num-node-list.csv.gz")
    num_edges = _read_count_list(ogb, "num-edge-list.csv.gz")
    edge_path = ogb.raw / "edge.csv.gz"
    edge_display = ogb.rel(edge_path)

    def edge_chunks() -> Iterator[EdgeChunk]:
        row = 0
        for first_line, rows in iter_csv_rows(edge_path, np.int64, ncols=2, display=edge_display):
            yield EdgeChunk(np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1]),
                            row, edge_display, first_line)
            row += rows.shape[0]

    def matrix_blocks(path: Path, dtype) -> callable:
        display = ogb.rel(path)

        def blocks() -> Iterator[RowBlock]:
            row = 0
            for first_line, rows in iter_csv_rows(path, dtype, display=display):
                yield RowBlock(row, rows, display, first_line)
                row += rows.shape[0]

        return blocks

    feat_path, efeat_path = ogb.raw / "node-feat.csv.gz", ogb.raw / "edge-feat.csv.gz"
    node_features = matrix_blocks(feat_path, np.float32) if feat_path.is_file() else None
    edge_features = matrix_blocks(efeat_path, np.float32) if efeat_path.is_file() else None
    feature_dim = _first_line_columns(feat_path) if node_features else None
    edge_feature_dim = _first_line_columns(efeat_path) if edge_features else None

    labels = None
    label_path = ogb.raw / "node-label.csv.gz"
    if label_path.is_file():
        labels = _labels_from_float(read_csv_table(label_path, np.float64, display=ogb.rel(label_path)))
        _check_label_rows(labels, num_nodes, ogb.rel(label_path))
    splits, split_sources = _read_splits(ogb, split, num_nodes)
    year_path = ogb.raw / "node_year.csv.gz"
    node_time = None
    if year_path.is_file():
        node_time = read_csv_table(year_path, np.int64, display=ogb.rel(year_path), ncols=1)[:, 0]
    return DatasetSource(
        name=name, source_format=kind, source_path=str(ogb.folder), num_nodes=num_nodes,
        num_input_edges=num_edges, edge_chunks=edge_chunks, node_time=node_time,
        node_features=node_features, feature_dim=feature_dim,
        edge_features=edge_features, edge_feature_dim=edge_feature_dim,
        labels=labels, task_type=_task_type(labels), num_classes=_num_classes(labels),
        splits=splits, split_sources=split_sources,
        extra={"edge_file": edge_display, "num_nodes_file": ogb.rel(ogb.raw / "num-node-list.csv.gz"),
               "num_edges_file": ogb.rel(ogb.raw / "num-edge-list.csv.gz"),
               **({"label_file": ogb.rel(label_path)} if labels is not None else {}),
               **({"node_time_file": ogb.rel(year_path)} if node_time is not None else {})},
    )


def _first_line_columns(path: Path) -> int:
    for index, block in enumerate(iter_line_blocks(path, block_bytes=1 << 16)):
        head = first_nonempty_line(block.removeprefix(_BOM) if index == 0 else block)
        if head is not None:
            try:
                return count_columns(head)
            except ValueError as exc:
                raise IngestError(f"{path}: {exc}") from None
    raise IngestError(f"{path}: empty file")


def _check_label_rows(labels: np.ndarray, num_nodes: int, display: str) -> None:
    if labels.shape[0] != num_nodes:
        raise IngestError(f"{display}: {labels.shape[0]} label rows, but the graph has {num_nodes} nodes")


def _task_type(labels: np.ndarray | None) -> str | None:
    if labels is None:
        return None
    if labels.dtype.kind in "iu":
        return "multiclass classification" if labels.ndim == 1 else "binary classification"
    return "regression"


def _num_classes(labels: np.ndarray | None) -> int | None:
    if labels is None or labels.dtype.kind not in "iu" or labels.size == 0:
        return None
    return int(labels.max()) + 1 if labels.ndim == 1 else 2


def _arrays_source(ogb: OgbRawFolder, kind: str, split: str | None, name: str,
                   edge_index: np.ndarray, num_nodes: int, node_feat, edge_feat, labels,
                   edge_display: str) -> DatasetSource:
    edge_index = np.asarray(edge_index)
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise IngestError(f"{edge_display}: edge_index must have shape (2, E), got {edge_index.shape}")
    step = 1 << 22

    def edge_chunks() -> Iterator[EdgeChunk]:
        for start in range(0, edge_index.shape[1], step):
            part = edge_index[:, start:start + step].astype(np.int64, copy=False)
            yield EdgeChunk(np.ascontiguousarray(part[0]), np.ascontiguousarray(part[1]),
                            start, edge_display, start + 1)

    def blocks_of(matrix: np.ndarray, display: str):
        matrix = matrix.reshape(matrix.shape[0], -1)

        def blocks() -> Iterator[RowBlock]:
            rows = max(1, (64 << 20) // max(1, matrix.shape[1] * matrix.itemsize))
            for start in range(0, matrix.shape[0], rows):
                yield RowBlock(start, matrix[start:start + rows], display, start + 1)

        return blocks

    if labels is not None:
        labels = np.asarray(labels)
        labels = _labels_from_float(labels.reshape(labels.shape[0], -1).astype(np.float64)) \
            if labels.dtype.kind == "f" else (labels[:, 0] if labels.ndim == 2 and labels.shape[1] == 1 else labels)
        _check_label_rows(labels, num_nodes, f"{edge_display} labels")
    splits, split_sources = _read_splits(ogb, split, num_nodes)
    return DatasetSource(
        name=name, source_format=kind, source_path=str(ogb.folder), num_nodes=num_nodes,
        num_input_edges=int(edge_index.shape[1]), edge_chunks=edge_chunks,
        node_features=blocks_of(node_feat, f"{edge_display}[node_feat]") if node_feat is not None else None,
        feature_dim=int(np.prod(node_feat.shape[1:])) if node_feat is not None else None,
        edge_features=blocks_of(edge_feat, f"{edge_display}[edge_feat]") if edge_feat is not None else None,
        edge_feature_dim=int(np.prod(edge_feat.shape[1:])) if edge_feat is not None else None,
        labels=labels, task_type=_task_type(labels), num_classes=_num_classes(labels),
        splits=splits, split_sources=split_sources,
    )


def _read_raw_npz(ogb: OgbRawFolder, kind: str, split: str | None, name: str) -> DatasetSource:
    """``raw/data.npz`` (+ ``raw/node-label.npz``), as ``ogb.io.DatasetSaver`` writes them,
    streamed member by member (:mod:`graphpipe.ingest.npz_stream`): nothing is read whole
    but the two count lists, the labels (``N`` values) and the splits."""
    path = ogb.raw / "data.npz"
    display = ogb.rel(path)
    members = list_members(path, display)
    for key in ("edge_index", "num_nodes_list", "num_edges_list"):
        if key not in members:
            raise IngestError(f"{display}: missing key {key!r} (found {sorted(members)})")
    num_nodes = _single_count(members["num_nodes_list"], display)
    num_edges = _single_count(members["num_edges_list"], display)
    edges = members["edge_index"]
    if check_edge_index(edges) != num_edges:
        raise IngestError(f"{edges.where}: {edges.shape[1]} edges, but {display}['num_edges_list'] "
                          f"says {num_edges}")

    def edge_chunks() -> Iterator[EdgeChunk]:
        for first, src, dst in iter_edge_blocks(edges):
            yield EdgeChunk(src, dst, first, edges.where, first + 1)

    node_feat, edge_feat = members.get("node_feat"), members.get("edge_feat")
    for member, rows, what in ((node_feat, num_nodes, "nodes"), (edge_feat, num_edges, "edges")):
        if member is not None and member.num_rows != rows:
            raise IngestError(f"{member.where}: {member.num_rows} rows, but there are {rows} {what}")
    labels, label_path = None, ogb.raw / "node-label.npz"
    if label_path.is_file():
        label_members = list_members(label_path, ogb.rel(label_path))
        if "node_label" not in label_members:
            raise IngestError(f"{ogb.rel(label_path)}: missing key 'node_label' "
                              f"(found {sorted(label_members)})")
        labels = stream_labels(label_members["node_label"], num_nodes)
    splits, split_sources = _read_splits(ogb, split, num_nodes)
    year = members.get("node_year")
    node_time = read_whole(year, max_bytes=max(1 << 10, 16 * num_nodes)) if year is not None else None
    ignored = sorted(set(members) - {"edge_index", "num_nodes_list", "num_edges_list", "node_feat",
                                     "edge_feat", "node_year"})
    return DatasetSource(
        name=name, source_format=kind, source_path=str(ogb.folder), num_nodes=num_nodes,
        num_input_edges=num_edges, edge_chunks=edge_chunks, node_time=node_time,
        node_features=_member_blocks(node_feat) if node_feat is not None else None,
        feature_dim=node_feat.row_elements if node_feat is not None else None,
        edge_features=_member_blocks(edge_feat) if edge_feat is not None else None,
        edge_feature_dim=edge_feat.row_elements if edge_feat is not None else None,
        labels=labels, task_type=_task_type(labels), num_classes=_num_classes(labels),
        splits=splits, split_sources=split_sources, num_nodes_backed=node_feat is not None,
        extra={"edge_file": edges.where, "num_nodes_file": f"{display}['num_nodes_list']",
               "num_edges_file": f"{display}['num_edges_list']",
               **({"label_file": ogb.rel(label_path)} if labels is not None else {}),
               **({"node_time_file": year.where} if year is not None else {}),
               **({"ignored_keys": ",".join(ignored)} if ignored else {})},
    )


def _single_count(member: NpyMember, display: str) -> int:
    """The one count of a single-graph ``num_nodes_list`` / ``num_edges_list``."""
    if member.dtype.kind not in "iu" or len(member.shape) != 1:
        raise IngestError(f"{member.where}: expected a 1-D integer array, got shape {member.shape} "
                          f"dtype {member.dtype}")
    if member.shape[0] != 1:
        raise IngestError(f"{member.where}: lists {member.shape[0]} graphs; only single-graph "
                          f"node-property datasets are supported")
    count = int(read_whole(member, max_bytes=1 << 10)[0])
    if count < 0:
        raise IngestError(f"{member.where}: negative count {count}")
    return count


def _member_blocks(member: NpyMember):
    """``RowBlock`` runs of a row-streamable member (checked now, streamed on each call)."""
    if member.fortran_order and member.row_elements > 1 and len(member.shape) > 1:
        raise IngestError(f"{member.where}: Fortran-ordered array of shape {member.shape} cannot be "
                          f"read in row blocks (save it in C order)")
    if len(member.shape) == 0:
        raise IngestError(f"{member.where}: a scalar, expected one row per node or edge")

    def blocks() -> Iterator[RowBlock]:
        for first, rows in iter_row_blocks(member):
            yield RowBlock(first, rows, member.where, first + 1)

    return blocks


def _read_processed(ogb: OgbRawFolder, kind: str, split: str | None, name: str) -> DatasetSource:
    display = ogb.rel(ogb.processed)
    loaded = load_torch_file(
        ogb.processed, display,
        way_out="ingest OGB's raw/ files instead (put raw/ in the folder; --from-raw ignores processed/)")
    try:
        graph, labels = loaded["graph"], loaded["labels"]
        edge_index, num_nodes = graph["edge_index"], int(graph["num_nodes"])
    except (KeyError, TypeError, ValueError) as exc:
        raise IngestError(f"{display}: not OGB processed data (missing or bad {exc})") from None
    source = _arrays_source(ogb, kind, split, name, edge_index, num_nodes,
                            graph.get("node_feat"), graph.get("edge_feat"), labels, display)
    if graph.get("node_year") is not None:
        source.node_time = np.asarray(graph["node_year"]).reshape(-1)
        source.extra["node_time_file"] = f"{display}[node_year]"
    return source
