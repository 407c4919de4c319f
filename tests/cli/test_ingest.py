"""`graphpipe ingest`: one command for every format, --format, the options a format refuses,
headerless and whitespace-separated edge lists."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest.formats import names
from graphpipe.store import GraphStore


def _ingest(*args: str | Path):
    return CliRunner().invoke(cli, ["ingest", *map(str, args), "--quiet"])


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    return lines[0]


def test_help_lists_every_format() -> None:
    result = CliRunner().invoke(cli, ["ingest", "--help"])
    assert result.exit_code == 0
    for name in names():
        assert f"\n    {name} " in result.output, name


def test_snap_edge_list_with_positions_keeps_every_edge(tmp_path: Path) -> None:
    (tmp_path / "e.txt").write_text("# FromNodeId\tToNodeId\n0\t1\n1\t2\n2\t0\n")
    for args in ((), ("--src", "0", "--dst", "1")):
        dest = tmp_path / f"s{len(args)}"
        result = _ingest(tmp_path / "e.txt", dest, *args)
        assert result.exit_code == 0, result.output
        assert GraphStore.open(dest).num_edges == 3


def test_format_overrides_detection(tmp_path: Path) -> None:
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1], [1, 0]]))
    line = _one_line_error(_ingest(tmp_path / "g.npz", tmp_path / "s", "--format", "edgelist"))
    assert "g.npz" in line
    assert not (tmp_path / "s").exists()
    assert _ingest(tmp_path / "g.npz", tmp_path / "s", "--format", "npz").exit_code == 0


@pytest.mark.parametrize(("flag", "value"), [("--src", "a"), ("--target-type", "paper"),
                                             ("--split-dir", "."), ("--from-raw", None)])
def test_an_option_the_format_does_not_take_is_one_line(tmp_path: Path, flag: str, value) -> None:
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1], [1, 0]]))
    args = [flag] if value is None else [flag, value]
    line = _one_line_error(_ingest(tmp_path / "g.npz", tmp_path / "s", *args))
    assert f"{flag} does not apply to npz datasets" in line
    assert not (tmp_path / "s").exists()


def test_nothing_matches_lists_the_formats(tmp_path: Path) -> None:
    line = _one_line_error(_ingest(tmp_path / "missing.csv", tmp_path / "s"))
    assert "missing.csv: no such file or folder" in line and "edgelist" in line and "ogb" in line


def _edge_file(tmp_path: Path) -> Path:
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n0,1\n1,2\n")
    return path


def test_an_empty_folder_is_used(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    result = _ingest(_edge_file(tmp_path), tmp_path / "store")
    assert result.exit_code == 0, result.output
    assert GraphStore.open(tmp_path / "store").num_edges == 2


@pytest.mark.parametrize("overwrite", [(), ("--overwrite",)])
def test_a_folder_with_files_says_what_to_do(tmp_path: Path, overwrite) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "notes.txt").write_text("keep")
    line = _one_line_error(_ingest(_edge_file(tmp_path), tmp_path / "store", *overwrite))
    assert "is not a graphpipe store" in line and "remove it yourself or choose another" in line
    assert "pass --overwrite" not in line
    assert sorted(p.name for p in (tmp_path / "store").iterdir()) == ["notes.txt"]


def test_an_existing_store_needs_overwrite(tmp_path: Path) -> None:
    edges = _edge_file(tmp_path)
    assert _ingest(edges, tmp_path / "store").exit_code == 0
    line = _one_line_error(_ingest(edges, tmp_path / "store"))
    assert line.endswith("already exists (pass --overwrite to replace it)")
    assert _ingest(edges, tmp_path / "store", "--overwrite").exit_code == 0
