"""Writers that put a generated graph on disk in each source format graphpipe ingests.

- :func:`write_ogb_raw` / :func:`ogb_meta_dict`: OGB's node-property-prediction
  folder (``raw/*.csv.gz`` or ``raw/data.npz``, ``split/<name>/*.csv.gz``), read
  by ``ogb.nodeproppred.NodePropPredDataset(name, meta_dict=ogb_meta_dict(folder))``.
- :func:`write_edge_list`, :func:`write_node_table`, :func:`write_table_file`:
  CSV / TSV / Parquet tables (``.gz`` names are gzip-compressed).
- :func:`write_npz`: one ``.npz`` with ``edge_index``, ``x``, ``y`` and the split indices.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from graphpipe.synthetic.graph import SyntheticGraph
from graphpipe.synthetic.text import ProgressFn, open_text_sink, write_csv

SPLIT_NAMES = ("train", "valid", "test")
OGB_TASK_TYPE = "multiclass classification"
OGB_EVAL_METRIC = "acc"

# ---------------------------------------------------------------------------
# input coercion


def as_synthetic_graph(graph_or_arrays: SyntheticGraph | Mapping[str, Any]) -> SyntheticGraph:
    """A :class:`SyntheticGraph` from itself or from a mapping of arrays.

    Mapping keys (first found wins): ``src``+``dst`` or ``edge_index`` (2, E);
    ``features`` / ``x`` / ``node_feat``; ``labels`` / ``y`` / ``node_label``;
    ``splits`` (name -> ids) or ``train_idx`` / ``valid_idx`` / ``test_idx``;
    ``num_nodes`` (default: one more than the largest ID seen); ``edge_feat``;
    ``num_classes``.
    """
    if isinstance(graph_or_arrays, SyntheticGraph):
        return graph_or_arrays
    if not isinstance(graph_or_arrays, Mapping):
        raise TypeError(
            "expected a SyntheticGraph or a mapping of arrays "
            f"(got {type(graph_or_arrays).__name__})"
        )
    arrays = graph_or_arrays

    def first(*names):
        for name in names:
            if name in arrays and arrays[name] is not None:
                return arrays[name]
        return None

    if "src" in arrays and "dst" in arrays:
        src, dst = np.asarray(arrays["src"]), np.asarray(arrays["dst"])
    elif "edge_index" in arrays:
        edge_index = np.asarray(arrays["edge_index"])
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise ValueError(f"'edge_index' must have shape (2, E) (got {edge_index.shape})")
        src, dst = edge_index[0], edge_index[1]
    else:
        raise ValueError("the arrays need 'src' and 'dst', or 'edge_index'")
    features = first("features", "x", "node_feat")
    labels = first("labels", "y", "node_label")
    if labels is not None:
        labels = np.asarray(labels)
        if labels.ndim == 2 and labels.shape[1] == 1:
            labels = labels[:, 0]
    splits = first("splits")
    if splits is None:
        splits = {name: arrays[f"{name}_idx"] for name in SPLIT_NAMES if f"{name}_idx" in arrays}
    num_nodes = first("num_nodes")
    if num_nodes is None:
        candidates = [0]
        if len(src):
            candidates.append(int(max(np.max(src), np.max(dst))) + 1)
        if features is not None:
            candidates.append(len(features))
        if labels is not None:
            candidates.append(len(labels))
        num_nodes = max(candidates)
    return SyntheticGraph(src, dst, None if features is None else np.asarray(features), labels,
                          dict(splits), int(num_nodes), num_classes=first("num_classes"),
                          edge_feat=first("edge_feat", "edge_attr"))


def _check(graph: SyntheticGraph) -> None:
    n = graph.num_nodes
    if graph.num_edges and (min(graph.src.min(), graph.dst.min()) < 0
                            or max(graph.src.max(), graph.dst.max()) >= n):
        raise ValueError(f"edge endpoints must be in 0..{n - 1} (num_nodes={n})")
    if graph.features is not None and (graph.features.ndim != 2 or len(graph.features) != n):
        raise ValueError(f"'features' must have shape ({n}, F) (got {graph.features.shape})")
    if graph.labels is not None and len(graph.labels) != n:
        raise ValueError(f"'labels' must have {n} rows (got {len(graph.labels)})")
    if graph.edge_feat is not None and len(graph.edge_feat) != graph.num_edges:
        raise ValueError(
            f"'edge_feat' must have {graph.num_edges} rows (got {len(graph.edge_feat)})"
        )


# ---------------------------------------------------------------------------
# OGB


def _write_small_gz(path: Path, values, level: int) -> None:
    write_csv(path, np.asarray(values, dtype=np.int64).reshape(-1, 1), level=level, workers=1)


def write_ogb_raw(
    folder: str | os.PathLike,
    graph_or_arrays: SyntheticGraph | Mapping[str, Any],
    *,
    binary: bool = False,
    split_name: str = "random",
    edge_feat: np.ndarray | None = None,
    feat_format: str = "%.6f",
    version: int = 1,
    compresslevel: int = 1,
    workers: int | None = None,
    release_note: str | None = None,
    progress: ProgressFn | None = None,
) -> Path:
    """Write a graph in OGB's node-property raw layout under ``folder``; returns ``folder``.

    CSV variant (``binary=False``), as in OGB's downloads::

        folder/RELEASE_v1.txt
        folder/raw/edge.csv.gz            "src,dst" per edge, no header
        folder/raw/num-node-list.csv.gz   N
        folder/raw/num-edge-list.csv.gz   E
        folder/raw/node-feat.csv.gz       F floats per node ("%.6f")   (when features)
        folder/raw/node-label.csv.gz      one int per node             (when labels)
        folder/raw/edge-feat.csv.gz       floats per edge              (when edge_feat)
        folder/split/<split_name>/{train,valid,test}.csv.gz   one node ID per line
        folder/processed/                 empty; OGB caches what it parsed there

    With ``binary=True`` the raw files are ``raw/data.npz`` (``edge_index``,
    ``num_nodes_list``, ``num_edges_list``, ``node_feat``, ``edge_feat``) and
    ``raw/node-label.npz`` (``node_label``), as OGB's ``DatasetSaver`` writes them;
    the split files stay CSV. Gzip files are written at ``compresslevel`` by
    ``workers`` threads. ``progress(label, done, total)`` is called as files fill.
    """
    graph = as_synthetic_graph(graph_or_arrays)
    if edge_feat is None:
        edge_feat = graph.edge_feat
    _check(graph)
    if edge_feat is not None:
        edge_feat = np.asarray(edge_feat)
        if edge_feat.ndim == 1:
            edge_feat = edge_feat.reshape(-1, 1)
        if len(edge_feat) != graph.num_edges:
            raise ValueError(f"'edge_feat' must have {graph.num_edges} rows (got {len(edge_feat)})")
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", split_name):
        raise ValueError(f"'split_name' must be a plain folder name (got {split_name!r})")
    folder = Path(folder)
    raw = folder / "raw"
    split_dir = folder / "split" / split_name
    for directory in (raw, split_dir, folder / "processed"):
        directory.mkdir(parents=True, exist_ok=True)
    note = release_note or (
        f"# Release note for {folder.name}\n\n### v{version}: generated by graphpipe\n")
    (folder / f"RELEASE_v{version}.txt").write_text(note)

    labels = graph.labels
    if labels is not None and labels.ndim == 1:
        labels = labels.reshape(-1, 1)

    if binary:
        if progress is not None:
            progress("raw/data.npz", 0, 1)
        data: dict[str, np.ndarray] = {
            "edge_index": graph.edge_index,
            "num_nodes_list": np.array([graph.num_nodes], dtype=np.int64),
            "num_edges_list": np.array([graph.num_edges], dtype=np.int64),
        }
        if graph.features is not None:
            data["node_feat"] = _ogb_dtype(graph.features)
        if edge_feat is not None:
            data["edge_feat"] = _ogb_dtype(edge_feat)
        np.savez(raw / "data.npz", **data)
        del data
        if labels is not None:
            np.savez_compressed(raw / "node-label.npz", node_label=labels)
        if progress is not None:
            progress("raw/data.npz", 1, 1)
    else:
        common = {"level": compresslevel, "workers": workers, "progress": progress}
        write_csv(raw / "edge.csv.gz", _edge_rows(graph), label="raw/edge.csv.gz", **common)
        _write_small_gz(raw / "num-node-list.csv.gz", [graph.num_nodes], compresslevel)
        _write_small_gz(raw / "num-edge-list.csv.gz", [graph.num_edges], compresslevel)
        if graph.features is not None:
            write_csv(raw / "node-feat.csv.gz", graph.features, float_format=feat_format,
                      label="raw/node-feat.csv.gz", **common)
        if labels is not None:
            write_csv(raw / "node-label.csv.gz", labels, label="raw/node-label.csv.gz", **common)
        if edge_feat is not None:
            write_csv(raw / "edge-feat.csv.gz", edge_feat, float_format=feat_format,
                      label="raw/edge-feat.csv.gz", **common)

    for name in SPLIT_NAMES:
        ids = graph.splits.get(name, np.empty(0, dtype=np.int64))
        _write_small_gz(split_dir / f"{name}.csv.gz", ids, compresslevel)
    return folder


def _edge_rows(graph: SyntheticGraph) -> np.ndarray:
    rows = np.empty((graph.num_edges, 2), dtype=np.int64)
    rows[:, 0] = graph.src
    rows[:, 1] = graph.dst
    return rows


def _ogb_dtype(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values)
    return values.astype(np.int64 if values.dtype.kind in "iub" else np.float32, copy=False)


def ogb_meta_dict(
    folder: str | os.PathLike,
    name: str | None = None,
    *,
    num_classes: int | None = None,
    num_tasks: int | None = None,
    split: str | None = None,
    binary: bool | None = None,
    version: int | None = None,
    task_type: str = OGB_TASK_TYPE,
    eval_metric: str = OGB_EVAL_METRIC,
    add_inverse_edge: bool = False,
) -> dict[str, Any]:
    """The ``meta_dict`` for ``NodePropPredDataset(name, meta_dict=...)`` on a folder
    written by :func:`write_ogb_raw`.

    Anything not given is read off the folder: ``binary`` (``raw/data.npz``
    without ``raw/edge.csv.gz``), ``split`` (the only folder under ``split/``),
    ``version`` (``RELEASE_v<N>.txt``), node / edge attributes (which raw files
    exist), and the number of classes and tasks (from the labels). ``name``
    (default ``"ogbn-" + folder name``) only fills ``download_name``; OGB uses it
    for messages. The values are strings where OGB's ``master.csv`` has
    strings (``'True'`` / ``'False'``, ``'None'``), as OGB compares them so.
    """
    folder = Path(folder)
    raw = folder / "raw"
    if not raw.is_dir():
        raise FileNotFoundError(f"{raw}: no raw/ folder (not an OGB dataset folder)")
    if binary is None:
        binary = (raw / "data.npz").is_file() and not (raw / "edge.csv.gz").is_file()
    if split is None:
        names = sorted(p.name for p in (folder / "split").glob("*") if p.is_dir())
        if len(names) != 1:
            raise ValueError(
                f"{folder / 'split'}: expected one split folder, found {names or 'none'}; "
                "pass 'split'"
            )
        split = names[0]
    if version is None:
        releases = sorted(folder.glob("RELEASE_v*.txt"))
        match = re.fullmatch(r"RELEASE_v(.+)\.txt", releases[-1].name) if releases else None
        version = int(match.group(1)) if match and match.group(1).isdigit() else 1
    if binary:
        with np.load(raw / "data.npz", allow_pickle=False) as data:
            keys = set(data.files)
        has_node_attr = "node_feat" in keys
        has_edge_attr = "edge_feat" in keys
    else:
        has_node_attr = (raw / "node-feat.csv.gz").is_file()
        has_edge_attr = (raw / "edge-feat.csv.gz").is_file()
    if num_classes is None or num_tasks is None:
        labels = _read_ogb_labels(raw, binary)
        if num_tasks is None:
            num_tasks = 1 if labels is None else int(labels.shape[1])
        if num_classes is None:
            num_classes = -1
            if labels is not None and labels.size and "classification" in task_type:
                finite = labels[np.isfinite(labels)] if labels.dtype.kind == "f" else labels
                num_classes = int(finite.max()) + 1 if finite.size else -1
    download_name = name.split("-", 1)[1] if name and name.startswith("ogbn-") else (
        name or folder.name)
    return {
        "version": version,
        "dir_path": str(folder),
        "download_name": download_name,
        "url": "",
        "num tasks": int(num_tasks),
        "num classes": int(num_classes),
        "task type": task_type,
        "eval metric": eval_metric,
        "add_inverse_edge": str(bool(add_inverse_edge)),
        "split": split,
        "has_node_attr": str(bool(has_node_attr)),
        "has_edge_attr": str(bool(has_edge_attr)),
        "additional node files": "None",
        "additional edge files": "None",
        "is hetero": "False",
        "binary": str(bool(binary)),
    }


def _read_ogb_labels(raw: Path, binary: bool) -> np.ndarray | None:
    if binary:
        path = raw / "node-label.npz"
        if not path.is_file():
            return None
        with np.load(path, allow_pickle=False) as data:
            labels = data["node_label"]
    else:
        path = raw / "node-label.csv.gz"
        if not path.is_file():
            return None
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(autogenerate_column_names=True))
        labels = np.column_stack([col.to_numpy(zero_copy_only=False) for col in table.columns]) \
            if table.num_columns else np.empty((0, 1))
    return labels.reshape(len(labels), -1)


# ---------------------------------------------------------------------------
# CSV / TSV / Parquet tables

_FORMATS = ("csv", "tsv", "parquet")


def infer_format(path: str | os.PathLike, format: str | None = None) -> str:
    """``format`` if given, else from the name.

    ``.csv[.gz]`` -> csv, ``.tsv[.gz]`` / ``.txt`` -> tsv, ``.parquet`` / ``.pq`` -> parquet.
    """
    if format is not None:
        if format not in _FORMATS:
            raise ValueError(f"'format' must be one of {', '.join(_FORMATS)} (got {format!r})")
        return format
    name = str(path).lower()
    name = name.removesuffix(".gz")
    for suffix, fmt in ((".csv", "csv"), (".tsv", "tsv"), (".txt", "tsv"), (".parquet", "parquet"),
                        (".pq", "parquet")):
        if name.endswith(suffix):
            return fmt
    raise ValueError(f"{path}: cannot tell the format from the name; pass 'format'")


def _to_arrow(values) -> pa.Array:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    values = np.asarray(values)
    if values.dtype.kind == "U":
        return pa.array(values, type=pa.string())
    return pa.array(values)


def write_table_file(
    path: str | os.PathLike,
    columns: Mapping[str, Any],
    *,
    format: str | None = None,
    header: bool = True,
    compresslevel: int = 1,
    workers: int | None = None,
) -> Path:
    """Write named columns (numpy / Arrow arrays, equal lengths) as CSV, TSV or Parquet.

    Text formats: fields unquoted, a header line of the column names unless
    ``header=False``, floats in their shortest round-trip form; a name ending
    in ``.gz`` is gzip-compressed. Parquet: one file, default compression.
    """
    path = Path(path)
    fmt = infer_format(path, format)
    table = pa.table({name: _to_arrow(values) for name, values in columns.items()})
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(table, path)
        return path
    for name, column in zip(table.column_names, table.columns):
        if pa.types.is_nested(column.type):
            raise ValueError(
                f"column {name!r} is a {column.type} column, which {fmt.upper()} cannot hold; "
                "use format='parquet' or one column per value"
            )
    delimiter = "," if fmt == "csv" else "\t"
    options = pacsv.WriteOptions(include_header=False, delimiter=delimiter, quoting_style="none")
    step = max(1024, (8 << 20) // max(1, 12 * table.num_columns))
    with open_text_sink(path, level=compresslevel, workers=workers) as sink:
        if header:
            sink.write((delimiter.join(table.column_names) + "\n").encode())
        for start in range(0, table.num_rows, step):
            buffer = pa.BufferOutputStream()
            pacsv.write_csv(table.slice(start, step), buffer, options)
            sink.write(buffer.getvalue())
    return path


def write_edge_list(
    path: str | os.PathLike,
    src: np.ndarray,
    dst: np.ndarray,
    *,
    format: str | None = None,
    src_col: str = "src",
    dst_col: str = "dst",
    weight: np.ndarray | None = None,
    weight_col: str = "weight",
    header: bool = True,
    ids: np.ndarray | None = None,
    compresslevel: int = 1,
) -> Path:
    """Write an edge list: one row per edge, columns ``src_col``, ``dst_col`` (and ``weight_col``).

    ``ids``: external IDs (:func:`external_ids`) to write instead of the dense
    ``src`` / ``dst`` values, as ``ids[src]``, ``ids[dst]``. ``format`` is
    ``"csv"``, ``"tsv"`` or ``"parquet"`` (default: from the file name).
    """
    src, dst = np.asarray(src), np.asarray(dst)
    if src.shape != dst.shape:
        raise ValueError(f"'src' and 'dst' must have one shape (got {src.shape}, {dst.shape})")
    if ids is not None:
        ids = np.asarray(ids)
        src, dst = ids[src], ids[dst]
    columns: dict[str, Any] = {src_col: src, dst_col: dst}
    if weight is not None:
        weight = np.asarray(weight)
        if weight.shape != src.shape:
            raise ValueError(f"'weight' must have shape {src.shape} (got {weight.shape})")
        columns[weight_col] = weight
    return write_table_file(path, columns, format=format, header=header,
                            compresslevel=compresslevel)


FEATURE_LAYOUTS = ("columns", "list", "fixed_list")


def write_node_table(
    path: str | os.PathLike,
    external_ids: np.ndarray,
    features: np.ndarray | None = None,
    labels: np.ndarray | None = None,
    *,
    format: str | None = None,
    feature_layout: str = "columns",
    id_col: str = "id",
    label_col: str = "label",
    feature_prefix: str = "f",
    feature_col: str = "features",
    header: bool = True,
    compresslevel: int = 1,
) -> Path:
    """Write one row per node: ``id_col``, then ``label_col``, then the features.

    ``feature_layout``:
      - ``"columns"``: one float column per dimension, ``f0 .. f{F-1}`` (any format);
      - ``"list"``: one ``list<float32>`` column ``feature_col`` (Parquet only);
      - ``"fixed_list"``: one ``fixed_size_list<float32, F>`` column (Parquet only).
    """
    if feature_layout not in FEATURE_LAYOUTS:
        raise ValueError(
            f"'feature_layout' must be one of {', '.join(FEATURE_LAYOUTS)} (got {feature_layout!r})"
        )
    fmt = infer_format(path, format)
    external_ids = np.asarray(external_ids)
    n = len(external_ids)
    columns: dict[str, Any] = {id_col: external_ids}
    if labels is not None:
        labels = np.asarray(labels)
        if len(labels) != n:
            raise ValueError(f"'labels' must have {n} rows (got {len(labels)})")
        columns[label_col] = labels
    if features is not None:
        features = np.asarray(features)
        if features.ndim != 2 or len(features) != n:
            raise ValueError(f"'features' must have shape ({n}, F) (got {features.shape})")
        if feature_layout == "columns":
            for j in range(features.shape[1]):
                columns[f"{feature_prefix}{j}"] = np.ascontiguousarray(features[:, j])
        else:
            if fmt != "parquet":
                raise ValueError(
                    f"feature_layout={feature_layout!r} needs format='parquet' (got {fmt!r})"
                )
            flat = pa.array(np.ascontiguousarray(features).reshape(-1))
            dim = features.shape[1]
            if feature_layout == "fixed_list":
                columns[feature_col] = pa.FixedSizeListArray.from_arrays(flat, dim)
            else:
                offsets = pa.array(np.arange(0, (n + 1) * dim, dim, dtype=np.int32))
                columns[feature_col] = pa.ListArray.from_arrays(offsets, flat)
    return write_table_file(path, columns, format=fmt, header=header, compresslevel=compresslevel)


# ---------------------------------------------------------------------------
# npz


def write_npz(
    path: str | os.PathLike,
    graph_or_arrays: SyntheticGraph | Mapping[str, Any],
    *,
    compressed: bool = False,
) -> Path:
    """Write one ``.npz``: ``edge_index`` int64 (2, E), ``x`` float32 (N, F), ``y`` int64 (N,),
    ``train_idx`` / ``valid_idx`` / ``test_idx`` int64, ``num_nodes`` (a 0-d int64), and
    ``edge_attr`` when the graph has edge features. ``x`` / ``y`` are left out when absent."""
    graph = as_synthetic_graph(graph_or_arrays)
    _check(graph)
    arrays: dict[str, np.ndarray] = {
        "edge_index": graph.edge_index,
        "num_nodes": np.array(graph.num_nodes, dtype=np.int64),
    }
    if graph.features is not None:
        arrays["x"] = np.asarray(graph.features, dtype=np.float32)
    if graph.labels is not None:
        arrays["y"] = graph.labels.astype(np.int64, copy=False)
    for name, ids in graph.splits.items():
        arrays[f"{name}_idx"] = ids.astype(np.int64, copy=False)
    if graph.edge_feat is not None:
        arrays["edge_attr"] = np.asarray(graph.edge_feat)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as file:  # a file object, so numpy adds no ".npz" to the name
        (np.savez_compressed if compressed else np.savez)(file, **arrays)
    return path
