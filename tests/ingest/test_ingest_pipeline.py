"""The ingest pipeline's own options: .npy features, source routing, memory-limit parsing."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.formats import open_source
from graphpipe.ingest.options import parse_size
from graphpipe.ingest.pipeline import attach_npy_features
from graphpipe.synthetic import write_edge_list


def test_npy_features_with_headerless_csv(tmp_path):
    src = np.array([0, 1, 2, 2])
    dst = np.array([1, 2, 0, 1])
    write_edge_list(tmp_path / "edges.csv", src, dst, header=False)
    feat = np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32)  # nodes 3, 4: no edges
    np.save(tmp_path / "feat.npy", feat)
    source = attach_npy_features(open_source(tmp_path / "edges.csv", header=False), tmp_path / "feat.npy")
    store = ingest(source, tmp_path / "s")
    assert store.num_nodes == 5 and store.num_edges == 4
    assert np.array_equal(store.features(), feat)
    np.testing.assert_array_equal(store.in_degrees, [1, 2, 1, 0, 0])


def test_npy_features_with_too_few_rows(tmp_path):
    write_edge_list(tmp_path / "edges.csv", np.array([0, 5]), np.array([5, 0]), header=False)
    np.save(tmp_path / "feat.npy", np.zeros((4, 2), np.float32))
    with pytest.raises(IngestError, match=r"feat.npy: 4 feature rows, but the graph has 6 nodes"):
        attach_npy_features(open_source(tmp_path / "edges.csv", header=False), tmp_path / "feat.npy")


def test_cli_node_features_option(tmp_path):
    from click.testing import CliRunner
    from graphpipe.cli.main import cli

    write_edge_list(tmp_path / "edges.csv", np.array([0, 1]), np.array([1, 0]))
    np.save(tmp_path / "feat.npy", np.ones((2, 4), np.float32))
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "edges.csv"), str(tmp_path / "s"),
                                      "--node-features", str(tmp_path / "feat.npy"), "--quiet"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "edges.csv"), str(tmp_path / "t"),
                                      "--node-features", str(tmp_path / "missing.npy"), "--quiet"])
    assert result.exit_code == 2 and "missing.npy: file not found" in result.output
    assert not (tmp_path / "t").exists()


def test_parse_size():
    assert parse_size("2GB") == 2 << 30
    assert parse_size("512 MiB") == 512 << 20
    assert parse_size(1000) == 1000 and parse_size(None) is None
    with pytest.raises(ValueError, match="memory_limit"):
        parse_size("lots")


def test_bad_option_values(tmp_path):
    write_edge_list(tmp_path / "edges.csv", np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="feature_dtype"):
        ingest(tmp_path / "edges.csv", tmp_path / "s", IngestOptions(feature_dtype="int8"))
    assert not (tmp_path / "s").exists()
