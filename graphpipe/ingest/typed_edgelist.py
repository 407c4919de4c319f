"""Typed edge lists (CSV / TSV / Parquet) and per-type node tables: a :class:`~graphpipe.ingest.source.TypedSource`.

A folder with an ``edges/`` folder, in one of two forms:

- one file per relation: ``edges/<src>___<rel>___<dst>.{csv,tsv,parquet}`` with columns
  ``src``, ``dst`` (and optionally ``time``, an integer timestamp per edge);
- one edge list (one or more files in ``edges/`` whose names are not relations, read in
  name order as one list) with columns ``src_type``, ``rel``, ``dst_type``, ``src``,
  ``dst`` (and optionally ``time``); it is grouped by relation in memory.

and optional node tables ``nodes/<type>.{csv,tsv,parquet}``: a column ``id`` (the
external IDs of the type's nodes, integers or strings; row ``i`` is local node ``i``),
optional ``label`` (integer classes, empty or -1: unlabelled), ``time`` (integer),
``split`` (``train`` / ``valid`` / ``test``, empty: none) and features (one list column
``feat``, or numeric columns ``f0, f1, ...`` in table order). Edges name nodes by their
external ID; an ID missing from its type's table is an error naming file and line. A
type without a node table has IDs ``0 .. max ID`` (non-negative integers, kept as they
are). Node tables are read whole (one row per node); per-relation edge files stream in
batches to the out-of-core CSC builder (edge times in a second pass over the file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.edgelist import _iter_batches, _null_check, _open_file, _TableFile
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.idmap_build import DuplicateIdError, IntIdIndex, StringIdIndex
from graphpipe.ingest.source import RowBlock, TypedNodes, TypedRelation, TypedSource
from graphpipe.store import schema as ts
from graphpipe.store.errors import StoreError

SUFFIXES = (".csv", ".tsv", ".parquet", ".csv.gz", ".tsv.gz")
TYPE_COLUMNS = ("src_type", "rel", "dst_type")
BLOCK_ROWS = 1 << 20
_FEATURE_COLUMN = re.compile(r"f[0-9]+")


def _stem(path: Path) -> str | None:
    for suffix in SUFFIXES:
        if path.name.endswith(suffix):
            return path.name[: -len(suffix)]
    return None


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and _stem(p) is not None) \
        if folder.is_dir() else []


def is_typed_edgelist_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a folder with an ``edges/`` folder of CSV/TSV/Parquet files."""
    path = Path(path)
    return path.is_dir() and bool(_data_files(path / "edges"))


# -- node tables ------------------------------------------------------------------------------
@dataclass
class NodeTable:
    """One type's node table: its ID index (local ID = row) and what it gives the builder."""

    path: str
    index: Any
    string_ids: bool
    nodes: TypedNodes


def _read_table(spec: _TableFile) -> pa.Table:
    try:
        if spec.format == "parquet":
            return pq.read_table(spec.path)
        return pcsv.read_csv(spec.path, parse_options=pcsv.ParseOptions(delimiter=spec.delimiter),
                             read_options=pcsv.ReadOptions(skip_rows=spec.skip_rows),
                             convert_options=pcsv.ConvertOptions(strings_can_be_null=True))
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(f"{spec.path}: cannot read ({' '.join(str(exc).split())[:160]})") from None


def _int_column(table: pa.Table, name: str, spec: _TableFile, *, missing: int | None) -> np.ndarray:
    column = table.column(name)
    if column.null_count and missing is None:
        row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
        raise IngestError(f"{spec.where(spec.first_data_line + row)}: column {name!r}: empty value")
    if not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
        raise IngestError(f"{spec.path}: column {name!r} must hold integers (found {column.type})")
    return column.fill_null(missing or 0).to_numpy(zero_copy_only=False).astype(np.int64)


def _features(table: pa.Table, spec: _TableFile) -> np.ndarray | None:
    if "feat" in table.column_names:
        column = table.column("feat").combine_chunks()
        if not (pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type)
                or pa.types.is_large_list(column.type)) or column.null_count:
            raise IngestError(f"{spec.path}: column 'feat' must be a list of numbers in every row")
        lengths = pc.list_value_length(column).to_numpy(zero_copy_only=False)
        if lengths.size and (lengths != lengths[0]).any():
            row = int(np.flatnonzero(lengths != lengths[0])[0])
            raise IngestError(f"{spec.where(spec.first_data_line + row)}: column 'feat' has "
                              f"{lengths[row]} values, expected {lengths[0]}")
        values = pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(np.float32)
        return values.reshape(len(column), int(lengths[0]) if lengths.size else 0)
    names = [c for c in table.column_names if _FEATURE_COLUMN.fullmatch(c)]
    if not names:
        return None
    for name in names:
        if not (pa.types.is_floating(table.column(name).type) or pa.types.is_integer(table.column(name).type)) \
                or table.column(name).null_count:
            raise IngestError(f"{spec.path}: feature column {name!r} must be numbers in every row")
    return np.stack([table.column(n).to_numpy(zero_copy_only=False) for n in names], 1).astype(np.float32)


def _splits(table: pa.Table, spec: _TableFile) -> dict[str, np.ndarray]:
    if "split" not in table.column_names:
        return {}
    values = table.column("split").cast(pa.string()).fill_null("").to_numpy(zero_copy_only=False)
    unknown = sorted(set(values.tolist()) - {"", "train", "valid", "test"})
    if unknown:
        raise IngestError(f"{spec.path}: column 'split' holds {unknown[:3]}; use train, valid, test "
                          f"or leave it empty")
    return {name: np.flatnonzero(values == name) for name in ("train", "valid", "test")
            if (values == name).any()}


def read_node_table(path: Path) -> NodeTable:
    """``nodes/<ntype>.<ext>`` (module docstring)."""
    spec = _open_file(str(path), "auto", None, True)
    spec.require(["id"])
    table = _read_table(spec)
    ids = table.column("id").combine_chunks()
    if ids.null_count:
        row = int(np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[0])
        raise IngestError(f"{spec.where(spec.first_data_line + row)}: column 'id': empty value")
    string_ids = not pa.types.is_integer(ids.type)
    try:
        index = StringIdIndex(ids.cast(pa.string())) if string_ids else \
            IntIdIndex(ids.to_numpy(zero_copy_only=False))
    except DuplicateIdError as exc:
        raise IngestError(f"{spec.where(spec.first_data_line + exc.duplicate_row)}: ID {exc.value!r} "
                          f"already on {spec.unit} {spec.first_data_line + exc.first_row}") from None
    node = TypedNodes(len(ids), where=str(path), id_map=ids)
    if "label" in table.column_names:
        node.labels = partial(np.asarray, _int_column(table, "label", spec, missing=-1))
    if "time" in table.column_names:
        node.time = partial(np.asarray, _int_column(table, "time", spec, missing=None))
    feat = _features(table, spec)
    if feat is not None:
        node.features = partial(iter, [RowBlock(0, feat, str(path), spec.first_data_line)])
        node.feature_dim = feat.shape[1]
    splits = [(name, ids, str(path)) for name, ids in _splits(table, spec).items()]
    node.splits = partial(iter, splits) if splits else None
    return NodeTable(str(path), index, string_ids, node)


# -- edges ------------------------------------------------------------------------------------
@dataclass
class EdgeSource:
    """Where one relation's edges come from: its own file, or rows of the one typed list."""

    etype: ts.EdgeType
    spec: _TableFile | None = None
    rows: list[tuple[pa.Array, pa.Array, np.ndarray | None, str, int]] = field(default_factory=list)

    @property
    def has_time(self) -> bool:
        return (self.spec is not None and "time" in self.spec.columns) or \
            any(r[2] is not None for r in self.rows)


def _id_type(tables: dict[str, NodeTable], ntype: str) -> pa.DataType:
    table = tables.get(ntype)
    return pa.string() if table is not None and table.string_ids else pa.int64()


def _batches(source: EdgeSource, tables: dict[str, NodeTable]) -> Iterator[tuple]:
    """``(src values, dst values, time or None, file, first line)`` runs of the relation."""
    if source.spec is None:
        yield from source.rows
        return
    spec, etype = source.spec, source.etype
    columns = ["src", "dst"] + (["time"] if "time" in spec.columns else [])
    types = {"src": _id_type(tables, etype[0]), "dst": _id_type(tables, etype[2]), "time": pa.int64()}
    for batch, first_line in _iter_batches(spec, columns, {c: types[c] for c in columns}, BLOCK_ROWS):
        _null_check(batch, columns, spec, first_line)
        time = batch.column("time").to_numpy(zero_copy_only=False) if "time" in columns else None
        yield batch.column("src"), batch.column("dst"), time, spec, first_line


def _local(values: pa.Array, table: NodeTable | None, spec: _TableFile, first_line: int,
           which: str, ntype: str) -> np.ndarray:
    if table is None:
        ids = values.to_numpy(zero_copy_only=False).astype(np.int64)
        bad = np.flatnonzero(ids < 0)
        if bad.size:
            raise IngestError(f"{spec.where(first_line + int(bad[0]))}: {which} id {int(ids[bad[0]])} "
                              f"is negative ({ntype!r} has no node table, so IDs are 0, 1, ...)")
        return ids
    local = table.index.lookup(values if table.string_ids else values.to_numpy(zero_copy_only=False))
    bad = np.flatnonzero(local < 0)
    if bad.size:
        raise IngestError(f"{spec.where(first_line + int(bad[0]))}: {which} id "
                          f"{values[int(bad[0])].as_py()!r} is not in {table.path}")
    return local


def relation_sources(folder: Path) -> list[EdgeSource]:
    """The relations of ``folder/edges/``: one file each, or grouped from one typed list."""
    files = _data_files(folder / "edges")
    named = [f for f in files if "___" in (_stem(f) or "")]
    if named and len(named) != len(files):
        raise IngestError(f"{folder / 'edges'}: mixes relation files (src___rel___dst) with other files")
    if named:
        sources = []
        for path in named:
            try:
                etype = ts.parse_etype(_stem(path))
            except StoreError as exc:
                raise IngestError(f"{path}: {exc}") from None
            spec = _open_file(str(path), "auto", None, True)
            spec.require(["src", "dst"])
            sources.append(EdgeSource(etype, spec))
        if len({s.etype for s in sources}) != len(sources):
            raise IngestError(f"{folder / 'edges'}: a relation has two files")
        return sources
    return _grouped(files)


def _grouped(files: list[Path]) -> list[EdgeSource]:
    """The one typed edge list, grouped by ``(src_type, rel, dst_type)`` (in memory)."""
    groups: dict[ts.EdgeType, EdgeSource] = {}
    for path in files:
        spec = _open_file(str(path), "auto", None, True)
        spec.require(list(TYPE_COLUMNS) + ["src", "dst"])
        columns = list(TYPE_COLUMNS) + ["src", "dst"] + (["time"] if "time" in spec.columns else [])
        types = {c: pa.string() for c in columns}
        if "time" in columns:
            types["time"] = pa.int64()
        for batch, first_line in _iter_batches(spec, columns, types, BLOCK_ROWS):
            _null_check(batch, columns, spec, first_line)
            _group_batch(batch, spec, first_line, groups)
    return [groups[e] for e in sorted(groups)]


def _group_batch(batch: pa.RecordBatch, spec: _TableFile, first_line: int,
                 groups: dict[ts.EdgeType, EdgeSource]) -> None:
    """Append the batch's rows to their relations, one contiguous run of rows at a time (so
    every run keeps its first line number)."""
    keys = pc.binary_join_element_wise(*(batch.column(c) for c in TYPE_COLUMNS), "\x00")
    keys = keys.to_numpy(zero_copy_only=False)
    time = batch.column("time").to_numpy(zero_copy_only=False) if "time" in batch.schema.names else None
    starts = np.concatenate([[0], np.flatnonzero(keys[1:] != keys[:-1]) + 1, [len(keys)]])
    for lo, hi in zip(starts[:-1].tolist(), starts[1:].tolist()):
        try:
            etype = ts.as_etype(tuple(keys[lo].split("\x00")))
        except StoreError as exc:
            raise IngestError(f"{spec.where(first_line + lo)}: {exc}") from None
        groups.setdefault(etype, EdgeSource(etype)).rows.append(
            (batch.column("src").slice(lo, hi - lo), batch.column("dst").slice(lo, hi - lo),
             None if time is None else time[lo:hi], spec, first_line + lo))


def _as_ids(values: pa.Array, table: NodeTable | None) -> pa.Array:
    """Values of the one typed list (read as text) in the type's ID kind."""
    if table is not None and table.string_ids:
        return values
    try:
        return values.cast(pa.int64())
    except pa.ArrowInvalid:
        return None


def _chunks(source: EdgeSource, tables: dict[str, NodeTable]) -> Iterator[EdgeChunk]:
    etype, row = source.etype, 0
    for src, dst, time, spec, first_line in _batches(source, tables):
        ends = []
        for values, ntype, which in ((src, etype[0], "source"), (dst, etype[2], "destination")):
            if source.spec is None:
                cast = _as_ids(values, tables.get(ntype))
                if cast is None:
                    raise IngestError(f"{spec.where(first_line)}: {which} IDs of {ntype!r} must be "
                                      f"integers (no node table with string IDs)")
                values = cast
            ends.append(_local(values, tables.get(ntype), spec, first_line, which, ntype))
        yield EdgeChunk(ends[0], ends[1], row, spec.path, first_line)
        row += ends[0].shape[0]


def _counts(sources: list[EdgeSource], tables: dict[str, NodeTable]) -> dict[str, int]:
    """Node counts: table rows, else the largest ID + 1 over every relation (one first pass
    over the relations that touch a type without a table)."""
    counts = {t: table.nodes.count for t, table in tables.items()}
    for source in sources:
        ends = [(i, t) for i, t in ((0, source.etype[0]), (1, source.etype[2])) if t not in tables]
        if not ends:
            continue
        for chunk in _chunks(source, tables):
            for i, ntype in ends:
                ids = chunk.src if i == 0 else chunk.dst
                counts[ntype] = max(counts.get(ntype, 0), int(ids.max(initial=-1)) + 1)
        for _, ntype in ends:
            counts.setdefault(ntype, 0)
    return counts


def _times(source: EdgeSource, tables: dict[str, NodeTable]) -> np.ndarray:
    """The relation's ``time`` column in edge-list order (0 where a run has none)."""
    return np.concatenate([np.zeros(len(src), np.int64) if time is None else time.astype(np.int64)
                           for src, _, time, _, _ in _batches(source, tables)] or [np.zeros(0, np.int64)])


def read_node_tables(folder: Path) -> dict[str, NodeTable]:
    """``nodes/<type>.<ext>`` of every type that has one."""
    tables = {}
    for path in _data_files(folder / "nodes"):
        try:
            ntype = ts.check_name(_stem(path), "node type")
        except StoreError as exc:
            raise IngestError(f"{path}: {exc}") from None
        if ntype in tables:
            raise IngestError(f"{path}: a second node table of {ntype!r}")
        tables[ntype] = read_node_table(path)
    return tables


def read_typed_edgelist(folder: str | os.PathLike, *, target_type: str | None = None) -> TypedSource:
    """The typed edge-list folder ``folder`` (module docstring) as a typed source.

    >>> import os, tempfile
    >>> tmp = tempfile.TemporaryDirectory()
    >>> os.makedirs(os.path.join(tmp.name, "edges"))
    >>> _ = open(os.path.join(tmp.name, "edges", "user___rates___item.csv"), "w").write("src,dst\\n0,1\\n2,1\\n")
    >>> source = read_typed_edgelist(tmp.name)
    >>> {t: n.count for t, n in source.node_types.items()}, source.relations[0].etype
    ({'user': 3, 'item': 2}, ('user', 'rates', 'item'))
    >>> tmp.cleanup()
    """
    folder = Path(folder)
    tables = read_node_tables(folder)
    sources = relation_sources(folder)
    counts = _counts(sources, tables)
    relations = [TypedRelation(s.etype, partial(_chunks, s, tables),
                               edge_time=partial(_times, s, tables) if s.has_time else None)
                 for s in sources]
    nodes = {t: tables[t].nodes if t in tables else TypedNodes(count) for t, count in counts.items()}
    return TypedSource(folder.name, "typed-edge-list", str(folder), nodes, relations, target_type)
