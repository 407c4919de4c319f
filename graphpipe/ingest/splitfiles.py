"""Split files for edge-list sources: one CSV / TSV / Parquet file of node IDs per split.

``find_split_files(folder)`` finds ``train`` / ``valid`` / ``test`` files in a folder
(``valid`` may be named ``val`` or ``validation``; any of the edge-list suffixes,
compressed or not), as ``graphpipe generate --format csv|tsv|parquet`` writes them
under ``split/``. ``read_split_files`` reads their IDs (the column ``id_column``, or the
file's only column) and turns them into dense node IDs through the dataset's external
IDs, so a split names nodes exactly as the edge list and the node table do.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from graphpipe.ingest.errors import IngestError

SPLIT_ALIASES = {"train": ("train",), "valid": ("valid", "val", "validation"), "test": ("test",)}
_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq")
_COMPRESSED = ("", ".gz", ".bz2", ".zst")


def find_split_files(folder: str | os.PathLike) -> dict[str, str]:
    """``{split: path}`` for the split files in ``folder`` (at least one must exist).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "train.csv").write_text("id\\n0\\n"); _ = (d / "val.csv").write_text("id\\n1\\n")
    >>> sorted(find_split_files(d))
    ['train', 'valid']
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise IngestError(f"{folder}: no such folder (expected train/valid/test split files)")
    found: dict[str, str] = {}
    for split, stems in SPLIT_ALIASES.items():
        matches = [folder / f"{stem}{suffix}{comp}" for stem in stems for suffix in _SUFFIXES
                   for comp in _COMPRESSED]
        matches = [p for p in matches if p.is_file()]
        if len(matches) > 1:
            raise IngestError(f"{folder}: several {split} split files: "
                              f"{', '.join(p.name for p in matches)}")
        if matches:
            found[split] = str(matches[0])
    if not found:
        raise IngestError(f"{folder}: no train/valid/test split file "
                          f"(train.csv, valid.parquet, test.tsv.gz, ...)")
    return found


def read_split_files(files: Mapping[str, str | os.PathLike], external_ids: pa.Array | None,
                     id_column: str = "id") -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Dense node IDs per split and the file each came from.

    ``external_ids[d]`` is the external ID of dense node ``d`` (None: the IDs are the dense
    IDs themselves). An ID that names no node is an :class:`IngestError` with its file and
    line (range and overlap checks are the pipeline's).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "train.csv").write_text("id\\nb\\nc\\n")
    >>> splits, _ = read_split_files({"train": d / "train.csv"}, pa.array(["a", "b", "c"]))
    >>> splits["train"].tolist()
    [1, 2]
    """
    splits, sources = {}, {}
    for split, path in files.items():
        path = os.fspath(path)
        values = _read_id_column(path, id_column)
        splits[split] = _to_dense(values, external_ids, path)
        sources[split] = path
    return splits, sources


def _read_id_column(path: str, id_column: str) -> pa.Array:
    """The ID column of a split file as text (CSV/TSV) or as stored (Parquet)."""
    try:
        if _plain(path).endswith((".parquet", ".pq")):
            names = pq.ParquetFile(path).schema_arrow.names
            column = _pick_column(names, id_column, path)
            return pq.read_table(path, columns=[column]).column(column).combine_chunks()
        delimiter = "\t" if _plain(path).endswith((".tsv", ".txt")) else ","
        parse = pcsv.ParseOptions(delimiter=delimiter)
        with pcsv.open_csv(path, parse_options=parse) as reader:
            names = reader.schema.names
        column = _pick_column(names, id_column, path)
        table = pcsv.read_csv(path, parse_options=parse, convert_options=pcsv.ConvertOptions(
            column_types={name: pa.string() for name in names}, include_columns=[column]))
        return table.column(column).combine_chunks()
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(f"{path}: cannot read ({' '.join(str(exc).split())})") from None


def _plain(path: str) -> str:
    name = os.path.basename(path).lower()
    for comp in _COMPRESSED[1:]:
        name = name.removesuffix(comp)
    return name


def _pick_column(names: list[str], id_column: str, path: str) -> str:
    if id_column in names:
        return id_column
    if len(names) == 1:
        return names[0]
    raise IngestError(f"{path}: no column {id_column!r} and more than one column ({names})")


def _to_dense(values: pa.Array, external_ids: pa.Array | None, path: str) -> np.ndarray:
    if values.null_count:
        row = int(np.flatnonzero(np.asarray(values.is_null()))[0])
        raise IngestError(f"{path}: line {row + 2}: empty node ID")
    if external_ids is None or pa.types.is_integer(external_ids.type):
        values = _as_int(values, path)
    if external_ids is None:
        return values.to_numpy().astype(np.int64, copy=False)
    if not pa.types.is_integer(external_ids.type):
        values = values.cast(pa.string())
    dense = pc.index_in(values, value_set=external_ids)
    if dense.null_count:
        row = int(np.flatnonzero(np.asarray(dense.is_null()))[0])
        raise IngestError(f"{path}: line {row + 2}: node ID {values[row].as_py()!r} is not a node "
                          f"of the dataset")
    return dense.to_numpy().astype(np.int64)


def _as_int(values: pa.Array, path: str) -> pa.Array:
    if pa.types.is_integer(values.type):
        return values.cast(pa.int64())
    text = values.cast(pa.string())
    ok = pc.match_substring_regex(text, r"^\s*[+-]?\d+\s*$")
    if not pc.all(ok).as_py():
        row = int(np.flatnonzero(~np.asarray(ok))[0])
        raise IngestError(f"{path}: line {row + 2}: {text[row].as_py()!r} is not an integer node ID")
    return pc.cast(pc.utf8_trim_whitespace(text), pa.int64())
