"""Typed edge lists (one file per relation, or one file with type columns; CSV or Parquet)
and node tables -> a typed store.

Oracle: the generated graph itself (every relation's edge list, rebuilt from the stored
CSC, edge IDs and ID maps, equals the input; node arrays and splits too), and the store
the OGB heterogeneous path writes for the same graph (identical CSC arrays).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.store.validate import validate
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.synthetic.typed_writers import write_typed_edge_lists

SMALL = {"papers": 400, "authors": 300, "institutions": 10, "fields": 30, "num_classes": 4,
         "feature_dim": 5}


@pytest.fixture(scope="module")
def data():
    return mag_dataset(**SMALL, seed=5)


def _edges(store, etype) -> np.ndarray:
    indptr, indices = store.typed_csc(etype)
    eid = store.typed_edge_ids(etype)
    out = np.empty((2, indices.shape[0]), dtype=np.int64)
    out[0, eid], out[1, eid] = indices, np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    return out


@pytest.mark.parametrize("fmt, one_file, string_ids", [
    ("parquet", False, False), ("csv", False, True), ("csv", True, False), ("parquet", True, True),
])
def test_round_trip(data, tmp_path, fmt, one_file, string_ids):
    folder = write_typed_edge_lists(tmp_path / "g", data, fmt=fmt, one_file=one_file,
                                    string_ids=string_ids)
    store = ingest(folder, tmp_path / "s")
    assert sorted(store.edge_types) == sorted(data.edges)
    for etype, (src, dst) in data.edges.items():
        np.testing.assert_array_equal(_edges(store, etype), np.stack([src, dst]))
    for ntype, n in store.num_nodes_dict.items():
        if ntype == "paper":
            assert n == data.num_nodes_dict["paper"]
        else:  # no node table: IDs 0 .. largest ID seen
            seen = max(int(ids.max()) for e, (s, d) in data.edges.items()
                       for ids, t in ((s, e[0]), (d, e[2])) if t == ntype)
            assert n == seen + 1
    np.testing.assert_array_equal(store.typed_features("paper"), data.x)
    np.testing.assert_array_equal(store.typed_labels("paper"), data.y)
    np.testing.assert_array_equal(store.typed_node_time("paper"), data.year)
    for name, ids in data.splits.items():
        np.testing.assert_array_equal(store.typed_split("paper", name), ids)
    id_map = store.typed_id_map("paper")
    expected = [f"paper-{i}" for i in range(3)] if string_ids else [0, 1, 2]
    assert id_map.external_ids.to_pylist()[:3] == expected
    assert store.target_type == "paper"
    assert validate(store.path) == []


def test_same_csc_as_ogb_path(data, tmp_path):
    ogb = ingest(write_ogb_mag(tmp_path / "ogb", data), tmp_path / "a")
    tables = ingest(write_typed_edge_lists(tmp_path / "t", data), tmp_path / "b")
    for etype in data.edges:
        for a, b in zip(ogb.typed_csc(etype), tables.typed_csc(etype)):
            np.testing.assert_array_equal(a, b)


def test_edge_time_column(tmp_path):
    folder = tmp_path / "g"
    (folder / "edges").mkdir(parents=True)
    pcsv.write_csv(pa.table({"src": [2, 0, 1], "dst": [1, 1, 0], "time": [30, 10, 20]}),
                   folder / "edges" / "user___rates___item.csv")
    store = ingest(folder, tmp_path / "s")
    etype = ("user", "rates", "item")
    assert store.num_nodes_dict == {"user": 3, "item": 2}
    assert [a.tolist() for a in store.typed_csc(etype)] == [[0, 1, 3], [1, 0, 2]]
    assert store.typed_edge_time(etype).tolist() == [20, 10, 30]  # CSC order


def _table(folder: Path, rel: str, **columns) -> None:
    (folder / Path(rel).parent).mkdir(parents=True, exist_ok=True)
    pcsv.write_csv(pa.table(columns), folder / rel)


HOSTILE = {
    "unknown id": (lambda f: _table(f, "edges/a___to___b.csv", src=[0, 1], dst=["x", "zz"]),
                   "zz"),
    "negative id": (lambda f: _table(f, "edges/a___to___b.csv", src=[0, -4], dst=["x", "y"]),
                    "line 3"),
    "duplicate node id": (lambda f: _table(f, "nodes/b.csv", id=["x", "y", "x"]), "b.csv"),
    "bad relation name": (lambda f: (f / "edges/a___to___b.csv").rename(f / "edges/a___to___b___c.csv"),
                          "a___to___b___c"),
    "missing column": (lambda f: _table(f, "edges/a___to___b.csv", source=[0], dst=["x"]), "'src'"),
    "empty id": (lambda f: _table(f, "edges/a___to___b.csv", src=[0, None], dst=["x", "y"]),
                 "line 3"),
    "bad split": (lambda f: _table(f, "nodes/b.csv", id=["x", "y"], split=["train", "later"]),
                  "later"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile(tmp_path, case):
    folder = tmp_path / "g"
    _table(folder, "edges/a___to___b.csv", src=[0, 1], dst=["x", "y"])
    _table(folder, "nodes/b.csv", id=["x", "y"], label=[0, 1])
    assert ingest(folder, tmp_path / "ok").num_nodes_dict == {"b": 2, "a": 2}
    shutil.rmtree(tmp_path / "ok")
    edit, named = HOSTILE[case]
    edit(folder)
    result = CliRunner().invoke(cli, ["ingest", str(folder), str(tmp_path / "s"), "-q"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]
    with pytest.raises(IngestError):
        ingest(folder, tmp_path / "s2")


def test_reverse_edges_keep_time(tmp_path):
    from graphpipe.ingest import IngestOptions

    folder = tmp_path / "g"
    (folder / "edges").mkdir(parents=True)
    pcsv.write_csv(pa.table({"src": [2, 0, 1], "dst": [1, 1, 0], "time": [30, 10, 20]}),
                   folder / "edges" / "user___rates___item.csv")
    store = ingest(folder, tmp_path / "s", IngestOptions(add_reverse_edges=True))
    reverse = ("item", "rev_rates", "user")
    assert store.edge_types == [("user", "rates", "item"), reverse]
    np.testing.assert_array_equal(_edges(store, reverse), [[1, 1, 0], [2, 0, 1]])
    assert [a.tolist() for a in store.typed_csc(reverse)] == [[0, 1, 2, 3], [1, 0, 1]]
    assert store.typed_edge_time(reverse).tolist() == [10, 20, 30]
    assert validate(store.path) == []


def test_empty_relation(tmp_path):
    folder = tmp_path / "g"
    _table(folder, "edges/a___to___b.csv", src=[0, 1], dst=["x", "y"])
    _table(folder, "nodes/b.csv", id=["x", "y", "z"])
    (folder / "edges" / "b___back___a.csv").write_text("src,dst\n")
    store = ingest(folder, tmp_path / "s")
    indptr, indices = store.typed_csc(("b", "back", "a"))
    assert indptr.tolist() == [0, 0, 0] and indices.size == 0
    assert store.num_edges_dict[("b", "back", "a")] == 0
    assert validate(store.path) == []


def test_validate_checks_id_map_rows(tmp_path):
    import json

    folder = tmp_path / "g"
    _table(folder, "edges/a___to___b.csv", src=[0, 1], dst=["x", "y"])
    _table(folder, "nodes/b.csv", id=["x", "y"])
    store = ingest(folder, tmp_path / "s")
    manifest = json.loads((store.path / "manifest.json").read_text())
    manifest["tables"]["typed/b/id_map.parquet"]["rows"] = 5
    (store.path / "manifest.json").write_text(json.dumps(manifest))
    assert any("id_map.parquet: 5 rows, expected 2" in p for p in validate(store.path))
