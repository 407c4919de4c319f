"""Typed Fused-Map sampling (``sample_neighbors`` with a ``HeteroCSC``): the Numba path equals the plain-Python oracle exactly,
exact properties of every sample (edges exist, fanouts, unique typed IDs, frontiers), and
PyG's own heterogeneous NeighborLoader where sampling is deterministic (fanout -1)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ops.sampling import sample_neighbors, sample_neighbors_batches
from graphpipe.ops.sampling.types import HeteroCSC, HeteroSampleOutput, etype_str

TYPES = {"paper": 120, "author": 80, "inst": 6}
RELS = [("author", "writes", "paper"), ("paper", "rev_writes", "author"),
        ("paper", "cites", "paper"), ("inst", "employs", "author"), ("author", "in", "inst")]


def relation_csc(num_src: int, num_dst: int, num_edges: int, rng: np.random.Generator,
                 dtype=np.int64) -> tuple[np.ndarray, np.ndarray]:
    """A CSC by destination with skewed in-degrees, each row's sources sorted (PyG's order)."""
    dst = np.minimum((rng.pareto(1.2, num_edges) * num_dst / 8).astype(np.int64), num_dst - 1)
    src = rng.integers(0, num_src, num_edges)
    order = np.lexsort((src, dst))
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_dst), out=indptr[1:])
    return indptr, src[order].astype(dtype)


def typed_graph(seed: int = 0, dtype=np.int64, edges: int = 700) -> HeteroCSC:
    rng = np.random.default_rng(seed)
    csc = {et: relation_csc(TYPES[et[0]], TYPES[et[2]], edges, rng, dtype) for et in RELS}
    return HeteroCSC.from_arrays(TYPES, csc)


def assert_same(got: HeteroSampleOutput, want: HeteroSampleOutput) -> None:
    assert got.num_seeds == want.num_seeds
    assert got.num_sampled_nodes == want.num_sampled_nodes
    assert got.num_sampled_edges == want.num_sampled_edges
    assert list(got.n_id) == list(want.n_id)
    for t in want.n_id:
        assert np.array_equal(got.n_id[t], want.n_id[t]), t
    for name in ("row", "col", "edge_ids"):
        for et in want.row:
            assert np.array_equal(getattr(got, name)[et], getattr(want, name)[et]), (name, et)


CASES = [
    # seeds, fanouts, replace, seed, frontier, index dtype
    ({"paper": [0, 5, 17, 3]}, [4, 3], False, 7, "new", np.int64),
    ({"paper": [1, 2], "author": [9, 0]}, [2, 2, 2], True, 1, "new", np.int32),
    ({"author": [4]}, [-1, 2], False, 0, "new", np.int64),
    ({"paper": [0, 1, 2]}, {"author___writes___paper": [40, 3], ("paper", "rev_writes", "author"): [0, 2],
                           ("paper", "cites", "paper"): [-1, 1], ("inst", "employs", "author"): [3, 3],
                           ("author", "in", "inst"): [1, 0]}, False, 5, "new", np.int64),
    ({"paper": [0, 7]}, [3, 2], False, 11, "all", np.int32),
    ({"inst": []}, [2], False, 3, "new", np.int64),  # no seeds at all
]


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_cpu_equals_reference(case):
    seeds, fanouts, replace, seed, frontier, dtype = case
    g = typed_graph(seed, dtype)
    seeds = {t: np.asarray(v, dtype=np.int64) for t, v in seeds.items()}
    kw = {"replace": replace, "seed": seed, "frontier": frontier}
    got = sample_neighbors(g, seeds, fanouts, **kw)
    assert_same(got, sample_neighbors(g, seeds, fanouts, backend="reference", **kw))
    check_properties(g, seeds, got, fanouts, replace)


def _per_rel(fanouts, et):
    if isinstance(fanouts, dict):
        return fanouts.get(et, fanouts.get(etype_str(et)))
    return fanouts


def check_properties(g: HeteroCSC, seeds, out: HeteroSampleOutput, fanouts, replace) -> None:
    """Exact properties: seeds first, typed IDs unique, every edge a relation edge into a
    frontier node, fanouts respected, the frontier the previous hop's new nodes."""
    for t, ids in out.n_id.items():
        given = np.asarray(seeds.get(t, []), dtype=np.int64)
        assert np.array_equal(ids[:given.shape[0]], given)
        assert np.unique(ids).shape[0] == ids.shape[0], f"duplicate {t}"
        assert ids.shape[0] == sum(out.num_sampled_nodes[t])
        assert ids.size == 0 or (ids.min() >= 0 and ids.max() < g.num_nodes[t])
    for et in g.edge_types:
        indptr, indices = g.csc[et]
        row, col, eid = out.row[et], out.col[et], out.edge_ids[et]
        src_g, dst_g = out.n_id[et[0]][row], out.n_id[et[2]][col]
        assert np.array_equal(indices[eid], src_g)                 # the edge exists ...
        assert np.all(indptr[dst_g] <= eid) and np.all(eid < indptr[dst_g + 1])  # ... into dst
        fan = _per_rel(fanouts, et)
        start = 0
        for h, count in enumerate(out.num_sampled_edges[et]):
            c, e = col[start:start + count], eid[start:start + count]
            start += count
            lo = sum(out.num_sampled_nodes[et[2]][:h]) if out.frontier == "new" else 0
            hi = sum(out.num_sampled_nodes[et[2]][:h + 1])
            assert np.all((c >= lo) & (c < hi))                     # only the frontier
            per_dst = np.bincount(c - lo, minlength=hi - lo)
            deg = np.diff(indptr)[out.n_id[et[2]][lo:hi]]
            f = fan[h]
            want = deg if f < 0 else (np.where(deg > 0, f, 0) if replace else np.minimum(deg, f))
            assert np.array_equal(per_dst, want)                    # fanout respected exactly
            if not replace:
                pairs = c * (indptr[-1] + 1) + e
                assert np.unique(pairs).shape[0] == pairs.shape[0]  # no edge twice in a hop


def test_properties_many_seeds():
    g = typed_graph(3, edges=3000)
    for s in range(5):
        seeds = {"paper": np.random.default_rng(s).choice(120, 30, replace=False)}
        out = sample_neighbors(g, seeds, [5, 4, 3], seed=s)
        check_properties(g, seeds, out, [5, 4, 3], False)
        assert_same(out, sample_neighbors(g, seeds, [5, 4, 3], seed=s, backend="reference"))


def test_deterministic_and_thread_independent():
    g = typed_graph(1)
    batches = [{"paper": np.arange(i, i + 10)} for i in range(0, 60, 10)]
    one = sample_neighbors_batches(g, batches, [3, 2], seeds=range(6), num_threads=1)
    two = sample_neighbors_batches(g, batches, [3, 2], seeds=range(6), num_threads=2)
    for a, b, i in zip(one, two, range(6)):
        assert_same(a, b)
        assert_same(a, sample_neighbors(g, batches[i], [3, 2], seed=i))
    other = sample_neighbors(g, batches[0], [3, 2], seed=99)
    assert any(not np.array_equal(other.row[e], one[0].row[e]) for e in g.edge_types)


def test_relation_draws_do_not_depend_on_relation_order():
    g = typed_graph(2)
    flipped = HeteroCSC.from_arrays(TYPES, {et: g.csc[et] for et in reversed(g.edge_types)})
    seeds = {"paper": np.arange(8)}
    a = sample_neighbors(g, seeds, [3], seed=4)
    b = sample_neighbors(flipped, seeds, [3], seed=4)
    for et in g.edge_types:  # one hop: each relation draws the same edges whatever the order
        assert np.array_equal(a.edge_ids[et], b.edge_ids[et])


def test_blocks_are_dgl_layers():
    g = typed_graph(4)
    out = sample_neighbors(g, {"paper": np.array([3, 4, 5])}, [3, 2], seed=1)
    blocks = out.blocks()
    assert len(blocks) == 2
    for et, blk in blocks[-1].items():  # seed layer: destinations are the seeds of dst type
        assert blk.num_dst == out.num_seeds[et[2]]
        assert blk.num_src == sum(out.num_sampled_nodes[et[0]][:2])
    for et, blk in blocks[0].items():
        assert blk.num_src == out.n_id[et[0]].shape[0]
        assert np.array_equal(out.n_id[et[0]][blk.indices],
                              g.csc[et][1][blk.edge_ids])           # edges exist
        dst = out.n_id[et[2]][blk.dst_of_edges()]
        assert np.all(g.csc[et][0][dst] <= blk.edge_ids)
    assert sum(b.num_edges for layer in blocks for b in layer.values()) == \
        sum(sum(v) for v in out.num_sampled_edges.values())


def test_bad_arguments():
    g = typed_graph(0)
    seeds = {"paper": np.array([0])}
    with pytest.raises(ValueError, match="unknown node types"):
        sample_neighbors(g, {"venue": [0]}, [2])
    with pytest.raises(ValueError, match=r"seeds\['paper'\]"):
        sample_neighbors(g, {"paper": [120]}, [2])
    with pytest.raises(ValueError, match="unique"):
        sample_neighbors(g, {"paper": [1, 1]}, [2])
    with pytest.raises(ValueError, match="misses relations"):
        sample_neighbors(g, seeds, {("paper", "cites", "paper"): [2]})
    with pytest.raises(ValueError, match="lacks"):
        sample_neighbors(g, seeds, {("a", "b", "c"): [2]})
    with pytest.raises(ValueError, match="same number of hops"):
        sample_neighbors(g, seeds, {et: [2] * (1 + (i == 0)) for i, et in enumerate(RELS)})
    with pytest.raises(ValueError, match="backend"):
        sample_neighbors(g, seeds, [2], backend="cuda")
    with pytest.raises(ValueError, match="fanouts"):
        sample_neighbors(g, seeds, [-2])


def test_relations_are_checked_once():
    ip, ind = np.array([0, 1, 2]), np.array([0, 3])
    with pytest.raises(ValueError, match=r"'a___r___b'.*\[0, 3\)"):
        HeteroCSC.from_arrays({"a": 3, "b": 2}, {("a", "r", "b"): (ip, ind)})
    with pytest.raises(ValueError, match="indptr must be"):
        HeteroCSC.from_arrays({"a": 3, "b": 3}, {("a", "r", "b"): (ip, ind)})
    with pytest.raises(ValueError, match="decreases"):
        HeteroCSC.from_arrays({"a": 3, "b": 3}, {("a", "r", "b"): (np.array([0, 2, 1, 2]), ind)})
    with pytest.raises(ValueError, match="unknown node type"):
        HeteroCSC.from_arrays({"a": 3}, {("a", "r", "b"): (ip, ind)})


def _pyg_hetero(g: HeteroCSC, x_dim: int = 2):
    """The same graph as a PyG HeteroData (edge_index in CSC order, sources sorted per row)."""
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in g.num_nodes.items():
        data[t].x = torch.arange(n * x_dim, dtype=torch.float32).view(n, x_dim)
    for et in g.edge_types:
        indptr, indices = g.csc[et]
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        data[et].edge_index = torch.from_numpy(np.stack([indices.astype(np.int64), dst]))
    return data


def _pyg_batch(g: HeteroCSC, seeds: list[int], hops: int):
    from torch_geometric.loader import NeighborLoader as PyGLoader

    loader = PyGLoader(_pyg_hetero(g), num_neighbors=[-1] * hops, batch_size=len(seeds),
                       input_nodes=("paper", torch.tensor(seeds)), is_sorted=True)  # our CSC order
    return next(iter(loader))


def _global_edges(n_id_src, n_id_dst, row, col, e_id) -> set:
    return set(zip(np.asarray(n_id_src)[row].tolist(), np.asarray(n_id_dst)[col].tolist(),
                   np.asarray(e_id).tolist()))


@pytest.mark.requires_pyg_sampler
@pytest.mark.parametrize("seeds", [[0, 5, 17], [3]])
def test_equals_pyg_hetero_loader_with_all_neighbours(seeds):
    """Fanout -1 draws nothing, so PyG's heterogeneous NeighborLoader (torch-sparse or pyg-lib)
    must reach what we reach. One hop: the same typed n_id and edge_index, entry for entry.
    Two hops: the same nodes per type and the same edges per relation; the numbering of a
    hop's new nodes follows the order relations are expanded in, which is
    ``graph.edge_types`` here and in pyg-lib, and torch-sparse's own dictionary order there."""
    g = typed_graph(6, edges=250)
    pyg = _pyg_batch(g, seeds, 1)
    ours = sample_neighbors(g, {"paper": np.array(seeds)}, [-1])
    for t in g.num_nodes:
        assert pyg[t].n_id.tolist() == ours.n_id[t].tolist(), t
    for et in g.edge_types:
        assert pyg[et].edge_index.tolist() == [ours.row[et].tolist(), ours.col[et].tolist()], et
        assert pyg[et].e_id.tolist() == ours.edge_ids[et].tolist(), et  # CSC order = input order
    pyg = _pyg_batch(g, seeds, 2)
    ours = sample_neighbors(g, {"paper": np.array(seeds)}, [-1, -1])
    for t in g.num_nodes:
        assert sorted(pyg[t].n_id.tolist()) == sorted(ours.n_id[t].tolist()), t
        assert pyg[t].n_id.shape[0] == ours.n_id[t].shape[0]
    assert pyg["paper"].n_id[:len(seeds)].tolist() == seeds
    for et in g.edge_types:
        s, _, d = et
        want = _global_edges(pyg[s].n_id, pyg[d].n_id, *pyg[et].edge_index, pyg[et].e_id)
        got = _global_edges(ours.n_id[s], ours.n_id[d], ours.row[et], ours.col[et], ours.edge_ids[et])
        assert got == want, et
        assert pyg[et].edge_index.shape[1] == ours.row[et].shape[0]


def _random_case(data):
    """A small random typed graph, seeds and fanouts drawn by hypothesis."""
    from hypothesis import strategies as st

    counts = {t: data.draw(st.integers(1, 12), label=f"n_{t}") for t in ("a", "b", "c")}
    rels = data.draw(st.lists(st.sampled_from([(s, r, d) for s in "abc" for d in "abc" for r in ("x", "y")]),
                              min_size=1, max_size=5, unique=True), label="relations")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16), label="graph seed"))
    csc = {}
    for s, r, d in rels:
        e = int(rng.integers(0, 4 * counts[d] + 1))
        dst = np.sort(rng.integers(0, counts[d], e))
        indptr = np.zeros(counts[d] + 1, dtype=np.int64)
        np.cumsum(np.bincount(dst, minlength=counts[d]), out=indptr[1:])
        csc[(s, r, d)] = (indptr, rng.integers(0, counts[s], e).astype(np.int32))
    g = HeteroCSC.from_arrays(counts, csc)
    hops = data.draw(st.integers(1, 3), label="hops")
    fanouts = {et: data.draw(st.lists(st.integers(-1, 4), min_size=hops, max_size=hops)) for et in rels}
    seeds = {t: rng.permutation(counts[t])[:data.draw(st.integers(0, counts[t]), label=f"B_{t}")]
             for t in counts}
    return g, seeds, fanouts


def test_random_graphs_equal_the_oracle_and_hold_the_properties():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None)
    @given(st.data(), st.booleans(), st.sampled_from(["new", "all"]), st.integers(0, 2**31))
    def check(data, replace, frontier, seed):
        g, seeds, fanouts = _random_case(data)
        kw = {"replace": replace, "seed": seed, "frontier": frontier}
        out = sample_neighbors(g, seeds, fanouts, **kw)
        assert_same(out, sample_neighbors(g, seeds, fanouts, backend="reference", **kw))
        check_properties(g, seeds, out, fanouts, replace)

    check()


def test_unchecked_graph_is_refused():
    """A HeteroCSC built around the checks (an index out of range here) never reaches a kernel."""
    bad = HeteroCSC(num_nodes={"a": 2}, edge_types=[("a", "r", "a")],
                    csc={("a", "r", "a"): (np.array([0, 1, 2]), np.array([0, 99]))})
    for backend in ("cpu", "reference"):
        with pytest.raises(ValueError, match="from_arrays"):
            sample_neighbors(bad, {"a": [0, 1]}, [2], backend=backend)
    with pytest.raises(ValueError, match="from_arrays"):
        sample_neighbors_batches(bad, [{"a": [1]}], [2], seeds=[0])


ONE_RELATION_CASES = [  # fanouts, replace, seed, frontier, index dtype
    ([4, 3], False, 7, "new", np.int64), ([2, 2, 2], True, 1, "new", np.int32),
    ([-1, 2], False, 0, "all", np.int64), ([40, 3], False, 5, "all", np.int32),
]


def _one_relation(dtype, etype=("_N", "_E", "_N")) -> tuple[HeteroCSC, np.ndarray, np.ndarray]:
    indptr, indices = relation_csc(120, 120, 900, np.random.default_rng(8), dtype)
    t = etype[0]
    return HeteroCSC.from_arrays({t: 120}, {etype: (indptr, indices)}), indptr, indices


@pytest.mark.parametrize("case", ONE_RELATION_CASES, ids=range(len(ONE_RELATION_CASES)))
@pytest.mark.parametrize("backend", ["cpu", "reference"])
def test_default_relation_draws_the_homogeneous_sample(case, backend):
    """A homogeneous graph seen as the typed graph ``(_N, _E, _N)`` samples exactly what the
    one-relation call samples (its relation key is the hop key: the CPU/GPU stream)."""
    fanouts, replace, seed, frontier, dtype = case
    _, indptr, indices = _one_relation(dtype)
    seeds = np.array([0, 5, 17, 3, 60])
    kw = {"replace": replace, "seed": seed, "frontier": frontier, "backend": backend}
    want = sample_neighbors(indptr, indices, seeds, fanouts, **kw)
    got = sample_neighbors(HeteroCSC.homogeneous(indptr, indices), {"_N": seeds}, fanouts, **kw)
    et = ("_N", "_E", "_N")
    assert np.array_equal(got.n_id["_N"], want.n_id)
    assert got.num_sampled_nodes["_N"] == want.num_sampled_nodes
    assert got.num_sampled_edges[et] == want.num_sampled_edges
    for typed, block in zip(got.blocks(), want.blocks):
        b = typed[et]
        assert (b.num_dst, b.num_src) == (block.num_dst, block.num_src)
        for name in ("indptr", "indices", "edge_ids"):
            assert np.array_equal(getattr(b, name), getattr(block, name)), name


@pytest.mark.parametrize("case", ONE_RELATION_CASES, ids=range(len(ONE_RELATION_CASES)))
def test_one_relation_fast_path_equals_the_relation_loop(case):
    """One node type and one relation take ``_sample_batch`` (all hops in one call); it draws
    what the relation loop and the oracle draw, under the relation's own key."""
    from graphpipe.ops.sampling import cpu
    from graphpipe.ops.sampling.types import check_seed_dict, resolve_fanouts

    fanouts, replace, seed, frontier, dtype = case
    g, _, _ = _one_relation(dtype, ("a", "to", "a"))
    seeds = {"a": np.array([9, 1, 44])}
    kw = {"replace": replace, "seed": seed, "frontier": frontier}
    fast = sample_neighbors(g, seeds, fanouts, **kw)
    loop = cpu._sample_relations(g, check_seed_dict(g, seeds), resolve_fanouts(fanouts, g.edge_types),
                                 replace, seed, frontier)
    assert_same(fast, loop)
    assert_same(fast, sample_neighbors(g, seeds, fanouts, backend="reference", **kw))
    check_properties(g, seeds, fast, fanouts, replace)
    windows = sample_neighbors_batches(g, [seeds, {"a": [3]}], fanouts, seeds=[seed, 1], num_threads=2,
                                       replace=replace, frontier=frontier)
    assert_same(windows[0], fast)
    homogeneous = sample_neighbors(*g.csc[("a", "to", "a")], seeds["a"], fanouts, **kw)
    assert not np.array_equal(homogeneous.n_id, fast.n_id["a"])  # another relation, another stream


def test_call_forms():
    g, indptr, indices = _one_relation(np.int64)
    with pytest.raises(TypeError, match="HeteroCSC"):
        sample_neighbors(g, {"_N": [0]}, [2], [3])
    with pytest.raises(TypeError, match="indptr, indices"):
        sample_neighbors(indptr, indices, [0])
    with pytest.raises(TypeError, match="seed_batches"):
        sample_neighbors_batches(indptr, [[0]], [2], seeds=[0])


def test_edge_index_is_the_samplers_buffer():
    """``edge_index(et)`` is ``row`` over ``col``; the CPU sampler writes both into one
    ``(2, E)`` buffer, handed out without a copy; other outputs are stacked."""
    g = typed_graph(3)
    for frontier in ("new", "all"):
        out = sample_neighbors(g, {"paper": [0, 5, 9], "author": [1]}, [3, 2], seed=4, frontier=frontier)
        for et in g.edge_types:
            ei = out.edge_index(et)
            assert ei.shape == (2, out.row[et].shape[0]) and ei.dtype == np.int64
            assert np.array_equal(ei, np.stack([out.row[et], out.col[et]]))
            assert np.shares_memory(ei, out.row[et]) and np.shares_memory(ei, out.col[et])
    other = HeteroSampleOutput(n_id={}, row={RELS[0]: np.array([1, 2])}, col={RELS[0]: np.array([0, 0])},
                               edge_ids={RELS[0]: np.array([4, 5])}, num_seeds={})
    assert other.edge_index(RELS[0]).tolist() == [[1, 2], [0, 0]]
    assert not np.shares_memory(other.edge_index(RELS[0]), other.row[RELS[0]])
