"""Reader of the MAG240M (OGB-LSC) layout into a typed store.

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
whole: the feature matrix is copied a row block at a time through a fresh map of that
block (unmapped after it, so the resident set stays one block however large the file);
each ``edge_index`` goes through the out-of-core CSC builder in column blocks. Features
are stored in their float16/float32 dtype (``feature_dtype="float16"`` halves float32
ones). ``test-whole`` is stored as the split ``test`` (``test-dev`` and ``test-challenge``
are its positions ``i % 5 < 3`` and the rest, OGB's ``split_test``; the store's splits
are disjoint, so they are not stored again).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.ogb import _labels_from_float
from graphpipe.ingest.safe_load import load_torch_file
from graphpipe.ingest.typed_csc import build_relation, build_reverse, check_reverse
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError
from graphpipe.store.writer import TypedStoreWriter

ProgressFn = Callable[[str, int, int], None]
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


def copy_features(writer: TypedStoreWriter, ntype: str, path: Path, where: str, *,
                  feature_dtype: str, allow_nonfinite: bool) -> None:
    """Copy ``node_feat.npy`` into the store a row block at a time, each block through its
    own memory map (unmapped before the next), so the file is never read whole."""
    header = open_npy(path, where)
    n = writer.num_nodes_dict[ntype]
    if header.ndim != 2 or header.shape[0] != n or header.dtype.kind != "f":
        raise IngestError(f"{where}: shape {header.shape} dtype {header.dtype}, expected ({n}, D) "
                          f"floats ({ntype!r} nodes in meta.pt)")
    if header.flags.f_contiguous and not header.flags.c_contiguous:
        raise IngestError(f"{where}: Fortran-ordered features are not supported (save C order)")
    shape, dtype, offset = header.shape, header.dtype, header.offset
    del header
    out_dtype = np.float16 if feature_dtype == "float16" or dtype == np.float16 else np.float32
    rows = writer.feature_rows(ntype, shape[1], out_dtype)
    step = max(1, BLOCK_BYTES // max(1, shape[1] * dtype.itemsize))
    for start in range(0, shape[0], step):
        count = min(step, shape[0] - start)
        block = np.memmap(path, dtype=dtype, mode="r", shape=(count, shape[1]),
                          offset=offset + start * shape[1] * dtype.itemsize)
        values = np.asarray(block, dtype=out_dtype)
        del block  # unmaps the block: its pages leave the resident set
        if not allow_nonfinite and not np.isfinite(values).all():
            r, c = np.argwhere(~np.isfinite(values))[0]
            raise IngestError(f"{where}: row {start + r}, column {c}: non-finite value "
                              f"{values[r, c]} (pass --allow-nonfinite to keep it)")
        rows.write(values)
    rows.close()


def node_vector(path: Path, where: str, n: int) -> np.ndarray:
    """A per-node ``(N_t,)`` (or ``(N_t, 1)``) array, read into memory."""
    array = open_npy(path, where)
    if array.shape not in ((n,), (n, 1)):
        raise IngestError(f"{where}: shape {array.shape}, expected ({n},)")
    return np.array(array).reshape(n)


def write_node_arrays(writer: TypedStoreWriter, base: Path, ntype: str, *, feature_dtype: str,
                      allow_nonfinite: bool) -> bool:
    """Features, labels and years of ``ntype`` where present; True when it has labels."""
    folder, n = base / "processed" / ntype, writer.num_nodes_dict[ntype]
    if (folder / "node_feat.npy").exists():
        copy_features(writer, ntype, folder / "node_feat.npy", _rel(base, folder / "node_feat.npy"),
                      feature_dtype=feature_dtype, allow_nonfinite=allow_nonfinite)
    if (folder / "node_year.npy").exists():
        where = _rel(base, folder / "node_year.npy")
        years = node_vector(folder / "node_year.npy", where, n)
        if years.dtype.kind == "f" and not (np.isfinite(years) & (years == np.round(years))).all():
            raise IngestError(f"{where}: years must be integers")
        writer.write_node_array(ntype, "time", years.astype(np.int64))
    if not (folder / "node_label.npy").exists():
        return False
    where = _rel(base, folder / "node_label.npy")
    labels = _labels_from_float(node_vector(folder / "node_label.npy", where, n).astype(np.float64))
    if labels.dtype.kind != "i" or (labels.size and labels.min() < -1):
        raise IngestError(f"{where}: labels must be integer classes >= 0 (NaN: unlabelled)")
    writer.write_node_array(ntype, "label", labels)
    return True


def write_splits(writer: TypedStoreWriter, base: Path, target: str) -> None:
    """``split_dict.pt`` (IDs of ``target``), ``test-whole`` left out when its parts are there."""
    path = base / "split_dict.pt"
    if not path.is_file():
        return
    where = _rel(base, path)
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
        try:
            writer.write_split(target, ts.check_name(str(name), "split name"), ids.reshape(-1))
        except StoreError as exc:
            raise IngestError(f"{where}: {exc}") from None


def ingest_mag240m(folder: str | os.PathLike, dest: str | os.PathLike, *, name: str | None = None,
                   overwrite: bool = False, target_type: str | None = None,
                   memory_limit: int | None = None, feature_dtype: str = "float32",
                   allow_nonfinite: bool = False, add_reverse_edges: bool = False,
                   progress: ProgressFn | None = None) -> Path:
    """Write the MAG240M-layout folder ``folder`` as a typed store at ``dest``; returns ``dest``."""
    base = mag240m_dir(folder)
    if base is None:
        raise IngestError(f"{folder}: no meta.pt and processed/ (not a MAG240M folder)")
    counts, num_classes = read_meta(base)
    etypes = relation_types(base, counts)
    if add_reverse_edges:
        check_reverse(etypes, _rel(base, base / "processed"))
    if target_type is not None and target_type not in counts:
        raise IngestError(f"--target-type {target_type!r} is not a node type of meta.pt ({sorted(counts)})")
    report = progress or (lambda stage, done, total: None)
    with TypedStoreWriter(dest, counts, name=name or base.name, overwrite=overwrite) as writer:
        for i, etype in enumerate(etypes):
            report("relations", i, len(etypes))
            path = base / "processed" / ts.etype_key(etype) / "edge_index.npy"
            edges = open_npy(path, _rel(base, path))
            build_relation(writer, etype, edge_blocks(edges, _rel(base, path)),
                           memory_limit=memory_limit)
            if add_reverse_edges:
                build_reverse(writer, etype, edge_blocks(edges, _rel(base, path)),
                              memory_limit=memory_limit)
            del edges
        labelled = [t for t in counts if write_node_arrays(writer, base, t, feature_dtype=feature_dtype,
                                                           allow_nonfinite=allow_nonfinite)]
        target = target_type or (labelled[0] if len(labelled) == 1 else None)
        if target is None and (base / "split_dict.pt").is_file():
            raise IngestError(f"{_rel(base, base / 'split_dict.pt')}: cannot tell which node type "
                              f"its IDs are of (labelled types: {labelled}); pass --target-type")
        if target is not None:
            write_splits(writer, base, target)
            if num_classes is not None and target in writer.labels_meta:
                writer.labels_meta[target]["num_classes"] = max(
                    num_classes, writer.labels_meta[target]["num_classes"])
        writer.target_type = target
        writer.manifest["provenance"] = {"source_format": "mag240m", "source_path": str(base)}
        return writer.commit()
