"""Run in the DGL environment by tests/interop/test_dgl_graph.py: ``python dgl_graph_child.py
CHECK DIR``. Each check writes a ``dgl.DGLGraph`` with ``graphpipe.from_dgl`` under DIR,
compares the store with the graph (and DGL's own CSC) and prints ``ok``."""

from __future__ import annotations

import os
import sys

import dgl
import numpy as np
import torch

from graphpipe import from_dgl
from graphpipe.ingest.csc_builder import reference_csc
from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore


def sample_graph(n: int = 300, e: int = 2400) -> dgl.DGLGraph:
    gen = torch.Generator().manual_seed(5)
    g = dgl.graph((torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)),
                  num_nodes=n + 3)                      # 3 isolated nodes at the end
    n += 3
    mask = torch.zeros(n, dtype=torch.bool)
    mask[:100] = True
    g.ndata["feat"] = torch.randn(n, 6, generator=gen)
    g.ndata["label"] = torch.randint(0, 4, (n,), generator=gen)
    g.ndata["train_mask"], g.ndata["val_mask"] = mask, ~mask
    g.ndata["year"] = torch.arange(n) + 1990
    g.edata["feat"] = torch.randn(e, 3, generator=gen)
    g.edata["time"] = torch.arange(e) * 7
    return g


def check_store(folder: str) -> None:
    """CSC against graphpipe's reference and DGL's own, every feature, splits, arrays."""
    g = sample_graph()
    store = from_dgl(g, os.path.join(folder, "g"))
    src, dst = (t.numpy() for t in g.edges(order="eid"))
    indptr, indices, edge_id = reference_csc(src, dst, g.num_nodes())
    assert store.num_nodes == g.num_nodes() and store.num_edges == g.num_edges()
    assert np.array_equal(store.indptr, indptr) and np.array_equal(store.indices, indices)
    assert np.array_equal(store.edge_id, edge_id)
    dgl_indptr, dgl_indices, dgl_eids = (t.numpy() for t in g.adj_tensors("csc"))
    assert np.array_equal(store.indptr, dgl_indptr)
    for v in range(g.num_nodes()):                   # same in-edges per node as DGL's CSC
        lo, hi = dgl_indptr[v], dgl_indptr[v + 1]
        assert sorted(zip(dgl_eids[lo:hi], dgl_indices[lo:hi])) == \
            sorted(zip(store.edge_id[lo:hi], store.indices[lo:hi]))
    assert np.array_equal(store.features(np.arange(g.num_nodes())), g.ndata["feat"].numpy())
    assert np.array_equal(store.labels, g.ndata["label"].numpy())
    assert np.array_equal(store.edge_features, g.edata["feat"].numpy())
    assert np.array_equal(store.array("edge/time"), g.edata["time"].numpy())
    assert np.array_equal(store.array("node/year"), g.ndata["year"].numpy())
    assert np.array_equal(store.array("node/train_mask"), g.ndata["train_mask"].numpy())
    assert store.split("train").tolist() == list(range(100))
    assert store.split("valid").tolist() == list(range(100, g.num_nodes()))
    assert {k for k in store.manifest["arrays"] if k.startswith("edge/")} == {"edge/feat", "edge/time"}
    check_loader(g, store)


def check_loader(g: dgl.DGLGraph, store: GraphStore) -> None:
    """Blocks from the store: input features and edges (by EID) are the graph's."""
    loader = NeighborLoader(store, [4, 3], batch_size=64, input_nodes="train", output="dgl", seed=2)
    batches = 0
    for input_nodes, _, blocks in loader:
        assert torch.equal(blocks[0].srcdata["feat"], g.ndata["feat"][input_nodes])
        for block in blocks:
            u, v = block.edges()
            eid = block.edata[dgl.EID]
            gu, gv = g.find_edges(eid)
            assert torch.equal(block.srcdata[dgl.NID][u], gu) and torch.equal(block.dstdata[dgl.NID][v], gv)
        batches += 1
    assert batches == 2


def check_single_edge_feature(folder: str) -> None:
    """The only edge feature (not named feat) becomes edge/feat; no masks, no splits."""
    g = dgl.graph((torch.tensor([0, 1, 2, 2]), torch.tensor([1, 2, 0, 1])))
    g.edata["weight"] = torch.tensor([0.5, 1.5, 2.5, 3.5])
    store = from_dgl(g, os.path.join(folder, "w"))
    assert store.edge_features.shape == (4, 1)
    assert store.edge_features[:, 0].tolist() == [0.5, 1.5, 2.5, 3.5] and not store.has_array("edge/weight")
    assert store.split_names == [] and store.edge_id.tolist() == [2, 0, 3, 1]


def check_refusals(folder: str) -> None:
    """Heterogeneous graphs and non-graphs: a one-line ValueError, nothing written."""
    hetero = dgl.heterograph({("user", "follows", "user"): ([0], [1]),
                              ("user", "buys", "item"): ([0], [0])})
    for bad, words in ((hetero, "only homogeneous DGL graphs"), ({"edges": []}, "expected a dgl.DGLGraph")):
        try:
            from_dgl(bad, os.path.join(folder, "bad"))
        except ValueError as exc:
            assert words in str(exc) and "\n" not in str(exc), exc
        else:
            raise AssertionError(f"{type(bad).__name__} was accepted")
    assert not os.path.exists(os.path.join(folder, "bad"))


CHECKS = {"store": check_store, "single_edge_feature": check_single_edge_feature,
          "refusals": check_refusals}

if __name__ == "__main__":
    CHECKS[sys.argv[1]](sys.argv[2])
    print("ok")
