"""``GraphData.from_pyg``: a PyG ``Data`` read in memory (no store written) has the CSC,
edge order and arrays the store written by ``graphpipe.from_pyg`` has; tensors are viewed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data

from graphpipe import from_pyg
from graphpipe.ingest.csc_builder import reference_csc
from graphpipe.loaders.graph_data import GraphData, coo_to_csc, resolve_graph_data


def sample_data(n: int = 50, e: int = 400) -> Data:
    g = torch.Generator().manual_seed(1)
    mask = torch.zeros(n, dtype=torch.bool)
    mask[:20] = True
    edge_index = torch.randint(0, n, (2, e), generator=g)
    edge_index[:, 1::7] = edge_index[:, ::7][:, :edge_index[:, 1::7].shape[1]]  # duplicate edges
    return Data(x=torch.randn(n, 4, generator=g), y=torch.randint(0, 3, (n,), generator=g),
                edge_index=edge_index, edge_attr=torch.randn(e, 2, generator=g),
                train_mask=mask, val_mask=~mask, node_year=torch.arange(n) + 2000,
                edge_time=torch.arange(e) * 10, title="graph-level values are left out")


def test_from_pyg_is_the_builders_csc_and_views_the_tensors() -> None:
    data = sample_data()
    gd = GraphData.from_pyg(data)
    src, dst = data.edge_index.numpy()
    indptr, indices, edge_id = reference_csc(src, dst, data.num_nodes)
    assert np.array_equal(gd.indptr, indptr) and np.array_equal(gd.indices, indices)
    assert gd.indices.dtype == indices.dtype
    assert np.array_equal(gd.attrs.edge_order, edge_id)
    assert np.shares_memory(gd.feature_chunks[0], data.x.numpy())   # no copy of x
    assert set(gd.attrs.node_attrs) == {"train_mask", "val_mask", "node_year"}
    assert set(gd.attrs.edge_attrs) == {"edge_time"}
    assert gd.splits["_N"]["train"].tolist() == gd.split("train").tolist() == list(range(20))
    assert gd.store is None


def test_from_pyg_equals_the_store_written_from_it(tmp_path) -> None:
    data = sample_data()
    stored = resolve_graph_data(from_pyg(data, tmp_path / "s"))
    gd = resolve_graph_data(data)                 # what NeighborLoader(data, ...) reads
    assert np.array_equal(gd.indptr, stored.indptr) and np.array_equal(gd.indices, stored.indices)
    assert np.array_equal(gd.attrs.edge_order, np.asarray(stored.attrs.edge_order))
    assert np.array_equal(gd.typed_labels("_N"), np.asarray(stored.typed_labels("_N")))
    assert gd.split("valid").tolist() == stored.split("valid").tolist()


def test_coo_to_csc_refuses_ids_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"Data.edge_index: dst IDs must lie in \[0, 3\)"):
        coo_to_csc([0, 1], [1, 3], 3, 3, "Data.edge_index")
    with pytest.raises(ValueError, match="edge_index"):
        GraphData.from_pyg(Data(x=torch.zeros(2, 2)))


def test_from_pyg_reads_a_heterodata_and_a_data_answers_the_typed_face() -> None:
    """One entry point for both PyG classes; a one-relation graph answers the typed read face
    (type _N, relation (_N, _E, _N)) with its own arrays."""
    from torch_geometric.data import HeteroData

    from graphpipe.loaders.graph_data import HeteroGraphData

    hetero = HeteroData()
    hetero["paper"].x = torch.eye(3)
    hetero["author"].num_nodes = 2
    hetero["author", "writes", "paper"].edge_index = torch.tensor([[0, 1, 1], [2, 0, 2]])
    typed = GraphData.from_pyg(hetero)
    assert HeteroGraphData is GraphData and typed.is_typed
    assert [a.tolist() for a in typed.typed_csc(("author", "writes", "paper"))] == [[0, 1, 1, 3], [1, 0, 1]]
    data = sample_data()
    graph = GraphData.from_pyg(data)
    (etype,) = graph.edge_types
    assert graph.node_types == ["_N"] and graph.num_nodes_dict == {"_N": 50}
    assert graph.typed_csc(etype)[0] is graph.indptr and graph.typed_labels("_N") is graph.labels["_N"]
    assert not graph.is_typed and graph.num_nodes == 50
    assert np.shares_memory(graph.typed_features("_N"), data.x.numpy())
    assert graph.typed_split("_N", "train").tolist() == list(range(20))
    with pytest.raises(ValueError, match="no type 'paper'"):
        graph.typed_features("paper")
