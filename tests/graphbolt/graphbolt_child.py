"""Run in the DGL environment by tests/graphbolt/test_against_graphbolt.py: ``python
graphbolt_child.py CHECK FOLDER STORE``: GraphBolt 2.1's pipeline on the store exported as
an on-disk dataset (FOLDER) against graphpipe.graphbolt's on the store. Prints ``ok``."""

from __future__ import annotations

import sys

import dgl
import dgl.graphbolt as dgb
import numpy as np
import torch

import graphpipe.graphbolt as ggb


def pipeline(gb, dataset, fanouts: list[int], items: str = "train_set"):
    item_set = getattr(dataset.tasks[0], items) if items != "all" else dataset.all_nodes_set
    pipe = gb.ItemSampler(item_set, batch_size=128, shuffle=False)
    pipe = pipe.sample_neighbor(dataset.graph, fanouts)
    pipe = pipe.fetch_feature(dataset.feature, node_feature_keys=["feat"]).copy_to("cpu")
    return gb.DataLoader(pipe, num_workers=0)


def global_edges(batch) -> list[list[tuple[int, int]]]:
    out = []
    for sub in batch.sampled_subgraphs:
        csc = sub.sampled_csc
        dst = torch.repeat_interleave(torch.arange(len(csc.indptr) - 1), csc.indptr.diff())
        rows, cols = sub.original_row_node_ids, sub.original_column_node_ids
        out.append(sorted(zip(rows[csc.indices.long()].tolist(), cols[dst].tolist())))
    return out


def check_full(folder: str, store: str) -> None:
    """Every in-neighbour: the same seeds, labels, input nodes (as sets), edges per layer
    and feature rows, batch by batch."""
    theirs = dgb.OnDiskDataset(folder).load()
    ours = ggb.OnDiskDataset(store).load()
    n = 0
    for items in ("train_set", "all"):
        for a, b in zip(pipeline(dgb, theirs, [-1, -1], items), pipeline(ggb, ours, [-1, -1], items), strict=True):
            assert torch.equal(a.seed_nodes, b.seed_nodes)
            assert (a.labels is None and b.labels is None) or torch.equal(a.labels, b.labels)
            assert sorted(a.input_nodes.tolist()) == sorted(b.input_nodes.tolist())
            assert global_edges(a) == global_edges(b)
            order_a, order_b = a.input_nodes.argsort(), b.input_nodes.argsort()
            assert torch.equal(a.node_features["feat"][order_a], b.node_features["feat"][order_b])
            n += 1
    assert n > 2
    print("ok")


def check_sampled(folder: str, store: str) -> None:
    """Fanouts [2, 4, 9]: min(fanout, in-degree) edges per destination and layer on both
    sides; real DGL blocks that a DGL layer takes."""
    theirs = dgb.OnDiskDataset(folder).load()
    ours = ggb.OnDiskDataset(store).load()
    indptr = ours.graph.indptr
    fanouts = [2, 4, 9]
    conv = dgl.nn.SAGEConv(ours.feature.size("node", None, "feat")[0], 3, "mean")
    for a, b in zip(pipeline(dgb, theirs, fanouts), pipeline(ggb, ours, fanouts), strict=True):
        assert torch.equal(a.seed_nodes, b.seed_nodes)
        for batch in (a, b):
            for sub, fanout in zip(batch.sampled_subgraphs, fanouts):
                dst = sub.original_column_node_ids.numpy()
                assert np.array_equal(sub.sampled_csc.indptr.diff().numpy(),
                                      np.minimum(np.diff(indptr)[dst], fanout))
        blocks = b.blocks
        assert all(isinstance(block, dgl.DGLGraph) and block.is_block for block in blocks)
        h = conv(blocks[0], b.node_features["feat"])
        assert h.shape == (blocks[0].num_dst_nodes(), 3)
    print("ok")


if __name__ == "__main__":
    {"full": check_full, "sampled": check_sampled}[sys.argv[1]](sys.argv[2], sys.argv[3])
