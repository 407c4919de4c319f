"""GraphBolt's on-disk dataset (``dgl.graphbolt.OnDiskDataset``, DGL 2.1) → a source.

A folder with ``metadata.yaml`` (read with ``yaml.safe_load``); a homogeneous graph
(a :class:`DatasetSource`)::

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

A typed graph (a :class:`TypedSource`) names a ``type`` in every entry, as GraphBolt's
``OnDiskDataset`` writes it: ``graph.nodes: [{type: paper, num: N_t}, ...]``, ``graph.edges:
[{type: "author:writes:paper", format, path}, ...]`` (per-type local IDs), ``feature_data``
entries with the node type (or ``"src:rel:dst"``) in ``type``, and per set a list of
``{type: paper, data: [...]}`` items.

Node features are ``feat``; labels are the ``label`` node feature, else the tasks' ``labels``
at their ``seed_nodes`` (``seeds`` too; others unlabelled, -1). Paths are relative to the
folder and must stay inside it; ``.npy`` files are read with ``allow_pickle=False``;
``torch`` files only as plain tensors (``weights_only``). Every refusal is one
:class:`IngestError` line naming ``metadata.yaml`` and the field, or the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.labels import class_labels
from graphpipe.ingest.source import DatasetSource, RowBlock, TypedNodes, TypedRelation, TypedSource
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError

__all__ = ["MAX_NODES", "is_graphbolt_folder", "read_graphbolt", "read_metadata"]

MAX_NODES = 1 << 40
"""Largest node count a ``metadata.yaml`` may declare."""
MAX_METADATA_BYTES = 1 << 20
_SETS = {"train_set": "train", "validation_set": "valid", "test_set": "test"}
_SEED_NAMES = ("seed_nodes", "seeds")
_BLOCK_ROWS = 1 << 20


def is_graphbolt_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder holding GraphBolt's ``metadata.yaml``."""
    return Path(path).is_dir() and (Path(path) / "metadata.yaml").is_file()


def read_metadata(file: Path, parse: Callable[[str], Any], errors: tuple, kind: str, top: str) -> dict:
    """A dataset's metadata ``file`` (at most :data:`MAX_METADATA_BYTES`) parsed by ``parse``
    (``errors``: what it raises on bad input, named ``kind``); ``top`` at the top level.

    >>> import json, pathlib, tempfile
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "metadata.json"
    >>> _ = path.write_text('{"graph_name": "g"}')
    >>> read_metadata(path, json.loads, (ValueError,), "JSON", "an object")
    {'graph_name': 'g'}
    """
    if file.stat().st_size > MAX_METADATA_BYTES:
        raise IngestError(f"{file}: larger than {MAX_METADATA_BYTES} bytes; refused")
    try:
        doc = parse(file.read_text(encoding="utf-8"))
    except (*errors, UnicodeDecodeError) as exc:
        raise IngestError(f"{file}: not valid {kind} ({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(doc, dict):
        raise IngestError(f"{file}: expected {top} at the top level")
    return doc


class _Meta:
    """``metadata.yaml`` of ``folder``: typed field access with one-line errors."""

    def __init__(self, folder: Path):
        import yaml

        self.folder = folder.resolve()
        self.file = folder / "metadata.yaml"
        self.doc = read_metadata(self.file, yaml.safe_load, (yaml.YAMLError,), "YAML", "a mapping")

    def fail(self, field: str, message: str) -> IngestError:
        return IngestError(f"{self.file}: {field}: {message}")

    def mapping(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"expected a mapping (got {type(value).__name__})")
        return value

    def items(self, value: Any, field: str, typed: bool) -> list[tuple[str | None, dict, str]]:
        """``(type, entry, field)`` of a list of entries: one untyped entry, or (``typed``)
        entries that each name their ``type``."""
        if not isinstance(value, list) or not value or (not typed and len(value) != 1):
            raise self.fail(field, f"expected a list of {'entries' if typed else 'one entry'} "
                                   f"(got {value!r:.80})")
        out = []
        for i, item in enumerate(value):
            item = self.mapping(item, f"{field}[{i}]")
            kind = item.get("type")
            if typed != (kind is not None) or (typed and not isinstance(kind, str)):
                raise self.fail(f"{field}[{i}].type", "every entry of a typed graph names its type, "
                                                      "and no entry of a homogeneous one does")
            out.append((kind, item, f"{field}[{i}]"))
        return out

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


def _count(meta: _Meta, entry: dict, field: str) -> int:
    num = entry.get("num")
    if isinstance(num, bool) or not isinstance(num, int) or not 0 <= num <= MAX_NODES:
        raise meta.fail(f"{field}.num", f"expected a node count in [0, {MAX_NODES}] (got {num!r})")
    return num


def _edge_arrays(meta: _Meta, entry: dict, field: str) -> tuple[np.ndarray, np.ndarray, str]:
    """``(src, dst, file)`` of one edge entry (numpy ``(2, E)`` or csv ``src,dst`` rows)."""
    path = meta.path(entry, field)
    if entry.get("format") == "csv":
        import pyarrow as pa
        from pyarrow import csv

        try:
            table = csv.read_csv(path, read_options=csv.ReadOptions(column_names=["src", "dst"]),
                                 convert_options=csv.ConvertOptions(
                                     column_types={"src": pa.int64(), "dst": pa.int64()}))
        except pa.ArrowInvalid as exc:
            raise IngestError(f"{path}: not a two-column integer CSV ({' '.join(str(exc).split())[:160]})"
                              ) from None
        return table.column("src").to_numpy(), table.column("dst").to_numpy(), str(path)
    edges = meta.array(entry, field)
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
        raise IngestError(f"{path}: edges must be an integer (2, E) array (got {edges.dtype} "
                          f"{edges.shape})")
    return edges[0], edges[1], str(path)


def _check_ids(src: np.ndarray, dst: np.ndarray, path: str, num_nodes: int) -> None:
    for name, ids in (("src", src), ("dst", dst)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
            bad = int(np.flatnonzero((ids < 0) | (ids >= num_nodes))[0])
            raise IngestError(f"{path}: edge {bad}: {name} {int(ids[bad])} is not a node ID in "
                              f"[0, {num_nodes})")


def _edge_chunks(src: np.ndarray, dst: np.ndarray, path: str) -> Iterator[EdgeChunk]:
    for start in range(0, src.shape[0], _BLOCK_ROWS):
        stop = min(start + _BLOCK_ROWS, src.shape[0])
        yield EdgeChunk(np.asarray(src[start:stop], dtype=np.int64),
                        np.asarray(dst[start:stop], dtype=np.int64), start, path, start + 1)


def _features(meta: _Meta, rows_of: dict[str | None, int], typed: bool
              ) -> dict[tuple[str, str | None, str], np.ndarray]:
    """``{(domain, type, name): array}`` of ``feature_data``, shapes checked; ``rows_of``:
    the rows of each type (node types and ``"src:rel:dst"``; None when untyped)."""
    out: dict[tuple[str, str | None, str], np.ndarray] = {}
    entries = meta.doc.get("feature_data") or []
    if not isinstance(entries, list):
        raise meta.fail("feature_data", "expected a list")
    for i, entry in enumerate(entries):
        field = f"feature_data[{i}]"
        entry = meta.mapping(entry, field)
        domain, kind, name = entry.get("domain"), entry.get("type"), entry.get("name")
        if domain not in ("node", "edge") or not isinstance(name, str):
            raise meta.fail(field, f"expected domain node or edge and a name (got {domain!r}, {name!r})")
        if (kind is not None) != typed or (domain, kind) not in rows_of:
            raise meta.fail(f"{field}.type", f"{kind!r} is not a {domain} type of graph")
        values = meta.array(entry, field)
        rows = rows_of[(domain, kind)]
        if values.ndim not in (1, 2) or values.shape[0] != rows:
            raise meta.fail(f"{field}.path", f"shape {values.shape}, expected ({rows}, ...) for "
                                             f"the {rows} {domain}s")
        out[(domain, kind, name)] = values
    return out


def _task_sets(meta: _Meta, counts: dict[str | None, int], typed: bool
               ) -> tuple[dict[tuple[str | None, str], tuple[np.ndarray, np.ndarray | None]], int | None]:
    """``({(node type, split): (seed IDs, labels or None)}, num_classes)`` of the first task."""
    tasks = meta.doc.get("tasks") or []
    if not isinstance(tasks, list):
        raise meta.fail("tasks", "expected a list")
    if not tasks:
        return {}, None
    task = meta.mapping(tasks[0], "tasks[0]")
    num_classes = task.get("num_classes")
    if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                    or not 0 < num_classes <= 1 << 20):
        raise meta.fail("tasks[0].num_classes", f"expected a positive class count (got {num_classes!r})")
    sets = {}
    for key, split in _SETS.items():
        if not task.get(key):
            continue
        for kind, entry, field in meta.items(task[key], f"tasks[0].{key}", typed):
            if kind not in counts:
                raise meta.fail(f"{field}.type", f"{kind!r} is not a node type of graph.nodes")
            sets[(kind, split)] = _one_set(meta, entry, field, counts[kind])
    return sets, num_classes


def _one_set(meta: _Meta, entry: dict, field: str, num_nodes: int) -> tuple[np.ndarray, np.ndarray | None]:
    """``(seed IDs, labels or None)`` of one set item."""
    data = entry.get("data")
    if not isinstance(data, list):
        raise meta.fail(f"{field}.data", "expected a list")
    named = {}
    for j, item in enumerate(data):
        item = meta.mapping(item, f"{field}.data[{j}]")
        named[item.get("name")] = (item, f"{field}.data[{j}]")
    seed_key = next((k for k in _SEED_NAMES if k in named), None)
    if seed_key is None:
        raise meta.fail(f"{field}.data", "no seed_nodes entry (graphpipe reads node "
                                          "classification sets)")
    ids = meta.array(*named[seed_key])
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise meta.fail(named[seed_key][1], f"expected 1-D node IDs (got {ids.dtype} {ids.shape})")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= num_nodes):
        raise meta.fail(named[seed_key][1], f"node IDs outside [0, {num_nodes})")
    if "labels" not in named:
        return np.asarray(ids, dtype=np.int64), None
    values = np.asarray(meta.array(*named["labels"]))
    if values.shape[:1] != ids.shape:
        raise meta.fail(named["labels"][1], f"{values.shape[0] if values.ndim else 0} labels "
                                            f"for {ids.shape[0]} seed nodes")
    return np.asarray(ids, dtype=np.int64), values


def _labels_from_sets(sets: list[tuple[np.ndarray, np.ndarray | None]], num_nodes: int) -> np.ndarray | None:
    """One type's labels from its sets' ``labels`` at their seeds (others -1), or None."""
    labelled = [(ids, values) for ids, values in sets if values is not None]
    if not labelled:
        return None
    first = labelled[0][1]
    out = np.full((num_nodes, *first.shape[1:]), -1, dtype=np.int64 if first.dtype.kind in "biu"
                  else np.float64)
    for ids, values in labelled:
        out[ids] = values
    return out


def _row_blocks(values: np.ndarray, source: str) -> Iterator[RowBlock]:
    matrix = values.reshape(values.shape[0], -1)
    for start in range(0, matrix.shape[0], _BLOCK_ROWS):
        yield RowBlock(start, np.asarray(matrix[start:start + _BLOCK_ROWS]), source, start + 1)


def read_graphbolt(path: str | os.PathLike, name: str | None = None,
                   target_type: str | None = None) -> DatasetSource | TypedSource:
    """Read GraphBolt's on-disk dataset folder ``path`` (see the module docstring); a typed
    one becomes a :class:`TypedSource` whose target type is ``target_type``, else the task's
    ``target_type`` (graphpipe's export writes it), else the only labelled type.

    >>> import tempfile, numpy as np
    >>> from pathlib import Path
    >>> tmp = tempfile.TemporaryDirectory(); folder = Path(tmp.name)
    >>> np.save(folder / "edges.npy", np.array([[1, 2, 0], [0, 0, 1]]))
    >>> _ = (folder / "metadata.yaml").write_text(
    ...     "graph:\\n  nodes: [{num: 3}]\\n  edges: [{format: numpy, path: edges.npy}]\\n")
    >>> source = read_graphbolt(folder)
    >>> source.num_nodes, [(c.src.tolist(), c.dst.tolist()) for c in source.edge_chunks()]
    (3, [([1, 2, 0], [0, 0, 1])])
    >>> _ = (folder / "metadata.yaml").write_text("graph:\\n  nodes: [{type: a, num: 3}, {type: b, num: 2}]"
    ...     "\\n  edges: [{type: 'a:to:b', format: numpy, path: edges.npy}]\\n")
    >>> typed = read_graphbolt(folder)
    >>> {t: n.count for t, n in typed.node_types.items()}, typed.relations[0].etype
    ({'a': 3, 'b': 2}, ('a', 'to', 'b'))
    >>> tmp.cleanup()
    """
    folder = Path(path)
    if not is_graphbolt_folder(folder):
        raise IngestError(f"{folder}: no metadata.yaml (not a GraphBolt on-disk dataset)")
    meta = _Meta(folder)
    graph = meta.mapping(meta.doc.get("graph"), "graph")
    nodes = graph.get("nodes")
    typed = isinstance(nodes, list) and any(isinstance(n, dict) and n.get("type") is not None for n in nodes)
    dataset_name = meta.doc.get("dataset_name")
    name = name or (dataset_name if isinstance(dataset_name, str) else folder.name)
    if typed:
        return _read_typed(meta, graph, name, target_type)
    if target_type is not None:
        raise IngestError(f"--target-type applies to typed datasets; {meta.file} has one node type")
    return _read_homogeneous(meta, graph, name)


def _read_homogeneous(meta: _Meta, graph: dict, name: str) -> DatasetSource:
    [(_, node_entry, node_field)] = meta.items(graph.get("nodes"), "graph.nodes", False)
    num_nodes = _count(meta, node_entry, node_field)
    [(_, edge_entry, edge_field)] = meta.items(graph.get("edges"), "graph.edges", False)
    src, dst, edge_file = _edge_arrays(meta, edge_entry, edge_field)
    _check_ids(src, dst, edge_file, num_nodes)
    num_edges = int(src.shape[0])
    features = _features(meta, {("node", None): num_nodes, ("edge", None): num_edges}, False)
    sets, num_classes = _task_sets(meta, {None: num_nodes}, False)
    splits = {split: ids for (_, split), (ids, _) in sets.items()}
    source = DatasetSource(name=name, source_format="graphbolt", source_path=str(meta.file.parent),
                           num_nodes=num_nodes, edge_chunks=lambda: _edge_chunks(src, dst, edge_file),
                           num_input_edges=num_edges,
                           splits=splits, split_sources={s: f"{meta.file}: tasks[0]" for s in splits})
    if ("node", None, "feat") in features:
        feat = features[("node", None, "feat")]
        source.node_features = lambda: _row_blocks(feat, f"{meta.file}: node feat")
        source.feature_dim = int(feat.shape[1]) if feat.ndim == 2 else 1
    if ("edge", None, "feat") in features:
        efeat = features[("edge", None, "feat")]
        source.edge_features = lambda: _row_blocks(efeat, f"{meta.file}: edge feat")
        source.edge_feature_dim = int(efeat.shape[1]) if efeat.ndim == 2 else 1
    labels = features.get(("node", None, "label"))
    source.labels = np.asarray(labels) if labels is not None else _labels_from_sets(list(sets.values()), num_nodes)
    if source.labels is not None:
        integral = source.labels.dtype.kind in "biu"
        source.task_type = "multiclass classification" if integral else "regression"
        source.num_classes = num_classes
        source.extra["label_file"] = f"{meta.file}: labels"
    source.num_nodes_backed = bool(features) or source.labels is not None
    source.extra["edge_file"] = edge_file
    return source


def _etype(meta: _Meta, kind: str, field: str, counts: dict[str, int]) -> tuple[str, str, str]:
    """GraphBolt's ``"src:rel:dst"`` as a relation of known node types."""
    parts = kind.split(":")
    if len(parts) != 3 or parts[0] not in counts or parts[2] not in counts:
        raise meta.fail(f"{field}.type", f"{kind!r} is not \"src:rel:dst\" of node types "
                                         f"{sorted(counts)}")
    try:
        return ts.as_etype(tuple(parts))
    except StoreError as exc:
        raise meta.fail(f"{field}.type", str(exc)) from None


def _read_typed(meta: _Meta, graph: dict, name: str, target_type: str | None) -> TypedSource:
    counts: dict[str, int] = {}
    for kind, entry, field in meta.items(graph.get("nodes"), "graph.nodes", True):
        try:
            counts[ts.check_name(kind, "node type")] = _count(meta, entry, field)
        except StoreError as exc:
            raise meta.fail(f"{field}.type", str(exc)) from None
    relations, rows_of = [], {("node", t): n for t, n in counts.items()}
    for kind, entry, field in meta.items(graph.get("edges"), "graph.edges", True):
        src, dst, edge_file = _edge_arrays(meta, entry, field)
        relations.append(TypedRelation(_etype(meta, kind, field, counts),
                                       partial(_edge_chunks, src, dst, edge_file)))
        rows_of[("edge", kind)] = int(src.shape[0])
    if len({r.etype for r in relations}) != len(relations):
        raise meta.fail("graph.edges", "a relation is listed twice")
    features = _features(meta, rows_of, True)
    sets, num_classes = _task_sets(meta, counts, True)
    for rel in relations:
        efeat = features.get(("edge", ":".join(rel.etype), "feat"))
        if efeat is not None:
            rel.edge_features = partial(np.asarray, efeat.reshape(efeat.shape[0], -1))
            rel.edge_features_from = f"{meta.file}: {':'.join(rel.etype)} edge feat"
    nodes = {t: TypedNodes(n, where=str(meta.file)) for t, n in counts.items()}
    for ntype, node in nodes.items():
        feat = features.get(("node", ntype, "feat"))
        if feat is not None:
            node.features = partial(_row_blocks, feat, f"{meta.file}: {ntype} feat")
            node.float16 = feat.dtype == np.float16  # kept as the source has it, as MAG240M's
        mine = {split: item for (t, split), item in sets.items() if t == ntype}
        labels = features.get(("node", ntype, "label"))
        labels = np.asarray(labels) if labels is not None else _labels_from_sets(list(mine.values()), node.count)
        if labels is not None:
            node.labels = partial(class_labels, labels, f"{meta.file}: {ntype} labels")
        if mine:
            node.splits = partial(iter, [(split, ids, f"{meta.file}: tasks[0]") for split, (ids, _) in mine.items()])
    target = target_type or _task_target(meta)
    labelled = [t for t, node in nodes.items() if node.labels is not None]
    if (target or (labelled[0] if len(labelled) == 1 else None)) in nodes:
        nodes[target or labelled[0]].num_classes = num_classes
    return TypedSource(name, "graphbolt", str(meta.file.parent), nodes, relations, target)


def _task_target(meta: _Meta) -> str | None:
    """``tasks[0].target_type`` (kept by GraphBolt in the task's metadata), or None."""
    tasks = meta.doc.get("tasks") or [{}]
    target = tasks[0].get("target_type") if isinstance(tasks[0], dict) else None
    if target is not None and not isinstance(target, str):
        raise meta.fail("tasks[0].target_type", f"expected a node type (got {target!r:.40})")
    return target
