"""DGL's chunked graph format (the input of its distributed partitioning pipeline) →
:class:`DatasetSource`, homogeneous graphs (one node type, one edge type).

A folder with ``metadata.json``::

    {"graph_name": "g", "node_type": ["_N"], "num_nodes_per_chunk": [[500, 500]],
     "edge_type": ["_N:_E:_N"], "num_edges_per_chunk": [[2000, 2000]],
     "edges": {"_N:_E:_N": {"format": {"name": "csv", "delimiter": " "},
                            "data": ["edges/part0.txt", "edges/part1.txt"]}},
     "node_data": {"_N": {"feat": {"format": {"name": "numpy"}, "data": ["feat0.npy", "feat1.npy"]},
                          "label": {"format": {"name": "numpy"}, "data": [...]},
                          "train_mask": ..., "val_mask": ..., "test_mask": ...}},
     "edge_data": {"_N:_E:_N": {"feat": {"format": {"name": "numpy"}, "data": [...]}}}}

Edge chunks are ``src dst`` text rows (``csv`` with its ``delimiter``, default a space)
or ``numpy`` ``(E_chunk, 2)`` integer arrays; node and edge data are ``numpy`` chunks with
the rows ``num_*_per_chunk`` declares. Node data ``feat`` are the features, ``label`` the
labels, ``train_mask``/``val_mask``/``test_mask`` (or ``valid_mask``) the splits; edge data
``feat`` the edge features. Paths must stay inside the folder (DGL also allows absolute
paths; graphpipe refuses any path leading out), ``.npy`` are read with
``allow_pickle=False``; every refusal is one :class:`IngestError` line naming
``metadata.json`` and the field, or the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.graphbolt import MAX_METADATA_BYTES, MAX_NODES
from graphpipe.ingest.source import DatasetSource, RowBlock

__all__ = ["is_dgl_chunked_folder", "read_dgl_chunked"]

_MASKS = {"train": ("train_mask",), "valid": ("val_mask", "valid_mask"), "test": ("test_mask",)}


def is_dgl_chunked_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding a DGL chunked-graph ``metadata.json``."""
    return Path(path).is_dir() and (Path(path) / "metadata.json").is_file()


class _Chunked:
    def __init__(self, folder: Path):
        self.folder = folder.resolve()
        self.file = folder / "metadata.json"
        if self.file.stat().st_size > MAX_METADATA_BYTES:
            raise IngestError(f"{self.file}: larger than {MAX_METADATA_BYTES} bytes; refused")
        try:
            self.doc = json.loads(self.file.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise IngestError(f"{self.file}: not valid JSON ({' '.join(str(exc).split())[:160]})") from None
        if not isinstance(self.doc, dict):
            raise IngestError(f"{self.file}: expected an object at the top level")

    def fail(self, field: str, message: str) -> IngestError:
        return IngestError(f"{self.file}: {field}: {message}")

    def only_type(self, key: str) -> str:
        names = self.doc.get(key)
        if not isinstance(names, list) or len(names) != 1 or not isinstance(names[0], str):
            raise self.fail(key, f"expected one type (graphpipe reads homogeneous graphs; got {names!r:.80})")
        return names[0]

    def counts(self, key: str, limit: int) -> list[int]:
        value = self.doc.get(key)
        if (not isinstance(value, list) or len(value) != 1 or not isinstance(value[0], list)
                or not value[0]):
            raise self.fail(key, "expected one list of per-chunk counts")
        for count in value[0]:
            if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= limit:
                raise self.fail(key, f"expected counts in [0, {limit}] (got {count!r:.40})")
        if sum(value[0]) > limit:
            raise self.fail(key, f"total {sum(value[0])} above {limit}")
        return list(value[0])

    def spec(self, value: Any, field: str, chunks: int) -> tuple[str, dict, list[Path]]:
        """``(format name, format, files)`` of a ``{"format": ..., "data": [...]}`` entry."""
        if not isinstance(value, dict):
            raise self.fail(field, "expected an object with format and data")
        fmt = value.get("format")
        if not isinstance(fmt, dict) or not isinstance(fmt.get("name"), str):
            raise self.fail(f"{field}.format", "expected {\"name\": ...}")
        data = value.get("data")
        if not isinstance(data, list) or len(data) != chunks:
            raise self.fail(f"{field}.data", f"expected {chunks} chunk files (one per chunk)")
        return fmt["name"], fmt, [self.path(rel, f"{field}.data[{i}]") for i, rel in enumerate(data)]

    def path(self, rel: Any, field: str) -> Path:
        if not isinstance(rel, str) or not rel:
            raise self.fail(field, "expected a file path")
        full = (self.folder / rel).resolve()
        if self.folder not in full.parents:
            raise self.fail(field, f"{rel!r} leads outside the dataset folder")
        if not full.is_file():
            raise self.fail(field, f"{rel!r}: no such file")
        return full


def _npy(path: Path, rows: int) -> np.ndarray:
    try:
        values = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise IngestError(f"{path}: not a readable .npy array ({' '.join(str(exc).split())[:120]})") from None
    if values.dtype.kind not in "biuf" or values.ndim not in (1, 2) or values.shape[0] != rows:
        raise IngestError(f"{path}: expected {rows} numeric rows (got {values.dtype} {values.shape})")
    return values


def _edge_chunk(path: Path, name: str, fmt: dict, rows: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "numpy":
        values = _npy(path, rows)
        if values.ndim != 2 or values.shape[1] != 2 or values.dtype.kind not in "iu":
            raise IngestError(f"{path}: expected an integer ({rows}, 2) array of src, dst "
                              f"(got {values.dtype} {values.shape})")
        return np.asarray(values[:, 0], dtype=np.int64), np.asarray(values[:, 1], dtype=np.int64)
    if name != "csv":
        raise IngestError(f"{path}: edge format {name!r}; graphpipe reads csv or numpy edge chunks")
    import pyarrow as pa
    from pyarrow import csv

    delimiter = fmt.get("delimiter", " ")
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise IngestError(f"{path}: csv delimiter must be one character (got {delimiter!r:.20})")
    try:
        table = csv.read_csv(path, read_options=csv.ReadOptions(column_names=["src", "dst"]),
                             parse_options=csv.ParseOptions(delimiter=delimiter),
                             convert_options=csv.ConvertOptions(
                                 column_types={"src": pa.int64(), "dst": pa.int64()}))
    except pa.ArrowInvalid as exc:
        raise IngestError(f"{path}: not two integer columns ({' '.join(str(exc).split())[:160]})") from None
    if table.num_rows != rows:
        raise IngestError(f"{path}: {table.num_rows} edges, but num_edges_per_chunk says {rows}")
    return table.column("src").to_numpy(), table.column("dst").to_numpy()


def _data(meta: _Chunked, key: str, type_name: str, counts: list[int]) -> dict[str, np.ndarray]:
    """``{name: array}`` of ``node_data``/``edge_data`` of the one type (chunks concatenated)."""
    section = meta.doc.get(key) or {}
    if not isinstance(section, dict) or not isinstance(section.get(type_name, {}), dict):
        raise meta.fail(key, f"expected an object keyed by type {type_name!r}")
    out = {}
    for name, value in section.get(type_name, {}).items():
        field = f"{key}.{type_name}.{name}"
        fmt_name, _fmt, files = meta.spec(value, field, len(counts))
        if fmt_name != "numpy":
            raise meta.fail(f"{field}.format", f"{fmt_name!r}; graphpipe reads numpy chunks")
        parts = [_npy(path, rows) for path, rows in zip(files, counts)]
        if len({p.shape[1:] for p in parts}) != 1:
            raise meta.fail(field, "chunks of different widths")
        out[name] = np.concatenate(parts) if len(parts) > 1 else np.asarray(parts[0])
    return out


def _splits(meta: _Chunked, node_data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    splits = {}
    for split, keys in _MASKS.items():
        for key in keys:
            if key in node_data:
                mask = node_data[key]
                if mask.ndim != 1 or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
                    raise meta.fail(f"node_data.{key}", "expected a 0/1 mask per node")
                splits[split] = np.flatnonzero(mask).astype(np.int64)
    return splits


def read_dgl_chunked(path: str | os.PathLike, name: str | None = None) -> DatasetSource:
    """Read DGL's chunked graph folder ``path`` (see the module docstring).

    >>> import json, tempfile, numpy as np
    >>> from pathlib import Path
    >>> tmp = tempfile.TemporaryDirectory(); folder = Path(tmp.name)
    >>> _ = (folder / "e0.txt").write_text("1 0\\n2 0\\n"); _ = (folder / "e1.txt").write_text("0 1\\n")
    >>> _ = (folder / "metadata.json").write_text(json.dumps({
    ...     "graph_name": "g", "node_type": ["_N"], "num_nodes_per_chunk": [[2, 1]],
    ...     "edge_type": ["_N:_E:_N"], "num_edges_per_chunk": [[2, 1]],
    ...     "edges": {"_N:_E:_N": {"format": {"name": "csv", "delimiter": " "},
    ...                            "data": ["e0.txt", "e1.txt"]}}}))
    >>> source = read_dgl_chunked(folder)
    >>> source.name, source.num_nodes, [(c.src.tolist(), c.dst.tolist()) for c in source.edge_chunks()]
    ('g', 3, [([1, 2], [0, 0]), ([0], [1])])
    >>> tmp.cleanup()
    """
    folder = Path(path)
    if not is_dgl_chunked_folder(folder):
        raise IngestError(f"{folder}: no metadata.json (not a DGL chunked graph)")
    meta = _Chunked(folder)
    node_type, edge_type = meta.only_type("node_type"), meta.only_type("edge_type")
    node_counts = meta.counts("num_nodes_per_chunk", MAX_NODES)
    edge_counts = meta.counts("num_edges_per_chunk", MAX_NODES * 64)
    num_nodes, num_edges = sum(node_counts), sum(edge_counts)
    edges = meta.doc.get("edges")
    if not isinstance(edges, dict) or set(edges) != {edge_type}:
        raise meta.fail("edges", f"expected one entry, for edge type {edge_type!r}")
    fmt_name, fmt, edge_files = meta.spec(edges[edge_type], f"edges.{edge_type}", len(edge_counts))
    node_data = _data(meta, "node_data", node_type, node_counts)
    edge_data = _data(meta, "edge_data", edge_type, edge_counts)

    def edge_chunks() -> Iterator[EdgeChunk]:
        first = 0
        for file, rows in zip(edge_files, edge_counts):
            src, dst = _edge_chunk(file, fmt_name, fmt, rows)
            for which, ids in (("src", src), ("dst", dst)):
                bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
                if bad.size:
                    raise IngestError(f"{file}: line {int(bad[0]) + 1}: {which} {int(ids[bad[0]])} is "
                                      f"not a node ID in [0, {num_nodes})")
            yield EdgeChunk(src, dst, first, str(file), 1)
            first += rows

    graph_name = meta.doc.get("graph_name")
    source = DatasetSource(name=name or (graph_name if isinstance(graph_name, str) else folder.name),
                           source_format="dgl-chunked", source_path=str(folder), num_nodes=num_nodes,
                           edge_chunks=edge_chunks, num_input_edges=num_edges,
                           splits=_splits(meta, node_data))
    source.split_sources = {s: f"{meta.file}: node_data" for s in source.splits}
    if "feat" in node_data:
        feat = node_data["feat"].reshape(num_nodes, -1)
        source.node_features = lambda: iter([RowBlock(0, feat, f"{meta.file}: node_data feat", 1)])
        source.feature_dim = int(feat.shape[1])
    if "feat" in edge_data:
        efeat = edge_data["feat"].reshape(num_edges, -1)
        source.edge_features = lambda: iter([RowBlock(0, efeat, f"{meta.file}: edge_data feat", 1)])
        source.edge_feature_dim = int(efeat.shape[1])
    if "label" in node_data:
        source.labels = node_data["label"]
        source.task_type = ("multiclass classification" if source.labels.dtype.kind in "biu"
                            else "regression")
        source.extra["label_file"] = f"{meta.file}: node_data label"
    source.num_nodes_backed = bool(node_data)
    source.extra["edge_file"] = ";".join(str(f) for f in edge_files)
    return source
