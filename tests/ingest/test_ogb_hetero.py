"""OGB's heterogeneous raw layout -> a typed store, checked against ogb's own reader.

Oracle: ``ogb.nodeproppred.NodePropPredDataset`` (``is hetero``; it calls
``read_csv_heterograph_raw``, ``read_node_label_hetero`` and
``read_nodesplitidx_split_hetero``) on the same generated folder: every relation's edge
list (rebuilt from the stored CSC and edge IDs), features, years, labels and splits equal.
Hostile folders: one-line error naming the file, exit code 2, nothing left at DEST.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate
from graphpipe.store.writer import TypedStoreWriter
from graphpipe.synthetic.mag import mag_dataset, mag_meta_dict, write_ogb_mag

SMALL = {"papers": 900, "authors": 700, "institutions": 20, "fields": 60, "num_classes": 5,
         "feature_dim": 6}
WRITES = ("author", "writes", "paper")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    data = mag_dataset(**SMALL, seed=1)
    folder = write_ogb_mag(tmp_path_factory.mktemp("mag") / "mag", data)
    return data, folder


@pytest.fixture(scope="module")
def ogb_graph(generated, tmp_path_factory):
    from ogb.nodeproppred import NodePropPredDataset

    data, folder = generated
    copy = tmp_path_factory.mktemp("ogb") / "mag"
    shutil.copytree(folder, copy)  # OGB writes processed/ into the folder it reads
    dataset = NodePropPredDataset("ogbn-mag", meta_dict=mag_meta_dict(copy, data.num_classes))
    graph, labels = dataset[0]
    return graph, labels, dataset.get_idx_split()


def edge_list(store: GraphStore, etype) -> np.ndarray:
    """The relation's input edge list (2, E), rebuilt from CSC + edge IDs."""
    indptr, indices = store.typed_csc(etype)
    eid = store.typed_edge_ids(etype)
    out = np.empty((2, indices.shape[0]), dtype=np.int64)
    out[0, eid] = indices
    out[1, eid] = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    return out


def test_equal_to_ogb_reader(generated, ogb_graph, tmp_path):
    _, folder = generated
    graph, labels, split = ogb_graph
    store = ingest(folder, tmp_path / "s")
    assert store.is_typed and store.num_nodes_dict == graph["num_nodes_dict"]
    assert sorted(store.edge_types) == sorted(graph["edge_index_dict"])
    for etype, edge_index in graph["edge_index_dict"].items():
        np.testing.assert_array_equal(edge_list(store, etype), edge_index)
    np.testing.assert_array_equal(store.typed_features("paper"), graph["node_feat_dict"]["paper"])
    assert set(graph["node_feat_dict"]) == {t for t in store.node_types if store.typed_features(t) is not None}
    np.testing.assert_array_equal(store.typed_node_time("paper"), graph["node_year"]["paper"][:, 0])
    np.testing.assert_array_equal(store.typed_labels("paper"), labels["paper"][:, 0])
    assert store.target_type == "paper" and store.typed_num_classes("paper") == SMALL["num_classes"]
    for name in ("train", "valid", "test"):
        np.testing.assert_array_equal(store.typed_split("paper", name), split[name]["paper"])
    assert validate(store.path) == []


def test_out_of_core_build_is_identical(generated, tmp_path):
    data, folder = generated
    small = ingest(folder, tmp_path / "small", IngestOptions(memory_limit="16KB"))
    big = ingest(folder, tmp_path / "big")
    with TypedStoreWriter(tmp_path / "mem", data.num_nodes_dict) as w:
        for etype, (src, dst) in data.edges.items():
            w.add_relation(etype, src, dst)
        w.commit()
    mem = GraphStore.open(tmp_path / "mem")
    for etype in data.edges:
        for store in (small, mem):
            for a, b in zip(store.typed_csc(etype), big.typed_csc(etype)):
                np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(store.typed_edge_ids(etype), big.typed_edge_ids(etype))


def test_reverse_edges_as_pyg_to_undirected(generated, ogb_graph, tmp_path):
    """--add-reverse-edges: the relations of PyG's ToUndirected(merge=False), edge for edge."""
    import torch
    from torch_geometric.data import HeteroData
    from torch_geometric.transforms import ToUndirected

    _, folder = generated
    graph, _, _ = ogb_graph
    pyg = HeteroData()
    for etype, edge_index in graph["edge_index_dict"].items():
        pyg[etype].edge_index = torch.from_numpy(edge_index)
    for ntype, n in graph["num_nodes_dict"].items():
        pyg[ntype].num_nodes = n
    pyg = ToUndirected(merge=False)(pyg)
    store = ingest(folder, tmp_path / "s", IngestOptions(add_reverse_edges=True))
    assert sorted(store.edge_types) == sorted(pyg.edge_types)
    for etype in pyg.edge_types:
        np.testing.assert_array_equal(edge_list(store, etype), pyg[etype].edge_index.numpy())
    assert store.manifest["reverse_edge_types"]["paper___rev_writes___author"] == "author___writes___paper"
    assert validate(store.path) == []


def test_cli_ingest_info_validate(generated, tmp_path):
    _, folder = generated
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(folder), str(tmp_path / "s"), "-q"])
    assert result.exit_code == 0, result.output
    assert "4 relations" in result.output and "target type paper" in result.output
    result = runner.invoke(cli, ["info", str(tmp_path / "s")])
    assert result.exit_code == 0 and "paper___has_topic___field_of_study" in result.output
    assert runner.invoke(cli, ["validate", str(tmp_path / "s")]).exit_code == 0


def test_target_type_option(generated, tmp_path):
    _, folder = generated
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(folder), str(tmp_path / "a"), "-q",
                                 "--target-type", "author"])
    assert result.exit_code == 0, result.output
    assert GraphStore.open(tmp_path / "a").target_type == "author"
    result = runner.invoke(cli, ["ingest", str(folder), str(tmp_path / "b"), "--target-type", "venue"])
    assert result.exit_code == 2 and "venue" in result.output and not (tmp_path / "b").exists()
    result = runner.invoke(cli, ["ingest", str(folder), str(tmp_path / "c"), "--dedup"])
    assert result.exit_code == 2 and "not supported for typed" in result.output


def _gz(path: Path, text: str) -> None:
    with gzip.open(path, "wb") as fh:
        fh.write(text.encode())


def _lines(path: Path) -> list[str]:
    with gzip.open(path, "rt") as fh:
        return fh.read().splitlines()


REL = "raw/relations/author___writes___paper"


def _bad_gzip(f: Path) -> str:
    (f / REL / "edge.csv.gz").write_bytes(b"\x1f\x8b\x08\x00garbage" * 10)
    return "edge.csv.gz"


def _truncated_gzip(f: Path) -> str:
    path = f / REL / "edge.csv.gz"
    path.write_bytes(path.read_bytes()[:-30])
    return "edge.csv.gz"


def _edit_line(rel: str, line: int, text: str):
    def edit(f: Path) -> str:
        lines = _lines(f / rel)
        lines[line] = text
        _gz(f / rel, "\n".join(lines) + "\n")
        return Path(rel).name
    return edit


def _drop_lines(rel: str, count: int):
    def edit(f: Path) -> str:
        _gz(f / rel, "\n".join(_lines(f / rel)[:-count]) + "\n")
        return Path(rel).name
    return edit


def _remove(rel: str):
    def edit(f: Path) -> str:
        (f / rel).unlink()
        return Path(rel).name
    return edit


HOSTILE = {
    "bad gzip": _bad_gzip,
    "truncated gzip": _truncated_gzip,
    "not a number": _edit_line(f"{REL}/edge.csv.gz", 3, "7,x"),
    "negative id": _edit_line(f"{REL}/edge.csv.gz", 3, "-1,2"),
    "src out of range": _edit_line(f"{REL}/edge.csv.gz", 3, "700,2"),
    "dst out of range": _edit_line(f"{REL}/edge.csv.gz", 5, "3,900"),
    "three columns": _edit_line(f"{REL}/edge.csv.gz", 5, "3,4,5"),
    "edge count": _edit_line(f"{REL}/num-edge-list.csv.gz", 0, "12"),
    "missing edge file": _remove(f"{REL}/edge.csv.gz"),
    "missing edge count": _remove(f"{REL}/num-edge-list.csv.gz"),
    "missing node dict": _remove("raw/num-node-dict.csv.gz"),
    "negative count": _edit_line("raw/num-node-dict.csv.gz", 1, "-700,60,20,900"),
    "bad type name": _edit_line("raw/num-node-dict.csv.gz", 0, "../author,field_of_study,institution,paper"),
    "unknown type": _edit_line("raw/triplet-type-list.csv.gz", 0, "author,writes,venue"),
    "feature rows": _drop_lines("raw/node-feat/paper/node-feat.csv.gz", 2),
    "feature width": _edit_line("raw/node-feat/paper/node-feat.csv.gz", 4, "1.0,2.0"),
    "feature nan": _edit_line("raw/node-feat/paper/node-feat.csv.gz", 4, "nan,0,0,0,0,0"),
    "label rows": _drop_lines("raw/node-label/paper/node-label.csv.gz", 1),
    "negative label": _edit_line("raw/node-label/paper/node-label.csv.gz", 2, "-3"),
    "year rows": _drop_lines("raw/node-feat/paper/node_year.csv.gz", 1),
    "year nan": _edit_line("raw/node-feat/paper/node_year.csv.gz", 3, "nan"),
    "year negative": _edit_line("raw/node-feat/paper/node_year.csv.gz", 3, "-5"),
    "split out of range": _edit_line("split/time/paper/test.csv.gz", 0, "900"),
    "split repeat": lambda f: _edit_line("split/time/paper/test.csv.gz", 1,
                                         _lines(f / "split/time/paper/test.csv.gz")[0])(f),
    "missing split file": _remove("split/time/paper/valid.csv.gz"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_folder(generated, tmp_path, case):
    _, folder = generated
    bad = tmp_path / "bad"
    shutil.copytree(folder, bad)
    named = HOSTILE[case](bad)
    result = CliRunner().invoke(cli, ["ingest", str(bad), str(tmp_path / "s"), "-q"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and named in lines[0], lines
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad"]  # no store, no temporary
    with pytest.raises(IngestError):
        ingest(bad, tmp_path / "s2")


def test_node_year_in_its_own_folder(generated, tmp_path):
    """raw/node_year/<type>/node_year.csv.gz is read when raw/node-feat/<type>/ has none."""
    data, folder = generated
    moved = tmp_path / "mag"
    shutil.copytree(folder, moved)
    target = moved / "raw" / "node_year" / "paper"
    target.mkdir(parents=True)
    (moved / "raw" / "node-feat" / "paper" / "node_year.csv.gz").rename(target / "node_year.csv.gz")
    store = ingest(moved, tmp_path / "s")
    np.testing.assert_array_equal(store.typed_node_time("paper"), data.year)
