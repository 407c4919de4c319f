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
    (_patch(node_type=["a", "b"]), "num_nodes_per_chunk: expected 2 list(s)"),
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


# -- typed (heterogeneous) chunked graphs, as DGL's chunk_graph writes them --------------------
def _typed_folder(tmp: Path, data, chunks: int = 2) -> Path:
    """``data`` (:func:`graphpipe.synthetic.mag.mag_dataset`) in DGL's chunked layout: per-type
    chunk counts in ``node_type`` / ``edge_type`` order, csv chunks for the first relation and
    numpy for the others, paper features, labels and masks, an edge feature on one relation."""
    tmp.mkdir(parents=True)

    def cuts(n: int) -> list[int]:
        return [int(c) for c in np.linspace(0, n, chunks + 1).round()]

    def save_chunks(prefix: str, values: np.ndarray) -> list[str]:
        c = cuts(values.shape[0])
        for i in range(chunks):
            np.save(tmp / f"{prefix}{i}.npy", values[c[i]:c[i + 1]])
        return [f"{prefix}{i}.npy" for i in range(chunks)]

    ntypes = list(data.num_nodes_dict)
    etypes = [":".join(e) for e in data.edges]
    edges, edge_data = {}, {}
    for j, (key, (src, dst)) in enumerate(zip(etypes, data.edges.values())):
        c = cuts(src.shape[0])
        if j == 0:
            for i in range(chunks):
                (tmp / f"e{j}_{i}.txt").write_text("".join(f"{s} {d}\n" for s, d in
                                                           zip(src[c[i]:c[i + 1]], dst[c[i]:c[i + 1]])))
            edges[key] = {"format": {"name": "csv", "delimiter": " "},
                          "data": [f"e{j}_{i}.txt" for i in range(chunks)]}
        else:
            edges[key] = {"format": {"name": "numpy"}, "data": save_chunks(f"e{j}_", np.stack([src, dst], 1))}
    weight = np.arange(data.edges[next(iter(data.edges))][0].shape[0], dtype=np.float32)
    edge_data[etypes[0]] = {"feat": {"format": {"name": "numpy"}, "data": save_chunks("w", weight)}}
    labels = np.full(data.num_nodes_dict["paper"], -1)
    for ids in data.splits.values():
        labels[ids] = data.y[ids]
    paper = {"feat": data.x, "label": labels}
    for mask, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        paper[mask] = np.isin(np.arange(labels.shape[0]), data.splits[split]).astype(np.uint8)
    node_data = {"paper": {k: {"format": {"name": "numpy"}, "data": save_chunks(f"paper_{k}", v)}
                           for k, v in paper.items()}}
    meta = {"graph_name": "mag-chunked", "node_type": ntypes,
            "num_nodes_per_chunk": [np.diff(cuts(data.num_nodes_dict[t])).tolist() for t in ntypes],
            "edge_type": etypes,
            "num_edges_per_chunk": [np.diff(cuts(s.shape[0])).tolist() for s, _ in data.edges.values()],
            "edges": edges, "node_data": node_data, "edge_data": edge_data}
    (tmp / "metadata.json").write_text(json.dumps(meta))
    return tmp


def test_typed_chunked_folder_is_a_typed_store(tmp_path: Path) -> None:
    """Oracle: the same graph through OGB's heterogeneous layout (the ``ogb-hetero`` reader,
    checked against OGB's own reader in tests/ingest/test_ogb_hetero.py)."""
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    data = mag_dataset(papers=120, authors=80, institutions=6, fields=15, num_classes=4, feature_dim=5)
    oracle = ingest(write_ogb_mag(tmp_path / "ogb", data), tmp_path / "ogb-store")
    assert main(["ingest", str(_typed_folder(tmp_path / "in", data)), str(tmp_path / "store"), "-q"]) == 0
    from graphpipe.store import GraphStore

    store = GraphStore.open(tmp_path / "store")
    assert store.name == "mag-chunked" and store.target_type == "paper"
    assert store.num_nodes_dict == oracle.num_nodes_dict and store.edge_types == oracle.edge_types
    for etype in oracle.edge_types:
        for a, b in zip(store.typed_csc(etype), oracle.typed_csc(etype)):
            assert np.array_equal(a, b), etype
        assert np.array_equal(store.typed_edge_ids(etype), oracle.typed_edge_ids(etype))
    first = next(iter(data.edges))  # its edge feature is its edge-list position
    assert np.array_equal(store.typed_edge_features(first)[:, 0], store.typed_edge_ids(first))
    assert np.array_equal(store.typed_features("paper"), data.x)
    for split in ("train", "valid", "test"):
        assert np.array_equal(store.typed_split("paper", split), np.sort(data.splits[split]))
    labelled = np.concatenate(list(data.splits.values()))
    assert np.array_equal(store.typed_labels("paper")[labelled], data.y[labelled])


def test_typed_chunk_out_of_range_is_refused_naming_the_file(tmp_path: Path) -> None:
    from graphpipe.synthetic.mag import mag_dataset

    data = mag_dataset(papers=40, authors=20, institutions=3, fields=5, num_classes=3, feature_dim=2)
    folder = _typed_folder(tmp_path / "in", data)
    meta = json.loads((folder / "metadata.json").read_text())
    bad = dict(meta, edge_type=["author:writes:venue", *meta["edge_type"][1:]])
    (folder / "metadata.json").write_text(json.dumps(bad))
    with pytest.raises(IngestError, match="metadata.json: edges: expected one entry per edge type"):
        read_dgl_chunked(folder)
    bad["edges"] = {k if k != meta["edge_type"][0] else "author:writes:venue": v for k, v in meta["edges"].items()}
    (folder / "metadata.json").write_text(json.dumps(bad))
    with pytest.raises(IngestError, match="metadata.json: edge_type: 'author:writes:venue' is not"):
        read_dgl_chunked(folder)
    (folder / "metadata.json").write_text(json.dumps(meta))
    text = (folder / "e0_1.txt").read_text().splitlines()
    text[0] = "0 99999"
    (folder / "e0_1.txt").write_text("\n".join(text) + "\n")
    assert main(["ingest", str(folder), str(tmp_path / "store")]) == 2
    with pytest.raises(IngestError, match=r"e0_1.txt: line 1: destination id 99999 out of range"):
        ingest(folder, tmp_path / "store")
    assert not (tmp_path / "store").exists()
