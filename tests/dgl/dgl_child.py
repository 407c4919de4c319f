"""Run in the DGL environment by tests/dgl/test_against_dgl.py: ``python dgl_child.py CHECK
STORE``. Each check compares graphpipe.dgl with DGL 2.1's own dgl.dataloading on the same
graph (a DGLGraph whose edge IDs are the store's edge order) and prints ``ok``."""

from __future__ import annotations

import sys

import dgl
import dgl.dataloading as dd
import numpy as np
import torch

import graphpipe.dgl as gd
from graphpipe.store import GraphStore

PREFETCH = {"prefetch_node_feats": ["feat"], "prefetch_labels": ["label"]}


def dgl_graph(store: GraphStore) -> dgl.DGLGraph:
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices, dtype=np.int64)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    order = np.argsort(np.asarray(store.edge_id), kind="stable")
    g = dgl.graph((torch.from_numpy(indices[order]), torch.from_numpy(dst[order])), num_nodes=store.num_nodes)
    g.ndata["feat"] = torch.from_numpy(np.array(store.features()))
    g.ndata["label"] = torch.from_numpy(np.array(store.labels))
    return g


def edge_set(block) -> list[tuple[int, int, int]]:
    src, dst, eid = block.edges(form="all")
    return sorted(zip(block.srcdata[dgl.NID][src].tolist(), block.dstdata[dgl.NID][dst].tolist(),
                      block.edata[dgl.EID][eid].tolist()))


def epoch(loader) -> list:
    return [(o.tolist(), sorted(i.tolist()), [edge_set(b) for b in blocks]) for i, o, blocks in loader]


def check_full(store: GraphStore) -> None:
    """MultiLayerFullNeighborSampler: the same batches as DGL's DataLoader, epoch after
    epoch under np.random.seed (shuffle), over a DGLGraph and over the store."""
    g = dgl_graph(store)
    seeds = torch.from_numpy(store.split("train"))
    for shuffle in (False, True):
        runs = []
        for module, graph in ((dd, g), (gd, g), (gd, store)):
            np.random.seed(7)
            loader = module.DataLoader(graph, seeds, module.MultiLayerFullNeighborSampler(2, **PREFETCH),
                                       batch_size=96, shuffle=shuffle, drop_last=False, num_workers=0)
            runs.append([epoch(loader) for _ in range(2)])
        assert runs[0] == runs[1] == runs[2], shuffle
    print("ok")


def degrees(blocks) -> list[dict[int, int]]:
    return [dict(zip(b.dstdata[dgl.NID].tolist(), b.in_degrees().tolist())) for b in blocks]


def check_sampled(store: GraphStore) -> None:
    """NeighborSampler([2, 4, 9]): the same seeds per batch, min(fanout, in-degree) edges
    per destination and layer on both sides, sampled edges are edges of g, the data as
    DGL attaches it, and a DGL layer runs on the blocks."""
    g = dgl_graph(store)
    fanouts, degree = [2, 4, 9], g.in_degrees()
    seeds = torch.from_numpy(store.split("train")[:400])
    theirs = dd.DataLoader(g, seeds, dd.NeighborSampler(fanouts, **PREFETCH), batch_size=128)
    ours = gd.DataLoader(g, seeds, gd.NeighborSampler(fanouts, **PREFETCH), batch_size=128)
    conv = dgl.nn.SAGEConv(g.ndata["feat"].shape[1], 4, "mean")
    for (_, o1, b1), (i2, o2, b2) in zip(theirs, ours):
        assert torch.equal(o1, o2)
        for blocks in (b1, b2):
            for layer, per_dst in enumerate(degrees(blocks)):
                for node, sampled in per_dst.items():
                    assert sampled == min(fanouts[layer], int(degree[node])), (layer, node)
        for block in b2:
            assert isinstance(block, dgl.DGLGraph) and block.is_block
            src, dst, eid = block.edges(form="all")
            gsrc, gdst = g.find_edges(block.edata[dgl.EID][eid])
            assert torch.equal(gsrc, block.srcdata[dgl.NID][src]) and torch.equal(gdst, block.dstdata[dgl.NID][dst])
        assert torch.equal(b2[0].srcdata["feat"], g.ndata["feat"][i2])
        assert torch.equal(b2[-1].dstdata["label"], g.ndata["label"][o2])
        h = b2[-1].srcdata[dgl.NID]
        assert conv(b2[-1], g.ndata["feat"][h]).shape == (len(o2), 4)
    print("ok")


if __name__ == "__main__":
    {"full": check_full, "sampled": check_sampled}[sys.argv[1]](GraphStore.open(sys.argv[2]))
