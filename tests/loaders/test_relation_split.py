"""random_relation_split against PyG's RandomLinkSplit on the same HeteroData: the same
split sizes and message-passing edge counts (relation and reverse) per split; train /
valid / test disjoint and covering the relation; no valid or test edge in a graph that
must not see it, in either direction; negatives are not edges, shared or per held-out
edge (the MRR layout: K of each edge's own, from the seed, the split otherwise the same)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import GraphData
from graphpipe.loaders.relation_split import random_relation_split

WRITES, REV = ("author", "writes", "paper"), ("paper", "rev_writes", "author")


@pytest.fixture(scope="module")
def hetero():
    from torch_geometric.data import HeteroData

    g = torch.Generator().manual_seed(0)
    data = HeteroData()
    data["paper"].x = torch.randn(60, 3, generator=g)
    data["author"].num_nodes = 30
    pairs = torch.unique(torch.randint(0, 1800, (400,), generator=g))
    data[WRITES].edge_index = torch.stack([pairs % 30, pairs // 30])
    return data


def _codes(src, dst) -> set[int]:
    return set((np.asarray(src, dtype=np.int64) * 1000 + np.asarray(dst)).tolist())


def _graph_codes(graph, et) -> set[int]:
    indptr, indices = graph.typed_csc(et)
    dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return _codes(indices, dst) if et == WRITES else _codes(dst, indices)  # reverse: flip back


def test_sizes_equal_pygs_random_link_split(hetero) -> None:
    import torch_geometric.transforms as T

    pyg = T.RandomLinkSplit(num_val=0.1, num_test=0.2, edge_types=[WRITES], rev_edge_types=[REV],
                            add_negative_train_samples=False)
    train, val, test = pyg(T.ToUndirected()(hetero.clone()))
    ours = random_relation_split(GraphData.from_pyg(hetero), WRITES, valid=0.1, test=0.2, seed=0)
    for name, theirs in (("train", train), ("valid", val), ("test", test)):
        graph = ours.graphs[name]
        assert graph.num_edges_dict[WRITES] == theirs[WRITES].edge_index.shape[1], name
        assert graph.num_edges_dict[REV] == theirs[REV].edge_index.shape[1], name
        label = theirs[WRITES].edge_label
        assert ours.edges[name].num_pos == int((label == 1).sum()), name
        if name != "train":
            assert ours.edges[name].neg_src.shape[0] == int((label == 0).sum()), name


def test_splits_are_disjoint_and_graphs_hide_what_they_must(hetero) -> None:
    data = GraphData.from_pyg(hetero)
    split = random_relation_split(data, "author___writes___paper", valid=0.1, test=0.2, seed=3)
    parts = {k: _codes(v.src, v.dst) for k, v in split.edges.items()}
    everything = _codes(*[a.numpy() for a in hetero[WRITES].edge_index])
    assert not parts["train"] & parts["valid"] and not parts["train"] & parts["test"]
    assert not parts["valid"] & parts["test"]
    assert parts["train"] | parts["valid"] | parts["test"] == everything
    for name, hidden in (("train", parts["valid"] | parts["test"]),
                         ("valid", parts["valid"] | parts["test"]), ("test", parts["test"])):
        for et in (WRITES, REV):
            seen = _graph_codes(split.graphs[name], et)
            assert not seen & hidden and seen == everything - hidden, (name, et)
    for name in ("valid", "test"):
        negatives = _codes(split.edges[name].neg_src, split.edges[name].neg_dst)
        assert negatives and not negatives & everything
    again = random_relation_split(data, WRITES, valid=0.1, test=0.2, seed=3)
    assert np.array_equal(again.edges["test"].src, split.edges["test"].src)


def test_per_edge_negatives(hetero) -> None:
    data = GraphData.from_pyg(hetero)
    shared = random_relation_split(data, WRITES, valid=0.1, test=0.2, seed=3)
    split = random_relation_split(data, WRITES, valid=0.1, test=0.2, neg_per_edge=50, seed=3)
    everything = _codes(*[a.numpy() for a in hetero[WRITES].edge_index])
    for name in ("valid", "test"):
        edges = split.edges[name]
        assert edges.neg_src is None and edges.neg_dst2d.shape == (edges.num_pos, 50)
        assert edges.neg_dst2d.min() >= 0 and edges.neg_dst2d.max() < 60
        assert not _codes(np.repeat(edges.src, 50), edges.neg_dst2d.reshape(-1)) & everything
        assert len(np.unique(edges.neg_dst2d)) > 50           # uniform over the 60 papers
    for name in ("train", "valid", "test"):                  # the layout changes nothing else
        assert np.array_equal(split.edges[name].src, shared.edges[name].src)
        assert np.array_equal(split.edges[name].dst, shared.edges[name].dst)
        assert split.graphs[name].num_edges_dict == shared.graphs[name].num_edges_dict
    again = random_relation_split(data, WRITES, valid=0.1, test=0.2, neg_per_edge=50, seed=3)
    other = random_relation_split(data, WRITES, valid=0.1, test=0.2, neg_per_edge=50, seed=4)
    assert np.array_equal(again.edges["test"].neg_dst2d, split.edges["test"].neg_dst2d)
    assert not np.array_equal(other.edges["valid"].neg_dst2d[:1], split.edges["valid"].neg_dst2d[:1])
    with pytest.raises(ValueError, match="neg_per_edge"):
        random_relation_split(data, WRITES, neg_per_edge=0)


def test_bad_arguments_are_refused(hetero) -> None:
    data = GraphData.from_pyg(hetero)
    with pytest.raises(ValueError, match="no relation"):
        random_relation_split(data, ("paper", "cites", "paper"))
    with pytest.raises(ValueError, match="leave training edges"):
        random_relation_split(data, WRITES, valid=0.5, test=0.5)
