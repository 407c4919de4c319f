"""Batch order of NeighborLoader: with ``shuffle=False`` batches come in input order whatever
Match-Reorder, cache and window say, so PyG's layer-wise inference idiom (concatenate
``out[:batch_size]`` over the batches) lines up with node IDs (issue 19)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore, StoreWriter

N, DIM, CLASSES = 1500, 8, 5


def _graph(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """CSC with hub sources, so batches overlap and Greedy Reorder has a non-identity order."""
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 12, size=N)
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    weights = 1.0 / np.arange(1, N + 1) ** 0.8
    weights /= weights.sum()
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    for v in range(N):
        indices[indptr[v]:indptr[v + 1]] = np.sort(rng.choice(N, size=int(deg[v]), replace=False,
                                                              p=weights))
    return indptr, indices


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    path: Path = tmp_path_factory.mktemp("order") / "store"
    indptr, indices = _graph()
    rng = np.random.default_rng(1)
    perm = rng.permutation(N)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(len(indices), dtype=np.int64))
        w.write_array("node/feat", rng.standard_normal((N, DIM)).astype(np.float32), chunk_rows=256)
        w.write_array("node/label", rng.integers(0, CLASSES, size=N).astype(np.int64))
        w.write_splits({"train": np.sort(perm[:900]), "valid": np.sort(perm[900:1200]),
                        "test": np.sort(perm[1200:])})
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, len(indices)
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [N], "dtype": "int64", "task_type": "multiclass",
                                "num_classes": CLASSES}
        w.commit()
    return GraphStore.open(path)


@pytest.mark.parametrize("match_reorder", [True, "match", False])
@pytest.mark.parametrize("cache", [None, "degree"])
@pytest.mark.parametrize("window", [1, 3, 8])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_unshuffled_batches_in_input_order(store: GraphStore, match_reorder, cache, window: int,
                                           prefetch: int) -> None:
    given = np.random.default_rng(4).permutation(N)[:1100]  # an arbitrary, unsorted order
    for input_nodes, expected in ((None, np.arange(N)), ("train", store.split("train")),
                                  (torch.from_numpy(given), given)):
        loader = NeighborLoader(store, [-1], batch_size=64, input_nodes=input_nodes, shuffle=False,
                                match_reorder=match_reorder, cache=cache, window=window,
                                prefetch=prefetch, seed=3)
        for _ in range(2):  # every epoch, not only the first
            seeds = torch.cat([b.n_id[:b.batch_size] for b in loader])
            assert np.array_equal(seeds.numpy(), expected)


def test_shuffled_epochs_still_reorder(store: GraphStore) -> None:
    """Reorder is kept where it is allowed: with shuffle=True some window leaves sample order."""
    loader = NeighborLoader(store, [5, 5], batch_size=64, input_nodes=None, shuffle=True, window=8, seed=3,
                            match_reorder=True)
    planned = [int(b[0]) for b in loader.epoch_batches(0)]
    produced = [int(b.n_id[0]) for b in loader]
    assert sorted(produced) == sorted(planned) and produced != planned


def test_pyg_layerwise_inference_matches_full_graph(store: GraphStore) -> None:
    """PyG's ``inference()`` of its SAGE examples on a graphpipe loader with default options
    (apart from ``shuffle=False``) gives the full-graph predictions."""
    from torch_geometric.nn import SAGEConv

    torch.manual_seed(0)
    convs = torch.nn.ModuleList([SAGEConv(DIM, 16), SAGEConv(16, CLASSES)])
    x = torch.from_numpy(np.asarray(store.features(np.arange(N))))
    dst = np.repeat(np.arange(N), np.diff(np.asarray(store.indptr)))
    edge_index = torch.from_numpy(np.stack([np.asarray(store.indices).astype(np.int64), dst]))
    with torch.no_grad():
        full = x
        for i, conv in enumerate(convs):
            full = conv(full, edge_index)
            full = full.relu() if i < len(convs) - 1 else full

        subgraph_loader = NeighborLoader(store, [-1], batch_size=128, input_nodes=None, shuffle=False, seed=0)
        x_all = x
        for i, conv in enumerate(convs):
            xs = []
            for batch in subgraph_loader:
                out = conv(x_all[batch.n_id], batch.edge_index)[:batch.batch_size]
                xs.append(out.relu() if i < len(convs) - 1 else out)
            x_all = torch.cat(xs, dim=0)
    torch.testing.assert_close(x_all, full, rtol=1e-4, atol=1e-5)
