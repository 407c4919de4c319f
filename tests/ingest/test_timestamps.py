"""Node and edge timestamps into a store (``nodes/time``, ``csc/time`` in CSC order):
edge lists with ``--time-column``, ``.npz`` keys, OGB's ``node_year`` (checked against
OGB's own raw reader), ``validate`` / ``info``, and bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.ingest.csc_builder import CscOptions, reference_csc
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore, StoreEditor
from graphpipe.store.validate import validate
from graphpipe.synthetic import community_graph, write_ogb_raw


def _random_edges(seed: int, n: int = 60, e: int = 400):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, n, e), rng.integers(0, n, e), rng.integers(-50, 10**12, e), n)


def _write_csv(path: Path, src, dst, t) -> None:
    lines = ["src,dst,t"] + [f"{a},{b},{c}" for a, b, c in zip(src, dst, t)]
    path.write_text("\n".join(lines) + "\n")


def _slot_triples(store: GraphStore) -> np.ndarray:
    dst = np.repeat(np.arange(store.num_nodes), np.diff(store.indptr))
    triples = np.stack([dst, np.asarray(store.indices, dtype=np.int64), store.edge_time()], axis=1)
    return triples[np.lexsort(triples.T[::-1])]


@pytest.mark.parametrize("reverse", [False, True])
def test_edge_times_follow_their_edges_into_csc_order(tmp_path: Path, reverse: bool) -> None:
    src, dst, t, _n = _random_edges(1)
    _write_csv(tmp_path / "e.csv", src, dst, t)
    store = ingest(tmp_path / "e.csv", tmp_path / "s", IngestOptions(add_reverse_edges=reverse),
                   reader_options={"time_column": "t"})
    # oracle without edge IDs: the multiset of (dst, src, time) of the input edges
    want = np.stack([dst, src, t], axis=1)
    if reverse:
        want = np.concatenate([want, np.stack([src, dst, t], axis=1)])
    want = want[np.lexsort(want.T[::-1])]
    assert np.array_equal(_slot_triples(store), want)
    assert store.edge_time().dtype == np.int64 and store.node_time() is None
    assert store.has_edge_ids and not store.has_array("edge/feat")  # time is no edge feature
    assert validate(store.path) == []


def test_dedup_keeps_the_time_of_the_kept_copy(tmp_path: Path) -> None:
    src, dst, t, n = _random_edges(2, n=12, e=300)
    _write_csv(tmp_path / "e.csv", src, dst, t)
    options = IngestOptions(deduplicate=True, remove_self_loops=True, add_reverse_edges=True)
    store = ingest(tmp_path / "e.csv", tmp_path / "s", options, reader_options={"time_column": "t"})
    _indptr, indices, edge_id = reference_csc(src, dst, n, CscOptions(
        add_reverse_edges=True, remove_self_loops=True, deduplicate=True))
    assert np.array_equal(store.indices, indices)
    assert np.array_equal(store.edge_time(), t[np.where(edge_id >= len(src), edge_id - len(src), edge_id)])


def test_time_column_beside_a_weight_and_out_of_core(tmp_path: Path) -> None:
    src, dst, t, _n = _random_edges(3, n=500, e=20000)
    w = np.arange(len(src))
    lines = ["src,dst,w,t"] + [f"{a},{b},{c},{d}" for a, b, c, d in zip(src, dst, w, t)]
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    store = ingest(tmp_path / "e.csv", tmp_path / "s", IngestOptions(memory_limit=1),
                   reader_options={"time_column": "t", "weight": "w"})
    assert store.manifest["build"]["out_of_core"]
    assert store.edge_features.shape == (len(src), 1)
    assert np.array_equal(store.edge_time(), t[store.edge_id])
    assert np.array_equal(store.edge_features[store.edge_id, 0], w[store.edge_id])


def test_npz_node_year_and_edge_time(tmp_path: Path) -> None:
    path = tmp_path / "g.npz"
    np.savez(path, edge_index=np.array([[0, 1, 2, 2], [1, 2, 0, 1]]), node_year=np.array([3, 1, 2]),
             edge_time=np.array([10, 11, 12, 13]))
    store = ingest(path, tmp_path / "s")
    assert store.node_time().tolist() == [3, 1, 2]
    assert np.array_equal(store.edge_time(), np.array([10, 11, 12, 13])[store.edge_id])
    assert store.manifest["time"] == {"node": True, "edge": True, "dtype": "int64", "edge_order": "csc",
                                      "node_range": [1, 3], "edge_range": [10, 13]}
    assert "ignored_keys" not in store.manifest["provenance"]


def test_ogb_node_year_as_ogb_reads_it(tmp_path: Path) -> None:
    from ogb.io.read_graph_raw import read_csv_graph_raw

    graph = community_graph(300, 4, avg_degree=6, feature_dim=4, seed=3)
    folder = tmp_path / "arxiv_like"
    write_ogb_raw(folder, graph)
    years = np.random.default_rng(0).integers(1990, 2021, graph.num_nodes)
    with gzip.open(folder / "raw" / "node_year.csv.gz", "wt") as fh:
        fh.write("\n".join(str(y) for y in years) + "\n")
    ours = ingest(folder, tmp_path / "s")
    theirs = read_csv_graph_raw(str(folder / "raw"), add_inverse_edge=False,
                                additional_node_files=["node_year"])[0]["node_year"]
    assert np.array_equal(ours.node_time(), np.asarray(theirs).reshape(-1))
    assert ours.edge_time() is None


def test_ogb_binary_node_year(tmp_path: Path) -> None:
    graph = community_graph(200, 4, avg_degree=6, feature_dim=4, seed=4)
    folder = tmp_path / "bin"
    write_ogb_raw(folder, graph, binary=True)
    data = dict(np.load(folder / "raw" / "data.npz"))
    data["node_year"] = np.arange(graph.num_nodes, dtype=np.int64)[::-1].reshape(-1, 1)
    np.savez_compressed(folder / "raw" / "data.npz", **data)
    store = ingest(folder, tmp_path / "s")
    assert np.array_equal(store.node_time(), np.arange(graph.num_nodes)[::-1])


def test_cli_ingest_info_validate(tmp_path: Path) -> None:
    src, dst, t, _ = _random_edges(5)
    _write_csv(tmp_path / "e.csv", src, dst, t)
    runner = CliRunner()
    result = runner.invoke(cli, ["ingest", str(tmp_path / "e.csv"), str(tmp_path / "s"),
                                 "--time-column", "t", "-q"])
    assert result.exit_code == 0, result.output
    info = runner.invoke(cli, ["info", str(tmp_path / "s"), "--json"])
    assert json.loads(info.output)["time"] == {"csc/time": {"min": int(t.min()), "max": int(t.max())}}
    table = runner.invoke(cli, ["info", str(tmp_path / "s")])
    assert "csc/time" in table.output and "timestamps" in table.output
    assert runner.invoke(cli, ["validate", str(tmp_path / "s")]).exit_code == 0


@pytest.mark.parametrize("value", ["1.5", "abc", ""])
def test_cli_non_integer_time_is_one_line_exit_2(tmp_path: Path, value: str) -> None:
    (tmp_path / "e.csv").write_text(f"src,dst,t\n0,1,3\n1,2,{value}\n")
    result = CliRunner().invoke(cli, ["ingest", str(tmp_path / "e.csv"), str(tmp_path / "s"),
                                      "--time-column", "t", "-q"])
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and "e.csv" in lines[0] and "'t'" in lines[0], result.output
    assert not (tmp_path / "s").exists()


def test_missing_time_column_and_wrong_lengths(tmp_path: Path) -> None:
    _write_csv(tmp_path / "e.csv", [0, 1], [1, 0], [1, 2])
    with pytest.raises(IngestError, match="no time column 'when'"):
        ingest(tmp_path / "e.csv", tmp_path / "s", reader_options={"time_column": "when"})
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1], [1, 0]]), node_year=np.array([1, 2, 3]),
             num_nodes=2)
    with pytest.raises(IngestError, match="node_year: 3 values, but there are 2 nodes"):
        ingest(tmp_path / "g.npz", tmp_path / "s")
    np.savez(tmp_path / "f.npz", edge_index=np.array([[0, 1], [1, 0]]), edge_time=np.array([0.5, 1.0]))
    with pytest.raises(IngestError, match="edge_time: line 1: timestamp 0.5 is not an integer"):
        ingest(tmp_path / "f.npz", tmp_path / "s")
    with pytest.raises(ValueError, match="edge timestamps"):
        np.savez(tmp_path / "h.npz", edge_index=np.array([[0, 1], [1, 0]]), edge_time=np.array([1, 2]))
        ingest(tmp_path / "h.npz", tmp_path / "s", IngestOptions(edge_ids="never"))
    assert not (tmp_path / "s").exists()


def test_validate_finds_bad_timestamps(tmp_path: Path) -> None:
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]), node_year=np.array([1, 2, 3]),
             edge_time=np.array([4, 5, 6]))
    store = ingest(tmp_path / "g.npz", tmp_path / "s")
    with StoreEditor(store.path) as editor:
        editor.write_array("nodes/time", np.array([1.0, 2.0, 3.0, 4.0]), replace=True)
        editor.write_array("csc/time", np.array([1, 2], dtype=np.int32), replace=True)
        editor.commit()
    problems = validate(store.path)
    assert any("nodes/time: dtype float64" in p for p in problems)
    assert any("nodes/time: shape (4,), expected (3,)" in p for p in problems)
    assert any("csc/time: dtype int32" in p for p in problems)
    assert any("csc/time: shape (2,), expected (3,)" in p for p in problems)


def test_ogb_processed_node_year(tmp_path: Path) -> None:
    """OGB's own NodePropPredDataset reads node_year (``additional node files``); its
    processed graph saved (torch's default protocol), ingested: the same years."""
    import shutil

    import torch
    from ogb.nodeproppred import NodePropPredDataset

    from graphpipe.synthetic import ogb_meta_dict

    graph = community_graph(200, 4, avg_degree=6, feature_dim=4, seed=6)
    folder = tmp_path / "arxiv_like"
    write_ogb_raw(folder, graph)
    with gzip.open(folder / "raw" / "node_year.csv.gz", "wt") as fh:
        fh.write("\n".join(str(2000 + i % 20) for i in range(graph.num_nodes)) + "\n")
    meta = ogb_meta_dict(folder) | {"additional node files": "node_year"}
    dataset = NodePropPredDataset(name=folder.name, root=str(tmp_path), meta_dict=meta)
    shutil.rmtree(folder / "raw")
    torch.save({"graph": dataset.graph, "labels": dataset.labels}, folder / "processed" / "data_processed")
    store = ingest(folder, tmp_path / "s")
    assert store.manifest["provenance"]["source_format"] == "ogb-processed"
    assert np.array_equal(store.node_time(), np.asarray(dataset.graph["node_year"]).reshape(-1))


def test_info_reads_the_range_of_times_added_later(tmp_path: Path) -> None:
    from graphpipe.store.summary import summarize

    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]))
    store = ingest(tmp_path / "g.npz", tmp_path / "s")
    assert summarize(store)["time"] is None and store.node_time() is None
    with StoreEditor(store.path) as editor:   # no manifest "time" entry: read from the array
        editor.write_array("nodes/time", np.array([7, -3, 5]))
        editor.commit()
    store = GraphStore.open(store.path)
    assert summarize(store)["time"] == {"nodes/time": {"min": -3, "max": 7}}
    assert validate(store.path) == []


def test_parquet_time_column(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    src, dst, t, _n = _random_edges(7, n=30, e=200)
    pq.write_table(pa.table({"src": src, "dst": dst, "t": t}), tmp_path / "e.parquet")
    store = ingest(tmp_path / "e.parquet", tmp_path / "s", reader_options={"time_column": "t"})
    assert np.array_equal(store.edge_time(), t[store.edge_id])
    pq.write_table(pa.table({"src": src, "dst": dst, "t": t.astype(float)}), tmp_path / "f.parquet")
    with pytest.raises(IngestError, match="time column 't' must hold integers"):
        ingest(tmp_path / "f.parquet", tmp_path / "s2", reader_options={"time_column": "t"})
