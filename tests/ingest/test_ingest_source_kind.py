"""`graphpipe ingest` of a folder that is not an OGB folder (issue 19): a store given as
SOURCE is a one-line error; a folder of edge-list part files is one edge list."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import GraphStore


def _ingest(*args: str | Path):
    return CliRunner().invoke(cli, ["ingest", *map(str, args), "--quiet"])


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _edges(seed: int = 0, n: int = 40, m: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, m), rng.integers(0, n, m)


def test_store_as_source_is_a_one_line_error(tmp_path: Path) -> None:
    src, dst = _edges()
    pcsv.write_csv(pa.table({"src": src, "dst": dst}), tmp_path / "edges.csv")
    assert _ingest(tmp_path / "edges.csv", tmp_path / "store").exit_code == 0
    before = _tree(tmp_path / "store")
    line = _one_line_error(_ingest(tmp_path / "store", tmp_path / "again"))
    assert "store: is a graphpipe store, not a dataset" in line
    assert not (tmp_path / "again").exists()
    assert _tree(tmp_path / "store") == before


@pytest.mark.parametrize("ext", ["csv", "tsv", "parquet"])
def test_folder_of_part_files_is_one_edge_list(tmp_path: Path, ext: str) -> None:
    src, dst = _edges(1)
    parts = tmp_path / "parts"
    parts.mkdir()
    cuts = [0, 70, 71, 200, len(src)]  # in name order: part-0, part-1, ...
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        table = pa.table({"src": src[a:b], "dst": dst[a:b]})
        path = parts / f"part-{i}.{ext}"
        if ext == "parquet":
            pq.write_table(table, path)
        else:
            pcsv.write_csv(table, path, pcsv.WriteOptions(delimiter="\t" if ext == "tsv" else ","))
    whole = tmp_path / "whole.csv"
    pcsv.write_csv(pa.table({"src": src, "dst": dst}), whole)

    result = _ingest(parts, tmp_path / "from_parts")
    assert result.exit_code == 0, result.output
    assert _ingest(whole, tmp_path / "from_whole").exit_code == 0
    a, b = GraphStore.open(tmp_path / "from_parts"), GraphStore.open(tmp_path / "from_whole")
    assert a.num_edges == len(src) and a.num_nodes == b.num_nodes
    assert np.array_equal(np.asarray(a.indptr), np.asarray(b.indptr))
    assert np.array_equal(np.asarray(a.indices), np.asarray(b.indices))
    # the oracle: in-edges of every destination, as sorted source lists
    for v in range(a.num_nodes):
        got = np.asarray(a.indices)[a.indptr[v]:a.indptr[v + 1]]
        assert np.array_equal(np.sort(got), np.sort(src[dst == v]))


def test_folder_of_parts_with_different_columns_is_a_one_line_error(tmp_path: Path) -> None:
    parts = tmp_path / "parts"
    parts.mkdir()
    pcsv.write_csv(pa.table({"src": [0, 1], "dst": [1, 2]}), parts / "part-0.csv")
    pcsv.write_csv(pa.table({"from": [2], "to": [0]}), parts / "part-1.csv")
    line = _one_line_error(_ingest(parts, tmp_path / "out"))
    assert "part-1.csv" in line
    assert not (tmp_path / "out").exists()


def test_folder_without_data_files_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.md").write_text("nothing here")
    line = _one_line_error(_ingest(tmp_path / "empty", tmp_path / "out"))
    assert "folder holds no .csv/.tsv/.txt/.parquet file" in line
