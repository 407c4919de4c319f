"""Typed temporal sampling (graphpipe.ops.sampling.temporal_typed): on one node type it is
the homogeneous temporal sampler, sample for sample; with every neighbour (fanout -1) each
tree's node set per type equals a plain-Python BFS over the valid edges (PyG's semantics:
an edge is kept only if no newer than its tree's seed time); with fanouts, no sampled edge
is newer than its tree's seed, every edge is a real one, and no row takes more than its fanout."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.sampling import HeteroCSC
from graphpipe.ops.sampling.temporal import sample_temporal, temporal_graph
from graphpipe.ops.sampling.temporal_typed import (
    sample_temporal_typed,
    sample_temporal_typed_batches,
    typed_temporal_graph,
)

ET = ("_N", "_E", "_N")
NUM = {"paper": 30, "author": 20, "inst": 6}
RELS = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
        ("inst", "employs", "author")]


def _csc(rng, num_src: int, num_dst: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    dst = np.sort(rng.integers(0, num_dst, e))
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, rng.integers(0, num_src, e).astype(np.int32)


def typed_graph(seed: int = 0):
    """``(HeteroCSC, node times, edge times)`` of a small three-type graph."""
    rng = np.random.default_rng(seed)
    csc = {et: _csc(rng, NUM[et[0]], NUM[et[2]], 90) for et in RELS}
    graph = HeteroCSC.from_arrays(NUM, csc)
    node_time = {t: rng.integers(0, 20, n) for t, n in NUM.items()}
    edge_time = {et: rng.integers(0, 20, csc[et][1].shape[0]) for et in RELS}
    return graph, node_time, edge_time


@pytest.mark.parametrize("level", ["edge", "node"])
@pytest.mark.parametrize("strategy, replace, fanouts", [("uniform", False, [3, 2]), ("uniform", True, [2, 2]),
                                                        ("last", False, [2, -1])])
def test_one_type_is_the_homogeneous_temporal_sample(level, strategy, replace, fanouts):
    rng = np.random.default_rng(1)
    indptr, indices = _csc(rng, 40, 40, 300)
    times = {"edge_time": rng.integers(0, 30, 300)} if level == "edge" else {"node_time": rng.integers(0, 30, 40)}
    seeds, when = rng.integers(0, 40, 12), rng.integers(0, 30, 12)
    want = sample_temporal(temporal_graph(indptr, indices, **times), seeds, when, fanouts, strategy=strategy,
                           replace=replace, seed=9)
    graph = HeteroCSC.homogeneous(indptr, indices)
    typed = typed_temporal_graph(graph, **{k: {ET if level == "edge" else "_N": v} for k, v in times.items()})
    got = sample_temporal_typed(typed, {"_N": seeds}, when, fanouts, strategy=strategy, replace=replace, seed=9)
    assert np.array_equal(got.n_id["_N"], want.n_id) and np.array_equal(got.batch["_N"], want.batch)
    assert got.num_sampled_nodes["_N"] == want.num_sampled_nodes
    assert got.num_sampled_edges[ET] == want.num_sampled_edges
    hops = want.blocks[::-1]
    assert np.array_equal(got.row[ET], np.concatenate([b.indices for b in hops]))
    assert np.array_equal(got.col[ET], np.concatenate([b.dst_of_edges() for b in hops]))
    assert np.array_equal(got.edge_ids[ET], np.concatenate([b.edge_ids for b in hops]))


def _edge_valid(graph, node_time, edge_time, et, slot: int, t_seed: int) -> bool:
    if edge_time is not None:
        return edge_time[et][slot] <= t_seed
    return node_time[et[0]][graph.csc[et][1][slot]] <= t_seed


def reference_trees(graph, seeds, when, hops: int, node_time=None, edge_time=None) -> list[dict]:
    """Every tree's ``{ntype: set of node IDs}`` with every valid neighbour, hop by hop
    (frontier: the nodes of each type the hop before reached first)."""
    trees = []
    for s, t_seed in zip(seeds, when):
        seen = {t: set() for t in graph.num_nodes}
        seen["paper"].add(int(s))
        frontier = {t: set(v) for t, v in seen.items()}
        for _ in range(hops):
            new = {t: set() for t in graph.num_nodes}
            for et in graph.edge_types:
                indptr, indices = graph.csc[et]
                for v in frontier[et[2]]:
                    for slot in range(indptr[v], indptr[v + 1]):
                        u = int(indices[slot])
                        if _edge_valid(graph, node_time, edge_time, et, slot, t_seed) and u not in seen[et[0]]:
                            new[et[0]].add(u)
            for t, reached in new.items():
                seen[t] |= reached
            frontier = new
        trees.append(seen)
    return trees


@pytest.mark.parametrize("level", ["edge", "node"])
def test_every_neighbour_gives_the_reference_node_sets(level):
    graph, node_time, edge_time = typed_graph()
    times = {"edge_time": edge_time} if level == "edge" else {"node_time": node_time}
    rng = np.random.default_rng(2)
    seeds, when = rng.integers(0, NUM["paper"], 8), rng.integers(0, 20, 8)
    out = sample_temporal_typed(typed_temporal_graph(graph, **times), {"paper": seeds}, when, [-1, -1], seed=3)
    want = reference_trees(graph, seeds, when, 2, **times)
    for i, tree in enumerate(want):
        for t in NUM:
            mine = out.n_id[t][out.batch[t] == i]
            assert len(set(mine.tolist())) == mine.shape[0]          # once per tree
            assert set(mine.tolist()) == tree[t], (i, t)
    assert any(len(tree["inst"]) for tree in want)                  # three hops of types reached


@pytest.mark.parametrize("strategy", ["uniform", "last"])
def test_fanouts_sample_only_valid_real_edges(strategy):
    graph, _, edge_time = typed_graph(4)
    tg = typed_temporal_graph(graph, edge_time=edge_time)
    rng = np.random.default_rng(5)
    seeds, when = rng.integers(0, NUM["paper"], 16), rng.integers(0, 20, 16)
    fanouts = [3, 2]
    out = sample_temporal_typed(tg, {"paper": seeds}, when, fanouts, strategy=strategy, seed=1)
    assert np.array_equal(out.n_id["paper"][:16], seeds)
    total = 0
    for et in RELS:
        indptr, indices = graph.csc[et]
        src, dst, slot = out.row[et], out.col[et], out.edge_ids[et]
        tree = out.batch[et[2]][dst]
        assert np.array_equal(out.batch[et[0]][src], tree)                    # same tree both ends
        assert np.array_equal(indices[slot], out.n_id[et[0]][src])             # a real edge
        assert np.all((slot >= indptr[out.n_id[et[2]][dst]]) & (slot < indptr[out.n_id[et[2]][dst] + 1]))
        assert np.all(edge_time[et][slot] <= when[tree])                       # never newer than its seed
        _, per_row = np.unique(dst, return_counts=True)
        assert per_row.max(initial=0) <= max(fanouts)
        total += slot.shape[0]
    assert total > 40
    if strategy == "last":   # the most recent valid edges of each row
        et = RELS[1]
        for d in np.unique(out.col[et][:out.num_sampled_edges[et][0]]):
            v, t_seed = out.n_id["paper"][d], when[out.batch["paper"][d]]
            lo, hi = graph.csc[et][0][v], graph.csc[et][0][v + 1]
            valid = sorted(edge_time[et][lo:hi][edge_time[et][lo:hi] <= t_seed].tolist())
            mine = sorted(edge_time[et][out.edge_ids[et][out.col[et] == d]].tolist())
            assert mine == valid[-len(mine):] and len(mine) == min(3, len(valid))


def test_window_equals_one_batch_calls_and_relations_without_times_are_kept():
    graph, node_time, _ = typed_graph(6)
    tg = typed_temporal_graph(graph, node_time={"paper": node_time["paper"]})   # authors, insts: no time
    batches = [{"paper": np.array([1, 2, 2])}, {"paper": np.array([5])}]
    times = [np.array([0, 3, 19]), np.array([7])]
    outs = sample_temporal_typed_batches(tg, batches, times, [2, 2], keys=[4, 8], num_threads=2)
    for o, b, t, k in zip(outs, batches, times, [4, 8]):
        one = sample_temporal_typed(tg, b, t, [2, 2], seed=k)
        assert all(np.array_equal(o.n_id[n], one.n_id[n]) for n in NUM)
    full = sample_temporal_typed(tg, {"paper": [1]}, [-1], [-1])
    assert full.n_id["paper"].tolist() == [1]              # papers all newer than time -1
    indptr, indices = graph.csc[RELS[1]]                   # authors have no time: all kept
    assert sorted(full.n_id["author"].tolist()) == sorted(set(indices[indptr[1]:indptr[2]].tolist()))
    assert full.n_id["author"].shape[0] > 0


def test_bad_arguments_are_one_line_errors():
    graph, node_time, _ = typed_graph()
    tg = typed_temporal_graph(graph, node_time=node_time)
    with pytest.raises(ValueError, match="one known node type"):
        sample_temporal_typed(tg, {"paper": [0], "author": [0]}, [0], [1])
    with pytest.raises(ValueError, match="seed_time"):
        sample_temporal_typed(tg, {"paper": [0, 1]}, [0], [1])
    with pytest.raises(ValueError, match="node IDs"):
        sample_temporal_typed(tg, {"paper": [30]}, [0], [1])
    with pytest.raises(ValueError, match="unknown node types"):
        typed_temporal_graph(graph, node_time={"venue": np.zeros(3, np.int64)})
    with pytest.raises(ValueError, match="node times or edge times"):
        typed_temporal_graph(graph)
