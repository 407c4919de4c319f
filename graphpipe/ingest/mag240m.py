"""Reader of the MAG240M (OGB-LSC) layout: a :class:`~graphpipe.ingest.source.TypedSource`.

Layout (what ``ogb.lsc.MAG240MDataset`` reads; ``DIR`` is ``mag240m_kddcup2021/`` or the
folder given)::

    DIR/meta.pt                              {ntype: count, ..., "num_classes": C}
    DIR/split_dict.pt                        {"train": ids, "valid": ids, "test-dev": ids, ...}
    DIR/processed/<src>___<rel>___<dst>/edge_index.npy   (2, E) int64 local IDs
    DIR/processed/<ntype>/node_feat.npy      (N_t, D) float16 (768 wide in MAG240M)
    DIR/processed/<ntype>/node_label.npy     (N_t,) float, NaN = unlabelled (stored as -1)
    DIR/processed/<ntype>/node_year.npy      (N_t,) integer years

Nothing is unpickled: ``meta.pt`` and ``split_dict.pt`` are read by
:func:`graphpipe.ingest.safe_load.load_torch_file` (``torch.load(weights_only=True)``,
plain containers and arrays only), ``.npy`` files with ``np.load`` without
``allow_pickle`` (an object array is refused). Large arrays are memory maps, never read
whole: the feature matrix is handed to the store builder a row block at a time, each
block copied through a fresh map of it (unmapped after it, so the resident set stays one
block however large the file); each ``edge_index`` goes to the out-of-core CSC builder in
column blocks. Features are stored in their float16/float32 dtype
(``feature_dtype="float16"`` halves float32 ones). ``test-whole`` is stored as the split ``test`` (``test-dev`` and ``test-challenge``
are its positions ``i % 5 < 3`` and the rest, OGB's ``split_test``; the store's splits
are disjoint, so they are not stored again).
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
from graphpipe.ingest.safe_load import load_torch_file
from graphpipe.ingest.source import RowBlock, TypedNodes, TypedRelation, TypedSource
from graphpipe.ingest.timestamps import as_year_values
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError

DIR_NAME = "mag240m_kddcup2021"
BLOCK_BYTES = 32 << 20
"""Bytes of feature rows copied per block (one memory map of that block at a time)."""
EDGE_BLOCK = 1 << 22
"""Edges per chunk handed to the CSC builder."""


def mag240m_dir(path: str | os.PathLike) -> Path | None:
    """The MAG240M folder at or under ``path`` (``meta.pt`` and ``processed/``), or None."""
    path = Path(path)
    for candidate in (path / DIR_NAME, path):
        if (candidate / "meta.pt").is_file() and (candidate / "processed").is_dir():
            return candidate
    return None


def is_mag240m_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` (or its ``mag240m_kddcup2021/``) is a MAG240M folder.

    >>> import tempfile
    >>> is_mag240m_folder(tempfile.gettempdir() + "/no-such-folder")
    False
    """
    return mag240m_dir(path) is not None


def _rel(base: Path, path: Path) -> str:
    try:
        return str(Path(base.name) / path.relative_to(base))
    except ValueError:
        return str(path)


def read_meta(base: Path) -> tuple[dict[str, int], int | None]:
    """``({ntype: count}, num_classes)`` from ``meta.pt``."""
    where = _rel(base, base / "meta.pt")
    meta = load_torch_file(base / "meta.pt", where)
    if not isinstance(meta, dict):
        raise IngestError(f"{where}: expected a dict of node counts, found {type(meta).__name__}")
    counts: dict[str, int] = {}
    num_classes = None
    for key, value in meta.items():
        value = np.asarray(value)
        if value.shape != () or value.dtype.kind not in "iu" or int(value) < 0:
            raise IngestError(f"{where}: {key!r} must be a non-negative integer (got {value!r})")
        if key == "num_classes":
            num_classes = int(value)
            continue
        try:
            counts[ts.check_name(key, "node type")] = int(value)
        except StoreError as exc:
            raise IngestError(f"{where}: {exc}") from None
    if not counts:
        raise IngestError(f"{where}: no node counts")
    return counts, num_classes


def open_npy(path: Path, where: str) -> np.ndarray:
    """A read-only memory map of the ``.npy`` at ``path`` (numeric only, never unpickled)."""
    if not path.is_file():
        raise IngestError(f"{where}: file not found")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # noqa: BLE001 - bad magic, bad header, object dtype, truncated
        raise IngestError(f"{where}: not a readable numeric .npy file "
                          f"({' '.join(str(exc).split())[:160]})") from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        raise IngestError(f"{where}: dtype {getattr(array, 'dtype', None)} is not numeric")
    return array


def relation_types(base: Path, counts: dict[str, int]) -> list[ts.EdgeType]:
    """The ``processed/<src>___<rel>___<dst>/`` folders, sorted."""
    etypes = []
    for entry in sorted((base / "processed").iterdir()):
        if not entry.is_dir() or "___" not in entry.name:
            continue
        try:
            etype = ts.parse_etype(entry.name)
        except StoreError as exc:
            raise IngestError(f"{_rel(base, entry)}: {exc}") from None
        for ntype in (etype[0], etype[2]):
            if ntype not in counts:
                raise IngestError(f"{_rel(base, entry)}: node type {ntype!r} is not in meta.pt "
                                  f"({sorted(counts)})")
        etypes.append(etype)
    return etypes


def edge_blocks(edge_index: np.ndarray, where: str) -> Iterator[EdgeChunk]:
    """Column blocks of a memory-mapped ``(2, E)`` edge index as :class:`EdgeChunk` runs."""
    if edge_index.ndim != 2 or edge_index.shape[0] != 2 or edge_index.dtype.kind not in "iu":
        raise IngestError(f"{where}: shape {edge_index.shape} dtype {edge_index.dtype}, "
                          f"expected (2, E) integers")
    for start in range(0, edge_index.shape[1], EDGE_BLOCK):
        block = np.array(edge_index[:, start:start + EDGE_BLOCK], dtype=np.int64)
        yield EdgeChunk(block[0], block[1], start, where, start + 1)


def feature_blocks(path: Path, where: str, n: int, ntype: str) -> Iterator[RowBlock]:
    """``node_feat.npy`` a row block at a time, each block through its own memory map
    (unmapped before the next), so the file is never read whole."""
    header = open_npy(path, where)
    if header.ndim != 2 or header.shape[0] != n or header.dtype.kind != "f":
        raise IngestError(f"{where}: shape {header.shape} dtype {header.dtype}, expected ({n}, D) "
                          f"floats ({ntype!r} nodes in meta.pt)")
    if header.flags.f_contiguous and not header.flags.c_contiguous:
        raise IngestError(f"{where}: Fortran-ordered features are not supported (save C order)")
    shape, dtype, offset = header.shape, header.dtype, header.offset
    del header
    out_dtype = np.float16 if dtype == np.float16 else np.float32
    step = max(1, BLOCK_BYTES // max(1, shape[1] * dtype.itemsize))
    for start in range(0, shape[0], step):
        count = min(step, shape[0] - start)
        block = np.memmap(path, dtype=dtype, mode="r", shape=(count, shape[1]),
                          offset=offset + start * shape[1] * dtype.itemsize)
        values = np.asarray(block, dtype=out_dtype)
        del block  # unmaps the block: its pages leave the resident set
        yield RowBlock(start, values, where, start + 1)


def read_vector(check: Callable[[np.ndarray, str], np.ndarray], path: Path, where: str,
                n: int) -> np.ndarray:
    """A per-node ``.npy`` (``(N_t,)`` or ``(N_t, 1)``) read whole, through ``check``."""
    array = open_npy(path, where)
    if array.shape not in ((n,), (n, 1)):
        raise IngestError(f"{where}: shape {array.shape}, expected ({n},)")
    return check(np.array(array).reshape(n), where)


def node_types(base: Path, counts: dict[str, int]) -> dict[str, TypedNodes]:
    """Each type's features, years and labels where ``processed/<ntype>/`` has them."""
    nodes = {}
    for ntype, n in counts.items():
        folder = base / "processed" / ntype
        files = {name: (folder / f"{name}.npy", _rel(base, folder / f"{name}.npy"))
                 for name in ("node_feat", "node_year", "node_label")}
        here = {name: spec for name, spec in files.items() if spec[0].exists()}
        node = nodes[ntype] = TypedNodes(n, where=_rel(base, base / "meta.pt"))
        if "node_feat" in here:
            node.features = partial(feature_blocks, *here["node_feat"], n, ntype)
            node.float16 = open_npy(*here["node_feat"]).dtype == np.float16
        if "node_year" in here:
            node.time = partial(read_vector, as_year_values, *here["node_year"], n)
        if "node_label" in here:
            node.labels = partial(read_vector, class_labels, *here["node_label"], n)
    return nodes


def read_splits(path: Path, where: str) -> Iterator[tuple[str, np.ndarray, str]]:
    """``split_dict.pt`` (IDs of the target type), ``test-whole`` left out when its parts are there."""
    splits = load_torch_file(path, where)
    if not isinstance(splits, dict):
        raise IngestError(f"{where}: expected a dict of index arrays, found {type(splits).__name__}")
    if "test-whole" in splits:  # OGB's test-dev / test-challenge are its positions i%5<3 / the rest
        splits = {("test" if k == "test-whole" else k): v for k, v in splits.items()
                  if k not in ("test-dev", "test-challenge")}
    for name, ids in splits.items():
        ids = np.asarray(ids)
        if ids.dtype.kind not in "iu":
            raise IngestError(f"{where}: split {name!r} has dtype {ids.dtype}, expected integer IDs")
        yield str(name), ids.reshape(-1), where


def _edges(path: Path, where: str) -> Iterator[EdgeChunk]:
    yield from edge_blocks(open_npy(path, where), where)


def read_mag240m(folder: str | os.PathLike, *, target_type: str | None = None) -> TypedSource:
    """The MAG240M-layout folder ``folder`` (module docstring) as a typed source.

    >>> import os, tempfile
    >>> from graphpipe.synthetic.mag240m import mag240m_dataset, write_mag240m
    >>> tmp = tempfile.TemporaryDirectory()
    >>> root = write_mag240m(tmp.name, mag240m_dataset(papers=40, authors=20, institutions=3,
    ...                                                feature_dim=4))
    >>> source = read_mag240m(root)
    >>> source.target_type, {t: n.count for t, n in source.node_types.items()}["paper"]
    ('paper', 40)
    >>> tmp.cleanup()
    """
    base = mag240m_dir(folder)
    if base is None:
        raise IngestError(f"{folder}: no meta.pt and processed/ (not a MAG240M folder)")
    counts, num_classes = read_meta(base)
    nodes = node_types(base, counts)
    relations = []
    for etype in relation_types(base, counts):
        path = base / "processed" / ts.etype_key(etype) / "edge_index.npy"
        relations.append(TypedRelation(etype, partial(_edges, path, _rel(base, path))))
    labelled = [t for t, node in nodes.items() if node.labels is not None]
    target = target_type or (labelled[0] if len(labelled) == 1 else None)
    split_path = base / "split_dict.pt"
    if target is None and split_path.is_file():
        raise IngestError(f"{_rel(base, split_path)}: cannot tell which node type its IDs are of "
                          f"(labelled types: {labelled}); pass --target-type")
    if target in nodes:
        if split_path.is_file():
            nodes[target].splits = partial(read_splits, split_path, _rel(base, split_path))
        nodes[target].num_classes = num_classes
    return TypedSource(base.name, "mag240m", str(base), nodes, relations, target)
