"""``graphpipe.from_pyg`` / ``graphpipe.interop.pyg_data``: a PyG ``Data`` written as a store
keeps every node and edge tensor; the CSC is graphpipe's builder's. (A loader's in-memory
read of a ``Data`` is tests/loaders/test_graph_data.py.)"""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData

from graphpipe import from_pyg
from graphpipe.ingest.csc_builder import reference_csc
from graphpipe.loaders.pyg_arrays import pyg_parts


def sample_data(n: int = 50, e: int = 400) -> Data:
    g = torch.Generator().manual_seed(1)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[:20] = True
    return Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g),
                edge_index=torch.randint(0, n, (2, e), generator=g),
                edge_attr=torch.randn(e, 2, generator=g), train_mask=mask, val_mask=~mask,
                node_year=torch.arange(n) + 2000, edge_time=torch.arange(e) * 10,
                title="graph-level values are left out")


def test_from_pyg_keeps_every_attribute(tmp_path) -> None:
    data = sample_data()
    store = from_pyg(data, tmp_path / "s")
    src, dst = data.edge_index.numpy()
    indptr, indices, edge_id = reference_csc(src, dst, data.num_nodes)
    assert np.array_equal(store.indptr, indptr) and np.array_equal(store.indices, indices)
    assert np.array_equal(store.edge_id, edge_id)            # slot -> column of edge_index
    assert np.array_equal(store.features(np.arange(50)), data.x.numpy())
    assert np.array_equal(store.labels, data.y.numpy())
    assert np.array_equal(store.edge_features, data.edge_attr.numpy())
    assert np.array_equal(store.array("node/node_year"), data.node_year.numpy())
    assert np.array_equal(store.array("edge/edge_time"), data.edge_time.numpy())
    assert np.array_equal(store.array("node/train_mask"), data.train_mask.numpy())
    assert store.split("train").tolist() == list(range(20))
    assert store.split("valid").tolist() == list(range(20, 50))
    assert not any("title" in k for k in store.manifest["arrays"])


def test_overlapping_masks_stay_arrays_only() -> None:
    data = sample_data()
    data.test_mask = data.train_mask.clone()        # overlaps train: not a split
    arrays, node_extra, _ = pyg_parts(data)
    assert not any(k.endswith("_mask") for k in arrays)
    assert {"train_mask", "val_mask", "test_mask"} <= set(node_extra)


def test_refuses_what_is_not_a_homogeneous_data(tmp_path) -> None:
    with pytest.raises(ValueError, match="no node types"):     # HeteroData: tests/interop/test_pyg_hetero.py
        from_pyg(HeteroData(), tmp_path / "h")
    with pytest.raises(ValueError, match="edge_index"):
        from_pyg(Data(x=torch.zeros(2, 2)), tmp_path / "x")
    assert not (tmp_path / "h").exists() and not (tmp_path / "x").exists()
