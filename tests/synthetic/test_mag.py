"""The ogbn-mag-like generator: OGB's own heterogeneous reader reads what it writes (every
array equal), it is deterministic, degrees are skewed, and the class signal is in the
typed neighbourhood far more than in the paper features."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.synthetic.mag import mag_dataset, mag_meta_dict, write_ogb_mag

SMALL = {"papers": 3000, "authors": 2500, "institutions": 60, "fields": 200, "num_classes": 8,
         "feature_dim": 16}


@pytest.fixture(scope="module")
def data():
    return mag_dataset(**SMALL, seed=3)


def test_ogb_reads_the_layout(data, tmp_path):
    from ogb.nodeproppred import NodePropPredDataset

    folder = write_ogb_mag(tmp_path / "mag", data)
    dataset = NodePropPredDataset("ogbn-mag", meta_dict=mag_meta_dict(folder, data.num_classes))
    graph, labels = dataset[0]
    assert graph["num_nodes_dict"] == data.num_nodes_dict
    assert set(graph["edge_index_dict"]) == set(data.edges)
    for etype, (src, dst) in data.edges.items():
        np.testing.assert_array_equal(graph["edge_index_dict"][etype], np.stack([src, dst]))
        assert graph["edge_reltype"][etype].shape == (src.shape[0], 1)
    np.testing.assert_allclose(graph["node_feat_dict"]["paper"], data.x, atol=1e-6)
    np.testing.assert_array_equal(graph["node_year"]["paper"][:, 0], data.year)
    np.testing.assert_array_equal(labels["paper"][:, 0], data.y)
    split = dataset.get_idx_split()
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(split[name]["paper"], data.splits[name])


def test_deterministic_and_disjoint_splits(data):
    again = mag_dataset(**SMALL, seed=3)
    for etype in data.edges:
        for a, b in zip(data.edges[etype], again.edges[etype]):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(data.x, again.x)
    ids = np.concatenate(list(data.splits.values()))
    assert np.unique(ids).size == ids.size == data.num_nodes_dict["paper"]
    assert not np.array_equal(mag_dataset(**SMALL, seed=4).y, data.y)


def test_skewed_degrees_no_duplicates(data):
    for etype, (src, dst) in data.edges.items():
        pairs = src * (dst.max() + 1) + dst
        assert np.unique(pairs).size == pairs.size, etype
        assert src.min() >= 0 and src.max() < data.num_nodes_dict[etype[0]]
        assert dst.min() >= 0 and dst.max() < data.num_nodes_dict[etype[2]]
    author_deg = np.bincount(data.edges[("author", "writes", "paper")][0])
    cited = np.bincount(data.edges[("paper", "cites", "paper")][1])
    assert author_deg.max() > 20 * author_deg.mean() and cited.max() > 20 * cited.mean()


def _nearest_centroid(x, y, train, test, num_classes):
    centroids = np.stack([x[train][y[train] == c].mean(0) for c in range(num_classes)])
    dist = ((x[test][:, None, :] - centroids[None]) ** 2).sum(-1)
    return (dist.argmin(1) == y[test]).mean()


def _field_vote(data, train, test):
    """Each test paper's class by the training labels of the papers sharing its fields."""
    paper, fos = data.edges[("paper", "has_topic", "field_of_study")]
    hist = np.zeros((data.num_nodes_dict["field_of_study"], data.num_classes))
    is_train = np.isin(paper, train)
    np.add.at(hist, (fos[is_train], data.y[paper[is_train]]), 1)
    scores = np.zeros((data.num_nodes_dict["paper"], data.num_classes))
    np.add.at(scores, paper, hist[fos] / np.maximum(hist[fos].sum(1, keepdims=True), 1))
    return (scores[test].argmax(1) == data.y[test]).mean()


def test_signal_is_in_the_neighbourhood(data):
    train, test = data.splits["train"], data.splits["test"]
    by_features = _nearest_centroid(data.x, data.y, train, test, data.num_classes)
    by_fields = _field_vote(data, train, test)
    assert by_features > 1.2 / data.num_classes          # the features are not empty ...
    assert by_fields > by_features + 0.3                  # ... but the typed neighbours say far more


def test_cli(tmp_path):
    dest = tmp_path / "mag"
    args = ["generate", "mag", str(dest), "--papers", "300", "--authors", "200",
            "--institutions", "10", "--fields", "30", "--num-classes", "4", "--feature-dim", "8"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert (dest / "raw" / "relations" / "author___writes___paper" / "edge.csv.gz").is_file()
    assert (dest / "split" / "time" / "paper" / "train.csv.gz").is_file()
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "already exists" in result.output
    shutil.rmtree(dest)
