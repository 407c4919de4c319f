"""GraphBolt's on-disk dataset (``dgl.graphbolt.OnDiskDataset``, DGL 2.1) → :class:`DatasetSource`.

A folder with ``metadata.yaml`` (read with ``yaml.safe_load``), homogeneous graphs only::

    dataset_name: NAME
    graph:
      nodes: [{num: N}]
      edges: [{format: numpy | csv, path: edges.npy}]   # numpy (2, E); csv "src,dst" rows
    feature_data:                                       # numpy .npy (or torch tensors)
      - {domain: node, name: feat, format: numpy, path: node_feat.npy}
      - {domain: node, name: label, format: numpy, path: node_label.npy}   # optional
      - {domain: edge, name: feat, format: numpy, path: edge_feat.npy}     # optional
    tasks:
      - name: node_classification
        num_classes: C
        train_set: [{data: [{name: seed_nodes, format: numpy, path: set/train_nodes.npy},
                            {name: labels, format: numpy, path: set/train_labels.npy}]}]
        validation_set: ...   # -> split "valid"
        test_set: ...

Node features are ``feat``; labels are the ``label`` node feature, else the tasks' ``labels``
at their ``seed_nodes`` (``seeds`` too; others unlabelled, -1). Paths are relative to the
folder and must stay inside it; ``.npy`` files are read with ``allow_pickle=False``;
``torch`` files only as plain tensors (``weights_only``). Every refusal is one
:class:`IngestError` line naming ``metadata.yaml`` and the field, or the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.source import DatasetSource, RowBlock

__all__ = ["MAX_NODES", "is_graphbolt_folder", "read_graphbolt"]

MAX_NODES = 1 << 40
"""Largest node count a ``metadata.yaml`` may declare."""
MAX_METADATA_BYTES = 1 << 20
_SETS = {"train_set": "train", "validation_set": "valid", "test_set": "test"}
_SEED_NAMES = ("seed_nodes", "seeds")
_BLOCK_ROWS = 1 << 20


def is_graphbolt_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding GraphBolt's ``metadata.yaml``."""
    return Path(path).is_dir() and (Path(path) / "metadata.yaml").is_file()


class _Meta:
    """``metadata.yaml`` of ``folder``: typed field access with one-line errors."""

    def __init__(self, folder: Path):
        self.folder = folder.resolve()
        self.file = folder / "metadata.yaml"
        if self.file.stat().st_size > MAX_METADATA_BYTES:
            raise IngestError(f"{self.file}: larger than {MAX_METADATA_BYTES} bytes; refused")
        import yaml

        try:
            self.doc = yaml.safe_load(self.file.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise IngestError(f"{self.file}: not valid YAML ({' '.join(str(exc).split())[:160]})") from None
        if not isinstance(self.doc, dict):
            raise IngestError(f"{self.file}: expected a mapping at the top level")

    def fail(self, field: str, message: str) -> IngestError:
        return IngestError(f"{self.file}: {field}: {message}")

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"expected a mapping (got {type(value).__name__})")
        return value

    def one_item(self, value: Any, field: str, what: str) -> dict:
        if not isinstance(value, list) or len(value) != 1:
            raise self.fail(field, f"expected a list of one {what} (graphpipe reads homogeneous "
                                   f"graphs only; got {value!r:.80})")
        item = self.mapping(value[0], f"{field}[0]")
        if item.get("type") is not None:
            raise self.fail(f"{field}[0].type", "typed (heterogeneous) graphs are not supported")
        return item

    def path(self, entry: dict, field: str) -> Path:
        """The file ``entry["path"]`` names, which must lie inside the dataset folder."""
        rel = entry.get("path")
        if not isinstance(rel, str) or not rel:
            raise self.fail(f"{field}.path", "expected a relative file path")
        if os.path.isabs(rel):
            raise self.fail(f"{field}.path", f"{rel!r} is absolute; paths are relative to the dataset")
        full = (self.folder / rel).resolve()
        if full != self.folder and self.folder not in full.parents:
            raise self.fail(f"{field}.path", f"{rel!r} leads outside the dataset folder")
        if not full.is_file():
            raise self.fail(f"{field}.path", f"{rel!r}: no such file")
        return full

    def array(self, entry: dict, field: str) -> np.ndarray:
        """The array an entry names (``format`` numpy or torch), memory-mapped for numpy."""
        path = self.path(entry, field)
        fmt = entry.get("format")
        if fmt == "numpy":
            try:
                values = np.load(path, mmap_mode="r", allow_pickle=False)
            except (ValueError, OSError, EOFError) as exc:
                raise IngestError(f"{path}: not a readable .npy array ({' '.join(str(exc).split())[:120]})"
                                  ) from None
            if not isinstance(values, np.ndarray) or values.dtype.kind not in "biuf":
                raise IngestError(f"{path}: expected a numeric .npy array")
            return values
        if fmt == "torch":
            from graphpipe.ingest.safe_load import load_torch_file

            loaded = load_torch_file(path, str(path), way_out="save it as .npy (format: numpy)")
            if not hasattr(loaded, "numpy"):
                raise IngestError(f"{path}: expected one tensor (got {type(loaded).__name__})")
            return loaded.numpy()
        raise self.fail(f"{field}.format", f"expected numpy or torch (got {fmt!r})")


def _num_nodes(meta: _Meta, graph: dict) -> int:
    nodes = meta.one_item(graph.get("nodes"), "graph.nodes", "node entry")
    num = nodes.get("num")
    if isinstance(num, bool) or not isinstance(num, int) or not 0 <= num <= MAX_NODES:
        raise meta.fail("graph.nodes[0].num", f"expected a node count in [0, {MAX_NODES}] (got {num!r})")
    return num


def _edges(meta: _Meta, graph: dict, num_nodes: int) -> tuple[np.ndarray, np.ndarray, str]:
    entry = meta.one_item(graph.get("edges"), "graph.edges", "edge entry")
    field = "graph.edges[0]"
    fmt = entry.get("format")
    if fmt == "csv":
        path = meta.path(entry, field)
        import pyarrow as pa
        from pyarrow import csv

        try:
            table = csv.read_csv(path, read_options=csv.ReadOptions(column_names=["src", "dst"]),
                                 convert_options=csv.ConvertOptions(
                                     column_types={"src": pa.int64(), "dst": pa.int64()}))
        except pa.ArrowInvalid as exc:
            raise IngestError(f"{path}: not a two-column integer CSV ({' '.join(str(exc).split())[:160]})"
                              ) from None
        src, dst = (table.column(c).to_numpy() for c in ("src", "dst"))
    else:
        edges = meta.array(entry, field)
        path = meta.path(entry, field)
        if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
            raise IngestError(f"{path}: edges must be an integer (2, E) array (got {edges.dtype} "
                              f"{edges.shape})")
        src, dst = edges[0], edges[1]
    for name, ids in (("src", src), ("dst", dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            bad = int(np.flatnonzero((ids < 0) | (ids >= num_nodes))[0])
            raise IngestError(f"{path}: edge {bad}: {name} {int(ids[bad])} is not a node ID in "
                              f"[0, {num_nodes})")
    return src, dst, str(path)


def _features(meta: _Meta, num_nodes: int, num_edges: int) -> dict[tuple[str, str], np.ndarray]:
    """``{(domain, name): array}`` of ``feature_data``, shapes checked."""
    out: dict[tuple[str, str], np.ndarray] = {}
    entries = meta.doc.get("feature_data") or []
    if not isinstance(entries, list):
        raise meta.fail("feature_data", "expected a list")
    for i, entry in enumerate(entries):
        field = f"feature_data[{i}]"
        entry = meta.mapping(entry, field)
        domain, name = entry.get("domain"), entry.get("name")
        if entry.get("type") is not None:
            raise meta.fail(f"{field}.type", "typed (heterogeneous) features are not supported")
        if domain not in ("node", "edge") or not isinstance(name, str):
            raise meta.fail(field, f"expected domain node or edge and a name (got {domain!r}, {name!r})")
        values = meta.array(entry, field)
        rows = num_nodes if domain == "node" else num_edges
        if values.ndim not in (1, 2) or values.shape[0] != rows:
            raise meta.fail(f"{field}.path", f"shape {values.shape}, expected ({rows}, ...) for "
                                             f"the {rows} {domain}s")
        out[(domain, name)] = values
    return out


def _task_sets(meta: _Meta, num_nodes: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray],
                                                     int | None]:
    """``(splits, labels per split, num_classes)`` of the first task."""
    tasks = meta.doc.get("tasks") or []
    if not isinstance(tasks, list):
        raise meta.fail("tasks", "expected a list")
    if not tasks:
        return {}, {}, None
    task = meta.mapping(tasks[0], "tasks[0]")
    num_classes = task.get("num_classes")
    if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                    or not 0 < num_classes <= 1 << 20):
        raise meta.fail("tasks[0].num_classes", f"expected a positive class count (got {num_classes!r})")
    splits: dict[str, np.ndarray] = {}
    labels: dict[str, np.ndarray] = {}
    for key, split in _SETS.items():
        if not task.get(key):
            continue
        field = f"tasks[0].{key}"
        entry = meta.one_item(task[key], field, "set")
        data = entry.get("data")
        if not isinstance(data, list):
            raise meta.fail(f"{field}[0].data", "expected a list")
        named = {}
        for j, item in enumerate(data):
            item = meta.mapping(item, f"{field}[0].data[{j}]")
            named[item.get("name")] = (item, f"{field}[0].data[{j}]")
        seed_key = next((k for k in _SEED_NAMES if k in named), None)
        if seed_key is None:
            raise meta.fail(f"{field}[0].data", "no seed_nodes entry (graphpipe reads node "
                                                "classification sets)")
        ids = meta.array(*named[seed_key])
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise meta.fail(named[seed_key][1], f"expected 1-D node IDs (got {ids.dtype} {ids.shape})")
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            raise meta.fail(named[seed_key][1], f"node IDs outside [0, {num_nodes})")
        splits[split] = np.asarray(ids, dtype=np.int64)
        if "labels" in named:
            values = np.asarray(meta.array(*named["labels"]))
            if values.shape[:1] != ids.shape:
                raise meta.fail(named["labels"][1], f"{values.shape[0] if values.ndim else 0} labels "
                                                    f"for {ids.shape[0]} seed nodes")
            labels[split] = values
    return splits, labels, num_classes


def _labels_from_sets(splits: dict[str, np.ndarray], labels: dict[str, np.ndarray],
                      num_nodes: int) -> np.ndarray | None:
    if not labels:
        return None
    first = next(iter(labels.values()))
    out = np.full((num_nodes, *first.shape[1:]), -1, dtype=np.int64 if first.dtype.kind in "biu"
                  else np.float64)
    for split, values in labels.items():
        out[splits[split]] = values
    return out


def _row_blocks(values: np.ndarray, source: str) -> Iterator[RowBlock]:
    matrix = values.reshape(values.shape[0], -1)
    for start in range(0, matrix.shape[0], _BLOCK_ROWS):
        yield RowBlock(start, np.asarray(matrix[start:start + _BLOCK_ROWS]), source, start + 1)


def read_graphbolt(path: str | os.PathLike, name: str | None = None) -> DatasetSource:
    """Read GraphBolt's on-disk dataset folder ``path`` (see the module docstring).

    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> tmp = tempfile.TemporaryDirectory(); folder = Path(tmp.name)
    >>> np.save(folder / "edges.npy", np.array([[1, 2, 0], [0, 0, 1]]))
    >>> _ = (folder / "metadata.yaml").write_text(
    ...     "graph:\\n  nodes: [{num: 3}]\\n  edges: [{format: numpy, path: edges.npy}]\\n")
    >>> source = read_graphbolt(folder)
    >>> source.num_nodes, [(c.src.tolist(), c.dst.tolist()) for c in source.edge_chunks()]
    (3, [([1, 2, 0], [0, 0, 1])])
    >>> tmp.cleanup()
    """
    folder = Path(path)
    if not is_graphbolt_folder(folder):
        raise IngestError(f"{folder}: no metadata.yaml (not a GraphBolt on-disk dataset)")
    meta = _Meta(folder)
    graph = meta.mapping(meta.doc.get("graph"), "graph")
    num_nodes = _num_nodes(meta, graph)
    src, dst, edge_file = _edges(meta, graph, num_nodes)
    num_edges = int(src.shape[0])
    features = _features(meta, num_nodes, num_edges)
    splits, set_labels, num_classes = _task_sets(meta, num_nodes)

    def edge_chunks() -> Iterator[EdgeChunk]:
        for start in range(0, num_edges, _BLOCK_ROWS):
            stop = min(start + _BLOCK_ROWS, num_edges)
            yield EdgeChunk(np.asarray(src[start:stop], dtype=np.int64),
                            np.asarray(dst[start:stop], dtype=np.int64), start, edge_file, start + 1)

    dataset_name = meta.doc.get("dataset_name")
    source = DatasetSource(name=name or (dataset_name if isinstance(dataset_name, str) else folder.name),
                           source_format="graphbolt", source_path=str(folder), num_nodes=num_nodes,
                           edge_chunks=edge_chunks, num_input_edges=num_edges,
                           splits=splits, split_sources={s: f"{meta.file}: tasks[0]" for s in splits})
    if ("node", "feat") in features:
        feat = features[("node", "feat")]
        source.node_features = lambda: _row_blocks(feat, f"{meta.file}: node feat")
        source.feature_dim = int(feat.shape[1]) if feat.ndim == 2 else 1
    if ("edge", "feat") in features:
        efeat = features[("edge", "feat")]
        source.edge_features = lambda: _row_blocks(efeat, f"{meta.file}: edge feat")
        source.edge_feature_dim = int(efeat.shape[1]) if efeat.ndim == 2 else 1
    labels = features.get(("node", "label"))
    source.labels = (np.asarray(labels) if labels is not None
                     else _labels_from_sets(splits, set_labels, num_nodes))
    if source.labels is not None:
        integral = source.labels.dtype.kind in "biu"
        source.task_type = "multiclass classification" if integral else "regression"
        source.num_classes = num_classes
        source.extra["label_file"] = f"{meta.file}: labels"
    source.num_nodes_backed = bool(features) or source.labels is not None
    source.extra["edge_file"] = edge_file
    return source
