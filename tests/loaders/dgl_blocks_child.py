"""Run in the DGL environment by tests/loaders/test_dgl_blocks.py: ``python dgl_blocks_child.py
CHECK STORE``. Each check compares graphpipe's DGL output with DGL itself and prints ``ok``."""

from __future__ import annotations

import sys

import dgl
import dgl.nn as dglnn
import numpy as np
import torch

from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore

DGL_FANOUTS = [2, 4, 9]  # DGL's order: input layer first, the seeds get 9


def _dgl_graph(store: GraphStore) -> dgl.DGLGraph:
    """The store's graph in DGL, edges in their original order (edge ID = store edge_id)."""
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices, dtype=np.int64)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    order = np.argsort(np.asarray(store.edge_id), kind="stable")
    return dgl.graph((torch.from_numpy(indices[order]), torch.from_numpy(dst[order])),
                     num_nodes=store.num_nodes)


def check_blocks(store: GraphStore) -> None:
    """Blocks: shapes, edges, NID/EID, features, labels, and a DGL layer on them."""
    g = _dgl_graph(store)
    loader = NeighborLoader(store, DGL_FANOUTS, batch_size=64, fanout_order="dgl", output="dgl", seed=3)
    feat = torch.from_numpy(store.features())
    labels = torch.from_numpy(np.asarray(store.labels))
    conv = dglnn.SAGEConv(feat.shape[1], 5, "mean")
    batches = 0
    for input_nodes, output_nodes, blocks in loader:
        assert len(blocks) == 3 and all(isinstance(b, dgl.DGLGraph) and b.is_block for b in blocks)
        assert torch.equal(input_nodes, blocks[0].srcdata[dgl.NID])
        assert torch.equal(output_nodes, blocks[-1].dstdata[dgl.NID])
        for inner, outer in zip(blocks[1:], blocks[:-1]):
            assert torch.equal(inner.srcdata[dgl.NID], outer.dstdata[dgl.NID])
        for block in blocks:
            src, dst, eid = block.edges(form="all")
            gsrc = block.srcdata[dgl.NID][src]
            gdst = block.dstdata[dgl.NID][dst]
            ge = block.edata[dgl.EID][eid]
            assert torch.equal(g.find_edges(ge)[0], gsrc) and torch.equal(g.find_edges(ge)[1], gdst)
        assert torch.equal(blocks[0].srcdata["feat"], feat[input_nodes])
        assert torch.equal(blocks[-1].dstdata["label"], labels[output_nodes])
        block = blocks[-1]
        h_src = feat[block.srcdata[dgl.NID]]
        want = conv(dgl.block_to_graph(block), (h_src, h_src[:block.num_dst_nodes()]))
        assert torch.allclose(conv(block, h_src), want, atol=1e-6)
        batches += 1
    assert batches == len(loader)
    print("ok")


def _in_degrees_by_layer(blocks: list) -> list[dict[int, int]]:
    """Per block, input layer first: global destination ID -> sampled in-degree."""
    return [dict(zip(b.dstdata[dgl.NID].tolist(), b.in_degrees().tolist())) for b in blocks]


def check_fanout_order(store: GraphStore) -> None:
    """The same DGL fanout list samples the same number of neighbours per layer in DGL's
    NeighborSampler and in graphpipe with fanout_order="dgl" (min(fanout, in-degree))."""
    g = _dgl_graph(store)
    degree = np.diff(np.asarray(store.indptr))
    seeds = torch.from_numpy(store.split("train")[:200])
    _, _, dgl_blocks = dgl.dataloading.NeighborSampler(DGL_FANOUTS).sample_blocks(g, seeds)
    ours = NeighborLoader(store, DGL_FANOUTS, batch_size=len(seeds), input_nodes=seeds, shuffle=False,
                          fanout_order="dgl", output="dgl", seed=0)
    _, _, gp_blocks = next(iter(ours))
    for layer, (theirs, mine) in enumerate(zip(_in_degrees_by_layer(dgl_blocks),
                                               _in_degrees_by_layer(gp_blocks))):
        fanout = DGL_FANOUTS[layer]
        for blocks_degrees in (theirs, mine):
            for node, sampled in blocks_degrees.items():
                assert sampled == min(fanout, int(degree[node])), (layer, node, sampled)
    assert set(_in_degrees_by_layer(dgl_blocks)[-1]) == set(_in_degrees_by_layer(gp_blocks)[-1])
    print("ok")


if __name__ == "__main__":
    {"blocks": check_blocks, "fanout_order": check_fanout_order}[sys.argv[1]](
        GraphStore.open(sys.argv[2]))
