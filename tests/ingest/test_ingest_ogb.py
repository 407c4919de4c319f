"""Ingest of OGB node-property folders, checked against OGB's own reader, and every bad input."""

from __future__ import annotations

import gzip
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore, StoreError
from graphpipe.store.validate import validate
from graphpipe.synthetic import community_graph, ogb_meta_dict, write_ogb_raw


@pytest.fixture(scope="module")
def graph():
    return community_graph(1500, 6, avg_degree=8, feature_dim=12, seed=7)


@pytest.fixture(scope="module")
def raw_folder(tmp_path_factory, graph):
    folder = tmp_path_factory.mktemp("ogb") / "synth_csv"
    rng = np.random.default_rng(0)
    write_ogb_raw(folder, graph, edge_feat=rng.standard_normal((len(graph.src), 3)).astype(np.float32))
    return folder


@pytest.fixture(scope="module")
def binary_folder(tmp_path_factory, graph):
    folder = tmp_path_factory.mktemp("ogb") / "synth_npz"
    write_ogb_raw(folder, graph, binary=True)
    return folder


def _ogb_dataset(folder: Path, tmp_path: Path, *, add_inverse_edge: bool = False):
    """OGB's own NodePropPredDataset on a copy of ``folder`` (it writes a processed cache)."""
    from ogb.nodeproppred import NodePropPredDataset

    copy = tmp_path / ("ogb_" + folder.name)
    shutil.copytree(folder, copy)
    meta = ogb_meta_dict(copy, add_inverse_edge=add_inverse_edge)
    return NodePropPredDataset(name=folder.name, meta_dict=meta), copy


def _edge_multiset(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    pairs = np.stack([dst, src], axis=1).astype(np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def _store_edges(store: GraphStore) -> tuple[np.ndarray, np.ndarray]:
    dst = np.repeat(np.arange(store.num_nodes), np.diff(store.indptr))
    return store.indices.astype(np.int64), dst


@pytest.mark.parametrize("kind", ["csv", "binary"])
def test_same_graph_as_ogb_reader(kind, raw_folder, binary_folder, tmp_path):
    folder = raw_folder if kind == "csv" else binary_folder
    dataset, _ = _ogb_dataset(folder, tmp_path)
    store = ingest(folder, tmp_path / "store", IngestOptions(edge_ids="always"))
    graph, labels = dataset.graph, dataset.labels
    assert store.num_nodes == graph["num_nodes"]
    src, dst = _store_edges(store)
    np.testing.assert_array_equal(_edge_multiset(src, dst),
                                  _edge_multiset(graph["edge_index"][0], graph["edge_index"][1]))
    # CSC edge ids point back at the original edge list
    np.testing.assert_array_equal(graph["edge_index"][0][store.edge_id], src)
    np.testing.assert_array_equal(graph["edge_index"][1][store.edge_id], dst)
    ours = store.features()
    assert ours.dtype == graph["node_feat"].dtype == np.float32
    assert np.array_equal(ours.view(np.uint32), graph["node_feat"].view(np.uint32)), "features not bit-equal"
    np.testing.assert_array_equal(store.labels, labels.reshape(-1))
    split = dataset.get_idx_split()
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(store.split(name), np.sort(split[name]))
    if kind == "csv":
        assert np.array_equal(store.edge_features.view(np.uint32), graph["edge_feat"].view(np.uint32))
    assert validate(tmp_path / "store") == []


def test_reverse_edges_match_ogb_add_inverse_edge(raw_folder, tmp_path):
    dataset, _ = _ogb_dataset(raw_folder, tmp_path, add_inverse_edge=True)
    store = ingest(raw_folder, tmp_path / "store", IngestOptions(add_reverse_edges=True))
    assert store.manifest["graph"]["reverse_edges_added"]
    src, dst = _store_edges(store)
    ei = dataset.graph["edge_index"]
    np.testing.assert_array_equal(_edge_multiset(src, dst), _edge_multiset(ei[0], ei[1]))


def test_processed_folder(raw_folder, tmp_path):
    import torch

    dataset, copy = _ogb_dataset(raw_folder, tmp_path)
    shutil.rmtree(copy / "raw")  # only processed/ and split/ remain
    # OGB writes pickle protocol 4, which torch's weights-only loader refuses (see
    # tests/ingest/test_no_pickle.py); the same content saved with torch's default protocol reads.
    torch.save({"graph": dataset.graph, "labels": dataset.labels}, copy / "processed" / "data_processed")
    store = ingest(copy, tmp_path / "store")
    src, dst = _store_edges(store)
    ei = dataset.graph["edge_index"]
    np.testing.assert_array_equal(_edge_multiset(src, dst), _edge_multiset(ei[0], ei[1]))
    assert np.array_equal(store.features().view(np.uint32), dataset.graph["node_feat"].view(np.uint32))
    assert store.manifest["provenance"]["source_format"] == "ogb-processed"


def test_out_of_core_gives_identical_store(raw_folder, tmp_path):
    full = ingest(raw_folder, tmp_path / "a")
    small = ingest(raw_folder, tmp_path / "b", IngestOptions(memory_limit="16KB"))
    assert small.manifest["build"]["out_of_core"]
    for key in ("csc/indptr", "csc/indices", "csc/edge_id", "node/feat", "node/label"):
        assert full.manifest["arrays"][key]["checksum"] == small.manifest["arrays"][key]["checksum"], key


def test_float16_and_compressed_features(raw_folder, graph, tmp_path):
    store = ingest(raw_folder, tmp_path / "s", IngestOptions(feature_dtype="float16", compression="zstd"))
    assert store.features().dtype == np.float16
    np.testing.assert_allclose(store.features([0, 5]), graph.features[[0, 5]], rtol=1e-3, atol=1e-3)
    assert validate(tmp_path / "s") == []


# -- bad input -----------------------------------------------------------------------------------

def _broken_copy(raw_folder: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "broken"
    shutil.copytree(raw_folder, copy)
    return copy


def _rewrite_gz(path: Path, edit) -> None:
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    lines = edit(lines)
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))


def _expect_failure(source: Path, dest: Path, match: str, **options) -> None:
    with pytest.raises(IngestError, match=match):
        ingest(source, dest, IngestOptions(**options))
    assert not dest.exists()
    assert [p.name for p in dest.parent.iterdir() if p.name.startswith(f".{dest.name}")] == []


def test_missing_file(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    os.remove(src / "raw" / "num-node-list.csv.gz")
    _expect_failure(src, tmp_path / "s", r"raw/num-node-list.csv.gz: file not found")


def test_missing_dataset_folder(tmp_path):
    _expect_failure(tmp_path / "nope", tmp_path / "s", r"nope: no such file or folder")


def test_truncated_gzip(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    path = src / "raw" / "edge.csv.gz"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _expect_failure(src, tmp_path / "s", r"raw/edge.csv.gz: truncated gzip")


def test_corrupt_gzip(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    path = src / "raw" / "node-feat.csv.gz"
    data = bytearray(path.read_bytes())
    data[40:60] = b"\x00" * 20
    path.write_bytes(bytes(data))
    _expect_failure(src, tmp_path / "s", r"raw/node-feat.csv.gz: corrupt gzip|raw/node-feat.csv.gz")


def test_non_numeric_field_names_line(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)

    def edit(lines):
        lines[41] = "12,abc"
        return lines

    _rewrite_gz(src / "raw" / "edge.csv.gz", edit)
    _expect_failure(src, tmp_path / "s", r"raw/edge.csv.gz: line 42: column 2: 'abc' is not a number")


@pytest.mark.parametrize("bad", ["-3", "999999"])
def test_out_of_range_node_id(raw_folder, tmp_path, bad):
    src = _broken_copy(raw_folder, tmp_path)

    def edit(lines):
        lines[9] = f"{bad},1"
        return lines

    _rewrite_gz(src / "raw" / "edge.csv.gz", edit)
    _expect_failure(src, tmp_path / "s", r"raw/edge.csv.gz: line 10: .*out of range")


def test_node_feat_rows_disagree_with_num_node_list(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    _rewrite_gz(src / "raw" / "node-feat.csv.gz", lambda lines: lines[:-3])
    _expect_failure(src, tmp_path / "s", r"raw/node-feat.csv.gz: 1497 rows, but there are 1500 nodes")
    src2 = tmp_path / "more"
    shutil.copytree(raw_folder, src2)
    _rewrite_gz(src2 / "raw" / "node-feat.csv.gz", lambda lines: lines + [lines[0]])
    _expect_failure(src2, tmp_path / "s", r"raw/node-feat.csv.gz: line 1501: more rows than the 1500 nodes")


def test_labels_of_wrong_length(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    _rewrite_gz(src / "raw" / "node-label.csv.gz", lambda lines: lines[:-1])
    _expect_failure(src, tmp_path / "s", r"raw/node-label.csv.gz: 1499 label rows, but the graph has 1500 nodes")


def test_nonfinite_features_refused_or_kept(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)

    def edit(lines):
        fields = lines[6].split(",")
        fields[2] = "nan"
        lines[6] = ",".join(fields)
        fields = lines[8].split(",")
        fields[0] = "inf"
        lines[8] = ",".join(fields)
        return lines

    _rewrite_gz(src / "raw" / "node-feat.csv.gz", edit)
    _expect_failure(src, tmp_path / "s", r"raw/node-feat.csv.gz: line 7, column 3: non-finite value nan")
    store = ingest(src, tmp_path / "kept", IngestOptions(allow_nonfinite=True))
    feat = store.features([6, 8])
    assert np.isnan(feat[0, 2]) and np.isinf(feat[1, 0])


def test_split_out_of_range_and_overlapping(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    split_dir = next((src / "split").iterdir())
    _rewrite_gz(split_dir / "valid.csv.gz", lambda lines: lines[:4] + ["5000"] + lines[5:])
    _expect_failure(src, tmp_path / "s", r"valid.csv.gz: line 5: node id 5000 out of range \[0, 1500\)")
    src2 = tmp_path / "overlap"
    shutil.copytree(raw_folder, src2)
    split_dir = next((src2 / "split").iterdir())
    train_first = gzip.decompress((split_dir / "train.csv.gz").read_bytes()).decode().split()[0]
    _rewrite_gz(split_dir / "test.csv.gz", lambda lines: lines + [train_first])
    _expect_failure(src2, tmp_path / "s", r"test.csv.gz: 1 node\(s\) also in split 'train'")


def test_empty_edge_list(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    (src / "raw" / "edge.csv.gz").write_bytes(gzip.compress(b""))
    _rewrite_gz(src / "raw" / "num-edge-list.csv.gz", lambda lines: ["0"])
    _expect_failure(src, tmp_path / "s", r"raw/edge.csv.gz.*empty")


def test_edge_count_disagrees_with_num_edge_list(raw_folder, tmp_path):
    src = _broken_copy(raw_folder, tmp_path)
    _rewrite_gz(src / "raw" / "num-edge-list.csv.gz", lambda lines: ["7"])
    _expect_failure(src, tmp_path / "s", r"raw/edge.csv.gz: \d+ edges, but raw/num-edge-list.csv.gz says 7")


def test_existing_destination_and_file_destination(raw_folder, tmp_path):
    first = ingest(raw_folder, tmp_path / "s")
    checksum = first.manifest["arrays"]["csc/indices"]["checksum"]
    with pytest.raises(StoreError, match="already exists"):
        ingest(raw_folder, tmp_path / "s")
    (tmp_path / "f").write_text("keep me")
    with pytest.raises(StoreError, match="is a file"):
        ingest(raw_folder, tmp_path / "f", IngestOptions(overwrite=True))
    assert (tmp_path / "f").read_text() == "keep me"
    # a failing overwrite leaves the old store intact
    src = _broken_copy(raw_folder, tmp_path)
    _rewrite_gz(src / "raw" / "node-label.csv.gz", lambda lines: lines[:-1])
    with pytest.raises(IngestError):
        ingest(src, tmp_path / "s", IngestOptions(overwrite=True))
    assert GraphStore.open(tmp_path / "s").manifest["arrays"]["csc/indices"]["checksum"] == checksum
    assert validate(tmp_path / "s") == []
    again = ingest(raw_folder, tmp_path / "s", IngestOptions(overwrite=True, add_reverse_edges=True))
    assert again.num_edges == 2 * first.num_edges


def _cli(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphpipe.cli.main", *args],
                          check=False, capture_output=True, text=True, **kwargs)


def test_cli_exit_codes(raw_folder, tmp_path):
    ok = _cli("ingest", str(raw_folder), str(tmp_path / "s"), "--quiet")
    assert ok.returncode == 0, ok.stderr
    assert "ingested" in ok.stdout
    again = _cli("ingest", str(raw_folder), str(tmp_path / "s"), "--quiet")
    assert again.returncode != 0
    assert again.stderr.strip().splitlines() == [f"error: {tmp_path / 's'}: already exists (pass --overwrite to replace it)"]
    bad = _cli("ingest", str(tmp_path / "missing"), str(tmp_path / "t"), "--quiet")
    assert bad.returncode != 0 and "no such file or folder" in bad.stderr
    assert not (tmp_path / "t").exists()


@pytest.mark.slow
def test_interrupted_ingest_keeps_old_store(tmp_path):
    """Kill -9 an overwriting ingest mid-way: the old store still opens and validates."""
    big = community_graph(60_000, 5, avg_degree=20, feature_dim=64, seed=1)
    folder = write_ogb_raw(tmp_path / "big", big)
    small = community_graph(300, 3, avg_degree=4, feature_dim=4, seed=2)
    small_folder = write_ogb_raw(tmp_path / "small", small)
    ingest(small_folder, tmp_path / "store")
    before = GraphStore.open(tmp_path / "store").manifest
    proc = subprocess.Popen([sys.executable, "-m", "graphpipe.cli.main", "ingest", str(folder),
                             str(tmp_path / "store"), "--overwrite", "--quiet"])
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob(".store.tmp-*")):
        time.sleep(0.01)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    after = GraphStore.open(tmp_path / "store")
    assert after.manifest["arrays"] == before["arrays"]
    assert validate(tmp_path / "store") == []
    # the next ingest cleans up what the killed one left behind, then succeeds
    ingest(folder, tmp_path / "store", IngestOptions(overwrite=True))
    assert GraphStore.open(tmp_path / "store").num_nodes == 60_000
    assert list(tmp_path.glob(".store.tmp-*")) == []
