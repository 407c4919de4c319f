"""NeighborLoader's temporal sampling on typed graphs (PyG's time_attr on a HeteroData):
on one node type the typed path gives the homogeneous temporal loader's batches; with every
neighbour each tree's node set per type equals the plain-Python BFS over the valid edges
(PyG's semantics; PyG's own hetero temporal loader needs pyg-lib, not installed here); with
fanouts the batches are the typed temporal kernel on the loader's keys, no node or edge is
newer than its tree's seed, and features equal X[n_id]."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch_geometric.data import Data, HeteroData

from graphpipe.loaders import NeighborLoader
from graphpipe.ops.sampling import HeteroCSC
from graphpipe.ops.sampling.temporal_typed import sample_temporal_typed, typed_temporal_graph
from tests.ops.sampling.test_temporal_typed import NUM, RELS, reference_trees

ET = ("_N", "_E", "_N")


def hetero(level: str, seed: int = 0) -> HeteroData:
    """A three-type HeteroData with ``time`` on every node type (``level="node"``) or
    relation (``"edge"``)."""
    rng = np.random.default_rng(seed)
    data = HeteroData()
    for t, n in NUM.items():
        data[t].x = torch.from_numpy(rng.standard_normal((n, 3)).astype(np.float32))
        if level == "node":
            data[t].time = torch.from_numpy(rng.integers(0, 20, n))
    for s, r, d in RELS:
        data[s, r, d].edge_index = torch.from_numpy(np.stack([rng.integers(0, NUM[s], 90), rng.integers(0, NUM[d], 90)]))
        if level == "edge":
            data[s, r, d].time = torch.from_numpy(rng.integers(0, 20, 90))
    return data


def _graph_of(data: HeteroData) -> tuple[HeteroCSC, dict | None, dict | None]:
    """The oracle's view: CSC per relation (sources ascending per row) and times in CSC order."""
    csc, edge_time = {}, {}
    for et in RELS:
        src, dst = data[et].edge_index.numpy()
        order = np.lexsort((src, dst))
        indptr = np.zeros(NUM[et[2]] + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=NUM[et[2]]), out=indptr[1:])
        csc[et] = (indptr, src[order])
        if "time" in data[et]:
            edge_time[et] = data[et].time.numpy()[order]
    node_time = {t: data[t].time.numpy() for t in NUM if "time" in data[t]}
    return HeteroCSC.from_arrays(NUM, csc), node_time or None, edge_time or None


@pytest.mark.parametrize("level", ["edge", "node"])
def test_every_neighbour_gives_the_reference_node_sets(level):
    data = hetero(level)
    rng = np.random.default_rng(1)
    seeds, when = rng.integers(0, NUM["paper"], 12), rng.integers(0, 20, 12)
    loader = NeighborLoader(data, [-1, -1], input_nodes=("paper", torch.from_numpy(seeds)), batch_size=5,
                            time_attr="time", input_time=torch.from_numpy(when), seed=2)
    graph, node_time, edge_time = _graph_of(data)
    want = reference_trees(graph, seeds, when, 2, node_time=node_time, edge_time=edge_time)
    done = 0
    for batch in loader:
        pos = batch.input_id.numpy()
        assert torch.equal(batch["paper"].seed_time, torch.from_numpy(when[pos]))
        for k, p in enumerate(pos):
            for t in NUM:
                assert set(batch.n_id[t][batch[t].batch == k].tolist()) == want[p][t], (p, t)
        for t in NUM:
            assert torch.equal(batch.x[t], data[t].x[batch.n_id[t]])
        done += len(pos)
    assert done == 12


@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_batches_are_the_typed_kernel_and_never_newer_than_the_seed(strategy):
    data = hetero("node", seed=3)
    loader = NeighborLoader(data, [3, 2], input_nodes=("paper", torch.arange(NUM["paper"])), batch_size=8,
                            time_attr="time", temporal_strategy=strategy, shuffle=True, seed=4, prefetch=2)
    graph, node_time, _ = _graph_of(data)
    tg = typed_temporal_graph(graph, node_time=node_time)
    keys, positions = loader.batch_keys(0, len(loader)), loader.epoch_positions(0)
    for batch, key, pos in zip(loader, keys, positions, strict=True):
        seeds = np.asarray(pos)   # input_nodes = arange: positions are the node IDs
        want = sample_temporal_typed(tg, {"paper": seeds}, node_time["paper"][seeds], [3, 2],
                                     strategy=strategy, seed=key)
        assert torch.equal(batch.input_id, torch.from_numpy(seeds))
        seed_time = batch["paper"].seed_time
        assert torch.equal(seed_time, torch.from_numpy(node_time["paper"][seeds]))
        for t in NUM:
            assert torch.equal(batch.n_id[t], torch.from_numpy(want.n_id[t]))
            assert torch.equal(batch[t].batch, torch.from_numpy(want.batch[t]))
            newest = torch.from_numpy(node_time[t])[batch.n_id[t][batch.num_sampled_nodes[t][0]:]]
            assert bool((newest <= seed_time[batch[t].batch[batch.num_sampled_nodes[t][0]:]]).all())
        for et in RELS:
            assert torch.equal(batch.edge_index[et][0], torch.from_numpy(want.row[et]))
            assert torch.equal(batch.edge_index[et][1], torch.from_numpy(want.col[et]))


def test_one_type_typed_path_gives_the_homogeneous_temporal_batches():
    rng = np.random.default_rng(5)
    edge_index = torch.from_numpy(rng.integers(0, 50, (2, 400)))
    x, when = torch.randn(50, 3), torch.from_numpy(rng.integers(0, 30, 400))
    plain = Data(x=x, edge_index=edge_index, stamp=when, num_nodes=50)
    typed = HeteroData()
    typed["_N"].x = x
    typed[ET].edge_index, typed[ET].stamp = edge_index, when
    nodes, times = torch.from_numpy(rng.integers(0, 50, 20)), torch.from_numpy(rng.integers(0, 30, 20))
    kw = {"input_time": times, "time_attr": "stamp", "batch_size": 6, "seed": 7, "prefetch": 0}
    a = list(NeighborLoader(plain, [3, 2], input_nodes=nodes, **kw))
    b = list(NeighborLoader(typed, [3, 2], input_nodes=("_N", nodes), **kw))
    assert len(a) == len(b) == 4
    for p, q in zip(a, b):
        assert torch.equal(p.n_id, q.n_id["_N"]) and torch.equal(p.batch, q["_N"].batch)
        assert torch.equal(p.input_id, q.input_id) and torch.equal(p.seed_time, q["_N"].seed_time)
        assert torch.equal(p.e_id, q.e_id[ET]) and torch.equal(p.x, q.x["_N"])


def test_typed_temporal_refusals_are_one_line():
    data = hetero("edge")
    with pytest.raises(ValueError, match="needs 'input_time'"):   # edge times only: seeds need times
        NeighborLoader(data, [2], input_nodes="paper", time_attr="time")
    with pytest.raises(ValueError, match="neither a node-level nor an edge-level"):
        NeighborLoader(data, [2], input_nodes="paper", time_attr="when")
    with pytest.raises(ValueError, match="input_time"):
        NeighborLoader(data, [2], input_nodes="paper", time_attr="time", input_time=torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="temporal sampling yields MiniBatches"):
        NeighborLoader(data, [2], input_nodes="paper", time_attr="time", output="dgl")


@pytest.mark.parametrize("level", ["edge", "node"])
def test_typed_store_gives_the_hetero_data_batches(tmp_path, level):
    """A typed store's typed/<ntype>/time or rel/<etype>/time (time_attr='time') samples
    as the HeteroData it was written from."""
    from graphpipe.store.writer import TypedStoreWriter

    data = hetero(level, seed=6)
    with TypedStoreWriter(tmp_path / "s", NUM, target_type="paper") as w:
        for et in RELS:
            src, dst = data[et].edge_index.numpy()
            w.add_relation(et, src, dst, **({"time": data[et].time.numpy()} if level == "edge" else {}))
        for t in NUM:
            w.write_node_array(t, "feat", data[t].x.numpy())
            if level == "node":
                w.write_node_array(t, "time", data[t].time.numpy())
        path = w.commit()
    nodes, when = torch.arange(0, 30, 2), torch.arange(15) + 3
    kw = {"input_nodes": ("paper", nodes), "input_time": when, "time_attr": "time", "batch_size": 4, "seed": 1}
    ours, theirs = list(NeighborLoader(path, [3, 2], **kw)), list(NeighborLoader(data, [3, 2], **kw))
    assert len(ours) == len(theirs) == 4
    for a, b in zip(ours, theirs):
        for t in NUM:
            assert torch.equal(a.n_id[t], b.n_id[t]) and torch.equal(a.x[t], b.x[t])
            assert torch.equal(a[t].batch, b[t].batch)
        assert torch.equal(a.input_id, b.input_id) and torch.equal(a["paper"].seed_time, when[a.input_id])
    with pytest.raises(ValueError, match="no node timestamps" if level == "edge" else "no edge timestamps"):
        NeighborLoader(path, [2], **{**kw, "time_attr": "node_time" if level == "edge" else "edge_time"})
