"""OGB's binary layout (papers100M-bin): a folder written by ogb's own ``DatasetSaver``,
ingested by streaming and checked against ogb's binary reader; and the ingest of a folder
larger than its memory cap under ``memlimit.sh``."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.ingest.errors import IngestError
from graphpipe.store import GraphStore, StoreError
from graphpipe.store.validate import validate

MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[3] / "shared" / "tools" / "memlimit.sh")
N, E, DIM = 3000, 20_000, 16


@pytest.fixture(scope="module")
def papers_folder(tmp_path_factory) -> Path:
    """A papers100M-bin-like folder: DatasetSaver's raw/data.npz (edge_index, node_feat,
    node_year) and raw/node-label.npz (NaN = unlabelled), split/time/*.csv.gz."""
    pytest.importorskip("ogb")
    from ogb.io import DatasetSaver

    root = tmp_path_factory.mktemp("ogb_bin")
    rng = np.random.default_rng(3)
    graph = {"edge_index": rng.integers(0, N, (2, E)).astype(np.int64), "num_nodes": N,
             "node_feat": rng.standard_normal((N, DIM)).astype(np.float32),
             "node_year": rng.integers(1990, 2020, (N, 1)).astype(np.int64)}
    labels = np.full((N, 1), np.nan, dtype=np.float32)
    labelled = rng.choice(N, 300, replace=False)
    labels[labelled, 0] = rng.integers(0, 172, 300)
    saver = DatasetSaver("ogbn-papersbin", is_hetero=False, version=1, root=str(root / "submission"))
    saver.save_graph_list([graph])
    saver.save_target_labels(labels)
    saver.save_task_info("multiclass classification", "acc", num_classes=172)
    split = {"train": labelled[:200], "valid": labelled[200:250], "test": labelled[250:]}
    saver.save_split(split, "time")
    folder = Path(saver.dataset_dir)
    split_dir = folder / "split" / "time"
    (split_dir / "split_dict.pt").unlink()  # papers100M-bin ships the CSV files only
    for name, ids in split.items():
        (split_dir / f"{name}.csv.gz").write_bytes(gzip.compress("".join(f"{i}\n" for i in ids).encode()))
    return folder


def _ogb_reference(folder: Path) -> tuple[dict, np.ndarray, dict]:
    """What ogb reads: its binary graph reader, the label member, the split CSVs (pandas)."""
    import pandas as pd
    from ogb.io.read_graph_raw import read_binary_graph_raw

    graph = read_binary_graph_raw(str(folder / "raw"))[0]
    with np.load(folder / "raw" / "node-label.npz") as data:
        labels = data["node_label"]
    splits = {name: pd.read_csv(folder / "split" / "time" / f"{name}.csv.gz", compression="gzip",
                                header=None).values.T[0] for name in ("train", "valid", "test")}
    return graph, labels, splits


@pytest.mark.parametrize("memory_limit", [None, "256KB"])
def test_same_as_ogb_binary_reader(papers_folder, tmp_path, memory_limit):
    graph, labels, splits = _ogb_reference(papers_folder)
    store = ingest(papers_folder, tmp_path / "s", IngestOptions(memory_limit=memory_limit))
    assert store.manifest["build"]["out_of_core"] == (memory_limit is not None)
    assert (store.num_nodes, store.num_edges) == (N, E)
    ours = store.features()
    assert ours.dtype == np.float32 and ours.tobytes() == graph["node_feat"].tobytes()
    ei = graph["edge_index"]
    np.testing.assert_array_equal(store.in_degrees, np.bincount(ei[1], minlength=N))
    dst = np.repeat(np.arange(N), np.diff(store.indptr))
    got = np.stack([dst, store.indices.astype(np.int64)], 1)
    want = np.stack([ei[1], ei[0]], 1)
    np.testing.assert_array_equal(got, want[np.lexsort((want[:, 1], want[:, 0]))])
    assert store.indices.dtype == np.int32
    want_labels = np.where(np.isnan(labels[:, 0]), -1, labels[:, 0]).astype(np.int64)
    np.testing.assert_array_equal(store.labels, want_labels)
    assert store.manifest["labels"]["task_type"] == "multiclass classification"
    assert store.manifest["labels"]["unlabeled"] == N - 300
    for name, ids in splits.items():
        np.testing.assert_array_equal(store.split(name), np.sort(ids))
    # no edge features: csc/edge_id is not stored (--edge-ids auto)
    assert not store.has_edge_ids and store.manifest["graph"]["edge_ids"] is False
    with pytest.raises(StoreError, match="no csc/edge_id .* --edge-ids always"):
        store.edge_id  # noqa: B018
    assert "ignored_keys" not in store.manifest["provenance"]  # node_year is the node time now
    np.testing.assert_array_equal(store.node_time(), graph["node_year"][:, 0])
    assert validate(tmp_path / "s") == []


def test_edge_ids_always_map_slots_to_input_edges(papers_folder, tmp_path):
    graph, _, _ = _ogb_reference(papers_folder)
    store = ingest(papers_folder, tmp_path / "s", IngestOptions(edge_ids="always", memory_limit="256KB"))
    dst = np.repeat(np.arange(N), np.diff(store.indptr))
    np.testing.assert_array_equal(graph["edge_index"][0][store.edge_id], store.indices)
    np.testing.assert_array_equal(graph["edge_index"][1][store.edge_id], dst)
    plain = ingest(papers_folder, tmp_path / "p", IngestOptions(edge_ids="never"))
    for key in ("csc/indptr", "csc/indices"):  # the topology does not depend on the choice
        assert plain.manifest["arrays"][key]["checksum"] == store.manifest["arrays"][key]["checksum"]


def test_edge_features_keep_edge_ids(tmp_path):
    rng = np.random.default_rng(0)
    raw = tmp_path / "ds" / "raw"
    raw.mkdir(parents=True)
    edge_index = rng.integers(0, 50, (2, 300))
    efeat = rng.standard_normal((300, 2)).astype(np.float32)
    np.savez_compressed(raw / "data.npz", edge_index=edge_index, edge_feat=efeat,
                        num_nodes_list=np.array([50]), num_edges_list=np.array([300]))
    store = ingest(tmp_path / "ds", tmp_path / "s")  # auto: edge features need edge_id
    assert store.has_edge_ids and store.edge_features.tobytes() == efeat.tobytes()
    np.testing.assert_array_equal(edge_index[0][store.edge_id], store.indices)
    with pytest.raises(ValueError, match="--edge-ids never, but the dataset has edge features"):
        ingest(tmp_path / "ds", tmp_path / "n", IngestOptions(edge_ids="never"))
    with pytest.raises(ValueError, match="'edge_ids' must be one of"):
        ingest(tmp_path / "ds", tmp_path / "n", IngestOptions(edge_ids="sometimes"))


def _rewrite_member(folder: Path, **arrays) -> None:
    path = folder / "raw" / "data.npz"
    with np.load(path) as data:
        members = {**dict(data), **arrays}
    np.savez_compressed(path, **{k: v for k, v in members.items() if v is not None})


@pytest.mark.parametrize("change, message", [
    ({"num_edges_list": np.array([E + 1])}, rf"data.npz\['edge_index'\]: {E} edges, but .*says {E + 1}"),
    ({"num_nodes_list": np.array([N, 5])}, "lists 2 graphs"),
    ({"node_feat": np.zeros((N - 1, DIM), np.float32)}, rf"\['node_feat'\]: {N - 1} rows, but there are {N}"),
    ({"edge_index": np.zeros((3, E), np.int64)}, r"must have shape \(2, E\)"),
    ({"edge_index": None}, "missing key 'edge_index'"),
])
def test_bad_members(papers_folder, tmp_path, change, message):
    import shutil

    folder = tmp_path / "bad"
    shutil.copytree(papers_folder, folder)
    _rewrite_member(folder, **change)
    with pytest.raises(IngestError, match=message) as info:
        ingest(folder, tmp_path / "s")
    assert "\n" not in str(info.value) and not (tmp_path / "s").exists()


def test_out_of_range_edge_names_the_member(papers_folder, tmp_path):
    import shutil

    folder = tmp_path / "bad"
    shutil.copytree(papers_folder, folder)
    with np.load(folder / "raw" / "data.npz") as data:
        edge_index = data["edge_index"].copy()
    edge_index[1, 777] = N
    _rewrite_member(folder, edge_index=edge_index)
    with pytest.raises(IngestError, match=rf"data.npz\['edge_index'\]: line 778: destination node id {N}"):
        ingest(folder, tmp_path / "s")


# -- bounded memory --------------------------------------------------------------------------

def _write_big_folder(folder: Path, n: int, e: int, dim: int, step: int = 1 << 18) -> None:
    """raw/data.npz of ``n`` x ``dim`` float32 features and ``e`` edges, deflated (level 1,
    for speed), written block by block; values are functions of the position (checked later)."""
    raw = folder / "raw"
    raw.mkdir(parents=True)

    def member(archive, key, shape, dtype, blocks):
        with archive.open(f"{key}.npy", "w", force_zip64=True) as out:
            np.lib.format.write_array_header_1_0(out, {"descr": np.dtype(dtype).str, "fortran_order": False,
                                                       "shape": shape})
            for block in blocks:
                out.write(np.ascontiguousarray(block, dtype=dtype).tobytes())

    with zipfile.ZipFile(raw / "data.npz", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        member(archive, "edge_index", (2, e), np.int64,
               (_edges(a, min(a + step, e), n)[row] for row in (0, 1) for a in range(0, e, step)))
        member(archive, "node_feat", (n, dim), np.float32,
               (_feat_rows(np.arange(a, min(a + step, n)), dim) for a in range(0, n, step)))
        member(archive, "num_nodes_list", (1,), np.int64, [np.array([n])])
        member(archive, "num_edges_list", (1,), np.int64, [np.array([e])])


def _feat_rows(rows: np.ndarray, dim: int) -> np.ndarray:
    return ((rows[:, None] * 7 + np.arange(dim)[None, :]) % 1000).astype(np.float32)


def _edges(lo: int, hi: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    i = np.arange(lo, hi, dtype=np.int64)
    return (i * 2654435761) % n, (i * 40503 + 17) % n


@pytest.mark.skipif(not MEMLIMIT.is_file(), reason="memlimit.sh not on this machine")
def test_ingest_under_a_cap_below_the_data_size(tmp_path):
    n, e, dim = 1_000_000, 4_000_000, 128  # 512 MB of features + 64 MB of edges, cap 300 MB
    _write_big_folder(tmp_path / "big", n, e, dim)
    proc = subprocess.run([str(MEMLIMIT), "--keep-caches", "300M", sys.executable, "-m", "graphpipe.cli.main",
                           "ingest", str(tmp_path / "big"), str(tmp_path / "s"), "--quiet"],
                          check=False, capture_output=True, text=True, timeout=300)
    if proc.returncode == 3:
        pytest.skip(f"memlimit.sh cannot make a memory cgroup here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    store = GraphStore.open(tmp_path / "s")
    assert store.manifest["build"]["out_of_core"] and store.num_edges == e
    in_degrees = np.zeros(n, dtype=np.int64)
    for a in range(0, e, 1 << 20):
        in_degrees += np.bincount(_edges(a, min(a + (1 << 20), e), n)[1], minlength=n)
    np.testing.assert_array_equal(store.in_degrees, in_degrees)
    rows = np.random.default_rng(0).choice(n, 2000, replace=False)
    assert store.features(rows).tobytes() == _feat_rows(rows, dim).tobytes()


def test_cli_edge_ids_option(papers_folder, tmp_path):
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "graphpipe.cli.main", "ingest", *args, "--quiet"],
                              check=False, capture_output=True, text=True, timeout=300)

    done = cli(str(papers_folder), str(tmp_path / "s"), "--edge-ids", "always")
    assert done.returncode == 0, done.stderr
    assert GraphStore.open(tmp_path / "s").has_edge_ids
    bad = cli(str(papers_folder), str(tmp_path / "t"), "--edge-ids", "sometimes")
    assert bad.returncode == 2 and "--edge-ids" in bad.stderr and not (tmp_path / "t").exists()
