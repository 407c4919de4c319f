"""graphpipe.dgl.DataLoader over a store, in the main environment (without DGL: blocks are
graphpipe.dgl.Block): DGL 2.1's batch order, DGL's sampling rule, data on the blocks,
refusals. The same loader against DGL itself: test_against_dgl.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.dgl import (
    EID,
    NID,
    Block,
    DataLoader,
    MultiLayerFullNeighborSampler,
    NeighborSampler,
)
from graphpipe.dgl.block import dgl_or_none
from graphpipe.store import GraphStore

SAMPLER = {"prefetch_node_feats": ["feat"], "prefetch_labels": ["label"]}


def _epoch(loader: DataLoader) -> list:
    return [(i.tolist(), o.tolist(), [(b.num_src_nodes(), b.num_dst_nodes(), b.edata[EID].tolist())
                                      for b in blocks]) for i, o, blocks in loader]


@pytest.mark.skipif(dgl_or_none() is not None, reason="checks graphpipe's own Block (DGL absent)")
def test_blocks_are_graphpipe_blocks_without_dgl(dgl_store: GraphStore) -> None:
    _, _, blocks = next(iter(DataLoader(dgl_store, torch.arange(10), NeighborSampler([3, 3]), batch_size=5)))
    assert all(isinstance(b, Block) and b.is_block for b in blocks)


def test_batches_in_given_order_and_dgl_shuffle(dgl_store: GraphStore) -> None:
    seeds = torch.from_numpy(dgl_store.split("train"))[torch.randperm(len(dgl_store.split("train")))]
    loader = DataLoader(dgl_store, seeds, NeighborSampler([4, 4]), batch_size=100)
    assert len(loader) == -(-len(seeds) // 100)
    assert torch.equal(torch.cat([o for _, o, _ in loader]), seeds)
    # DGL 2.1: one index permutation, shuffled in place by NumPy's generator every epoch
    shuffled = DataLoader(dgl_store, seeds, NeighborSampler([4, 4]), batch_size=100, shuffle=True,
                          drop_last=True)
    np.random.seed(5)
    got = [torch.cat([o for _, o, _ in shuffled]) for _ in range(2)]
    np.random.seed(5)
    order = np.arange(len(seeds))
    for epoch in got:
        np.random.shuffle(order)
        assert torch.equal(epoch, seeds[order[:len(seeds) // 100 * 100]])
    assert not torch.equal(got[0], got[1])


def test_torch_generator_untouched(dgl_store: GraphStore) -> None:
    torch.manual_seed(0)
    want = torch.rand(3)
    torch.manual_seed(0)
    loader = DataLoader(dgl_store, torch.arange(300), NeighborSampler([5]), batch_size=64, shuffle=True)
    for _ in range(2):
        list(loader)
    assert torch.equal(torch.rand(3), want)


def test_same_seed_same_samples(dgl_store: GraphStore) -> None:
    def run(seed: int) -> list:
        return _epoch(DataLoader(dgl_store, torch.arange(200), NeighborSampler([2, 3]), batch_size=50,
                                 seed=seed))

    assert run(3) == run(3) != run(4)


def test_dgl_sampling_rule(dgl_store: GraphStore) -> None:
    """Per layer (input first) min(fanout, in-degree) in-edges of every destination, drawn
    without repeats from its in-edges; each layer's destinations are all the sources of
    the layer after it (DGL's frontier); input_nodes / output_nodes as DGL's."""
    fanouts = [2, 5, 3]
    indptr, edge_id = np.asarray(dgl_store.indptr), np.asarray(dgl_store.edge_id)
    degree = np.diff(indptr)
    slot_of = np.empty_like(edge_id)
    slot_of[edge_id] = np.arange(edge_id.shape[0])
    loader = DataLoader(dgl_store, torch.arange(0, 600, 3), NeighborSampler(fanouts), batch_size=64)
    for input_nodes, output_nodes, blocks in loader:
        assert len(blocks) == 3
        assert torch.equal(input_nodes, blocks[0].srcdata[NID])
        assert torch.equal(output_nodes, blocks[-1].dstdata[NID])
        for inner, outer in zip(blocks[1:], blocks[:-1]):
            assert torch.equal(inner.srcdata[NID], outer.dstdata[NID])
        for block, fanout in zip(blocks, fanouts):
            dst = block.dstdata[NID].numpy()
            assert torch.equal(block.srcdata[NID][:block.num_dst_nodes()], block.dstdata[NID])
            assert np.array_equal(block.in_degrees().numpy(), np.minimum(degree[dst], fanout))
            src, dst_local, _ = block.edges(form="all")
            slots = slot_of[block.edata[EID].numpy()]          # the CSC slot of each sampled edge
            assert np.array_equal(np.asarray(dgl_store.indices)[slots], block.srcdata[NID][src].numpy())
            owner = np.searchsorted(indptr, slots, side="right") - 1
            assert np.array_equal(owner, dst[dst_local.numpy()])
            assert np.unique(slots).shape == slots.shape


def test_full_neighbor_sampler_takes_every_in_edge(dgl_store: GraphStore) -> None:
    indptr = np.asarray(dgl_store.indptr)
    loader = DataLoader(dgl_store, torch.tensor([7, 3, 900]), MultiLayerFullNeighborSampler(2, **SAMPLER),
                        batch_size=3)
    input_nodes, output_nodes, blocks = next(iter(loader))
    for block in blocks:
        dst = block.dstdata[NID].numpy()
        assert np.array_equal(block.in_degrees().numpy(), np.diff(indptr)[dst])
    assert torch.equal(blocks[0].srcdata["feat"], torch.from_numpy(dgl_store.features(input_nodes.numpy())))
    assert torch.equal(blocks[-1].dstdata["label"], torch.from_numpy(np.array(dgl_store.labels)[[7, 3, 900]]))
    assert output_nodes.tolist() == [7, 3, 900]


def test_data_on_blocks(dgl_store: GraphStore) -> None:
    loader = DataLoader(dgl_store, torch.arange(50), NeighborSampler([3, 3], **SAMPLER), batch_size=25)
    feat, labels = torch.from_numpy(np.array(dgl_store.features())), torch.from_numpy(np.array(dgl_store.labels))
    for input_nodes, output_nodes, blocks in loader:
        assert torch.equal(blocks[0].srcdata["feat"], feat[input_nodes])      # bit for bit
        assert torch.equal(blocks[-1].dstdata["label"], labels[output_nodes])
        assert "feat" not in blocks[-1].srcdata and "label" not in blocks[0].dstdata
    bare = next(iter(DataLoader(dgl_store, torch.arange(5), NeighborSampler([2]), batch_size=5)))[2][0]
    assert set(bare.srcdata) == {NID} and set(bare.dstdata) == {NID}


def test_refusals(dgl_store: GraphStore) -> None:
    with pytest.raises(ValueError, match="edge_dir"):
        NeighborSampler([2], edge_dir="out")
    with pytest.raises(ValueError, match="prob"):
        NeighborSampler([2], prob="w")
    with pytest.raises(ValueError, match="per edge type"):
        NeighborSampler([{"r": 2}])
    with pytest.raises(ValueError, match="num_layers"):
        MultiLayerFullNeighborSampler(0)
    with pytest.raises(ValueError, match="use_ddp"):
        DataLoader(dgl_store, torch.arange(5), NeighborSampler([2]), use_ddp=True)
    with pytest.raises(ValueError, match="heterogeneous"):
        DataLoader(dgl_store, {"paper": torch.arange(5)}, NeighborSampler([2]))
    with pytest.raises(ValueError, match="no node array 'year'"):
        DataLoader(dgl_store, torch.arange(5), NeighborSampler([2], prefetch_labels=["year"]))
    with pytest.raises(ValueError, match="collate_fn"):
        DataLoader(dgl_store, torch.arange(5), NeighborSampler([2]), collate_fn=list)
    with pytest.raises(ValueError, match="graph_sampler"):
        DataLoader(dgl_store, torch.arange(5), [2])
    with pytest.warns(UserWarning, match="pin_memory"):
        DataLoader(dgl_store, torch.arange(5), NeighborSampler([2]), pin_memory=True, num_workers=4)


def test_block_face() -> None:
    block = Block(torch.tensor([0, 2, 2, 3]), torch.tensor([3, 0, 1]), num_src=4, num_dst=3)
    block.srcdata["h"] = torch.arange(4.0)
    moved = block.to("cpu")
    assert moved.srcdata["h"].tolist() == [0.0, 1.0, 2.0, 3.0] and moved is not block
    assert block.in_degrees().tolist() == [2, 0, 1]
    assert [t.tolist() for t in block.edges(form="all")] == [[3, 0, 1], [0, 0, 2], [0, 1, 2]]
    indptr, _, eids = block.adj_tensors("csc")
    assert indptr.tolist() == [0, 2, 2, 3] and eids.tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="form"):
        block.edges(form="eid")
