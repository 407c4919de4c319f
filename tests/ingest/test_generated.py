"""`graphpipe generate --format csv|tsv|parquet|npz` folders ingest back with their splits,
features (bit-exact: the writers print float32 values in their shortest round-trip form)
and labels (generate.json), against the generator's own arrays."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import GraphStore
from graphpipe.synthetic import community_graph

ARGS = {"nodes": 300, "classes": 4, "feature_dim": 5, "seed": 3}


@pytest.fixture(scope="module")
def graph():
    return community_graph(ARGS["nodes"], ARGS["classes"], feature_dim=ARGS["feature_dim"],
                           seed=ARGS["seed"])


def _generate(dest, *extra) -> None:
    result = CliRunner().invoke(cli, [
        "generate", "community", str(dest), "--nodes", str(ARGS["nodes"]), "--classes",
        str(ARGS["classes"]), "--feature-dim", str(ARGS["feature_dim"]), "--seed",
        str(ARGS["seed"]), "-q", *extra])
    assert result.exit_code == 0, result.output


def _ingest(source, dest, *extra):
    return CliRunner().invoke(cli, ["ingest", str(source), str(dest), "-q", *extra])


def _assert_same_graph(store: GraphStore, graph, features: np.ndarray) -> None:
    assert store.num_nodes == graph.num_nodes and store.num_edges == graph.num_edges
    for name, ids in graph.splits.items():
        np.testing.assert_array_equal(np.sort(store.split(name)), ids)
    np.testing.assert_array_equal(store.labels, graph.labels)
    stored = store.features()
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(stored.view(np.uint32), features.view(np.uint32))
    degree = np.bincount(graph.dst, minlength=graph.num_nodes)
    np.testing.assert_array_equal(store.in_degrees, degree)


@pytest.mark.parametrize(("fmt", "id_kind"), [("csv", "string"), ("tsv", "sparse-int"),
                                              ("csv", "dense")])
def test_text_folder_round_trip(tmp_path, graph, fmt, id_kind):
    _generate(tmp_path / "g", "--format", fmt, "--id-kind", id_kind)
    result = _ingest(tmp_path / "g", tmp_path / "s")
    assert result.exit_code == 0, result.output
    _assert_same_graph(GraphStore.open(tmp_path / "s"), graph, graph.features)


@pytest.mark.parametrize("layout", ["columns", "list"])
def test_parquet_folder_is_bit_exact_and_equals_npz(tmp_path, graph, layout):
    _generate(tmp_path / "g", "--format", "parquet", "--id-kind", "sparse-int",
              "--feature-layout", layout)
    assert _ingest(tmp_path / "g", tmp_path / "s").exit_code == 0
    _assert_same_graph(GraphStore.open(tmp_path / "s"), graph, graph.features)
    # the same graph generated as one .npz (no external IDs) gives the same store content
    _generate(tmp_path / "n", "--format", "npz")
    assert _ingest(tmp_path / "n", tmp_path / "t").exit_code == 0, "npz folder"
    _assert_same_graph(GraphStore.open(tmp_path / "t"), graph, graph.features)


def test_edge_list_with_split_dir_and_feature_pattern(tmp_path, graph):
    _generate(tmp_path / "g", "--format", "csv", "--id-kind", "string")
    g = tmp_path / "g"
    result = _ingest(g / "edges.csv", tmp_path / "s", "--nodes", g / "nodes.csv",
                     "--features", "f*", "--label", "label", "--split-dir", g / "split")
    assert result.exit_code == 0, result.output
    _assert_same_graph(GraphStore.open(tmp_path / "s"), graph, graph.features)


def test_split_file_with_an_unknown_id_is_one_line_error(tmp_path):
    _generate(tmp_path / "g", "--format", "csv", "--id-kind", "string")
    g = tmp_path / "g"
    (g / "split" / "test.csv").write_text("id\nuser_000001\nnobody\n")
    result = _ingest(g, tmp_path / "s")
    assert result.exit_code == 2
    assert "test.csv: line 3: node ID 'nobody'" in result.output
    assert not (tmp_path / "s").exists()


def test_generate_json_paths_must_stay_inside(tmp_path):
    _generate(tmp_path / "g", "--format", "csv")
    path = tmp_path / "g" / "generate.json"
    description = json.loads(path.read_text())
    description["files"]["edges"]["path"] = "../elsewhere.csv"
    path.write_text(json.dumps(description))
    result = _ingest(tmp_path / "g", tmp_path / "s")
    assert result.exit_code == 2
    assert "files.edges.path must be a relative path inside the folder" in result.output


def test_split_dir_is_refused_for_sources_with_their_own_splits(tmp_path):
    _generate(tmp_path / "g", "--format", "csv")
    result = _ingest(tmp_path / "g", tmp_path / "s", "--split-dir", tmp_path / "g" / "split")
    assert result.exit_code == 2 and "--split-dir does not apply to generated datasets" in result.output
