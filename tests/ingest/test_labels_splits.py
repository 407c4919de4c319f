"""Labels, splits and float16 features on every ingest path (issue 14.6).

Labels below -1, labels implying more than MAX_CLASSES classes and duplicate IDs in
one split are refused naming the file; NaN labels mark unlabelled nodes (stored as -1,
the task stays classification); float16 overflow is refused unless --clamp-float16.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest.labels import MAX_CLASSES, UNLABELED
from graphpipe.store import GraphStore

N = 6
EDGES = np.array([[i, (i + 1) % N] for i in range(N)]).T
FEAT = np.arange(2 * N, dtype=np.float32).reshape(N, 2) / 4
SPLITS = {"train": [0, 1, 2], "valid": [3], "test": [4, 5]}
PATHS = ["ogb-csv", "ogb-npz", "npz", "edge-list"]


def _gz(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(text.encode()))


def _text(values) -> str:
    return "".join(("nan" if isinstance(v, float) and np.isnan(v) else str(v)) + "\n" for v in values)


def _ogb_splits(folder: Path, splits: dict) -> None:
    for name, ids in splits.items():
        _gz(folder / "split" / "s" / f"{name}.csv.gz", _text(ids))


def _ogb_csv(root: Path, labels, feat, splits) -> tuple[Path, list[str], str]:
    raw = root / "ogbn-csv" / "raw"
    _gz(raw / "edge.csv.gz", "".join(f"{s},{d}\n" for s, d in EDGES.T))
    _gz(raw / "num-node-list.csv.gz", f"{N}\n")
    _gz(raw / "num-edge-list.csv.gz", f"{EDGES.shape[1]}\n")
    _gz(raw / "node-label.csv.gz", _text(labels))
    _gz(raw / "node-feat.csv.gz", "".join(",".join(repr(float(v)) for v in row) + "\n" for row in feat))
    _ogb_splits(raw.parent, splits)
    return raw.parent, [], "node-label.csv.gz"


def _ogb_npz(root: Path, labels, feat, splits) -> tuple[Path, list[str], str]:
    raw = root / "ogbn-npz" / "raw"
    raw.mkdir(parents=True)
    np.savez(raw / "data.npz", edge_index=EDGES, num_nodes_list=np.array([N]),
             num_edges_list=np.array([EDGES.shape[1]]), node_feat=np.asarray(feat, np.float32))
    np.savez(raw / "node-label.npz", node_label=np.asarray(labels).reshape(-1, 1))
    _ogb_splits(raw.parent, splits)
    return raw.parent, [], "node-label.npz"


def _npz(root: Path, labels, feat, splits) -> tuple[Path, list[str], str]:
    root.mkdir(parents=True, exist_ok=True)
    path = root / "graph.npz"
    idx = {f"{name}_idx": np.asarray(ids, np.int64) for name, ids in splits.items()}
    np.savez(path, edge_index=EDGES, x=np.asarray(feat, np.float32), y=np.asarray(labels), **idx)
    return path, [], "graph.npz: y"


def _cell(label) -> str:
    """A node-table label cell: empty for NaN (unlabelled), integers as integers."""
    if isinstance(label, float):
        return "" if np.isnan(label) else str(int(label))
    return str(label)


def _edge_list(root: Path, labels, feat, splits) -> tuple[Path, list[str], str]:
    root.mkdir(parents=True, exist_ok=True)
    edges = root / "edges.csv"
    edges.write_text("src,dst\n" + "".join(f"{s},{d}\n" for s, d in EDGES.T))
    split_of = {i: name for name, ids in splits.items() for i in ids}
    rows = [f"{i},{float(feat[i][0])!r},{float(feat[i][1])!r},"
            f"{_cell(labels[i])},{split_of.get(i, '')}"
            for i in range(N)]
    (root / "nodes.csv").write_text("id,f0,f1,label,split\n" + "\n".join(rows) + "\n")
    return edges, ["--nodes", str(root / "nodes.csv"), "--features", "f0,f1", "--label", "label"], \
        "nodes.csv: column 'label'"


MAKERS = {"ogb-csv": _ogb_csv, "ogb-npz": _ogb_npz, "npz": _npz, "edge-list": _edge_list}


def _run(path: str, tmp_path: Path, labels=None, feat=None, splits=None, *extra: str):
    labels = [0, 1, 2, 1, 0, 2] if labels is None else labels
    feat = FEAT if feat is None else np.asarray(feat)
    source, options, label_file = MAKERS[path](tmp_path / "in", labels, feat, SPLITS if splits is None else splits)
    result = CliRunner().invoke(cli, ["ingest", str(source), str(tmp_path / "s"), "--quiet", *options, *extra])
    return result, label_file


def _refused(result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in result.output, result.output
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("path", PATHS)
def test_valid_labels_are_stored(path, tmp_path):
    result, _ = _run(path, tmp_path)
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    np.testing.assert_array_equal(np.asarray(store.labels).reshape(-1), [0, 1, 2, 1, 0, 2])
    assert store.manifest["labels"]["num_classes"] == 3
    np.testing.assert_array_equal(store.split("train"), [0, 1, 2])


@pytest.mark.parametrize("path", PATHS)
def test_negative_label_is_refused(path, tmp_path):
    result, label_file = _run(path, tmp_path, labels=[0, 1, 2, -3, 0, 2])
    _refused(result, label_file, "row 4: label -3 is negative")
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("path", PATHS)
def test_huge_label_is_refused(path, tmp_path):
    result, label_file = _run(path, tmp_path, labels=[0, 1, 10**9, 1, 0, 2])
    _refused(result, label_file, "row 3: label 1000000000", f"more than the {MAX_CLASSES:,} allowed")


@pytest.mark.parametrize("path", PATHS)
def test_nan_labels_mark_unlabelled_nodes(path, tmp_path):
    nan = float("nan")
    result, _ = _run(path, tmp_path, labels=[0.0, 3.0, nan, 1.0, nan, 2.0])
    assert result.exit_code == 0, result.output
    store = GraphStore.open(tmp_path / "s")
    labels = np.asarray(store.labels).reshape(-1)
    assert labels.dtype == np.int64
    np.testing.assert_array_equal(labels, [0, 3, UNLABELED, 1, UNLABELED, 2])
    meta = store.manifest["labels"]
    assert meta["task_type"] == "multiclass classification" and meta["num_classes"] == 4
    assert meta["unlabeled"] == 2 and meta["unlabeled_value"] == UNLABELED


@pytest.mark.parametrize("path", ["ogb-csv", "ogb-npz", "npz"])
def test_duplicate_ids_in_one_split_are_refused(path, tmp_path):
    splits = {"train": [0, 1, 1], "valid": [3], "test": [4, 5]}
    result, _ = _run(path, tmp_path, splits=splits)
    line = _refused(result, "node 1 listed twice")
    assert "train" in line
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("path", PATHS)
def test_float16_overflow_is_refused_or_clamped(path, tmp_path):
    feat = FEAT.copy()
    feat[4, 1] = 1e6
    result, _ = _run(path, tmp_path, None, feat, None, "--feature-dtype", "float16")
    line = "line 6" if path == "edge-list" else "line 5"             # the CSV header is line 1
    _refused(result, f"{line}, column 2", "value 1000000.0 does not fit in float16", "--clamp-float16")
    assert not (tmp_path / "s").exists()
    result, _ = _run(path, tmp_path / "again", None, feat, None, "--feature-dtype", "float16", "--clamp-float16")
    assert result.exit_code == 0, result.output
    stored = np.asarray(GraphStore.open(tmp_path / "again" / "s").features())
    assert stored.dtype == np.float16 and np.isfinite(stored).all() and stored[4, 1] == 65504


def test_float16_in_range_is_unchanged(tmp_path):
    result, _ = _run("npz", tmp_path, None, None, None, "--feature-dtype", "float16")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(GraphStore.open(tmp_path / "s").features(), FEAT.astype(np.float16))
