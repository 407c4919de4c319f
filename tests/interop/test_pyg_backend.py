"""graphpipe stores as PyG's remote backend: PyG's own loaders run on
``graphpipe.to_pyg_backend(store)`` unchanged, and every batch is checked against the
graph the store was written from (features bit for bit, labels, every edge by ID),
and, with full neighbourhoods, against PyG's loader on the same graph as a ``Data``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("torch_geometric")
from torch_geometric.data import Data, HeteroData
from torch_geometric.loader import LinkNeighborLoader, NeighborLoader

from graphpipe import GraphStore, to_pyg_backend
from graphpipe.ingest import ingest
from graphpipe.interop.pyg_backend import PygBackend, StoreFeatureStore, StoreGraphStore

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def graph(rmat_small, tmp_path_factory):
    """rmat_small (duplicate edges and self-loops kept) with 3-wide edge features and
    an extra node array ``node/year``, ingested from an ``.npz``: ``(store, g, ea, year)``."""
    g = rmat_small
    rng = np.random.default_rng(1)
    ea = rng.standard_normal((len(g.src), 3)).astype(np.float32)
    tmp = tmp_path_factory.mktemp("pygb")
    np.savez(tmp / "g.npz", src=g.src, dst=g.dst, x=g.features, y=g.labels, edge_attr=ea,
             num_nodes=g.num_nodes, train_idx=g.splits["train"])
    ingest(tmp / "g.npz", tmp / "store")
    year = rng.integers(1990, 2020, g.num_nodes).astype(np.int64)
    store = GraphStore.open(tmp / "store")
    store.add_derived("year", {"node/year": year}, {"kind": "test"})
    return store, g, ea, year


def _check_batch(batch, g, x, y, seeds=None):
    n_id = batch.n_id.numpy()
    assert torch.equal(batch.x, torch.from_numpy(x[n_id]))          # bit for bit
    assert torch.equal(batch.y, torch.from_numpy(y[n_id]))
    row, col = batch.edge_index.numpy()
    e_id = batch.e_id.numpy()
    # every batch edge is the store's edge e_id: source -> destination, as in the input
    np.testing.assert_array_equal(g.src[e_id], n_id[row])
    np.testing.assert_array_equal(g.dst[e_id], n_id[col])
    if seeds is not None:
        np.testing.assert_array_equal(n_id[:batch.batch_size], seeds)


def test_feature_store_reads_rows_bit_for_bit(graph):
    store, g, ea, year = graph
    fs, _ = to_pyg_backend(store)
    ids = torch.tensor([5, 0, 5, g.num_nodes - 1])
    assert torch.equal(fs[None, "x", ids], torch.from_numpy(g.features[ids.numpy()]))
    assert torch.equal(fs[None, "y", ids], torch.from_numpy(g.labels[ids.numpy()]))
    assert torch.equal(fs[None, "year", ids], torch.from_numpy(year[ids.numpy()]))
    assert torch.equal(fs[None, "x", None], torch.from_numpy(g.features))
    assert torch.equal(fs[None, "x", 2:7], torch.from_numpy(g.features[2:7]))
    mask = torch.zeros(g.num_nodes, dtype=torch.bool)
    mask[[3, 9]] = True
    assert torch.equal(fs[None, "y", mask], torch.from_numpy(g.labels[[3, 9]]))
    e = torch.tensor([7, 1])
    assert torch.equal(fs.get_tensor(None, "edge_attr", e), torch.from_numpy(ea[[7, 1]]))
    assert fs.get_tensor_size(None, "x") == tuple(g.features.shape)
    assert fs.get_tensor_size(None, "x", ids) == (4, g.features.shape[1])
    assert sorted(a.attr_name for a in fs.get_all_tensor_attrs()) == ["x", "y", "year"]
    assert [a.attr_name for a in fs.edge_tensor_attrs()] == ["edge_attr"]


def test_feature_store_refuses_bad_requests_and_writes(graph):
    store, g, _, _ = graph
    fs, gs = to_pyg_backend(store)
    with pytest.raises(KeyError, match="no tensor 'z'"):
        fs.get_tensor(None, "z", None)
    with pytest.raises(ValueError, match="outside"):
        fs.get_tensor(None, "x", torch.tensor([g.num_nodes]))
    with pytest.raises(TypeError, match="read-only"):
        fs.put_tensor(torch.zeros(2, 2), None, "x", None)
    with pytest.raises(TypeError, match="read-only"):
        gs.put_edge_index((torch.zeros(2), torch.zeros(2)), None, "coo")
    with pytest.raises(ValueError, match="node_type"):
        to_pyg_backend(store, node_type="")


def test_a_store_with_node_types_refuses_node_type_in_one_line(tmp_path):
    # a typed store is served whole: tests/interop/test_pyg_hetero.py
    from graphpipe.store.writer import TypedStoreWriter

    with TypedStoreWriter(tmp_path / "t", {"paper": 2, "author": 1}) as w:
        w.add_relation(("author", "writes", "paper"), np.array([0]), np.array([1]))
        w.commit()
    with pytest.raises(ValueError, match=r"'node_type' names the one type of a homogeneous store; "
                                         r"this one has node types \['paper', 'author'\]"):
        to_pyg_backend(GraphStore.open(tmp_path / "t"), node_type="paper")


def test_graph_store_is_the_store_csc_with_original_edge_ids(graph):
    store, g, _, _ = graph
    _, gs = to_pyg_backend(store)
    (attr,) = gs.get_all_edge_attrs()
    assert attr.layout.value == "csc" and attr.is_sorted and attr.size == (g.num_nodes,) * 2
    indptr, indices = store.topology()
    row, colptr = gs.get_edge_index(None, "csc", True, attr.size)
    assert torch.equal(row, torch.from_numpy(np.asarray(indices, dtype=np.int64)))
    assert torch.equal(colptr, torch.from_numpy(np.asarray(indptr, dtype=np.int64)))
    for convert in (gs.coo, gs.csr, gs.csc):   # every layout: perm = original edge IDs
        a, b, perm = convert()
        if convert == gs.coo:
            src, dst = a, b
        elif convert == gs.csr:
            src = torch.repeat_interleave(torch.arange(g.num_nodes), a.diff())
            dst = b
        else:
            src, dst = a, torch.repeat_interleave(torch.arange(g.num_nodes), b.diff())
        np.testing.assert_array_equal(g.src[perm.numpy()], src.numpy())
        np.testing.assert_array_equal(g.dst[perm.numpy()], dst.numpy())
        assert sorted(perm.tolist()) == list(range(len(g.src)))


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("features", [True, "disk"])
def test_pyg_neighbor_loader_runs_unchanged(graph, features):
    store, g, _, _ = graph
    data = to_pyg_backend(store, features=features)
    seeds = torch.from_numpy(g.splits["train"])
    loader = NeighborLoader(data, num_neighbors=[5, 3], input_nodes=seeds, batch_size=100)
    seen = []
    for batch in loader:
        assert isinstance(batch, Data)
        seen.append(batch.n_id[:batch.batch_size])
        _check_batch(batch, g, g.features, g.labels, seeds=seeds[batch.input_id].numpy())
        assert int(torch.bincount(batch.edge_index[1]).max()) <= 5
    assert torch.equal(torch.cat(seen), seeds)


@pytest.mark.requires_pyg_sampler
def test_full_neighbourhoods_match_pyg_on_data(graph):
    """num_neighbors=[-1, -1] is deterministic as sets: the same nodes and the same
    edges (by ID) as PyG's loader over a Data holding the same graph."""
    store, g, _, _ = graph
    ref = Data(x=torch.from_numpy(g.features), y=torch.from_numpy(g.labels),
               edge_index=torch.from_numpy(np.stack([g.src, g.dst])), num_nodes=g.num_nodes)
    seeds = torch.arange(0, g.num_nodes, 7)
    kwargs = {"num_neighbors": [-1, -1], "input_nodes": seeds, "batch_size": 64}
    ours = NeighborLoader(to_pyg_backend(store), **kwargs)
    theirs = NeighborLoader(ref, **kwargs)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert torch.equal(a.n_id[:a.batch_size], b.n_id[:b.batch_size])
        assert set(a.n_id.tolist()) == set(b.n_id.tolist())
        assert sorted(a.e_id.tolist()) == sorted(b.e_id.tolist())
        _check_batch(a, g, g.features, g.labels)


@pytest.mark.requires_pyg_sampler
def test_layerwise_inference_order(graph):
    """PyG's inference idiom (all nodes, in order, out[:batch_size] concatenated)."""
    store, g, _, _ = graph
    data = to_pyg_backend(store)
    loader = NeighborLoader(data, num_neighbors=[-1], input_nodes=torch.arange(data.num_nodes),
                            batch_size=300)
    xs = torch.cat([b.x[:b.batch_size] for b in loader])
    assert torch.equal(xs, data.x) and torch.equal(data.x, torch.from_numpy(g.features))
    assert torch.equal(data.y, torch.from_numpy(g.labels))
    assert (data.num_features, data.num_edges) == (g.features.shape[1], len(g.src))
    assert data.num_classes == int(g.labels.max()) + 1


@pytest.mark.requires_pyg_sampler
def test_edge_transform_adds_edge_features(graph):
    store, _, ea, _ = graph
    data = to_pyg_backend(store)
    loader = NeighborLoader(data, num_neighbors=[4, 4], input_nodes=torch.arange(50),
                            batch_size=25, transform=data.edge_transform)
    for batch in loader:
        assert torch.equal(batch.edge_attr, torch.from_numpy(ea[batch.e_id.numpy()]))


@pytest.mark.requires_pyg_sampler
def test_pyg_link_neighbor_loader(graph):
    store, g, _, _ = graph
    data = to_pyg_backend(store)
    pos = torch.arange(0, len(g.src), 97)
    label_index = torch.from_numpy(np.stack([g.src[pos], g.dst[pos]]))
    loader = LinkNeighborLoader(data, num_neighbors=[5, 3], edge_label_index=(None, label_index),
                                batch_size=32, neg_sampling_ratio=1.0)
    total = 0
    for batch in loader:
        _check_batch(batch, g, g.features, g.labels)
        ends = batch.n_id[batch.edge_label_index]
        positive = batch.edge_label == 1
        got = ends[:, positive]
        want = label_index[:, batch.input_id]
        assert torch.equal(got, want)
        total += int(positive.sum())
    assert total == pos.numel()
    # every edge of the store as a label edge: PyG 2.8 reads `edge_label_index=(None, None)`
    # only for heterogeneous remote backends, so a homogeneous script passes the COO itself
    row, col, _ = data.graph_store.coo()
    loader = LinkNeighborLoader(data, num_neighbors=[2], batch_size=4096,
                                edge_label_index=(None, torch.stack([row, col])))
    assert sum(b.input_id.numel() for b in loader) == len(g.src)


@pytest.mark.requires_pyg_sampler
def test_one_type_heterogeneous_loader(graph):
    store, g, _, _ = graph
    data = to_pyg_backend(store, node_type="paper")
    et = ("paper", "to", "paper")
    loader = NeighborLoader(data, num_neighbors={et: [5, 3]},
                            input_nodes=("paper", torch.arange(0, 200)), batch_size=50,
                            transform=data.edge_transform)
    for batch in loader:
        assert isinstance(batch, HeteroData)
        n_id = batch["paper"].n_id.numpy()
        assert torch.equal(batch["paper"].x, torch.from_numpy(g.features[n_id]))
        row, col = batch[et].edge_index.numpy()
        e_id = batch[et].e_id.numpy()
        np.testing.assert_array_equal(g.src[e_id], n_id[row])
        np.testing.assert_array_equal(g.dst[e_id], n_id[col])
        assert batch[et].edge_attr.shape == (len(e_id), 3)


def test_types(graph):
    store, _, _, _ = graph
    data = to_pyg_backend(store)
    assert isinstance(data, PygBackend) and len(data) == 2
    assert isinstance(data[0], StoreFeatureStore) and isinstance(data[1], StoreGraphStore)
