"""A generated typed graph written as typed edge lists and node tables (the layout
:mod:`graphpipe.ingest.typed_edgelist` reads), for tests, demos and benchmarks.

``write_typed_edge_lists(folder, data)`` writes ``nodes/<target>.<ext>`` (``id``,
``label``, ``time``, ``split``, ``f0..``) and either one file per relation
``edges/<src>___<rel>___<dst>.<ext>`` (``src``, ``dst``) or, with ``one_file``, a single
``edges/edges.<ext>`` with ``src_type``, ``rel``, ``dst_type``, ``src``, ``dst``. With
``string_ids`` the target type's IDs are strings ``"<type>-<i>"``.

>>> import tempfile
>>> from graphpipe.synthetic.mag import mag_dataset
>>> tmp = tempfile.TemporaryDirectory()
>>> data = mag_dataset(papers=20, authors=10, institutions=2, fields=4, num_classes=2, feature_dim=2)
>>> folder = write_typed_edge_lists(tmp.name + "/g", data, fmt="csv")
>>> sorted(p.name for p in (folder / "edges").iterdir())  # doctest: +NORMALIZE_WHITESPACE
['author___affiliated_with___institution.csv', 'author___writes___paper.csv',
 'paper___cites___paper.csv', 'paper___has_topic___field_of_study.csv']
>>> tmp.cleanup()
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq

from graphpipe.synthetic.mag import HeteroDataset

__all__ = ["write_typed_edge_lists"]


def _write(table: pa.Table, path: Path, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "parquet":
        pq.write_table(table, path)
    else:
        pcsv.write_csv(table, path)


def _ids(ntype: str, ids: np.ndarray, string_type: str | None) -> pa.Array:
    if ntype == string_type:
        return pa.array([f"{ntype}-{i}" for i in ids.tolist()])
    return pa.array(ids.astype(np.int64))


def write_typed_edge_lists(folder: str | os.PathLike, data: HeteroDataset, *, fmt: str = "parquet",
                           one_file: bool = False, string_ids: bool = False) -> Path:
    """Write ``data`` under ``folder`` (module docstring); returns ``folder``."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"'fmt' must be csv or parquet (got {fmt!r})")
    folder, target = Path(folder), data.target_type
    string_type = target if string_ids else None
    n = data.num_nodes_dict[target]
    split = np.full(n, None, dtype=object)
    for name, ids in data.splits.items():
        split[ids] = name
    columns = {"id": _ids(target, np.arange(n), string_type), "label": pa.array(data.y),
               "time": pa.array(data.year), "split": pa.array(split.tolist(), pa.string())}
    columns.update({f"f{j}": pa.array(data.x[:, j]) for j in range(data.x.shape[1])})
    _write(pa.table(columns), folder / "nodes" / f"{target}.{fmt}", fmt)
    tables = []
    for etype in sorted(data.edges):
        src, dst = data.edges[etype]
        table = pa.table({"src": _ids(etype[0], src, string_type), "dst": _ids(etype[2], dst, string_type)})
        if not one_file:
            _write(table, folder / "edges" / f"{'___'.join(etype)}.{fmt}", fmt)
            continue
        kinds = [pa.array([name] * len(src)) for name in etype]
        tables.append(pa.table({"src_type": kinds[0], "rel": kinds[1], "dst_type": kinds[2],
                                "src": table.column("src").cast(pa.string()),
                                "dst": table.column("dst").cast(pa.string())}))
    if one_file:
        _write(pa.concat_tables(tables), folder / "edges" / f"edges.{fmt}", fmt)
    return folder
