"""Arrow/Parquet tables of a store: the ID map and the splits.

- ``tables/id_map.parquet``: columns ``external_id`` (int64 or string) and
  ``node_id`` (int64, dense ``0..N-1``, equal to the row number).
- ``tables/splits.parquet``: columns ``split`` (string) and ``node_id`` (int64);
  the rows of one split are sorted by ``node_id``.
- ``tables/nodes.parquet``: extra per-node columns, one row per dense node ID.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from graphpipe.store import _fetch
from graphpipe.store.errors import CorruptStoreError
from graphpipe.store.generation import confirm

ID_MAP_TABLE = "tables/id_map.parquet"
SPLITS_TABLE = "tables/splits.parquet"
NODES_TABLE = "tables/nodes.parquet"


def write_table(root: str | os.PathLike, key: str, table: pa.Table) -> None:
    """Write ``table`` as Parquet at ``root/key`` (zstd-compressed columns)."""
    path = Path(root) / key
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, compression="zstd")


def read_table(root: str | os.PathLike, key: str) -> pa.Table:
    """Read the Parquet table ``root/key``."""
    _fetch.ensure_file(root, key)
    path = Path(root) / key
    if not path.is_file():
        confirm(root)
        raise CorruptStoreError(f"{path}: table missing")
    try:
        table = pq.read_table(path, memory_map=True)
    except (pa.ArrowException, OSError) as exc:  # a damaged file: name it, one line
        confirm(root)
        detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise CorruptStoreError(f"{path}: table cannot be read ({detail})") from None
    confirm(root)  # read from the store this reader opened (generation.py)
    return table


def splits_table(splits: dict[str, np.ndarray]) -> pa.Table:
    """The splits table for ``{name: node_ids}``; IDs are sorted within each split."""
    names, ids = [], []
    for name, values in splits.items():
        values = np.sort(np.asarray(values, dtype=np.int64))
        names.append(np.full(len(values), name, dtype=object))
        ids.append(values)
    if not ids:
        return pa.table({"split": pa.array([], pa.string()), "node_id": pa.array([], pa.int64())})
    return pa.table({
        "split": pa.array(np.concatenate(names), pa.string()).dictionary_encode(),
        "node_id": pa.array(np.concatenate(ids), pa.int64()),
    })


def split_ids(table: pa.Table, name: str) -> np.ndarray:
    """Sorted dense node IDs of split ``name`` from a splits table."""
    return _ids_of(table.to_batches(), name)


def read_split_ids(root: str | os.PathLike, key: str, name: str) -> np.ndarray:
    """Sorted dense node IDs of split ``name`` from the Parquet splits table ``root/key``,
    read a batch of rows at a time: memory ~ the result, not the table (a whole-table
    read of an 8.4M-row table took ~470 MB of Arrow memory, the result 67 MB)."""
    _fetch.ensure_file(root, key)
    path = Path(root) / key
    if not path.is_file():
        confirm(root)
        raise CorruptStoreError(f"{path}: table missing")
    try:
        parquet = pq.ParquetFile(path, memory_map=True)
        confirm(root)  # the file is open: from the store this reader opened (generation.py)
        batches = parquet.iter_batches(batch_size=1 << 20, columns=["split", "node_id"],
                                       use_threads=False)
        return _ids_of(batches, name)
    except (pa.ArrowException, OSError) as exc:  # a damaged file: name it, one line
        confirm(root)
        detail = str(exc).strip().splitlines()[0][:120] if str(exc).strip() else type(exc).__name__
        raise CorruptStoreError(f"{path}: table cannot be read ({detail})") from None
    finally:
        pa.default_memory_pool().release_unused()


def _ids_of(batches: Iterable[pa.RecordBatch], name: str) -> np.ndarray:
    """The ``node_id`` values of the rows whose ``split`` is ``name``, as one writable
    int64 array (Arrow's zero-copy views are read-only; torch.from_numpy warns on them)."""
    parts = [np.zeros(0, dtype=np.int64)]
    for batch in batches:
        column = batch.column("split")
        if pa.types.is_dictionary(column.type):
            column = column.cast(pa.string())
        parts.append(batch.column("node_id").filter(pc.equal(column, name)).to_numpy())
    return np.concatenate(parts).astype(np.int64, copy=False)


class IdMap:
    """Translation between external node IDs (sparse int64 or strings) and dense IDs ``0..N-1``.

    ``external_ids[d]`` is the external ID of dense node ``d``. Lookups are
    vectorised: :meth:`to_dense` takes an array of external IDs and returns
    int64 dense IDs (``-1`` for unknown ones unless ``strict``), and
    :meth:`to_external` the reverse.
    """

    def __init__(self, external_ids: pa.Array | None, num_nodes: int):
        self.num_nodes = int(num_nodes)
        self._external = external_ids
        self._sorted_keys: np.ndarray | None = None
        self._sorted_pos: np.ndarray | None = None

    @property
    def is_identity(self) -> bool:
        """True when the store has no ID map (external IDs are the dense IDs)."""
        return self._external is None

    @property
    def external_type(self) -> str:
        if self._external is None:
            return "int64"
        return "string" if pa.types.is_string(self._external.type) or pa.types.is_large_string(
            self._external.type) else "int64"

    @property
    def external_ids(self) -> pa.Array:
        if self._external is None:
            return pa.array(np.arange(self.num_nodes, dtype=np.int64))
        return self._external

    def to_dense(self, external: object, *, strict: bool = True) -> np.ndarray:
        """Dense IDs of ``external`` (a sequence / array of external IDs), int64.

        Unknown IDs raise ``KeyError`` naming the first few when ``strict``,
        else map to ``-1``.
        """
        if self._external is None:
            values = np.asarray(external, dtype=np.int64)
            dense = np.where((values >= 0) & (values < self.num_nodes), values, -1)
        elif self.external_type == "int64":
            values = np.asarray(external, dtype=np.int64)
            if self._sorted_keys is None:
                keys = self._external.to_numpy().astype(np.int64, copy=False)
                order = np.argsort(keys, kind="stable")
                self._sorted_keys, self._sorted_pos = keys[order], order.astype(np.int64)
            dense = np.full(len(values), -1, dtype=np.int64)
            if len(self._sorted_keys):
                pos = np.minimum(np.searchsorted(self._sorted_keys, values), len(self._sorted_keys) - 1)
                found = self._sorted_keys[pos] == values
                dense[found] = self._sorted_pos[pos[found]]
        else:
            values = pa.array(external, pa.string()) if not isinstance(external, pa.Array) else external
            dense = pc.index_in(values, value_set=self._external).to_numpy(zero_copy_only=False)
            dense = np.where(np.isnan(dense.astype(np.float64)), -1, dense).astype(np.int64) \
                if dense.dtype.kind == "f" else dense.astype(np.int64)
        dense = np.asarray(dense, dtype=np.int64)
        if strict and (dense < 0).any():
            missing = np.flatnonzero(dense < 0)[:5]
            shown = [_as_py(external, i) for i in missing]
            raise KeyError(f"{int((dense < 0).sum())} unknown external ID(s), first: {shown}")
        return dense

    def to_external(self, dense: object) -> pa.Array:
        """External IDs of dense IDs ``dense``; out-of-range IDs raise ``IndexError``."""
        ids = np.asarray(dense, dtype=np.int64)
        bad = (ids < 0) | (ids >= self.num_nodes)
        if bad.any():
            raise IndexError(f"dense ID(s) out of range [0, {self.num_nodes}): {ids[bad][:5].tolist()}")
        return self.external_ids.take(pa.array(ids))


def _as_py(values: object, i: int) -> object:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values[int(i)].as_py()
    return np.asarray(values)[int(i)].item() if not isinstance(values, list) else values[int(i)]
