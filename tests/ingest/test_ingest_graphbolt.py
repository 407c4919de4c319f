"""GraphBolt on-disk datasets as ingest input: numpy and csv edges, features, labels from the
tasks' sets, and hostile ``metadata.yaml`` refused with one line (CLI exit 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from graphpipe.cli.main import main

from graphpipe.ingest import IngestError, IngestOptions, ingest
from graphpipe.ingest.graphbolt import read_graphbolt

SRC = np.array([1, 2, 3, 0, 4, 2])
DST = np.array([0, 0, 1, 2, 3, 4])
FEAT = np.arange(10, dtype=np.float32).reshape(5, 2)


def _dataset(folder: Path, *, edges: str = "numpy", meta_patch=None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "set").mkdir(exist_ok=True)
    np.save(folder / "feat.npy", FEAT)
    np.save(folder / "set/train.npy", np.array([0, 3]))
    np.save(folder / "set/train_y.npy", np.array([1, 2]))
    np.save(folder / "set/test.npy", np.array([4]))
    np.save(folder / "set/test_y.npy", np.array([0]))
    if edges == "numpy":
        np.save(folder / "edges.npy", np.stack([SRC, DST]))
        edge_entry = {"format": "numpy", "path": "edges.npy"}
    else:
        (folder / "edges.csv").write_text("".join(f"{s},{d}\n" for s, d in zip(SRC, DST)))
        edge_entry = {"format": "csv", "path": "edges.csv"}
    meta = {"dataset_name": "tiny",
            "graph": {"nodes": [{"num": 5}], "edges": [edge_entry]},
            "feature_data": [{"domain": "node", "name": "feat", "format": "numpy", "path": "feat.npy"}],
            "tasks": [{"name": "node_classification", "num_classes": 3,
                       "train_set": [{"data": [
                           {"name": "seed_nodes", "format": "numpy", "path": "set/train.npy"},
                           {"name": "labels", "format": "numpy", "path": "set/train_y.npy"}]}],
                       "test_set": [{"data": [
                           {"name": "seed_nodes", "format": "numpy", "path": "set/test.npy"},
                           {"name": "labels", "format": "numpy", "path": "set/test_y.npy"}]}]}]}
    if meta_patch is not None:
        meta_patch(meta)
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta))
    return folder


@pytest.mark.parametrize("edges", ["numpy", "csv"])
def test_reads_edges_features_labels_and_sets(tmp_path: Path, edges: str) -> None:
    store = ingest(_dataset(tmp_path / "gb", edges=edges), tmp_path / "store",
                   IngestOptions(edge_ids="always"))
    assert store.name == "tiny" and store.num_nodes == 5 and store.num_edges == 6
    order = np.asarray(store.edge_id)
    dst = np.repeat(np.arange(5), np.diff(store.indptr))
    assert np.array_equal(SRC[order], store.indices) and np.array_equal(DST[order], dst)
    assert np.array_equal(store.features(), FEAT)
    assert store.labels.tolist() == [1, -1, -1, 2, 0]
    assert store.split("train").tolist() == [0, 3] and store.split("test").tolist() == [4]
    assert store.manifest["labels"]["num_classes"] == 3


def _set(path: list, value):
    def patch(meta: dict) -> None:
        target = meta
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return patch


HOSTILE = [
    (_set(["graph", "edges", 0, "path"], "../outside.npy"), "'../outside.npy' leads outside"),
    (_set(["graph", "edges", 0, "path"], "/etc/passwd"), "is absolute"),
    (_set(["feature_data", 0, "path"], "set/../../x.npy"), "feature_data[0].path"),
    (_set(["graph", "nodes", 0, "num"], 10 ** 15), "graph.nodes[0].num: expected a node count"),
    (_set(["graph", "nodes", 0, "num"], "5"), "graph.nodes[0].num"),
    (_set(["graph", "nodes"], [{"type": "a", "num": 5}, {"type": "b", "num": 2}]), "homogeneous"),
    (_set(["graph", "edges", 0, "format"], "parquet"), "graph.edges[0].format"),
    (_set(["feature_data", 0, "format"], "pickle"), "feature_data[0].format"),
    (_set(["tasks", 0, "num_classes"], -4), "tasks[0].num_classes"),
    (_set(["graph"], None), "graph: expected a mapping"),
]


@pytest.mark.parametrize(("patch", "message"), HOSTILE)
def test_hostile_metadata_is_refused_in_one_line(tmp_path: Path, patch, message: str,
                                                 capsys: pytest.CaptureFixture) -> None:
    np.save(tmp_path / "outside.npy", np.stack([SRC, DST]))
    folder = _dataset(tmp_path / "gb", meta_patch=patch)
    with pytest.raises(IngestError, match="metadata.yaml") as info:
        read_graphbolt(folder)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert main(["ingest", str(folder), str(tmp_path / "store")]) == 2
    assert not (tmp_path / "store").exists()


def test_hostile_files_are_refused(tmp_path: Path) -> None:
    folder = _dataset(tmp_path / "gb")
    np.save(folder / "feat.npy", np.array([{"a": 1}] * 5, dtype=object), allow_pickle=True)
    with pytest.raises(IngestError, match="feat.npy: not a readable .npy"):
        read_graphbolt(folder)
    folder = _dataset(tmp_path / "gb2")
    np.save(folder / "edges.npy", np.stack([SRC, DST + 5]))
    with pytest.raises(IngestError, match=r"edges.npy: edge 0: dst 5 is not a node ID in \[0, 5\)"):
        read_graphbolt(folder)
    folder = _dataset(tmp_path / "gb3")
    np.save(folder / "feat.npy", FEAT[:4])
    with pytest.raises(IngestError, match=r"feature_data\[0\].path: shape \(4, 2\)"):
        read_graphbolt(folder)
    (folder / "metadata.yaml").write_text("graph: [unclosed")
    with pytest.raises(IngestError, match="not valid YAML"):
        read_graphbolt(folder)
    (folder / "metadata.yaml").write_text("!!python/object/apply:os.system ['true']")
    with pytest.raises(IngestError, match="not valid YAML"):
        read_graphbolt(folder)


def test_npy_header_claiming_more_rows_than_the_file_holds_is_refused(tmp_path: Path) -> None:
    folder = _dataset(tmp_path / "gb")
    with open(folder / "feat.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False,
                                                 "shape": (10 ** 12, 2)})
        fh.write(b"\0" * 64)
    with pytest.raises(IngestError, match="feat.npy: not a readable .npy array"):
        read_graphbolt(folder)


# -- typed (heterogeneous) datasets, as GraphBolt's OnDiskDataset lays them out ----------------
def _typed_dataset(folder: Path, data) -> Path:
    """``data`` (:func:`graphpipe.synthetic.mag.mag_dataset`) as a typed GraphBolt folder in the
    layout of DGL's OnDiskDataset documentation: csv edges for one relation, numpy for the
    others, ``seeds`` + ``labels`` sets of the target type, float16 paper features."""
    (folder / "set").mkdir(parents=True)
    edges = []
    for i, ((src_t, rel, dst_t), (src, dst)) in enumerate(data.edges.items()):
        if i == 0:
            (folder / f"e{i}.csv").write_text("".join(f"{s},{d}\n" for s, d in zip(src, dst)))
            edges.append({"type": f"{src_t}:{rel}:{dst_t}", "format": "csv", "path": f"e{i}.csv"})
        else:
            np.save(folder / f"e{i}.npy", np.stack([src, dst]))
            edges.append({"type": f"{src_t}:{rel}:{dst_t}", "format": "numpy", "path": f"e{i}.npy"})
    np.save(folder / "paper_feat.npy", data.x.astype(np.float16))
    sets = {}
    for key, split in (("train_set", "train"), ("validation_set", "valid"), ("test_set", "test")):
        ids = data.splits[split]
        np.save(folder / f"set/{split}.npy", ids)
        np.save(folder / f"set/{split}_y.npy", data.y[ids])
        sets[key] = [{"type": "paper", "data": [
            {"name": "seeds", "format": "numpy", "path": f"set/{split}.npy"},
            {"name": "labels", "format": "numpy", "path": f"set/{split}_y.npy"}]}]
    meta = {"dataset_name": "mag-gb",
            "graph": {"nodes": [{"type": t, "num": n} for t, n in data.num_nodes_dict.items()],
                      "edges": edges},
            "feature_data": [{"domain": "node", "type": "paper", "name": "feat", "format": "numpy",
                              "in_memory": True, "path": "paper_feat.npy"}],
            "tasks": [{"name": "node_classification", "num_classes": data.num_classes, **sets}]}
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta))
    return folder


@pytest.fixture(scope="module")
def mag(tmp_path_factory: pytest.TempPathFactory):
    """A small ogbn-mag-like graph and its store through OGB's heterogeneous layout (the
    ``ogb-hetero`` reader, checked against OGB's own reader in tests/ingest/test_ogb_hetero.py)."""
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    tmp = tmp_path_factory.mktemp("mag")
    data = mag_dataset(papers=120, authors=80, institutions=6, fields=15, num_classes=4, feature_dim=5)
    return data, ingest(write_ogb_mag(tmp / "ogb", data), tmp / "ogb-store")


def test_typed_folder_is_a_typed_store(mag, tmp_path: Path) -> None:
    data, oracle = mag
    store = ingest(_typed_dataset(tmp_path / "gb", data), tmp_path / "store")
    assert store.is_typed and store.name == "mag-gb" and store.target_type == "paper"
    assert store.num_nodes_dict == oracle.num_nodes_dict and store.edge_types == oracle.edge_types
    for etype in oracle.edge_types:
        for a, b in zip(store.typed_csc(etype), oracle.typed_csc(etype)):
            assert np.array_equal(a, b), etype
        assert np.array_equal(store.typed_edge_ids(etype), oracle.typed_edge_ids(etype))
    feat = store.typed_features("paper")
    assert feat.dtype == np.float16 and np.array_equal(feat, data.x.astype(np.float16))
    labelled = np.concatenate(list(data.splits.values()))
    assert np.array_equal(store.typed_labels("paper")[labelled], data.y[labelled])
    assert (np.delete(store.typed_labels("paper"), labelled) == -1).all()
    for split in ("train", "valid", "test"):
        assert np.array_equal(store.typed_split("paper", split), oracle.typed_split("paper", split))
    assert store.typed_num_classes("paper") == data.num_classes


TYPED_HOSTILE = [
    (lambda m: m["graph"]["edges"][1].__setitem__("type", "author:writes:venue"), "graph.edges[1].type"),
    (lambda m: m["graph"]["edges"][1].pop("type"), "graph.edges[1].type"),
    (lambda m: m["graph"]["nodes"][0].__setitem__("type", "../x"), "graph.nodes[0].type"),
    (lambda m: m["feature_data"][0].__setitem__("type", "venue"), "feature_data[0].type"),
    (lambda m: m["tasks"][0]["train_set"][0].__setitem__("type", "venue"), "train_set[0].type"),
    (lambda m: m["graph"]["edges"].append(dict(m["graph"]["edges"][1])), "listed twice"),
]


@pytest.mark.parametrize(("patch", "message"), TYPED_HOSTILE)
def test_hostile_typed_metadata_is_refused(mag, tmp_path: Path, patch, message: str) -> None:
    folder = _typed_dataset(tmp_path / "gb", mag[0])
    meta = yaml.safe_load((folder / "metadata.yaml").read_text())
    patch(meta)
    (folder / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(IngestError, match="metadata.yaml") as info:
        read_graphbolt(folder)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert main(["ingest", str(folder), str(tmp_path / "store")]) == 2
    assert not (tmp_path / "store").exists()


def test_typed_edge_out_of_range_is_refused_naming_the_file(mag, tmp_path: Path) -> None:
    folder = _typed_dataset(tmp_path / "gb", mag[0])
    (folder / "e0.csv").write_text((folder / "e0.csv").read_text() + "0,99999\n")
    with pytest.raises(IngestError, match=r"e0.csv: line \d+: destination id 99999 out of range"):
        ingest(folder, tmp_path / "store")
    assert not (tmp_path / "store").exists()
