"""DGL's chunked graph format (``metadata.json``) as ingest input: a generated folder of csv or
numpy edge chunks, node data chunks (feat, label, masks), edge data; hostile metadata refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from graphpipe.cli.main import main

from graphpipe.ingest import IngestError, ingest
from graphpipe.ingest.dgl_chunked import read_dgl_chunked
from graphpipe.synthetic import community_graph

NODE_CHUNKS, EDGE_CHUNKS = [300, 250, 250], [3]


def _folder(tmp: Path, edge_format: str, patch=None) -> tuple[Path, dict]:
    graph = community_graph(800, 4, feature_dim=3, avg_degree=6, seed=5)
    src, dst = graph.src.astype(np.int64), graph.dst.astype(np.int64)
    num_edges = src.shape[0]
    cuts = [0, num_edges // 3, 2 * num_edges // 3, num_edges]
    edge_counts = [cuts[i + 1] - cuts[i] for i in range(3)]
    tmp.mkdir(parents=True, exist_ok=True)
    edge_files = []
    for i in range(3):
        lo, hi = cuts[i], cuts[i + 1]
        if edge_format == "csv":
            name = f"edges/part{i}.txt"
            (tmp / "edges").mkdir(exist_ok=True)
            (tmp / name).write_text("".join(f"{s} {d}\n" for s, d in zip(src[lo:hi], dst[lo:hi])))
        else:
            name = f"part{i}.npy"
            np.save(tmp / name, np.stack([src[lo:hi], dst[lo:hi]], axis=1))
        edge_files.append(name)
    weight = np.random.default_rng(0).standard_normal(num_edges).astype(np.float32)
    masks = {k: np.isin(np.arange(800), graph.splits[s]).astype(np.uint8)
             for k, s in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test"))}
    node_arrays = {"feat": graph.features, "label": graph.labels, **masks}
    node_data = {}
    bounds = np.cumsum([0, *NODE_CHUNKS])
    for key, values in node_arrays.items():
        files = []
        for c in range(3):
            np.save(tmp / f"{key}{c}.npy", values[bounds[c]:bounds[c + 1]])
            files.append(f"{key}{c}.npy")
        node_data[key] = {"format": {"name": "numpy"}, "data": files}
    edge_data = []
    for c in range(3):
        np.save(tmp / f"w{c}.npy", weight[cuts[c]:cuts[c + 1]])
        edge_data.append(f"w{c}.npy")
    meta = {"graph_name": "chunky", "node_type": ["_N"], "num_nodes_per_chunk": [NODE_CHUNKS],
            "edge_type": ["_N:_E:_N"], "num_edges_per_chunk": [edge_counts],
            "edges": {"_N:_E:_N": {"format": {"name": edge_format, "delimiter": " "},
                                   "data": edge_files}},
            "node_data": {"_N": node_data},
            "edge_data": {"_N:_E:_N": {"feat": {"format": {"name": "numpy"}, "data": edge_data}}}}
    if patch is not None:
        patch(meta)
    (tmp / "metadata.json").write_text(json.dumps(meta))
    return tmp, {"graph": graph, "weight": weight}


@pytest.mark.parametrize("edge_format", ["csv", "numpy"])
def test_chunked_folder_is_ingested(tmp_path: Path, edge_format: str) -> None:
    folder, want = _folder(tmp_path / "in", edge_format)
    assert main(["ingest", str(folder), str(tmp_path / "store"), "-q"]) == 0
    from graphpipe.store import GraphStore

    store = GraphStore.open(tmp_path / "store")
    graph = want["graph"]
    assert store.name == "chunky" and store.num_nodes == 800
    order = np.asarray(store.edge_id)
    assert np.array_equal(graph.src[order], store.indices)
    assert np.array_equal(graph.dst[order], np.repeat(np.arange(800), np.diff(store.indptr)))
    assert np.array_equal(store.features(), graph.features)
    assert np.array_equal(store.labels, graph.labels)
    assert np.array_equal(store.edge_features[:, 0], want["weight"])
    for split in ("train", "valid", "test"):
        assert np.array_equal(store.split(split), np.sort(graph.splits[split]))


def _patch(**changes):
    def patch(meta: dict) -> None:
        meta.update(changes)
    return patch


@pytest.mark.parametrize(("patch", "message"), [
    (_patch(node_type=["a", "b"]), "node_type: expected one type"),
    (_patch(num_nodes_per_chunk=[[10 ** 15]]), "num_nodes_per_chunk: expected counts"),
    (_patch(num_edges_per_chunk=[[1, 2]]), ".data: expected 2 chunk files"),
    (lambda m: m["edges"]["_N:_E:_N"]["data"].__setitem__(0, "../../etc/passwd"), "leads outside"),
    (lambda m: m["node_data"]["_N"]["feat"]["data"].__setitem__(1, "/etc/passwd"), "leads outside"),
    (lambda m: m["node_data"]["_N"]["feat"].__setitem__("format", {"name": "pickle"}), "numpy chunks"),
])
def test_hostile_metadata_is_refused(tmp_path: Path, patch, message: str) -> None:
    folder, _ = _folder(tmp_path / "in", "csv", patch)
    with pytest.raises(IngestError, match="metadata.json") as info:
        source = read_dgl_chunked(folder)
        list(source.edge_chunks())
    assert message in str(info.value) and "\n" not in str(info.value)


def test_bad_chunks_are_refused(tmp_path: Path) -> None:
    folder, _ = _folder(tmp_path / "in", "csv")
    np.save(folder / "feat1.npy", np.zeros((3, 3), dtype=np.float32))
    with pytest.raises(IngestError, match=r"feat1.npy: expected 250 numeric rows"):
        read_dgl_chunked(folder)
    folder, _ = _folder(tmp_path / "in2", "csv")
    (folder / "edges/part1.txt").write_text("0 1\n")
    with pytest.raises(IngestError, match="part1.txt: 1 edges, but num_edges_per_chunk says"):
        ingest(folder, tmp_path / "store")
    assert not (tmp_path / "store").exists()
