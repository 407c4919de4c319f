"""npz reader: round trips of every key, and a message naming the key for every bad shape."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.npz import read_npz


@pytest.fixture
def graph():
    rng = np.random.default_rng(3)
    n, e = 20, 57
    return {
        "edge_index": rng.integers(0, n, (2, e)),
        "x": rng.random((n, 5)).astype(np.float32),
        "y": rng.integers(0, 4, n),
        "train_idx": np.arange(0, 10),
        "valid_idx": np.arange(10, 15),
        "test_idx": np.arange(15, 20),
        "edge_attr": rng.random((e, 2)),
        "num_nodes": np.array(n),
    }


def save(tmp_path, arrays, name="g.npz"):
    path = tmp_path / name
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def collect(source):
    chunks = list(source.edge_chunks())
    return np.concatenate([c.src for c in chunks]), np.concatenate([c.dst for c in chunks]), chunks


def test_round_trip_every_key(tmp_path, graph):
    source = read_npz(save(tmp_path, graph), block_rows=8)
    src, dst, chunks = collect(source)
    np.testing.assert_array_equal(src, graph["edge_index"][0])
    np.testing.assert_array_equal(dst, graph["edge_index"][1])
    assert all(len(c) <= 8 for c in chunks) and [c.first_row for c in chunks] == list(range(0, 57, 8))
    assert chunks[1].first_line == 9 and chunks[0].source.endswith("g.npz:edge_index")
    assert source.num_nodes == 20 and source.num_input_edges == 57 and source.name == "g"
    blocks = list(source.node_features())
    assert [b.first_row for b in blocks] == [0, 8, 16] and source.feature_dim == 5
    np.testing.assert_array_equal(np.concatenate([b.values for b in blocks]), graph["x"])
    assert source.labels.dtype == np.int64 and source.labels.tolist() == graph["y"].tolist()
    assert source.task_type == "multiclass classification" and source.num_classes == graph["y"].max() + 1
    assert {k: v.tolist() for k, v in source.splits.items()} == {
        "train": list(range(10)), "valid": list(range(10, 15)), "test": list(range(15, 20))}
    assert source.split_sources["valid"].endswith("g.npz:valid_idx")
    feats = np.concatenate([b.values for b in source.edge_features()])
    assert feats.dtype == np.float32 and source.edge_feature_dim == 2
    np.testing.assert_allclose(feats, graph["edge_attr"], rtol=1e-6)
    assert source.external_ids is None


def test_src_dst_masks_and_inferred_num_nodes(tmp_path):
    arrays = {"src": np.array([0, 1, 2], np.int32), "dst": np.array([1, 2, 6], np.uint16),
              "train_mask": np.array([1, 0, 0, 1, 0, 0, 0], bool),
              "val_mask": np.array([0, 1, 0, 0, 0, 0, 0], bool), "test_idx": np.array([6]),
              "comment": np.array([1])}
    source = read_npz(save(tmp_path, arrays), name="small")
    src, dst, _ = collect(source)
    assert src.dtype == np.int64 and dst.tolist() == [1, 2, 6]
    assert source.num_nodes == 7 and source.name == "small"
    assert source.splits["train"].tolist() == [0, 3] and source.splits["valid"].tolist() == [1]
    assert source.extra["ignored_keys"] == "comment" and source.node_features is None


def test_multi_task_float_labels_and_integer_features(tmp_path):
    y = np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, 0.0]])
    arrays = {"edge_index": np.array([[0, 1], [1, 2]]), "x": np.eye(3, dtype=np.int8), "y": y}
    source = read_npz(save(tmp_path, arrays))
    assert source.task_type == "binary classification" and source.labels.shape == (3, 2)
    assert np.concatenate([b.values for b in source.node_features()]).dtype == np.int64
    regression = read_npz(save(tmp_path, {**arrays, "y": np.array([0.5, 1.0, 2.0])}, "r.npz"))
    assert regression.task_type == "regression"


@pytest.mark.parametrize("change, message", [
    ({"edge_index": None}, r"no edge_index \(or src and dst\) key"),
    ({"edge_index": np.zeros((3, 4), np.int64)}, r"edge_index: shape \(3, 4\), expected \(2, E\)"),
    ({"edge_index": np.zeros((2, 4))}, r"edge_index: dtype float64, expected integers"),
    ({"edge_index": np.array([[0, 1, 25], [1, 2, 3]])}, r"edge_index\[0\]\[2\] = 25 is not a node ID in \[0, 20\)"),
    ({"edge_index": np.array([[0, 1], [1, -1]])}, r"edge_index\[1\]\[1\] = -1 is not a node ID"),
    ({"x": np.zeros((19, 5), np.float32)}, r"x: 19 rows, but num_nodes is 20 \(num_nodes\)"),
    ({"x": np.zeros((20, 2, 2), np.float32)}, r"x: shape \(20, 2, 2\), expected \(N, F\)"),
    ({"y": np.zeros(21, np.int64)}, r"y: 21 rows, but num_nodes is 20"),
    ({"y": np.zeros((20, 2, 1))}, r"y: shape \(20, 2, 1\), expected \(N,\) or \(N, T\)"),
    ({"train_idx": np.array([0, 20])}, r"train_idx\[1\] = 20 is not a node ID in \[0, 20\)"),
    ({"train_idx": np.array([0.0])}, r"train_idx: dtype float64, expected integers"),
    ({"test_idx": np.array([14, 15])}, r"test_idx: 1 node\(s\) also in split 'valid' \(valid_idx\), first: \[14\]"),
    ({"train_idx": np.array([3, 3])}, r"train_idx: node 3 listed twice"),
    ({"val_idx": np.array([1])}, r"split 'valid' given twice \(valid_idx, val_idx\)"),
    ({"train_idx": None, "train_mask": np.ones(19, bool)}, r"train_mask: shape \(19,\), expected \(20,\)"),
    ({"train_idx": None, "train_mask": np.ones(20)}, r"train_mask: dtype float64, expected bool"),
    ({"edge_attr": np.zeros((56, 2))}, r"edge_attr: shape \(56, 2\), expected \(57,\) or \(57, D\)"),
    ({"num_nodes": np.array([1.5])}, r"num_nodes: expected one integer"),
    ({"src": np.array([0])}, r"both edge_index and src/dst given"),
])
def test_bad_shapes_name_the_key(tmp_path, graph, change, message):
    arrays = dict(graph)
    for key, value in change.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    with pytest.raises(IngestError, match=r"g\.npz: " + message):
        read_npz(save(tmp_path, arrays))


def test_src_without_dst_and_unreadable_files(tmp_path):
    with pytest.raises(IngestError, match=r"g\.npz: no dst key; keys present: \['src'\]"):
        read_npz(save(tmp_path, {"src": np.array([0])}))
    with pytest.raises(IngestError, match=r"g\.npz: src has 1 entries but dst has 2"):
        read_npz(save(tmp_path, {"src": np.array([0]), "dst": np.array([0, 1])}))
    with pytest.raises(IngestError, match=r"missing\.npz: no such file"):
        read_npz(tmp_path / "missing.npz")
    bogus = tmp_path / "bogus.npz"
    bogus.write_text("not a zip")
    with pytest.raises(IngestError, match=r"bogus\.npz: not a readable \.npz file"):
        read_npz(bogus)
    with pytest.raises(IngestError, match=r"obj\.npz: y: cannot read"):
        read_npz(save(tmp_path, {"edge_index": np.array([[0], [1]]), "y": np.array([{}, 1], dtype=object)},
                      "obj.npz"))


def test_end_to_end_through_the_store(tmp_path, graph):
    from collections import Counter

    from graphpipe.ingest import ingest

    store = ingest(save(tmp_path, graph), tmp_path / "store")
    indptr = np.asarray(store.indptr)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    src = np.asarray(store.indices).astype(np.int64)
    edge_index = graph["edge_index"]
    assert Counter(zip(src.tolist(), dst.tolist())) == Counter(zip(edge_index[0].tolist(), edge_index[1].tolist()))
    np.testing.assert_array_equal(np.asarray(store.feat), graph["x"])
    np.testing.assert_array_equal(np.asarray(store.labels).reshape(-1), graph["y"])
    assert store.split("valid").tolist() == graph["valid_idx"].tolist()
