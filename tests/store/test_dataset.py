"""A store as an OGB / PyG dataset (graphpipe/store/dataset.py): the face a PyG products
script reads, checked against the store's own accessors, graphpipe's NeighborLoader and
OGB's Evaluator."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore
from graphpipe.store import arrays as store_arrays
from graphpipe.synthetic import community_graph, write_ogb_raw

N, DIM, CLASSES = 300, 5, 4


def _features(rng: np.random.Generator) -> np.ndarray:
    """Random float32 rows with the bit patterns a lossy path would change."""
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    x[0, 0], x[1, 1], x[2, 2] = -0.0, np.float32(1e-45), np.float32(3.4e38)
    return x


def _npz_store(tmp_path, name="s", **options) -> tuple[GraphStore, np.ndarray]:
    rng = np.random.default_rng(0)
    x = _features(rng)
    npz = tmp_path / f"{name}.npz"
    np.savez(npz, src=rng.integers(0, N, 3000), dst=rng.integers(0, N, 3000), x=x,
             y=rng.integers(0, CLASSES, N), train_idx=np.arange(0, 100),
             valid_idx=np.arange(100, 150), test_idx=np.arange(150, N))
    return ingest(npz, tmp_path / name, IngestOptions(**options)), x


def _same_bits(a: torch.Tensor, b: np.ndarray) -> bool:
    return a.dtype == torch.float32 and np.array_equal(a.numpy().view(np.uint32), b.view(np.uint32))


def test_ogb_folder_face(tmp_path):
    """Ingested from an OGB folder: get_idx_split as OGB's (int64 tensors, the splits),
    dataset[0] the store, labels as stored ((N,) for one task), sizes."""
    graph = community_graph(400, CLASSES, feature_dim=DIM, avg_degree=6, seed=1)
    write_ogb_raw(tmp_path / "raw", graph)
    dataset = ingest(tmp_path / "raw", tmp_path / "store")
    split_idx = dataset.get_idx_split()
    assert sorted(split_idx) == ["test", "train", "valid"]
    for name, idx in split_idx.items():
        assert idx.dtype == torch.int64
        assert np.array_equal(idx.numpy(), dataset.split(name))
    assert len(dataset) == 1 and dataset[0] is dataset and dataset[-1] is dataset
    data = dataset[0]
    assert tuple(data.y.shape) == (400,) and data.y.dtype == torch.int64
    assert np.array_equal(data.y.numpy(), dataset.labels)
    assert dataset.num_features == DIM and dataset.num_classes == CLASSES


@pytest.mark.parametrize("index", [1, -2, "0", True, slice(0, 1)])
def test_only_index_zero(tmp_path, index):
    dataset, _ = _npz_store(tmp_path)
    with pytest.raises(IndexError, match="dataset of one graph"):
        dataset[index]


def test_x_is_the_features_bit_for_bit(tmp_path):
    """One chunk file: a copy-on-write map (writes stay private); in memory: the store's
    own array, shared."""
    dataset, x = _npz_store(tmp_path)
    data_x = dataset[0].x
    assert _same_bits(data_x, x) and dataset.x is data_x
    data_x[0, 0] = 7.0  # a read-only map would fault here; this one is private
    assert _same_bits(torch.from_numpy(np.array(GraphStore.open(tmp_path / "s").feat)), x)
    in_memory = GraphStore.open(tmp_path / "s", in_memory=True)
    assert in_memory.x.data_ptr() == in_memory.array("node/feat").ctypes.data
    assert _same_bits(in_memory.x, x)


def test_x_without_read_only_warning(tmp_path):
    """torch warns once per process on a read-only array: checked in a fresh one."""
    _npz_store(tmp_path)
    script = ("import warnings, sys\n"
              "from graphpipe.store import GraphStore\n"
              "warnings.simplefilter('error')\n"
              "GraphStore.open(sys.argv[1]).x\n"
              "GraphStore.open(sys.argv[1], in_memory=True).x\n")
    proc = subprocess.run([sys.executable, "-c", script, str(tmp_path / "s")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_x_several_chunks_and_compressed(tmp_path, monkeypatch):
    monkeypatch.setattr(store_arrays, "default_chunk_rows", lambda row_bytes: 64)
    dataset, x = _npz_store(tmp_path, "chunked")
    assert len(dataset.feature_chunks()[0]) == 5
    assert _same_bits(dataset.x, x)
    dataset, x = _npz_store(tmp_path, "zstd", compression="zstd")
    assert _same_bits(dataset.x, x)


def test_no_features_or_labels(tmp_path):
    npz = tmp_path / "bare.npz"
    np.savez(npz, edge_index=np.array([[0, 1], [1, 0]]))
    dataset = ingest(npz, tmp_path / "bare")
    assert dataset.num_features == 0 and dataset.get_idx_split() == {}
    with pytest.raises(AttributeError, match="no node features"):
        _ = dataset.x
    with pytest.raises(AttributeError, match="no labels"):
        _ = dataset.y


def test_neighbor_loader_takes_dataset_zero(tmp_path):
    """graphpipe's NeighborLoader on dataset[0]: training batches carry x[n_id] and y[n_id];
    PyG's inference idiom (input_nodes=None, num_neighbors=[-1]) sees nodes in order."""
    dataset, x = _npz_store(tmp_path)
    data = dataset[0]
    train_idx = dataset.get_idx_split()["train"]
    loader = NeighborLoader(data, input_nodes=train_idx, num_neighbors=[5, 3], batch_size=32,
                            shuffle=True, seed=0)
    seeds = []
    for batch in loader:
        assert _same_bits(batch.x, x[batch.n_id.numpy()])
        assert torch.equal(batch.y, data.y[batch.n_id])
        seeds.append(batch.n_id[:batch.batch_size])
    assert torch.equal(torch.sort(torch.cat(seeds)).values, train_idx)
    loader = NeighborLoader(data, input_nodes=None, num_neighbors=[-1], batch_size=64)
    order = torch.cat([batch.n_id[:batch.batch_size] for batch in loader])
    assert torch.equal(order, torch.arange(N))


def test_evaluator_takes_y_and_predictions(tmp_path):
    """OGB's Evaluator('ogbn-products') on the script's shapes: y_true = data.y.view(-1, 1)
    and y_pred = logits.argmax(-1, keepdim=True), indexed by get_idx_split()."""
    ogb = pytest.importorskip("ogb.nodeproppred")
    dataset, _ = _npz_store(tmp_path)
    data = dataset[0]
    y_true = data.y.view(-1, 1)
    logits = torch.randn(N, CLASSES, generator=torch.Generator().manual_seed(0))
    y_pred = logits.argmax(dim=-1, keepdim=True)
    evaluator = ogb.Evaluator(name="ogbn-products")
    for idx in dataset.get_idx_split().values():
        acc = evaluator.eval({"y_true": y_true[idx], "y_pred": y_pred[idx]})["acc"]
        expected = float(np.mean(dataset.labels[idx.numpy()].ravel() == y_pred[idx].numpy().ravel()))
        assert acc == pytest.approx(expected)
