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
TYPED_CHILD = str(Path(__file__).with_name("graphbolt_typed_child.py"))


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


@pytest.fixture(scope="module")
def typed_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    """Two node types, three relations (one with edge features, one empty), labels and
    splits on two types, float16 features on one."""
    from graphpipe.store import StoreWriter

    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("typed") / "store"
    with StoreWriter(path, name="tiny-typed") as w:
        w.add_node_type("paper", 60)
        w.add_node_type("author", 30)
        src, dst = rng.integers(0, 30, 200), rng.integers(0, 60, 200)
        w.add_relation(("author", "writes", "paper"), src, dst,
                       edge_feat=rng.standard_normal((200, 3)).astype(np.float32))
        w.add_relation(("paper", "cites", "paper"), rng.integers(0, 60, 150), rng.integers(0, 60, 150))
        w.add_relation(("paper", "cited_by_none", "author"), np.zeros(0, np.int64), np.zeros(0, np.int64))
        w.write_node_array("paper", "feat", rng.standard_normal((60, 4)).astype(np.float16))
        w.write_node_array("author", "feat", rng.standard_normal((30, 2)).astype(np.float32))
        w.write_node_array("paper", "label", rng.integers(0, 5, 60))
        w.write_node_array("author", "label", rng.integers(0, 2, 30))
        w.target_type = "paper"
        order = rng.permutation(60)
        for name, ids in (("train", order[:30]), ("valid", order[30:40]), ("test", order[40:])):
            w.write_split("paper", name, ids)
        w.write_split("author", "train", np.arange(10))
        w.commit()
    return GraphStore.open(path)


def test_typed_round_trip_gives_the_same_arrays(typed_store: GraphStore, tmp_path: Path) -> None:
    """Our own typed GraphBolt layout read back: every array of every type and relation equal
    (edge IDs and features included), labels kept where the sets do not cover them."""
    store = typed_store
    out = write_graphbolt(store, tmp_path / "gb")
    back = ingest(out, tmp_path / "back")
    assert back.node_types == store.node_types and back.edge_types == store.edge_types
    assert back.target_type == "paper" and back.name == "tiny-typed"
    for etype in store.edge_types:
        for a, b in zip(store.typed_csc(etype), back.typed_csc(etype)):
            assert a.dtype == b.dtype and np.array_equal(a, b), etype
        assert np.array_equal(store.typed_edge_ids(etype), back.typed_edge_ids(etype))
        one, two = store.typed_edge_features(etype), back.typed_edge_features(etype)
        assert (one is None and two is None) or (one.dtype == two.dtype and np.array_equal(one, two))
    for ntype in store.node_types:
        for a, b in ((store.typed_features(ntype), back.typed_features(ntype)),
                     (store.typed_labels(ntype), back.typed_labels(ntype))):
            assert a.dtype == b.dtype and np.array_equal(a, b), ntype
        assert back.typed_split_names(ntype) == store.typed_split_names(ntype)
        for split in store.typed_split_names(ntype):
            assert np.array_equal(back.typed_split(ntype, split), store.typed_split(ntype, split))
    assert back.typed_num_classes("paper") == store.typed_num_classes("paper") == 5


def test_graphbolt_loads_the_typed_export(typed_store: GraphStore, tmp_path: Path, numpy1_env) -> None:
    out = write_graphbolt(typed_store, tmp_path / "gb")
    assert numpy1_env(TYPED_CHILD, str(out), str(typed_store.path)).strip().endswith("ok")
