"""LinkNeighborLoader against PyG's LinkNeighborLoader (same graph, same edges), its
negative modes, and the no-leakage property of ``exclude_seed_edges``."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.loaders import LinkMiniBatch, LinkNeighborLoader
from graphpipe.store.link import read_link_split
from graphpipe.synthetic.link import link_dataset, write_ogb_link


def _graph(n: int = 120, e: int = 700, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A random graph with both directions of every edge, as ``(edge_index, x)``."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    keep = src != dst
    pairs = np.unique(np.stack([np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]]]), axis=1)
    x = torch.from_numpy(rng.standard_normal((n, 4)).astype(np.float32))
    return torch.from_numpy(pairs), x


def _data(edge_index, x):
    from torch_geometric.data import Data

    return Data(x=x, edge_index=edge_index, num_nodes=x.shape[0])


def _pairs(batch, edge_index_attr: str = "edge_index") -> set[tuple[int, int]]:
    local = getattr(batch, edge_index_attr)
    return set(map(tuple, batch.n_id[local].T.tolist()))


@pytest.mark.requires_pyg_sampler
def test_same_batches_as_pyg_with_all_neighbours() -> None:
    from torch_geometric.loader import LinkNeighborLoader as PygLinkLoader

    edge_index, x = _graph()
    data = _data(edge_index, x)
    label_index = edge_index[:, ::3]
    label = torch.arange(label_index.shape[1]) % 2
    ours = LinkNeighborLoader(data, [-1, -1], edge_label_index=label_index, edge_label=label,
                              batch_size=16, seed=0)
    theirs = PygLinkLoader(data, [-1, -1], edge_label_index=label_index, edge_label=label,
                           batch_size=16)
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert isinstance(a, LinkMiniBatch)
        assert torch.equal(a.input_id, b.input_id)
        assert torch.equal(a.n_id[a.edge_label_index], b.n_id[b.edge_label_index])
        assert torch.equal(a.edge_label, b.edge_label)
        seeds = torch.unique(label_index[:, b.input_id])
        assert torch.equal(a.seeds, seeds) and torch.equal(b.n_id[:seeds.numel()], seeds)
        assert set(a.n_id.tolist()) == set(b.n_id.tolist())
        assert _pairs(a) == _pairs(b)  # every sampled edge, global IDs
        assert torch.equal(a.x, x[a.n_id])
        pyg = a.to_pyg()
        assert {"edge_label_index", "edge_label", "input_id", "n_id", "e_id"} <= set(pyg.keys())
        assert torch.equal(edge_index[:, a.e_id], a.n_id[a.edge_index])


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("amount", [1, 2.5])
def test_binary_layout_as_pyg(amount) -> None:
    from torch_geometric.loader import LinkNeighborLoader as PygLinkLoader

    edge_index, x = _graph()
    data = _data(edge_index, x)
    neg = {"mode": "binary", "amount": amount}
    ours = next(iter(LinkNeighborLoader(data, [3], edge_label_index=edge_index, neg_sampling=neg,
                                        batch_size=10, seed=1)))
    from torch_geometric.sampler import NegativeSampling

    theirs = next(iter(PygLinkLoader(data, [3], edge_label_index=edge_index, batch_size=10,
                                     neg_sampling=NegativeSampling("binary", amount))))
    num = 10 + math.ceil(10 * amount)
    for b in (ours, theirs):
        assert b.edge_label_index.shape == (2, num)
        assert b.edge_label.dtype == torch.float32
        assert b.edge_label.tolist() == [1.0] * 10 + [0.0] * (num - 10)
    assert torch.equal(ours.n_id[ours.edge_label_index[:, :10]], theirs.n_id[theirs.edge_label_index[:, :10]])
    assert torch.equal(ours.n_id[ours.edge_label_index[:, :10]], edge_index[:, :10])


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("amount", [1, 3])
def test_triplet_layout_as_pyg(amount) -> None:
    from torch_geometric.loader import LinkNeighborLoader as PygLinkLoader
    from torch_geometric.sampler import NegativeSampling

    edge_index, x = _graph()
    data = _data(edge_index, x)
    neg = {"mode": "triplet", "amount": amount}
    ours = next(iter(LinkNeighborLoader(data, [3], edge_label_index=edge_index, neg_sampling=neg,
                                        batch_size=8, seed=2)))
    theirs = next(iter(PygLinkLoader(data, [3], edge_label_index=edge_index, batch_size=8,
                                     neg_sampling=NegativeSampling("triplet", amount))))
    for b in (ours, theirs):
        assert b.src_index.shape == (8,) and b.dst_pos_index.shape == (8,)
        assert b.dst_neg_index.shape == ((8,) if amount == 1 else (8, amount))
    assert "edge_label_index" not in ours.to_pyg() and ours.edge_label is None
    assert torch.equal(ours.n_id[ours.src_index], edge_index[0, :8])
    assert torch.equal(ours.n_id[ours.dst_pos_index], edge_index[1, :8])
    assert torch.equal(theirs.n_id[theirs.src_index], edge_index[0, :8])


def test_degree_weighted_negatives_avoid_isolated_nodes() -> None:
    edge_index, x = _graph(n=60, e=150, seed=4)
    x = torch.cat([x, torch.zeros(20, 4)])  # nodes 60..79 have no edges
    data = _data(edge_index, x)
    loader = LinkNeighborLoader(data, [2], edge_label_index=edge_index, batch_size=32, seed=3,
                                neg_sampling={"mode": "binary", "amount": 4, "weight": "degree"})
    negatives = torch.cat([b.n_id[b.edge_label_index[:, b.edge_label == 0]].flatten() for b in loader])
    assert negatives.numel() > 1000 and int(negatives.max()) < 60
    uniform = LinkNeighborLoader(data, [2], edge_label_index=edge_index, batch_size=32, seed=3,
                                 neg_sampling={"mode": "binary", "amount": 4})
    negatives = torch.cat([b.n_id[b.edge_label_index[:, b.edge_label == 0]].flatten() for b in uniform])
    assert int(negatives.max()) >= 60  # the test can fail: uniform draws reach them


@pytest.mark.parametrize("fanouts", [[-1], [5, 3], [-1, -1]])
def test_exclusion_removes_every_seed_edge_and_nothing_else(fanouts) -> None:
    edge_index, x = _graph(seed=5)
    data = _data(edge_index, x)
    common = {"edge_label_index": edge_index[:, ::2], "neg_sampling": "binary", "batch_size": 24,
              "seed": 7}
    on = LinkNeighborLoader(data, fanouts, exclude_seed_edges=True, **common)
    off = LinkNeighborLoader(data, fanouts, **common)
    leaked = 0
    for a, b in zip(on, off):
        assert torch.equal(a.n_id, b.n_id)  # the same draws, then the seed edges dropped
        positives = a.n_id[a.edge_label_index[:, a.edge_label == 1]].T.tolist()
        banned = {tuple(p) for p in positives} | {tuple(p[::-1]) for p in positives}
        assert not (_pairs(a) & banned)  # no label leakage, either direction
        assert _pairs(a) == _pairs(b) - banned
        leaked += len(_pairs(b) & banned)
        for block in a.blocks:
            assert int(block.indptr[-1]) == block.indices.numel() == block.edge_ids.numel()
    assert leaked > 0  # without exclusion the seed edges are sampled


@pytest.fixture(scope="module")
def link_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("link")
    folder = write_ogb_link(root / "collab", link_dataset(300, avg_degree=6, feature_dim=6, pool=30),
                            num_neg=50)
    return ingest(folder, root / "store")


def test_train_split_of_a_store(link_store) -> None:
    train = read_link_split(link_store, "train")
    loader = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", neg_sampling="binary",
                                batch_size=64, shuffle=True, seed=3, exclude_seed_edges=True)
    assert len(loader) == math.ceil(train.num_pos / 64)
    again = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", neg_sampling="binary",
                               batch_size=64, shuffle=True, seed=3, exclude_seed_edges=True, prefetch=0)
    seen = []
    for a, b in zip(loader, again):  # prefetch thread or not, the same batches
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_label_index, b.edge_label_index)
        assert torch.equal(a.x, torch.from_numpy(np.asarray(link_store.feat))[a.n_id])
        pos = a.n_id[a.edge_label_index[:, a.edge_label == 1]]
        assert torch.equal(pos[0], torch.from_numpy(train.src)[a.input_id])
        assert torch.equal(pos[1], torch.from_numpy(train.dst)[a.input_id])
        seen.append(a.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(train.num_pos))


@pytest.mark.parametrize("kwargs, message", [
    ({"edge_label_index": "nope"}, "unknown link split"),
    ({"edge_label_index": (np.array([0]), np.array([1, 2]))}, "differ in length"),
    ({"edge_label_index": (np.array([0]), np.array([9999]))}, "node IDs in"),
    ({"edge_label_index": "train", "neg_sampling": "weird"}, "mode must be"),
    ({"edge_label_index": "train", "neg_sampling": {"mode": "triplet", "amount": 1.5}}, "integer"),
    ({"edge_label_index": "train", "neg_sampling": {"mode": "binary", "weight": "pagerank"}}, "weight"),
    ({"edge_label_index": "train", "disjoint": True}, "disjoint"),
])
def test_bad_arguments(link_store, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        LinkNeighborLoader(link_store, [2], batch_size=4, **kwargs)


def test_pyg_negative_sampling_object_with_weights() -> None:
    from torch_geometric.sampler import NegativeSampling

    edge_index, x = _graph(n=50, e=200, seed=6)
    weight = torch.zeros(50)
    weight[[3, 7]] = 1.0  # destinations of negatives: only nodes 3 and 7
    loader = LinkNeighborLoader(_data(edge_index, x), [2], edge_label_index=edge_index, batch_size=20,
                                seed=1, neg_sampling=NegativeSampling("binary", 2, dst_weight=weight))
    batch = next(iter(loader))
    neg = batch.n_id[batch.edge_label_index[:, batch.edge_label == 0]]
    assert neg.shape == (2, 40) and set(neg[1].tolist()) <= {3, 7}
    assert len(set(neg[0].tolist())) > 2  # sources stay uniform


def test_reordered_batches_keep_their_edges(link_store) -> None:
    """Match-Reorder permutes a shuffled window's batches: each batch's edges travel with it."""
    train = read_link_split(link_store, "train")
    loader = LinkNeighborLoader(link_store, [3, 3], edge_label_index="train", batch_size=16,
                                shuffle=True, seed=5, match_reorder=True, window=4,
                                neg_sampling={"mode": "triplet", "amount": 2})
    seen = []
    for b in loader:
        assert torch.equal(b.n_id[b.src_index], torch.from_numpy(train.src)[b.input_id])
        assert torch.equal(b.n_id[b.dst_pos_index], torch.from_numpy(train.dst)[b.input_id])
        assert b.dst_neg_index.shape == (b.input_id.numel(), 2)
        assert torch.equal(b.x, torch.from_numpy(np.asarray(link_store.feat))[b.n_id])
        seen.append(b.input_id)
    assert torch.equal(torch.cat(seen).sort().values, torch.arange(train.num_pos))


def test_topology_only_and_ratio(link_store) -> None:
    loader = LinkNeighborLoader(link_store, [2], edge_label_index="valid", batch_size=8, seed=0,
                                features=False, neg_sampling="triplet", neg_sampling_ratio=2)
    batch = next(iter(loader))
    assert batch.x is None and batch.edge_label_index.shape == (2, 24)  # ratio 2 -> binary
    assert batch.edge_label.tolist() == [1.0] * 8 + [0.0] * 16
    assert len(loader) == math.ceil(read_link_split(link_store, "valid").num_pos / 8)


def test_typed_graphs_get_the_typed_link_loader() -> None:
    pytest.importorskip("torch_geometric")
    from torch_geometric.data import HeteroData

    from graphpipe.loaders import TypedLinkNeighborLoader

    data = HeteroData()
    data["paper"].num_nodes = 3
    data["paper", "cites", "paper"].edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match=r"^'edge_label_index' must be \(relation, edges\)"):
        LinkNeighborLoader(data, [2], edge_label_index=torch.tensor([[0], [1]]))
    rel = ("paper", "cites", "paper")
    loader = LinkNeighborLoader(data, [2], edge_label_index=(rel, data[rel].edge_index), batch_size=2)
    assert isinstance(loader, TypedLinkNeighborLoader)
    assert next(iter(loader))[rel].edge_label_index.shape == (2, 2)
