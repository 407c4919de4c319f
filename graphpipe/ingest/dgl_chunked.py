"""DGL's chunked graph format (the input of its distributed partitioning pipeline) → a source:
a :class:`DatasetSource` for one node type and one edge type, else a :class:`TypedSource`.

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
``feat`` the edge features. A typed graph lists its node types and ``"src:rel:dst"`` edge
types, one list of chunk counts per type (in that order), edges with per-type local IDs
and data keyed by type, as DGL's ``chunk_graph`` writes them. Paths must stay inside the folder (DGL also allows absolute
paths; graphpipe refuses any path leading out), ``.npy`` are read with
``allow_pickle=False``; every refusal is one :class:`IngestError` line naming
``metadata.json`` and the field, or the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.graphbolt import MAX_NODES, read_metadata
from graphpipe.ingest.labels import class_labels
from graphpipe.ingest.source import DatasetSource, RowBlock, TypedNodes, TypedRelation, TypedSource
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError

__all__ = ["is_dgl_chunked_folder", "read_dgl_chunked"]

_MASKS = {"train": ("train_mask",), "valid": ("val_mask", "valid_mask"), "test": ("test_mask",)}


def is_dgl_chunked_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding a DGL chunked-graph ``metadata.json``."""
    return Path(path).is_dir() and (Path(path) / "metadata.json").is_file()


class _Chunked:
    def __init__(self, folder: Path):
        self.folder = folder.resolve()
        self.file = folder / "metadata.json"
        self.doc = read_metadata(self.file, json.loads, (ValueError,), "JSON", "an object")

    def fail(self, field: str, message: str) -> IngestError:
        return IngestError(f"{self.file}: {field}: {message}")

    def types(self, key: str) -> list[str]:
        names = self.doc.get(key)
        if (not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names)
                or len(set(names)) != len(names)):
            raise self.fail(key, f"expected a list of distinct type names (got {names!r:.80})")
        return names

    def counts(self, key: str, types: int, limit: int) -> list[list[int]]:
        """One list of per-chunk counts per type."""
        value = self.doc.get(key)
        if (not isinstance(value, list) or len(value) != types
                or not all(isinstance(v, list) and v for v in value)):
            raise self.fail(key, f"expected {types} list(s) of per-chunk counts, one per type")
        for counts in value:
            for count in counts:
                if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= limit:
                    raise self.fail(key, f"expected counts in [0, {limit}] (got {count!r:.40})")
            if sum(counts) > limit:
                raise self.fail(key, f"total {sum(counts)} above {limit}")
        return [list(counts) for counts in value]

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


def _splits(meta: _Chunked, node_data: dict[str, np.ndarray], field: str = "node_data"
            ) -> dict[str, np.ndarray]:
    splits = {}
    for split, keys in _MASKS.items():
        for key in keys:
            if key in node_data:
                mask = node_data[key]
                if mask.ndim != 1 or mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
                    raise meta.fail(f"{field}.{key}", "expected a 0/1 mask per node")
                splits[split] = np.flatnonzero(mask).astype(np.int64)
    return splits


def _chunks(files: list[Path], fmt_name: str, fmt: dict, counts: list[int]) -> Iterator[EdgeChunk]:
    """The edge chunk files as :class:`EdgeChunk` runs (rows checked against their counts)."""
    first = 0
    for file, rows in zip(files, counts):
        src, dst = _edge_chunk(file, fmt_name, fmt, rows)
        yield EdgeChunk(src, dst, first, str(file), 1)
        first += rows


def _in_range(chunks: Iterator[EdgeChunk], num_nodes: int) -> Iterator[EdgeChunk]:
    for chunk in chunks:
        for which, ids in (("src", chunk.src), ("dst", chunk.dst)):
            bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
            if bad.size:
                raise IngestError(f"{chunk.source}: line {int(bad[0]) + 1}: {which} {int(ids[bad[0]])} is "
                                  f"not a node ID in [0, {num_nodes})")
        yield chunk


def read_dgl_chunked(path: str | os.PathLike, name: str | None = None,
                     target_type: str | None = None) -> DatasetSource | TypedSource:
    """Read DGL's chunked graph folder ``path`` (see the module docstring); a typed one
    (several node or edge types) becomes a :class:`TypedSource` with ``target_type``
    (default: the only labelled type).

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
    >>> _ = (folder / "metadata.json").write_text(json.dumps({
    ...     "graph_name": "t", "node_type": ["a", "b"], "num_nodes_per_chunk": [[2, 1], [1, 1]],
    ...     "edge_type": ["a:to:b"], "num_edges_per_chunk": [[2, 1]],
    ...     "edges": {"a:to:b": {"format": {"name": "csv"}, "data": ["e0.txt", "e1.txt"]}}}))
    >>> typed = read_dgl_chunked(folder)
    >>> {t: n.count for t, n in typed.node_types.items()}, typed.relations[0].etype
    ({'a': 3, 'b': 2}, ('a', 'to', 'b'))
    >>> tmp.cleanup()
    """
    folder = Path(path)
    if not is_dgl_chunked_folder(folder):
        raise IngestError(f"{folder}: no metadata.json (not a DGL chunked graph)")
    meta = _Chunked(folder)
    ntypes, etypes = meta.types("node_type"), meta.types("edge_type")
    node_counts = meta.counts("num_nodes_per_chunk", len(ntypes), MAX_NODES)
    edge_counts = meta.counts("num_edges_per_chunk", len(etypes), MAX_NODES * 64)
    edges = meta.doc.get("edges")
    if not isinstance(edges, dict) or set(edges) != set(etypes):
        raise meta.fail("edges", f"expected one entry per edge type {etypes}")
    graph_name = meta.doc.get("graph_name")
    name = name or (graph_name if isinstance(graph_name, str) else folder.name)
    if len(ntypes) > 1 or len(etypes) > 1:
        return _read_typed(meta, name, dict(zip(ntypes, node_counts)), dict(zip(etypes, edge_counts)),
                           target_type)
    if target_type is not None:
        raise IngestError(f"--target-type applies to typed datasets; {meta.file} has one node type")
    return _read_homogeneous(meta, name, ntypes[0], etypes[0], node_counts[0], edge_counts[0])


def _read_homogeneous(meta: _Chunked, name: str, node_type: str, edge_type: str,
                      node_counts: list[int], edge_counts: list[int]) -> DatasetSource:
    num_nodes, num_edges = sum(node_counts), sum(edge_counts)
    fmt_name, fmt, edge_files = meta.spec(meta.doc["edges"][edge_type], f"edges.{edge_type}", len(edge_counts))
    node_data = _data(meta, "node_data", node_type, node_counts)
    edge_data = _data(meta, "edge_data", edge_type, edge_counts)
    source = DatasetSource(name=name, source_format="dgl-chunked", source_path=str(meta.file.parent),
                           num_nodes=num_nodes, num_input_edges=num_edges,
                           edge_chunks=lambda: _in_range(_chunks(edge_files, fmt_name, fmt, edge_counts),
                                                         num_nodes),
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


def _relation(meta: _Chunked, key: str, counts: list[int], num_nodes: dict[str, int]) -> TypedRelation:
    """Edge type ``key`` (``"src:rel:dst"``): its chunks and edge features."""
    parts = key.split(":")
    if len(parts) != 3 or parts[0] not in num_nodes or parts[2] not in num_nodes:
        raise meta.fail("edge_type", f"{key!r} is not \"src:rel:dst\" of node types {sorted(num_nodes)}")
    try:
        etype = ts.as_etype(tuple(parts))
    except StoreError as exc:
        raise meta.fail("edge_type", str(exc)) from None
    fmt_name, fmt, files = meta.spec(meta.doc["edges"][key], f"edges.{key}", len(counts))
    rel = TypedRelation(etype, partial(_chunks, files, fmt_name, fmt, counts), num_edges=sum(counts),
                        num_edges_from=f"{meta.file}: num_edges_per_chunk")
    feat = _data(meta, "edge_data", key, counts).get("feat")
    if feat is not None:
        rel.edge_features = partial(np.reshape, feat, (sum(counts), -1))
        rel.edge_features_from = f"{meta.file}: edge_data.{key}.feat"
    return rel


def _read_typed(meta: _Chunked, name: str, node_counts: dict[str, list[int]],
                edge_counts: dict[str, list[int]], target_type: str | None) -> TypedSource:
    num_nodes = {}
    for ntype, counts in node_counts.items():
        try:
            num_nodes[ts.check_name(ntype, "node type")] = sum(counts)
        except StoreError as exc:
            raise meta.fail("node_type", str(exc)) from None
    relations = [_relation(meta, key, counts, num_nodes) for key, counts in edge_counts.items()]
    nodes = {}
    for ntype, counts in node_counts.items():
        data = _data(meta, "node_data", ntype, counts)
        node = nodes[ntype] = TypedNodes(num_nodes[ntype], where=str(meta.file))
        if "feat" in data:
            feat = data["feat"].reshape(num_nodes[ntype], -1)
            node.features = partial(iter, [RowBlock(0, feat, f"{meta.file}: node_data.{ntype}.feat", 1)])
            node.float16 = feat.dtype == np.float16  # kept as the source has it, as MAG240M's
        if "label" in data:
            node.labels = partial(class_labels, data["label"], f"{meta.file}: node_data.{ntype}.label")
        splits = _splits(meta, data, f"node_data.{ntype}")
        if splits:
            node.splits = partial(iter, [(s, ids, f"{meta.file}: node_data.{ntype}") for s, ids in splits.items()])
    return TypedSource(name, "dgl-chunked", str(meta.file.parent), nodes, relations, target_type)
