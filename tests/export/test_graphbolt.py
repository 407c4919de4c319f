"""``graphpipe export --format graphbolt``: the folder GraphBolt 2.1 loads and samples (in
the DGL environment, skipped without one), and store -> export -> ingest gives the same
arrays."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from graphpipe.cli.main import main

from graphpipe.export import write_graphbolt
from graphpipe.ingest import ingest
from graphpipe.store import GraphStore
from graphpipe.synthetic import community_graph, write_npz

CHILD = str(Path(__file__).with_name("graphbolt_child.py"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    tmp = tmp_path_factory.mktemp("gb")
    graph = community_graph(800, 4, feature_dim=5, avg_degree=8, seed=2)
    rng = np.random.default_rng(0)
    npz = os.path.join(tmp, "g.npz")
    write_npz(npz, graph)
    arrays = dict(np.load(npz))
    arrays["edge_attr"] = rng.standard_normal((arrays["src"].shape[0] if "src" in arrays
                                               else arrays["edge_index"].shape[1], 2)).astype(np.float32)
    np.savez(npz, **arrays)
    return ingest(npz, os.path.join(tmp, "store"))


def test_round_trip_gives_the_same_arrays(store: GraphStore, tmp_path: Path) -> None:
    assert main(["export", str(store.path), str(tmp_path / "gb"), "--format", "graphbolt"]) == 0
    back = ingest(tmp_path / "gb", tmp_path / "back")
    for key in ("csc/indptr", "csc/indices", "csc/edge_id", "node/feat", "node/label", "edge/feat"):
        assert store.has_array(key)
        a, b = store.array(key), back.array(key)
        assert a.dtype == b.dtype and np.array_equal(a, b), key
    assert back.split_names == store.split_names
    for split in store.split_names:
        assert np.array_equal(back.split(split), store.split(split))
    assert back.manifest["labels"]["num_classes"] == store.manifest["labels"]["num_classes"]


def test_export_refuses_an_existing_destination(store: GraphStore, tmp_path: Path) -> None:
    (tmp_path / "taken").mkdir()
    with pytest.raises(ValueError, match="already exists"):
        write_graphbolt(store, tmp_path / "taken")
    assert main(["export", str(store.path), str(tmp_path / "taken")]) == 2


def test_graphbolt_loads_and_samples_the_export(store: GraphStore, tmp_path: Path, numpy1_env) -> None:
    out = write_graphbolt(store, tmp_path / "gb")
    assert numpy1_env(CHILD, str(out), str(store.path)).strip().endswith("ok")
