"""Loader options on typed graphs. The oracle: on one node type the typed path (typed
batches) gives what the homogeneous path gives, option by option; the graph is the same
:class:`GraphData` with ``is_typed`` flipped (type ``_N``, relation ``(_N, _E, _N)``)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from graphpipe.loaders import GraphData, NeighborLoader
from graphpipe.loaders.from_sample import BatchAttrs
from graphpipe.loaders.graph_data import coo_to_csc
from graphpipe.loaders.shard import PartitionShard, SeedShard
from graphpipe.ops.sampling.keys import tree_key

ET = ("_N", "_E", "_N")


def one_type_graphs(n: int = 80, e: int = 600) -> tuple[GraphData, GraphData]:
    """``(homogeneous, typed)``: one graph, two faces."""
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    indptr, indices, order = coo_to_csc(src, dst, n, n, "edges")
    homo = GraphData.homogeneous(indptr, indices, x=rng.standard_normal((n, 4)).astype(np.float32),
                                 y=rng.integers(0, 3, n), attrs=BatchAttrs(edge_order=order, num_input_edges=e))
    return homo, dataclasses.replace(homo, is_typed=True)


def assert_same_batches(plain: list, typed: list, edge_order: np.ndarray, options: dict) -> None:
    """Same nodes, rows, labels, input IDs and DGL-style blocks (a block's edge IDs: the
    input edge positions, ``edge_order`` of the homogeneous CSC slots); the same PyG edges
    unless ``frontier="all"`` (a MiniBatch's ``edge_index`` keeps only the edges into
    each hop's new nodes, PyG's; a typed batch's every sampled edge)."""
    assert len(plain) == len(typed) > 2
    for p, q in zip(plain, typed):
        assert torch.equal(p.n_id, q.n_id["_N"]) and torch.equal(p.input_id, q.input_id)
        assert torch.equal(p.x, q.x["_N"]) and torch.equal(p.y, q.y)
        assert p.num_sampled_nodes == q.num_sampled_nodes["_N"]
        for a, b in zip(p.blocks, q.blocks(), strict=True):
            b = b[ET]
            assert (a.num_dst, a.num_src) == (b.num_dst, b.num_src)
            assert torch.equal(a.indptr, b.indptr) and torch.equal(a.indices, b.indices)
            assert np.array_equal(edge_order[a.edge_ids.numpy()], b.edge_ids.numpy())
        if options.get("frontier") != "all":
            assert torch.equal(p.edge_index, q.edge_index[ET]) and torch.equal(p.e_id, q.e_id[ET])
            assert p.num_sampled_edges == q.num_sampled_edges[ET]
        if options.get("disjoint"):
            assert torch.equal(p.batch, q["_N"].batch)


@pytest.mark.parametrize("options", [
    {},
    {"shuffle": True, "match_reorder": True, "reorder_by": "match"},
    {"shuffle": True, "match_reorder": True, "reorder_by": "overlap"},
    {"disjoint": True},
    {"disjoint": True, "shuffle": True, "frontier": "all"},
    {"frontier": "all", "fanout_order": "dgl"},
    {"shard": SeedShard(1, 3), "shuffle": True},
    {"shard": PartitionShard(np.arange(80) % 4, 0, 2, drop_last=True), "shuffle": True,
     "ids": np.arange(3, 70)},
], ids=["defaults", "reorder-match", "reorder-overlap", "disjoint", "disjoint-all", "dgl-order",
        "seed-shard", "partition-shard"])
def test_one_type_typed_path_gives_the_homogeneous_batches(options):
    homo, typed = one_type_graphs()
    options = dict(options)
    ids = options.pop("ids", None)   # input nodes: the IDs on one relation, ("_N", IDs) typed
    kw = {"batch_size": 7, "window": 5, "seed": 3, "prefetch": 0, **options}
    plain = list(NeighborLoader(homo, [4, 3], input_nodes=ids, **kw))
    typed_batches = list(NeighborLoader(typed, [4, 3], input_nodes=None if ids is None else ("_N", ids), **kw))
    assert_same_batches(plain, typed_batches, homo.attrs.edge_order, options)
    if options.get("reorder_by"):   # Reorder did permute the window: the oracle saw it
        assert [int(b.input_id[0]) for b in plain] != sorted(int(b.input_id[0]) for b in plain)


def test_typed_reorder_default_keeps_the_byte_overlap_order():
    """reorder_by left at None keeps each path's former order: 'match' on one type,
    byte-weighted 'overlap' on a typed graph."""
    homo, typed = one_type_graphs()
    kw = {"batch_size": 5, "window": 8, "seed": 1, "prefetch": 0, "shuffle": True, "match_reorder": True}
    default = [b.input_id.tolist() for b in NeighborLoader(typed, [3, 2], **kw)]
    assert default == [b.input_id.tolist() for b in NeighborLoader(typed, [3, 2], reorder_by="overlap", **kw)]
    assert [b.input_id.tolist() for b in NeighborLoader(homo, [3, 2], **kw)] == [
        b.input_id.tolist() for b in NeighborLoader(homo, [3, 2], reorder_by="match", **kw)]
    with pytest.raises(ValueError, match="'reorder_by' must be 'match' or 'overlap'"):
        NeighborLoader(typed, [3, 2], reorder_by="bytes")


def test_disjoint_trees_on_several_types():
    """One tree per seed on a typed graph: every edge joins two nodes of one tree, every
    sampled edge is an edge of the graph, and tree k is the one-seed sample of seed k."""
    rng = np.random.default_rng(5)
    counts = {"paper": 40, "author": 25}
    edges = {("author", "writes", "paper"): (rng.integers(0, 25, 120), rng.integers(0, 40, 120)),
             ("paper", "cites", "paper"): (rng.integers(0, 40, 150), rng.integers(0, 40, 150)),
             ("paper", "rev_writes", "author"): (rng.integers(0, 40, 120), rng.integers(0, 25, 120))}
    data = GraphData.from_dicts(counts, edges, x={"paper": rng.standard_normal((40, 3)).astype(np.float32)})
    kw = {"input_nodes": "paper", "batch_size": 6, "seed": 4, "prefetch": 0}
    batches = list(NeighborLoader(data, [3, 2], disjoint=True, **kw))
    loader = NeighborLoader(data, [3, 2], **kw)
    keys = loader.batch_keys(0, len(batches))
    for batch, key in zip(batches, keys):
        tree = {t: batch[t].batch for t in counts}
        assert tree["paper"][:batch.batch_size].tolist() == list(range(batch.batch_size))
        for et, ei in batch.edge_index.items():
            assert torch.equal(tree[et[0]][ei[0]], tree[et[2]][ei[1]])
            src, dst = batch.n_id[et[0]][ei[0]].numpy(), batch.n_id[et[2]][ei[1]].numpy()
            given = set(zip(*(np.asarray(a).tolist() for a in edges[et])))
            assert set(zip(src.tolist(), dst.tolist())) <= given
            assert np.array_equal(np.stack(edges[et])[:, batch.e_id[et].numpy()], np.stack([src, dst]))
        for k, seed in enumerate(batch.seeds.tolist()):   # tree k = seed k sampled alone
            single = loader._sample_typed([{"paper": np.array([seed])}], [tree_key(key, k)])[0]
            for t in counts:
                assert batch.n_id[t][tree[t] == k].tolist() == single.n_id[t].tolist()
        assert torch.equal(batch.x["paper"], torch.from_numpy(data.features["paper"])[batch.n_id["paper"]])


DGL_SCRIPT = r"""
import dataclasses, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, torch, dgl
from test_typed_options import one_type_graphs
from graphpipe.loaders import NeighborLoader
homo, typed = one_type_graphs()
kw = dict(batch_size=7, seed=3, prefetch=0, output="dgl")
for (pin, pout, pblocks), (tin, tout, tblocks) in zip(NeighborLoader(homo, [4, 3], **kw),
                                                      NeighborLoader(typed, [4, 3], **kw)):
    assert torch.equal(pin, tin["_N"]) and torch.equal(pout, tout["_N"]) and len(pblocks) == len(tblocks)
    for a, b in zip(pblocks, tblocks):
        assert (a.num_src_nodes(), a.num_dst_nodes()) == (b.num_src_nodes("_N"), b.num_dst_nodes("_N"))
        assert all(torch.equal(u, v) for u, v in zip(a.edges(order="eid"), b.edges(order="eid", etype=("_N", "_E", "_N"))))
        assert torch.equal(a.srcdata[dgl.NID], b.srcnodes["_N"].data[dgl.NID])
        assert torch.equal(a.dstdata[dgl.NID], b.dstnodes["_N"].data[dgl.NID])
        assert torch.equal(a.edata[dgl.EID], b.edges[("_N", "_E", "_N")].data[dgl.EID])
    assert torch.equal(pblocks[0].srcdata["feat"], tblocks[0].srcnodes["_N"].data["feat"])
    assert torch.equal(pblocks[-1].dstdata["label"], tblocks[-1].dstnodes["_N"].data["label"])
print("same blocks")
"""


def test_typed_dgl_blocks_are_the_homogeneous_ones(numpy1_env):
    """output="dgl" on a typed graph: typed DGLBlocks; on one type the same blocks, IDs and
    data as the homogeneous output (runs where DGL is installed: the NumPy-1 environment)."""
    import pathlib

    assert "same blocks" in numpy1_env(DGL_SCRIPT, str(pathlib.Path(__file__).parent))
