"""Typed (heterogeneous) stores: TypedStoreWriter -> GraphStore's typed face, validate, info.

Oracle: each relation's CSC is checked against a plain Python construction (in-neighbours
of every destination, in the canonical order: source ascending, ties by input position);
per-edge arrays against the input indexed by the stored edge IDs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import CorruptStoreError, GraphStore, StoreError
from graphpipe.store.validate import validate
from graphpipe.store.writer import TypedStoreWriter

COUNTS = {"paper": 40, "author": 25, "institution": 3}
WRITES = ("author", "writes", "paper")
CITES = ("paper", "cites", "paper")
AFFIL = ("author", "affiliated_with", "institution")


def _graph(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    edges = {}
    for etype, e in ((WRITES, 90), (CITES, 120), (AFFIL, 25)):
        src = rng.integers(0, COUNTS[etype[0]], e)
        dst = rng.integers(0, COUNTS[etype[2]], e)
        edges[etype] = (src, dst)
    return {
        "edges": edges,
        "feat": rng.standard_normal((COUNTS["paper"], 5)).astype(np.float32),
        "author_feat": rng.standard_normal((COUNTS["author"], 3)).astype(np.float16),
        "label": np.where(rng.random(COUNTS["paper"]) < 0.2, -1, rng.integers(0, 4, COUNTS["paper"])),
        "year": rng.integers(2000, 2020, COUNTS["paper"]),
        "edge_time": rng.integers(0, 100, 90),
        "edge_feat": rng.standard_normal((90, 2)),
        "perm": rng.permutation(COUNTS["paper"]),
    }


def _write(path: Path, g: dict, **kwargs) -> Path:
    with TypedStoreWriter(path, COUNTS, name="toy", **kwargs) as w:
        for etype, (src, dst) in g["edges"].items():
            extra = {"time": g["edge_time"], "edge_feat": g["edge_feat"]} if etype == WRITES else {}
            w.add_relation(etype, src, dst, **extra)
        w.write_node_array("paper", "feat", g["feat"])
        w.write_node_array("author", "feat", g["author_feat"])
        w.write_node_array("paper", "label", g["label"])
        w.write_node_array("paper", "time", g["year"])
        perm = g["perm"]
        w.write_split("paper", "train", perm[:20])
        w.write_split("paper", "valid", perm[20:30])
        w.write_split("paper", "test", perm[30:])
        return w.commit()


def _reference_csc(src, dst, n_dst):
    rows = [sorted((int(s), i) for i, (s, d) in enumerate(zip(src, dst)) if d == v) for v in range(n_dst)]
    indptr = np.cumsum([0] + [len(r) for r in rows])
    return indptr, [s for r in rows for s, _ in r], [i for r in rows for _, i in r]


@pytest.fixture
def typed_store(tmp_path):
    g = _graph()
    return GraphStore.open(_write(tmp_path / "toy", g)), g


def test_relations_match_reference(typed_store):
    store, g = typed_store
    assert store.is_typed and store.node_types == list(COUNTS)
    assert store.num_nodes_dict == COUNTS
    assert store.edge_types == [WRITES, CITES, AFFIL]
    assert store.num_edges_dict == {e: len(s) for e, (s, _) in g["edges"].items()}
    assert store.num_nodes == sum(COUNTS.values()) and store.num_edges == 90 + 120 + 25
    for etype, (src, dst) in g["edges"].items():
        indptr, indices = store.typed_csc(etype)
        ref_ptr, ref_idx, ref_eid = _reference_csc(src, dst, COUNTS[etype[2]])
        assert indptr.dtype == np.int64 and indices.dtype == np.int32
        assert indptr.tolist() == ref_ptr.tolist() and indices.tolist() == ref_idx
        assert store.typed_edge_ids(etype).tolist() == ref_eid
        assert store.typed_csc("___".join(etype))[0] is indptr  # string form, cached
        assert isinstance(indices, np.memmap) or isinstance(indices.base, np.memmap)


def test_edge_arrays_in_csc_order(typed_store):
    store, g = typed_store
    eid = store.typed_edge_ids(WRITES)
    assert store.typed_edge_time(WRITES).tolist() == g["edge_time"][eid].tolist()
    np.testing.assert_array_equal(store.typed_edge_features(WRITES), g["edge_feat"][eid])
    assert store.typed_edge_time(CITES) is None and store.typed_edge_features(CITES) is None


def test_node_arrays_and_splits(typed_store):
    store, g = typed_store
    np.testing.assert_array_equal(store.typed_features("paper"), g["feat"])
    author = store.typed_features("author")
    assert author.dtype == np.float16 and author.shape == (25, 3)
    np.testing.assert_array_equal(author, g["author_feat"])
    assert store.typed_features("institution") is None
    assert store.typed_labels("paper").tolist() == g["label"].tolist()
    assert store.typed_labels("author") is None
    assert store.typed_num_classes("paper") == int(g["label"].max()) + 1
    assert store.typed_node_time("paper").tolist() == g["year"].tolist()
    assert store.target_type == "paper"
    assert store.typed_split_names("paper") == ["train", "valid", "test"]
    assert store.typed_split("paper", "valid").tolist() == g["perm"][20:30].tolist()  # order kept
    assert store.typed_split_names("author") == []
    with pytest.raises(KeyError):
        store.typed_split("paper", "nope")
    with pytest.raises(KeyError):
        store.typed_features("venue")
    with pytest.raises(KeyError):
        store.typed_csc(("paper", "writes", "author"))


def test_features_are_one_memory_map(typed_store):
    store, _ = typed_store
    feat = store.typed_features("paper")
    assert isinstance(feat, np.memmap) or isinstance(feat.base, np.memmap)
    assert not feat.flags.writeable


def test_homogeneous_store_answers_the_typed_face(tmp_path):
    """A homogeneous store is one node type ``_N`` and one relation ``(_N, _E, _N)`` (DGL's
    names) read from its own keys; its manifest and layout stay as they are."""
    from graphpipe.ingest import ingest

    npz = tmp_path / "g.npz"
    edge_index = np.array([[0, 1, 2, 2], [1, 2, 0, 1]])
    np.savez(npz, edge_index=edge_index, x=np.arange(6, dtype=np.float32).reshape(3, 2),
             y=np.array([1, 0, 1]), train_idx=np.array([2, 0]), node_year=np.array([5, 6, 7]),
             edge_time=np.array([10, 11, 12, 13]), edge_attr=np.array([[0.5], [1.5], [2.5], [3.5]]))
    store = ingest(npz, tmp_path / "g")
    etype = ("_N", "_E", "_N")
    assert not store.is_typed and "node_types" not in store.manifest
    assert store.node_types == ["_N"] and store.edge_types == [etype] and store.target_type == "_N"
    assert store.num_nodes_dict == {"_N": 3} and store.num_edges_dict == {etype: 4}
    indptr, indices = store.typed_csc("_N____E____N")  # "src___rel___dst"
    assert indptr.tolist() == store.indptr.tolist() and indices.tolist() == store.indices.tolist()
    assert np.array_equal(store.typed_features("_N"), store.feat)
    assert store.typed_labels("_N").tolist() == [1, 0, 1] and store.typed_num_classes("_N") == 2
    assert store.typed_split_names("_N") == ["train"] and store.typed_split("_N", "train").tolist() == [0, 2]
    assert store.typed_node_time("_N").tolist() == [5, 6, 7]
    eid = store.typed_edge_ids(etype)
    assert eid.tolist() == store.edge_id.tolist()
    assert store.typed_edge_time(etype).tolist() == [10 + int(e) for e in eid]
    assert store.typed_edge_features(etype)[:, 0].tolist() == [0.5 + int(e) for e in eid]
    assert store.typed_id_map("_N").is_identity
    with pytest.raises(KeyError, match="unknown node type 'paper'"):
        store.typed_features("paper")
    assert validate(tmp_path / "g") == []


def test_explicit_target_and_empty_relation(tmp_path):
    with TypedStoreWriter(tmp_path / "s", {"a": 2, "b": 0}, target_type="b") as w:
        w.add_relation(("a", "to", "a"), np.array([], dtype=np.int64), np.array([], dtype=np.int64))
        w.add_relation(("a", "to", "b"), np.zeros(0, np.int64), np.zeros(0, np.int64), edge_ids=False)
        w.commit()
    store = GraphStore.open(tmp_path / "s")
    assert store.target_type == "b"
    assert [a.tolist() for a in store.typed_csc(("a", "to", "a"))] == [[0, 0, 0], []]
    assert store.typed_csc(("a", "to", "b"))[0].tolist() == [0]
    assert store.typed_edge_ids(("a", "to", "b")) is None
    assert validate(tmp_path / "s") == []


def test_validate_clean_store(typed_store):
    store, _ = typed_store
    assert validate(store.path) == []


@pytest.mark.parametrize("bad", [
    {"type": "../x"}, {"type": "a___b"}, {"type": ".hidden"}, {"count": -1}, {"count": 1.5},
])
def test_writer_refuses_bad_types(tmp_path, bad):
    counts = {bad.get("type", "paper"): bad.get("count", 3)}
    with pytest.raises(StoreError):
        TypedStoreWriter(tmp_path / "s", counts)
    assert not (tmp_path / "s").exists()


def test_writer_refuses_bad_relations(tmp_path):
    with TypedStoreWriter(tmp_path / "s", COUNTS) as w:
        with pytest.raises(StoreError, match=r"outside \[0, 3\)"):
            w.add_relation(AFFIL, np.array([0, 1]), np.array([0, 3]))
        with pytest.raises(StoreError, match="outside"):
            w.add_relation(WRITES, np.array([-1]), np.array([0]))
        with pytest.raises(StoreError, match="venue"):
            w.add_relation(("paper", "in", "venue"), np.array([0]), np.array([0]))
        w.add_relation(CITES, np.array([0]), np.array([1]))
        with pytest.raises(StoreError, match="twice"):
            w.add_relation(CITES, np.array([0]), np.array([1]))
        with pytest.raises(StoreError, match="twice"):
            w.write_split("paper", "train", np.array([1, 1]))
        w.write_split("paper", "train", np.array([1, 2]))
        with pytest.raises(StoreError, match="share"):
            w.write_split("paper", "test", np.array([2, 3]))
        with pytest.raises(StoreError, match="outside"):
            w.write_split("paper", "valid", np.array([40]))
        with pytest.raises(StoreError):
            w.write_node_array("paper", "feat", np.zeros((39, 2), np.float32))
        with pytest.raises(StoreError):
            w.write_node_array("paper", "label", np.full(40, -2))
        with pytest.raises(StoreError):
            w.write_split("paper", "../../x", np.array([5]))


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), TypedStoreWriter(tmp_path / "s", COUNTS) as w:
        w.add_relation(CITES, np.array([0]), np.array([1]))
        raise RuntimeError("stop")
    assert list(tmp_path.iterdir()) == []


def _chunk(store_path: Path, key: str) -> Path:
    return next(p for p in (store_path / key / "c").rglob("*") if p.is_file())


def test_corrupt_indices_found(typed_store):
    store, _ = typed_store
    path = _chunk(store.path, "rel/author___affiliated_with___institution/csc/indices")
    data = np.fromfile(path, dtype=np.int32)
    data[3] = 99  # authors are 0..24
    data.tofile(path)
    problems = validate(store.path)
    assert any("checksum" in p for p in problems)
    assert any("outside [0, 25)" in p for p in problems)
    fresh = GraphStore.open(store.path)
    with pytest.raises(CorruptStoreError, match="outside"):
        fresh.typed_csc(AFFIL)


def test_corrupt_indptr_found(typed_store):
    store, _ = typed_store
    path = _chunk(store.path, "rel/paper___cites___paper/csc/indptr")
    data = np.fromfile(path, dtype=np.int64)
    data[5] = data[6] + 1
    data.tofile(path)
    assert any("decreases" in p for p in validate(store.path, checksums=False))
    with pytest.raises(CorruptStoreError, match="decreases"):
        GraphStore.open(store.path).typed_csc(CITES)


def _edit_manifest(path: Path, edit) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    edit(manifest)
    (path / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("edit, match", [
    (lambda m: m["node_types"].update(institution=2), "indptr"),
    (lambda m: m["node_types"].update(author=10), r"outside \[0, 10\)"),
    (lambda m: m["edge_types"].append(["paper", "x", "venue"]), "node type"),
    (lambda m: m["node_types"].update(paper=-1), "integer >= 0"),
    (lambda m: m.update(target_type="venue"), "target_type"),
    (lambda m: m["edge_types"].append(["../a", "x", "paper"]), "not allowed"),
])
def test_corrupt_manifest_refused_at_open(typed_store, edit, match):
    store, _ = typed_store
    _edit_manifest(store.path, edit)
    with pytest.raises(StoreError, match=match):
        GraphStore.open(store.path)
    assert validate(store.path)


def test_split_out_of_range_found(typed_store):
    store, _ = typed_store
    path = _chunk(store.path, "typed/paper/split/test")
    data = np.fromfile(path, dtype=np.int64)
    data[0] = 1000
    data.tofile(path)
    assert any("outside [0, 40)" in p for p in validate(store.path, checksums=False))
    with pytest.raises(CorruptStoreError):
        GraphStore.open(store.path).typed_split("paper", "test")


def test_info_and_validate_cli(typed_store):
    store, _ = typed_store
    runner = CliRunner()
    result = runner.invoke(cli, ["info", str(store.path), "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["target_type"] == "paper"
    assert info["node_types"]["paper"]["features"] == {"dim": 5, "dtype": "float32"}
    assert info["node_types"]["paper"]["splits"] == {"train": 20, "valid": 10, "test": 10}
    assert info["edge_types"]["author___writes___paper"]["num_edges"] == 90
    assert info["edge_types"]["author___writes___paper"]["time"] is True
    result = runner.invoke(cli, ["info", str(store.path)])
    assert result.exit_code == 0, result.output
    for word in ("paper", "author___affiliated_with___institution", "node types", "relations"):
        assert word in result.output
    assert runner.invoke(cli, ["validate", str(store.path)]).exit_code == 0
    path = _chunk(store.path, "typed/paper/label")
    os.truncate(path, 8)
    result = runner.invoke(cli, ["validate", str(store.path)])
    assert result.exit_code == 2 and "invalid:" in result.output


def test_one_writer_writes_typed_stores(tmp_path):
    """``StoreWriter.add_node_type`` + ``add_relation`` write what ``TypedStoreWriter`` (its
    types given up front) writes; a type is declared once."""
    from graphpipe.store import StoreWriter

    def fill(w):
        w.add_relation(("author", "writes", "paper"), np.array([0, 1, 1]), np.array([0, 0, 2]))
        w.write_node_array("paper", "label", np.array([1, 0, 1]))
        w.commit()

    with StoreWriter(tmp_path / "one") as w:
        w.add_node_type("paper", 3)
        w.add_node_type("author", 2)
        with pytest.raises(StoreError, match="added twice"):
            w.add_node_type("paper", 3)
        fill(w)
    with TypedStoreWriter(tmp_path / "two", {"paper": 3, "author": 2}) as w:
        fill(w)
    one, two = GraphStore.open(tmp_path / "one"), GraphStore.open(tmp_path / "two")
    for field in ("node_types", "edge_types", "target_type", "typed_labels", "num_nodes", "num_edges"):
        assert one.manifest[field] == two.manifest[field]
    assert sorted(one.manifest["arrays"]) == sorted(two.manifest["arrays"])
    assert [a.tolist() for a in one.typed_csc(("author", "writes", "paper"))] == \
        [a.tolist() for a in two.typed_csc(("author", "writes", "paper"))]
