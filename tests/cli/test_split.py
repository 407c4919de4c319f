"""`graphpipe split STORE --random 0.8,0.1,0.1`, and `graphpipe ingest --random-split`, on
homogeneous and typed stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag


def _run(*args) -> object:
    return CliRunner().invoke(cli, [*map(str, args)])


def _edges(tmp_path: Path) -> Path:
    path = tmp_path / "edges.csv"
    path.write_text("src,dst\n" + "".join(f"{i},{(i * 7 + 1) % 40}\n" for i in range(40)))
    return path


def test_split_command_on_a_store_without_splits(tmp_path: Path) -> None:
    assert _run("ingest", _edges(tmp_path), tmp_path / "s", "-q").exit_code == 0
    result = _run("split", tmp_path / "s", "--random", "0.8,0.1,0.1", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert "train 32, valid 4, test 4 (seed 0)" in result.output
    store = GraphStore.open(tmp_path / "s")
    assert store.split_names == ["train", "valid", "test"] and validate(store.path) == []
    again = _run("split", tmp_path / "s", "--random", "0.8,0.1,0.1")
    assert again.exit_code == 2 and "pass --replace" in again.output
    bad = _run("split", tmp_path / "s", "--random", "0.8,0.3", "--replace")
    assert bad.exit_code == 2 and "three fractions" in bad.output


def test_ingest_random_split_flag(tmp_path: Path) -> None:
    result = _run("ingest", _edges(tmp_path), tmp_path / "s", "-q", "--random-split", "0.5,0.25,0.25",
                  "--seed", "7")
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    assert [len(store.split(n)) for n in ("train", "valid", "test")] == [20, 10, 10]


def test_typed_store_split_for_a_node_type(tmp_path: Path) -> None:
    folder = write_ogb_mag(tmp_path / "mag", mag_dataset(papers=60, authors=30, institutions=3,
                                                         fields=6, num_classes=3, feature_dim=4))
    refused = _run("ingest", folder, tmp_path / "t", "-q", "--random-split", "0.8,0.1,0.1")
    assert refused.exit_code == 2 and "graphpipe split STORE --random" in refused.output
    ingest(folder, tmp_path / "s")
    result = _run("split", tmp_path / "s", "--random", "0.5,0.25,0.25", "--node-type", "author")
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    ids = [store.typed_split("author", name) for name in ("train", "valid", "test")]
    assert [len(i) for i in ids] == [15, 8, 7] or [len(i) for i in ids] == [14, 8, 8]
    assert np.unique(np.concatenate(ids)).size == 30
    assert validate(tmp_path / "s") == []
    paper = _run("split", tmp_path / "s", "--random", "0.8,0.1,0.1")  # the target type: has splits
    assert paper.exit_code == 2 and "(paper): has splits" in paper.output


def test_the_command_train_suggests_makes_a_trainable_store(tmp_path: Path) -> None:
    import re
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 60, 240), dst=rng.integers(0, 60, 240),
             x=rng.normal(size=(60, 4)).astype(np.float32), y=rng.integers(0, 3, 60))
    ingest(tmp_path / "g.npz", tmp_path / "bare")
    refused = _run("train", tmp_path / "bare", "--epochs", "1", "--hidden", "8")
    assert refused.exit_code == 2, refused.output
    suggested = re.search(r"`graphpipe (split [^`]+)`", refused.output).group(1).split()
    assert _run(*suggested).exit_code == 0
    trained = _run("train", tmp_path / "bare", "--epochs", "1", "--hidden", "8")
    assert trained.exit_code == 0, trained.output
