"""METIS wrapper, cluster permutation, per-sequence cache and `graphpipe partition`."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from graphpipe.ops.partition import (
    SequencePartitioner,
    cluster_offsets,
    cluster_permutation,
    edge_cut,
    induced_subgraph,
    metis_partition,
    symmetric_csr,
)
from graphpipe.synthetic import community_graph


def to_csc(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((src, dst))
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


@pytest.fixture(scope="module")
def community():
    g = community_graph(1200, 6, avg_degree=10, feature_dim=0, homophily=0.9, seed=3)
    indptr, indices = to_csc(g.src, g.dst, g.num_nodes)
    return g, indptr, indices


def brute_cut(src, dst, parts) -> int:
    pairs = {(min(u, v), max(u, v)) for u, v in zip(src.tolist(), dst.tolist()) if u != v}
    return sum(parts[u] != parts[v] for u, v in pairs)


def test_symmetric_csr_is_symmetric_without_loops_or_duplicates():
    src = np.array([0, 1, 1, 2, 2, 3, 0])
    dst = np.array([1, 0, 1, 0, 0, 3, 2])   # dup (1,0)/(0,1), self loops 1 and 3, dup 2->0
    indptr, indices = to_csc(src, dst, 4)
    xadj, adj = symmetric_csr(indptr, indices)
    rows = [adj[xadj[v]:xadj[v + 1]].tolist() for v in range(4)]
    assert rows == [[1, 2], [0], [0], []]


def test_every_node_has_a_part_and_cut_equals_direct_count(community):
    g, indptr, indices = community
    res = metis_partition(indptr, indices, 6, seed=0)
    assert res.parts.shape == (g.num_nodes,)
    assert res.parts.min() >= 0 and res.parts.max() < 6
    assert len(np.unique(res.parts)) == 6
    assert res.edge_cut == edge_cut(indptr, indices, res.parts)
    assert res.edge_cut == brute_cut(g.src, g.dst, res.parts)
    again = metis_partition(indptr, indices, 6, seed=0)
    np.testing.assert_array_equal(again.parts, res.parts)
    rec = metis_partition(indptr, indices, 6, recursive=True, seed=0)
    assert rec.edge_cut == edge_cut(indptr, indices, rec.parts)


def test_metis_cut_far_below_random_partition(community):
    g, indptr, indices = community
    res = metis_partition(indptr, indices, 6, seed=0)
    rng = np.random.default_rng(0)
    random_parts = rng.permutation(np.arange(g.num_nodes) % 6)
    random_cut = edge_cut(indptr, indices, random_parts)
    assert res.edge_cut < 0.5 * random_cut, (res.edge_cut, random_cut)


def test_cliques_land_in_one_part_each():
    k, size = 4, 24
    src, dst = [], []
    for c in range(k):
        nodes = np.arange(c * size, (c + 1) * size)
        u, v = np.meshgrid(nodes, nodes)
        keep = u != v
        src.append(u[keep]); dst.append(v[keep])
    src.append(np.array([0, size, 2 * size])); dst.append(np.array([size, 2 * size, 3 * size]))
    src, dst = np.concatenate(src), np.concatenate(dst)
    indptr, indices = to_csc(src, dst, k * size)
    res = metis_partition(indptr, indices, k, seed=1)
    for c in range(k):
        assert len(np.unique(res.parts[c * size:(c + 1) * size])) == 1
    assert res.edge_cut == 3


def test_cluster_permutation_is_stable_and_inverse():
    rng = np.random.default_rng(5)
    parts = rng.integers(0, 5, 300).astype(np.int32)
    perm, inverse = cluster_permutation(parts, 5)
    np.testing.assert_array_equal(np.sort(perm), np.arange(300))
    np.testing.assert_array_equal(inverse[perm], np.arange(300))
    np.testing.assert_array_equal(perm[inverse], np.arange(300))
    assert np.all(np.diff(parts[perm]) >= 0)
    for c in range(5):
        seg = perm[parts[perm] == c]
        np.testing.assert_array_equal(seg, np.flatnonzero(parts == c))   # original order
    offsets = cluster_offsets(parts, 5)
    for c in range(5):
        assert np.all(parts[perm[offsets[c]:offsets[c + 1]]] == c)
    with pytest.raises(ValueError, match="num_parts=5"):
        cluster_permutation(np.array([0, 5]), 5)


def test_relabelled_adjacency_is_permuted_matrix(community):
    _, indptr, indices = community
    n = 200   # a slice keeps the dense matrices small
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, np.arange(n))
    a = np.zeros((n, n), dtype=np.int64)
    dst = np.repeat(np.arange(n), np.diff(sub_ptr))
    np.add.at(a, (dst, sub_idx), 1)
    sp = SequencePartitioner(indptr, indices, 4)(np.arange(n))
    new_src, new_dst = sp.inverse[sub_idx], sp.inverse[dst]
    b = np.zeros_like(a)
    np.add.at(b, (new_dst, new_src), 1)
    np.testing.assert_array_equal(b, a[sp.perm][:, sp.perm])


def test_induced_subgraph_matches_brute_force(community):
    g, indptr, indices = community
    rng = np.random.default_rng(1)
    seq = rng.choice(g.num_nodes, 300, replace=False)
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, seq)
    pos = {int(v): i for i, v in enumerate(seq)}
    expected = sorted((pos[int(s)], pos[int(d)]) for s, d in zip(g.src, g.dst)
                      if int(s) in pos and int(d) in pos)
    dst = np.repeat(np.arange(300), np.diff(sub_ptr))
    assert sorted(zip(sub_idx.tolist(), dst.tolist())) == expected
    with pytest.raises(ValueError, match="distinct"):
        induced_subgraph(indptr, indices, np.array([1, 1]))


def test_sequence_partitioner_caches_by_node_set(community):
    g, indptr, indices = community
    sp = SequencePartitioner(indptr, indices, 4, cache_size=2)
    rng = np.random.default_rng(2)
    seq = rng.choice(g.num_nodes, 400, replace=False)
    first = sp(seq)
    shuffled = rng.permutation(seq)
    second = sp(shuffled)
    assert (sp.hits, sp.misses) == (1, 1)
    # the same node gets the same cluster whatever its position
    part_of = dict(zip(seq.tolist(), first.parts.tolist()))
    assert [part_of[v] for v in shuffled.tolist()] == second.parts.tolist()
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, seq)
    assert first.edge_cut == edge_cut(sub_ptr, sub_idx, first.parts)
    np.testing.assert_array_equal(first.inverse[first.perm], np.arange(400))
    sp(seq[:100]); sp(seq[:200])   # evicts the first set (cache_size=2)
    sp(seq)
    assert sp.misses == 4


def test_bad_arguments_name_the_argument(community):
    _, indptr, indices = community
    with pytest.raises(ValueError, match="'num_parts'"):
        metis_partition(indptr, indices, 0)
    with pytest.raises(ValueError, match="'indptr'"):
        metis_partition(indptr[:-1], indices, 2)
    with pytest.raises(ValueError, match="'num_parts'"):
        metis_partition(np.array([0, 0]), np.array([], dtype=np.int64), 3)


def _make_store(path, src, dst, n):
    from graphpipe.store import StoreWriter

    indptr, indices = to_csc(src, dst, n)
    with StoreWriter(path, name="t") as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices.astype(np.int32))
        w.manifest["num_nodes"] = n
        w.manifest["num_edges"] = int(indices.shape[0])
        w.commit()
    return indptr, indices


def test_cli_adds_keys_and_keeps_old_arrays(tmp_path, community):
    from graphpipe.cli.partition import command

    from graphpipe.store import GraphStore

    g, _, _ = community
    store_path = tmp_path / "s"
    indptr, indices = _make_store(store_path, g.src, g.dst, g.num_nodes)
    before = json.loads((store_path / "manifest.json").read_text())["arrays"]
    runner = CliRunner()
    res = runner.invoke(command, [str(store_path), "--parts", "4"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(command, [str(store_path), "--parts", "8"])
    assert res.exit_code == 0, res.output
    manifest = json.loads((store_path / "manifest.json").read_text())
    for key, meta in before.items():
        assert manifest["arrays"][key]["checksum"] == meta["checksum"]
    store = GraphStore.open(store_path)
    for k in (4, 8):
        part = store.array(f"partition/k{k}/part")
        perm = store.array(f"partition/k{k}/perm")
        inverse = store.array(f"partition/k{k}/inverse")
        entry = manifest["derived"][f"partition_k{k}"]
        assert part.min() >= 0 and part.max() < k
        np.testing.assert_array_equal(inverse[perm], np.arange(g.num_nodes))
        assert entry["edge_cut"] == edge_cut(indptr, indices, part)
        assert entry["num_parts"] == k
    k4 = store.array("partition/k4/part").copy()
    # same K again: refused with a clear message, nothing changed
    res = runner.invoke(command, [str(store_path), "--parts", "4"])
    assert res.exit_code != 0 and "already stored" in res.output and "--overwrite" in res.output
    # --overwrite replaces only K=4's keys
    k8_sum = manifest["arrays"]["partition/k8/part"]["checksum"]
    res = runner.invoke(command, [str(store_path), "--parts", "4", "--seed", "7", "--overwrite"])
    assert res.exit_code == 0, res.output
    manifest2 = json.loads((store_path / "manifest.json").read_text())
    assert manifest2["arrays"]["partition/k8/part"]["checksum"] == k8_sum
    assert manifest2["derived"]["partition_k4"]["seed"] == 7
    store2 = GraphStore.open(store_path)
    assert store2.array("partition/k4/part").shape == k4.shape
    from graphpipe.store.validate import validate

    assert validate(store_path) == []
