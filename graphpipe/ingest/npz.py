"""NumPy ``.npz`` graphs → :class:`DatasetSource`.

Recognised keys (every other key is ignored and listed in ``extra["ignored_keys"]``):

- ``edge_index``: int ``(2, E)`` (row 0 = source, row 1 = destination), or ``src`` + ``dst``: int ``(E,)``.
- ``num_nodes``: scalar int N (default: rows of ``x``, else length of ``y``, else max ID + 1).
- ``x``: ``(N, F)`` (or ``(N,)``, read as ``F = 1``) node features.
- ``y``: ``(N,)`` or ``(N, T)`` labels: integers → int64 multiclass classification; booleans (or
  0/1/NaN floats with ``T > 1``) → binary classification; ``(N,)`` floats holding NaN and
  otherwise only integers → multiclass classification with NaN = unlabelled (OGB's
  convention; stored as -1); other floats → regression.
- ``train_idx`` / ``valid_idx`` (or ``val_idx``) / ``test_idx``: int node IDs, or boolean
  ``(N,)`` masks ``train_mask`` / ``valid_mask`` (or ``val_mask``) / ``test_mask``.
- ``edge_attr``: ``(E,)`` or ``(E, D)`` numeric edge features (float32 row blocks).
- ``node_time`` (or OGB's ``node_year``): ``(N,)`` integer node timestamps -> ``nodes/time``;
  ``edge_time``: ``(E,)`` integer edge timestamps -> ``csc/time`` (CSC order).

Node IDs are dense already: there is no ID map. Every check names the key and
the offending position; split IDs are checked for range and overlap here too
(the pipeline checks them again).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.source import DatasetSource, RowBlock

_SPLIT_KEYS = {
    "train": ("train_idx", "train_mask"),
    "valid": ("valid_idx", "val_idx", "valid_mask", "val_mask"),
    "test": ("test_idx", "test_mask"),
}
_TIME_KEYS = ("node_time", "node_year")
_KNOWN = {"edge_index", "src", "dst", "num_nodes", "x", "y", "edge_attr", "edge_time", *_TIME_KEYS,
          *(k for keys in _SPLIT_KEYS.values() for k in keys)}


def is_npz_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` names an ``.npz`` file (by its suffix: a missing one is the reader's error).

    >>> is_npz_file("graph.npz"), is_npz_file("graph.csv")
    (True, False)
    """
    return str(path).endswith(".npz")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _load(path: str) -> dict[str, np.ndarray]:
    if not os.path.isfile(path):
        raise IngestError(f"{path}: no such file")
    if not zipfile.is_zipfile(path):
        raise IngestError(f"{path}: not a readable .npz file (not a zip archive)")
    arrays: dict[str, np.ndarray] = {}
    try:
        with np.load(path, allow_pickle=False) as archive:
            for key in archive.files:
                try:
                    arrays[key] = archive[key]
                except ValueError as exc:     # object arrays need pickle: refuse them
                    raise IngestError(f"{path}: {key}: cannot read ({_one_line(exc)})") from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise IngestError(f"{path}: not a readable .npz file ({_one_line(exc)})") from None
    return arrays


def _int_ids(path: str, key: str, values: np.ndarray) -> np.ndarray:
    if values.dtype.kind not in "iu":
        raise IngestError(f"{path}: {key}: dtype {values.dtype}, expected integers")
    if values.dtype == np.uint64 and values.size and values.max() > np.iinfo(np.int64).max:
        raise IngestError(f"{path}: {key}: ID {values.max()} does not fit in int64")
    return values.astype(np.int64, copy=False)


def _position(shape: tuple, flat: int) -> str:
    return ", ".join(str(int(i)) for i in np.unravel_index(int(flat), shape))


def _check_range(path: str, key: str, ids: np.ndarray, num_nodes: int) -> None:
    bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
    if bad.size:
        pos = _position(ids.shape, bad[0])
        raise IngestError(f"{path}: {key}[{pos}] = {int(ids.reshape(-1)[bad[0]])} is not a node ID "
                          f"in [0, {num_nodes})")


def _edges(path: str, arrays: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, str, str]:
    """``(src, dst, src_key, dst_key)`` int64 from ``edge_index`` or ``src`` + ``dst``."""
    if "edge_index" in arrays:
        if "src" in arrays or "dst" in arrays:
            raise IngestError(f"{path}: both edge_index and src/dst given; keep one")
        edge_index = arrays["edge_index"]
        if edge_index.ndim != 2 or edge_index.shape[0] != 2:
            raise IngestError(f"{path}: edge_index: shape {edge_index.shape}, expected (2, E)")
        edge_index = _int_ids(path, "edge_index", edge_index)
        return edge_index[0], edge_index[1], "edge_index[0]", "edge_index[1]"
    if "src" in arrays and "dst" in arrays:
        src, dst = arrays["src"], arrays["dst"]
        for key, values in (("src", src), ("dst", dst)):
            if values.ndim != 1:
                raise IngestError(f"{path}: {key}: shape {values.shape}, expected (E,)")
        if src.shape != dst.shape:
            raise IngestError(f"{path}: src has {src.shape[0]} entries but dst has {dst.shape[0]}")
        return _int_ids(path, "src", src), _int_ids(path, "dst", dst), "src", "dst"
    missing = "dst" if "src" in arrays else "src" if "dst" in arrays else "edge_index (or src and dst)"
    raise IngestError(f"{path}: no {missing} key; keys present: {sorted(arrays)}")


def _num_nodes(path: str, arrays: dict[str, np.ndarray], src: np.ndarray, dst: np.ndarray) -> tuple[int, str]:
    """N and where it came from."""
    if "num_nodes" in arrays:
        value = arrays["num_nodes"]
        if value.size != 1 or value.dtype.kind not in "iu":
            raise IngestError(f"{path}: num_nodes: expected one integer (got dtype {value.dtype}, "
                              f"shape {value.shape})")
        n = int(value.reshape(-1)[0])
        if n < 0:
            raise IngestError(f"{path}: num_nodes: {n} is negative")
        return n, "num_nodes"
    if "x" in arrays:
        return int(arrays["x"].shape[0]) if arrays["x"].ndim else 0, "rows of x"
    if "y" in arrays:
        return int(arrays["y"].shape[0]) if arrays["y"].ndim else 0, "length of y"
    top = max(int(src.max()) if src.size else -1, int(dst.max()) if dst.size else -1)
    return top + 1, "largest node ID + 1"


def _labels(path: str, y: np.ndarray, num_nodes: int, origin: str) -> tuple[np.ndarray, str, int | None]:
    if y.ndim not in (1, 2):
        raise IngestError(f"{path}: y: shape {y.shape}, expected (N,) or (N, T)")
    if y.shape[0] != num_nodes:
        raise IngestError(f"{path}: y: {y.shape[0]} rows, but num_nodes is {num_nodes} ({origin})")
    if y.dtype.kind == "b":
        return y.astype(np.int64), "binary classification", 2
    if y.dtype.kind in "iu":
        labels = y.astype(np.int64)
        if y.ndim == 2 and y.shape[1] > 1 and np.isin(labels, (0, 1)).all():
            return labels, "binary classification", 2
        return labels, "multiclass classification", int(labels.max()) + 1 if labels.size else 0
    if y.dtype.kind == "f":
        known = y[~np.isnan(y)]
        if y.ndim == 2 and y.shape[1] > 1 and known.size and np.isin(known, (0.0, 1.0)).all():
            return y, "binary classification", 2
        if y.ndim == 1 and known.size < y.size and known.size and (known == np.round(known)).all():
            return y, "multiclass classification", None     # OGB's convention: NaN = unlabelled
        return y, "regression", None
    raise IngestError(f"{path}: y: dtype {y.dtype}, expected numbers")


def _splits(path: str, arrays: dict[str, np.ndarray], num_nodes: int) -> tuple[dict[str, np.ndarray],
                                                                               dict[str, str]]:
    splits: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    for name, keys in _SPLIT_KEYS.items():
        present = [k for k in keys if k in arrays]
        if len(present) > 1:
            raise IngestError(f"{path}: split {name!r} given twice ({', '.join(present)}); keep one")
        if not present:
            continue
        key = present[0]
        values = arrays[key]
        if key.endswith("_mask"):
            if values.dtype.kind != "b":
                raise IngestError(f"{path}: {key}: dtype {values.dtype}, expected bool")
            if values.shape != (num_nodes,):
                raise IngestError(f"{path}: {key}: shape {values.shape}, expected ({num_nodes},)")
            ids = np.flatnonzero(values).astype(np.int64)
        else:
            if values.ndim != 1:
                raise IngestError(f"{path}: {key}: shape {values.shape}, expected (n,)")
            ids = _int_ids(path, key, values)
            _check_range(path, key, ids, num_nodes)
            unique, counts = np.unique(ids, return_counts=True)
            if (counts > 1).any():
                raise IngestError(f"{path}: {key}: node {int(unique[counts > 1][0])} listed twice")
        for other, other_ids in splits.items():
            common = np.intersect1d(ids, other_ids)
            if common.size:
                raise IngestError(f"{path}: {key}: {common.size} node(s) also in split {other!r} "
                                  f"({sources[other].split(':')[-1]}), first: {common[:5].tolist()}")
        splits[name], sources[name] = ids, f"{path}:{key}"
    return splits, sources


def _row_blocks(values: np.ndarray, source: str, block_rows: int, dtype: np.dtype | None) -> Iterator[RowBlock]:
    matrix = values.reshape(values.shape[0], -1)
    for start in range(0, matrix.shape[0], block_rows):
        part = matrix[start:start + block_rows]
        yield RowBlock(first_row=start, values=part.astype(dtype, copy=False) if dtype else part,
                       source=source, first_line=start + 1)


def read_npz(path: str | os.PathLike, name: str | None = None, *, block_rows: int = 1 << 20) -> DatasetSource:
    """Read a graph from a ``.npz`` file (see the module docstring for the keys).

    Returns a :class:`DatasetSource` (``source_format="npz"``): edges in
    ``edge_index`` order in chunks of at most ``block_rows``, ``x`` as row blocks
    (float32, or int64 when ``x`` is integer), ``y``, splits, ``edge_attr``.
    EdgeChunk ``first_line`` is the 1-based edge position. Raises
    :class:`IngestError` naming the key at fault.
    """
    if block_rows < 1:
        raise ValueError(f"'block_rows' must be positive (got {block_rows})")
    path = os.fspath(path)
    stem = os.path.basename(path)
    return source_from_arrays(_load(path), path, name=name or stem.removesuffix(".npz"),
                              block_rows=block_rows)


def source_from_arrays(arrays: dict[str, np.ndarray], path: str, *, name: str,
                       block_rows: int = 1 << 20, source_format: str = "npz") -> DatasetSource:
    """A :class:`DatasetSource` from in-memory arrays with the keys of an ``.npz`` (module
    docstring); ``path`` names them in error messages (a file, or ``"Data"``)."""
    src, dst, src_key, dst_key = _edges(path, arrays)
    num_nodes, origin = _num_nodes(path, arrays, src, dst)
    for key, ids in ((src_key, src), (dst_key, dst)):
        bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
        if bad.size:
            raise IngestError(f"{path}: {key}[{int(bad[0])}] = {int(ids[bad[0]])} is not a node ID in "
                              f"[0, {num_nodes}) (num_nodes from {origin})")
    num_edges = int(src.shape[0])
    edge_source = f"{path}:{'edge_index' if src_key.startswith('edge_index') else 'src/dst'}"

    def edge_chunks() -> Iterator[EdgeChunk]:
        for start in range(0, num_edges, block_rows):
            stop = min(start + block_rows, num_edges)
            yield EdgeChunk(src=src[start:stop].copy(), dst=dst[start:stop].copy(),
                            first_row=start, source=edge_source, first_line=start + 1)

    source = DatasetSource(name=name, source_format=source_format,
                           source_path=path, num_nodes=num_nodes, edge_chunks=edge_chunks,
                           num_input_edges=num_edges)
    if "x" in arrays:
        x = arrays["x"]
        if x.ndim not in (1, 2):
            raise IngestError(f"{path}: x: shape {x.shape}, expected (N, F)")
        if x.shape[0] != num_nodes:
            raise IngestError(f"{path}: x: {x.shape[0]} rows, but num_nodes is {num_nodes} ({origin})")
        if x.dtype.kind not in "biuf":
            raise IngestError(f"{path}: x: dtype {x.dtype}, expected numbers")
        dtype = np.int64 if x.dtype.kind in "biu" else np.float32
        source.node_features = lambda: _row_blocks(x, f"{path}:x", block_rows, dtype)
        source.feature_dim = int(x.shape[1]) if x.ndim == 2 else 1
    if "y" in arrays:
        source.labels, source.task_type, source.num_classes = _labels(path, arrays["y"], num_nodes, origin)
    source.splits, source.split_sources = _splits(path, arrays, num_nodes)
    if "edge_attr" in arrays:
        attr = arrays["edge_attr"]
        if attr.ndim not in (1, 2) or attr.shape[0] != num_edges:
            raise IngestError(f"{path}: edge_attr: shape {attr.shape}, expected ({num_edges},) or "
                              f"({num_edges}, D) for the {num_edges} edges")
        if attr.dtype.kind not in "biuf":
            raise IngestError(f"{path}: edge_attr: dtype {attr.dtype}, expected numbers")
        source.edge_features = lambda: _row_blocks(attr, f"{path}:edge_attr", block_rows, np.float32)
        source.edge_feature_dim = int(attr.shape[1]) if attr.ndim == 2 else 1
    source.extra = {"edge_file": edge_source, "num_nodes_from": origin}
    _attach_times(source, arrays, path, num_nodes, num_edges, block_rows)
    ignored = sorted(set(arrays) - _KNOWN)
    if "y" in arrays:
        source.extra["label_file"] = f"{path}: y"
    source.num_nodes_backed = "x" in arrays or "y" in arrays
    if ignored:
        source.extra["ignored_keys"] = ",".join(ignored)
    return source


def _attach_times(source: DatasetSource, arrays: dict[str, np.ndarray], path: str, num_nodes: int,
                  num_edges: int, block_rows: int) -> None:
    """``node_time`` / ``node_year`` and ``edge_time`` as the source's timestamps."""
    from graphpipe.ingest.timestamps import as_time_values

    keys = [k for k in _TIME_KEYS if k in arrays]
    if len(keys) > 1:
        raise IngestError(f"{path}: both {keys[0]} and {keys[1]} given; keep one node timestamp key")
    if keys:
        where = f"{path}: {keys[0]}"
        source.node_time = as_time_values(arrays[keys[0]], where)
        if source.node_time.shape[0] != num_nodes:
            raise IngestError(f"{where}: {source.node_time.shape[0]} values, but there are {num_nodes} nodes")
        source.extra["node_time_file"] = where
    if "edge_time" in arrays:
        where = f"{path}: edge_time"
        times = as_time_values(arrays["edge_time"], where)
        if times.shape[0] != num_edges:
            raise IngestError(f"{where}: {times.shape[0]} values, but there are {num_edges} edges")
        source.edge_time = lambda: _row_blocks(times, where, block_rows, np.int64)
        source.extra["edge_time_file"] = where
