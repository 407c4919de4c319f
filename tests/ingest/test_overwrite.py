"""`ingest --overwrite` replaces only a graphpipe store, never an input, and only after success (issue 14.4)."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.store import GraphStore, StoreError
from graphpipe.store.validate import validate


def _edges(path: Path, n: int = 5) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("src,dst\n" + "".join(f"{i},{(i + 1) % n}\n" for i in range(n)))
    return path


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (to prove nothing changed)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _ingest(*args: str):
    return CliRunner().invoke(cli, ["ingest", *map(str, args), "--quiet"])


def _one_line_error(result, code: int = 2) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_overwrite_refuses_a_plain_directory(tmp_path):
    src = _edges(tmp_path / "edges.csv")
    dest = tmp_path / "photos"
    dest.mkdir()
    (dest / "holiday.jpg").write_bytes(b"\xff\xd8 precious")
    before = _tree(dest)
    line = _one_line_error(_ingest(src, dest, "--overwrite"))
    assert "is not a graphpipe store" in line and str(dest) in line
    assert _tree(dest) == before
    assert sorted(os.listdir(tmp_path)) == ["edges.csv", "photos"]      # no temporary left over


def test_overwrite_refuses_a_directory_with_a_fake_manifest(tmp_path):
    src = _edges(tmp_path / "edges.csv")
    dest = tmp_path / "d"
    dest.mkdir()
    (dest / "manifest.json").write_text('{"format": "something-else"}')
    _one_line_error(_ingest(src, dest, "--overwrite"))
    assert (dest / "manifest.json").read_text() == '{"format": "something-else"}'


def _ogb_folder(folder: Path, n: int = 6) -> Path:
    raw = folder / "raw"
    raw.mkdir(parents=True)
    edges = "".join(f"{i},{(i + 1) % n}\n" for i in range(n))
    for name, text in (("edge.csv.gz", edges), ("num-node-list.csv.gz", f"{n}\n"),
                       ("num-edge-list.csv.gz", f"{n}\n")):
        (raw / name).write_bytes(gzip.compress(text.encode()))
    return folder


def test_overwrite_refuses_the_source_itself(tmp_path):
    folder = _ogb_folder(tmp_path / "ogbn-x")
    before = _tree(folder)
    line = _one_line_error(_ingest(folder, folder, "--overwrite"))
    assert "is, or contains, the input" in line
    assert _tree(folder) == before
    with pytest.raises(StoreError, match="is, or contains, the input"):
        ingest(folder, folder, IngestOptions(overwrite=True))
    assert _tree(folder) == before


def test_overwrite_refuses_a_store_that_contains_the_source(tmp_path):
    """Even a real store is not replaced when the input lives inside it, also through a link."""
    store = tmp_path / "store"
    ingest(_edges(tmp_path / "first.csv"), store)
    src = _edges(store / "extra" / "edges.csv", n=7)
    before = _tree(store)
    line = _one_line_error(_ingest(src, store, "--overwrite"))
    assert "is, or contains, the input" in line
    link = tmp_path / "link"
    link.symlink_to(store)
    _one_line_error(_ingest(link / "extra" / "edges.csv", store, "--overwrite"))
    _one_line_error(_ingest(tmp_path / "first.csv", store, "--overwrite", "--nodes", link / "extra" / "edges.csv"))
    assert _tree(store) == before
    assert GraphStore.open(store).num_nodes == 5


def test_overwrite_refuses_a_symlinked_destination(tmp_path):
    store = tmp_path / "store"
    ingest(_edges(tmp_path / "a.csv"), store)
    link = tmp_path / "link"
    link.symlink_to(store)
    line = _one_line_error(_ingest(_edges(tmp_path / "b.csv", n=9), link, "--overwrite"))
    assert "symbolic link" in line
    assert link.is_symlink() and GraphStore.open(store).num_nodes == 5


def test_overwrite_replaces_a_store_after_success(tmp_path):
    store = tmp_path / "store"
    ingest(_edges(tmp_path / "a.csv"), store)
    result = _ingest(_edges(tmp_path / "b.csv", n=9), store, "--overwrite")
    assert result.exit_code == 0, result.output
    assert GraphStore.open(store).num_nodes == 9 and validate(store) == []
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "b.csv", "store"]


def test_failed_overwrite_leaves_the_old_store(tmp_path):
    """The new ingest fails after its topology is written: the old store is untouched."""
    store = tmp_path / "store"
    ingest(_edges(tmp_path / "a.csv"), store)
    before = _tree(store)
    folder = _ogb_folder(tmp_path / "ogbn-bad", n=6)
    rows = "".join(f"{i}.5,1\n" for i in range(5)) + "1,not-a-number\n"
    (folder / "raw" / "node-feat.csv.gz").write_bytes(gzip.compress(rows.encode()))
    line = _one_line_error(_ingest(folder, store, "--overwrite"))
    assert "node-feat.csv.gz" in line and "line 6" in line
    assert _tree(store) == before and validate(store) == []
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "ogbn-bad", "store"]
    np.testing.assert_array_equal(GraphStore.open(store).in_degrees, np.ones(5))
