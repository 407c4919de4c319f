"""The papers100M-bin generator: OGB's own readers open what it streams, equal to the
in-memory arrays; the CLI command; the streamed npz writer."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from graphpipe.cli.generate import command as generate_command

from graphpipe.synthetic.npz_stream import NpzStreamWriter
from graphpipe.synthetic.papers import (
    EDGE_BLOCK,
    NODE_BLOCK,
    PapersSpec,
    class_weights,
    papers100m_arrays,
    write_papers100m_bin,
)
from graphpipe.synthetic.rmat import rmat_edges

SPEC = PapersSpec(NODE_BLOCK + 1234, edges_per_node=3, dim=16, num_classes=7, label_frac=0.05,
                  seed=5)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_papers100m_bin(tmp_path_factory.mktemp("papers") / "papers100M-bin", SPEC)


@pytest.fixture(scope="module")
def arrays() -> dict[str, np.ndarray]:
    return papers100m_arrays(SPEC)


def test_ogb_binary_reader_reads_the_streamed_folder(folder, arrays):
    from ogb.io.read_graph_raw import read_binary_graph_raw

    (graph,) = read_binary_graph_raw(str(folder / "raw"))
    assert graph["num_nodes"] == SPEC.num_nodes
    np.testing.assert_array_equal(graph["edge_index"], arrays["edge_index"])
    assert graph["edge_index"].dtype == np.int64
    np.testing.assert_array_equal(graph["node_feat"], arrays["node_feat"])
    assert graph["node_feat"].dtype == np.float32
    np.testing.assert_array_equal(graph["node_year"], arrays["node_year"])
    assert graph["node_year"].dtype == np.int64 and graph["node_year"].shape == (SPEC.num_nodes, 1)


def test_ogb_dataset_reads_labels_and_time_split(folder, arrays):
    from ogb.nodeproppred import NodePropPredDataset

    from graphpipe.synthetic import ogb_meta_dict

    meta = ogb_meta_dict(folder, "ogbn-papers100M", num_classes=SPEC.num_classes)
    assert meta["binary"] == "True" and meta["split"] == "time"
    dataset = NodePropPredDataset("ogbn-papers100M", root=str(folder.parent), meta_dict=meta)
    graph, labels = dataset[0]
    assert labels.dtype == np.float32 and labels.shape == (SPEC.num_nodes, 1)
    np.testing.assert_array_equal(labels, arrays["node_label"])  # NaN where equal NaN
    split = dataset.get_idx_split()
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(split[name], arrays[name])
    np.testing.assert_array_equal(graph["node_feat"], arrays["node_feat"])


def test_members_are_deflated_zip64_npy(folder):
    with zipfile.ZipFile(folder / "raw" / "data.npz") as zf:
        infos = {info.filename: info for info in zf.infolist()}
    assert set(infos) == {"num_nodes_list.npy", "edge_index.npy", "num_edges_list.npy",
                          "node_feat.npy", "node_year.npy"}
    assert all(info.compress_type == zipfile.ZIP_DEFLATED for info in infos.values())
    assert (folder / "RELEASE_v1.txt").is_file() and (folder / "processed").is_dir()


def test_labels_split_and_year_semantics(arrays):
    labels = arrays["node_label"][:, 0]
    labelled = ~np.isnan(labels)
    assert 0.03 < labelled.mean() < 0.07  # label_frac 0.05
    classes = np.argmax(arrays["node_feat"] @ class_weights(SPEC), axis=1)
    np.testing.assert_array_equal(labels[labelled], classes[labelled])
    year = arrays["node_year"][:, 0]
    assert year.min() >= 1950 and year.max() <= 2020
    ids = np.concatenate([arrays["train"], arrays["valid"], arrays["test"]])
    np.testing.assert_array_equal(np.sort(ids), np.flatnonzero(labelled))
    assert (year[arrays["train"]] <= 2017).all() and (year[arrays["valid"]] == 2018).all()
    assert (year[arrays["test"]] >= 2019).all()
    assert len(arrays["train"]) > len(arrays["test"]) > len(arrays["valid"]) > 0


def test_edges_are_folded_rmat_edges(arrays):
    src, dst = rmat_edges(SPEC.scale, SPEC.edges_per_node, seed=SPEC.seed, count=SPEC.num_edges)
    np.testing.assert_array_equal(arrays["edge_index"][0], src % SPEC.num_nodes)
    np.testing.assert_array_equal(arrays["edge_index"][1], dst % SPEC.num_nodes)
    degree = np.bincount(arrays["edge_index"][1], minlength=SPEC.num_nodes)
    assert degree.max() > 20 * degree.mean()  # power law: hubs


def test_edge_blocks_do_not_change_the_edges():
    from graphpipe.synthetic import papers

    spec = PapersSpec(5000, edges_per_node=4, dim=2, seed=1)
    whole = papers100m_arrays(spec)["edge_index"]
    assert spec.num_edges < EDGE_BLOCK
    parts = list(papers.edge_blocks(spec, block=777))
    assert len(parts) > 1
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), whole[0])


def test_cli_writes_the_same_folder(tmp_path, arrays):
    dest = tmp_path / "p"
    result = CliRunner().invoke(generate_command, [
        "papers100m-bin", str(dest), "--nodes", str(SPEC.num_nodes), "--edges-per-node", "3",
        "--dim", "16", "--classes", "7", "--label-frac", "0.05", "--seed", "5"])
    assert result.exit_code == 0, result.output
    with np.load(dest / "raw" / "data.npz", allow_pickle=False) as data:
        np.testing.assert_array_equal(data["node_feat"], arrays["node_feat"])
    train = pd.read_csv(dest / "split" / "time" / "train.csv.gz", header=None).values[:, 0]
    np.testing.assert_array_equal(train, arrays["train"])
    again = CliRunner().invoke(generate_command, ["papers100m-bin", str(dest), "--nodes", "10"])
    assert again.exit_code == 2 and "exists" in again.output.lower()


def test_cli_rejects_bad_sizes(tmp_path):
    result = CliRunner().invoke(generate_command, ["papers100m-bin", str(tmp_path / "p"),
                                                   "--nodes", "1"])
    assert result.exit_code == 2 and not (tmp_path / "p").exists()


def test_npz_stream_writer_matches_savez_and_checks_sizes(tmp_path):
    values = np.arange(30, dtype=np.int64).reshape(3, 10)
    with NpzStreamWriter(tmp_path / "a.npz") as npz:
        npz.write_blocks("v", (3, 10), np.int64, [values.ravel()[:7], values.ravel()[7:]])
    np.savez_compressed(tmp_path / "b.npz", v=values)
    with np.load(tmp_path / "a.npz") as a, np.load(tmp_path / "b.npz") as b:
        np.testing.assert_array_equal(a["v"], b["v"])
    with NpzStreamWriter(tmp_path / "c.npz") as npz:
        with pytest.raises(ValueError, match="needs 30"):
            npz.write_blocks("v", (3, 10), np.int64, [values.ravel()[:7]])
        with pytest.raises(ValueError, match="more than"):
            npz.write_blocks("w", (2,), np.int64, [values.ravel()[:7]])
