"""TypedLinkNeighborLoader against PyG's LinkNeighborLoader on the same HeteroData: with
all neighbours and no negatives (no draws) every batch's seeds, supervision edges,
labels, input IDs, nodes and sampled edges per relation are PyG's, for a relation
between two types and one within a type; binary negatives have PyG's layout."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.loaders import GraphData, TypedLinkNeighborLoader

pyg_loader = pytest.importorskip("torch_geometric.loader")
WRITES, CITES = ("author", "writes", "paper"), ("paper", "cites", "paper")


@pytest.fixture(scope="module")
def hetero():
    from torch_geometric.data import HeteroData

    g = torch.Generator().manual_seed(0)
    data = HeteroData()
    data["paper"].x = torch.randn(40, 3, generator=g)
    data["author"].x = torch.randn(25, 2, generator=g)
    pairs = torch.unique(torch.randint(0, 1000, (90,), generator=g))
    data[WRITES].edge_index = torch.stack([pairs % 25, pairs // 25])
    cites = torch.unique(torch.randint(0, 1600, (70,), generator=g))
    data[CITES].edge_index = torch.stack([cites % 40, cites // 40])
    data["paper", "rev_writes", "author"].edge_index = data[WRITES].edge_index.flip(0)
    return data


def _pairs(n_id_src, n_id_dst, index) -> set[tuple[int, int]]:
    return set(zip(n_id_src[index[0]].tolist(), n_id_dst[index[1]].tolist()))


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("relation", [WRITES, CITES])
def test_batches_equal_pygs_with_all_neighbours(hetero, relation) -> None:
    ours = TypedLinkNeighborLoader(GraphData.from_pyg(hetero), [-1, -1],
                                   edge_label_index=(relation, hetero[relation].edge_index),
                                   batch_size=16)
    theirs = pyg_loader.LinkNeighborLoader(hetero, [-1, -1], batch_size=16,
                                           edge_label_index=(relation, hetero[relation].edge_index))
    assert len(ours) == len(theirs)
    s, _, d = relation
    for mine, pyg in zip(ours, theirs):
        m, p = mine[relation], pyg[relation]
        assert torch.equal(m.input_id, p.input_id)
        assert not hasattr(m, "edge_label") and not hasattr(p, "edge_label")  # no negatives
        assert torch.equal(mine[s].n_id[m.edge_label_index[0]], pyg[s].n_id[p.edge_label_index[0]])
        assert torch.equal(mine[d].n_id[m.edge_label_index[1]], pyg[d].n_id[p.edge_label_index[1]])
        seeds = int(torch.unique(pyg[s].n_id[p.edge_label_index.reshape(-1)] if s == d
                                 else pyg[s].n_id[p.edge_label_index[0]]).numel())
        assert torch.equal(mine[s].n_id[:seeds], pyg[s].n_id[:seeds])   # seeds first, sorted
        for t in pyg.node_types:
            assert sorted(mine[t].n_id.tolist()) == sorted(pyg[t].n_id.tolist()), t
        for et in pyg.edge_types:
            got = _pairs(mine[et[0]].n_id, mine[et[2]].n_id, mine[et].edge_index)
            want = _pairs(pyg[et[0]].n_id, pyg[et[2]].n_id, pyg[et].edge_index)
            assert got == want, et
        assert torch.equal(mine["paper"].x, hetero["paper"].x[mine["paper"].n_id])


@pytest.mark.requires_pyg_sampler
def test_binary_negatives_have_pygs_layout(hetero) -> None:
    edges = hetero[WRITES].edge_index
    ours = TypedLinkNeighborLoader(GraphData.from_pyg(hetero), [3], edge_label_index=(WRITES, edges),
                                   neg_sampling="binary", batch_size=8, shuffle=True, seed=1)
    theirs = pyg_loader.LinkNeighborLoader(hetero, [3], edge_label_index=(WRITES, edges),
                                           neg_sampling="binary", batch_size=8)
    mine, pyg = next(iter(ours)), next(iter(theirs))
    assert mine[WRITES].edge_label.tolist() == pyg[WRITES].edge_label.tolist() == [1.0] * 8 + [0.0] * 8
    assert mine[WRITES].edge_label_index.shape == pyg[WRITES].edge_label_index.shape == (2, 16)
    src = mine["author"].n_id[mine[WRITES].edge_label_index[0]]
    dst = mine["paper"].n_id[mine[WRITES].edge_label_index[1]]
    positives = set(zip(edges[0].tolist(), edges[1].tolist()))
    assert set(zip(src[:8].tolist(), dst[:8].tolist())) <= positives
    assert int(src.max()) < 25 and int(dst.max()) < 40
    again = next(iter(TypedLinkNeighborLoader(GraphData.from_pyg(hetero), [3], batch_size=8,
                                              edge_label_index=(WRITES, edges), neg_sampling="binary",
                                              shuffle=True, seed=1)))
    assert torch.equal(again[WRITES].edge_label_index, mine[WRITES].edge_label_index)


def test_bad_arguments_are_refused(hetero) -> None:
    data = GraphData.from_pyg(hetero)
    with pytest.raises(ValueError, match="no relation"):
        TypedLinkNeighborLoader(data, [2], edge_label_index=(("paper", "x", "paper"), None))
    with pytest.raises(ValueError, match="'paper' IDs"):
        TypedLinkNeighborLoader(data, [2], edge_label_index=(WRITES, (np.array([0]), np.array([40]))))
    with pytest.raises(ValueError, match="binary"):
        TypedLinkNeighborLoader(data, [2], edge_label_index=(WRITES, None), neg_sampling="triplet")


@pytest.mark.parametrize("relation", [WRITES, CITES])
def test_exclude_seed_edges_drops_exactly_the_positives_both_ways(hetero, relation) -> None:
    data = GraphData.from_pyg(hetero)
    rev = relation if relation[0] == relation[2] else ("paper", "rev_writes", "author")
    options = {"edge_label_index": (relation, hetero[relation].edge_index), "batch_size": 16}
    plain = TypedLinkNeighborLoader(data, [-1, -1], **options)
    kept = TypedLinkNeighborLoader(data, [-1, -1], exclude_seed_edges=True, **options)
    s, _, d = relation
    for a, b in zip(plain, kept):
        index = b[relation].edge_label_index
        pos = set(zip(b[s].n_id[index[0]].tolist(), b[d].n_id[index[1]].tolist()))
        banned = {relation: pos, rev: {(y, x) for x, y in pos}}
        if relation == rev:
            banned = {relation: pos | banned[rev]}
        for t in a.node_types:
            assert torch.equal(a[t].n_id, b[t].n_id)
        for et in a.edge_types:
            before = _pairs(a[et[0]].n_id, a[et[2]].n_id, a[et].edge_index)
            after = _pairs(b[et[0]].n_id, b[et[2]].n_id, b[et].edge_index)
            assert after == before - banned.get(et, set()), et
            assert sum(b[et].num_sampled_edges) == b[et].edge_index.shape[1]
        # the check can fail: the positives were among the sampled edges before
        assert banned[relation] & _pairs(a[s].n_id, a[d].n_id, a[relation].edge_index)
