"""ClusterLoader against brute-force oracles: epoch coverage, features and labels bit for bit,
the attention pattern (induced symmetrised edges + self-loops + token edges), METIS and stored
reordering, degrees, shortest-path buckets, the cluster-sparse format, determinism, argument
errors and graph-level batching with padding."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.derive import write_partition
from graphpipe.ingest import ingest
from graphpipe.loaders import ClusterLoader, SequenceBatch
from graphpipe.loaders.cluster import sequence_pattern, shortest_path_buckets
from graphpipe.ops.attention.cluster_sparse import ThresholdTuner, cluster_sparse_pattern
from graphpipe.ops.partition import induced_subgraph, symmetric_csr
from graphpipe.store import GraphStore
from graphpipe.store.validate import validate
from graphpipe.synthetic import rmat_graph, write_npz
from graphpipe.synthetic.graph_level import community_count_graphs, write_graph_level_store

SEQ_LEN = 97  # 96 nodes + the token


def _rmat_store(path: Path) -> GraphStore:
    """R-MAT scale 9: directed, with duplicate edges and self-loops; every 7th node unlabelled."""
    graph = rmat_graph(9, 4, feature_dim=6, num_classes=5, seed=3)
    graph.labels[::7] = -1
    return ingest(write_npz(path.parent / f"{path.name}.npz", graph), path)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    return _rmat_store(tmp_path_factory.mktemp("cluster") / "rmat")


@pytest.fixture(scope="module")
def graph_store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    dataset = community_count_graphs(30, min_nodes=10, max_nodes=40, seed=2)
    return write_graph_level_store(dataset, tmp_path_factory.mktemp("graphs") / "graphs")


# ------------------------------------------------------------------------------ oracles


def _positions(batch: SequenceBatch, b: int) -> list[int]:
    return list(range(b * batch.seq_len, (b + 1) * batch.seq_len))


def _entries(batch: SequenceBatch) -> set[tuple[int, int, int, int]]:
    """``(b, original query position, original key position, kind)`` of every entry."""
    indptr, indices = batch.indptr.tolist(), batch.indices.tolist()
    kind, perm, size = batch.edge_kind.tolist(), batch.perm.tolist(), batch.seq_len
    out = set()
    for row in range(len(indptr) - 1):
        b, p = divmod(row, size)
        for e in range(indptr[row], indptr[row + 1]):
            kb, kp = divmod(indices[e], size)
            assert kb == b, "entries must stay inside their sequence (block-diagonal)"
            out.add((b, perm[b][p], perm[b][kp], kind[e]))
    return out


def _oracle_entries(indptr: np.ndarray, indices: np.ndarray, node_ids: list[int], token: bool,
                    size: int, b: int = 0) -> set[tuple[int, int, int, int]]:
    """The pattern from its definition, in un-reordered positions (token at 0)."""
    t = int(token)
    pos = {v: i + t for i, v in enumerate(node_ids)}
    entries: dict[tuple[int, int], int] = {}
    for v in node_ids:
        for u in indices[indptr[v]:indptr[v + 1]].tolist():
            if u in pos and u != v:
                entries[(pos[v], pos[u])] = 1
                entries[(pos[u], pos[v])] = 1
    for i in range(size):  # a self-loop per position, padding included
        entries[(i, i)] = 0
    if token:
        for i in range(1, len(node_ids) + 1):
            entries[(0, i)] = entries[(i, 0)] = 2
    return {(b, q, k, kind) for (q, k), kind in entries.items()}


def _bfs(adj: dict[int, set[int]], n: int, max_dist: int) -> np.ndarray:
    out = np.full((n, n), max_dist, dtype=np.int64)
    for src in range(n):
        dist = {src: 0}
        queue = deque([src])
        while queue:
            v = queue.popleft()
            for u in adj[v]:
                if u not in dist:
                    dist[u] = dist[v] + 1
                    queue.append(u)
        for v, d in dist.items():
            out[src, v] = min(d, max_dist)
    return out


def _oracle_spd(indptr, indices, node_ids: list[int], token: bool, size: int, max_dist: int
                ) -> np.ndarray:
    """Un-reordered spd buckets of one padded sequence."""
    t, n = int(token), len(node_ids)
    pos = {v: i for i, v in enumerate(node_ids)}
    adj: dict[int, set[int]] = {i: set() for i in range(n)}
    for v in node_ids:
        for u in indices[indptr[v]:indptr[v + 1]].tolist():
            if u in pos and u != v:
                adj[pos[v]].add(pos[u])
                adj[pos[u]].add(pos[v])
    full = np.full((size, size), max_dist, dtype=np.int64)
    np.fill_diagonal(full, 0)
    full[t:t + n, t:t + n] = _bfs(adj, n, max_dist)
    if token:
        full[0, :n + 1] = full[:n + 1, 0] = max_dist + 1
    return full


def _slice_ids(batch: SequenceBatch, b: int = 0) -> np.ndarray:
    """The node IDs of sequence ``b`` in un-reordered order (token and padding dropped)."""
    ids = batch.node_ids[b][batch.inverse[b]].numpy()
    return ids[ids >= 0]


# ------------------------------------------------------------------------------ pieces


def test_sequence_pattern_counts_and_spd_helper() -> None:
    """O3 on a 5-node path 0→1→2→3→4 plus 2→0 and a duplicate and a self-loop."""
    src = [0, 1, 2, 3, 2, 2, 4]
    dst = [1, 2, 3, 4, 0, 0, 4]
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(6, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=5), out=indptr[1:])
    indices = np.asarray(src, dtype=np.int64)[order]
    sub_ptr, sub_idx = induced_subgraph(indptr, indices, np.arange(5))
    for token in (False, True):
        rows, cols, kind = sequence_pattern(sub_ptr, sub_idx, token)
        undirected = 5  # {0,1} {1,2} {2,3} {3,4} {0,2}
        assert rows.shape[0] == 2 * undirected + 5 + int(token) * (1 + 2 * 5)
        assert np.all(np.diff(rows * 100 + cols) > 0)  # sorted by (row, col), distinct
        assert np.array_equal(kind == 0, rows == cols)
    xadj, adjncy = symmetric_csr(sub_ptr, sub_idx)
    assert shortest_path_buckets(xadj, adjncy, 3)[0].tolist() == [0, 1, 1, 2, 3]
    assert shortest_path_buckets(xadj, adjncy, 9)[4].tolist() == [3, 3, 2, 1, 0]


# ------------------------------------------------------------------------------ node-level


@pytest.mark.parametrize("shuffle", ["once", True, False])
def test_every_input_node_once_per_epoch(store: GraphStore, shuffle) -> None:
    loader = ClusterLoader(store, SEQ_LEN, input_nodes="train", shuffle=shuffle, seed=1,
                           spd_max_len=0)
    train = store.split("train")
    orders = []
    for _epoch in range(2):
        batches = list(loader)
        assert len(batches) == len(loader) == -(-train.shape[0] // (SEQ_LEN - 1))
        ids = np.concatenate([b.node_ids[b.mask].numpy() for b in batches])
        assert np.array_equal(np.sort(ids), train)
        assert all(b.batch_size == 1 and b.seq_len == b.mask.sum() + 1 for b in batches)
        assert [b.seq_len for b in batches[:-1]] == [SEQ_LEN] * (len(batches) - 1)
        orders.append(np.concatenate([_slice_ids(b) for b in batches]))
    assert np.array_equal(orders[0], orders[1]) == (shuffle != True)
    if shuffle is False:
        assert np.array_equal(orders[0], train)


def test_drop_last_all_nodes_and_id_arrays(store: GraphStore) -> None:
    loader = ClusterLoader(store, 64, input_nodes="all", drop_last=True, global_token=False,
                           reorder="none", spd_max_len=0)
    assert len(loader) == store.num_nodes // 64
    batches = list(loader)
    assert len(batches) == len(loader) and all(b.seq_len == 64 for b in batches)
    assert np.unique(np.concatenate([b.node_ids[b.mask].numpy() for b in batches])).shape[0] == \
        len(batches) * 64
    ids = np.array([5, 17, 3, 400, 99], dtype=np.int64)
    for given in (ids, torch.from_numpy(ids)):
        loader = ClusterLoader(store, 3, input_nodes=given, shuffle=False, reorder="none")
        assert [_slice_ids(b).tolist() for b in loader] == [[5, 17], [3, 400], [99]]


@pytest.mark.parametrize("reorder", ["metis", "none"])
def test_features_labels_bitwise(store: GraphStore, reorder: str) -> None:
    loader = ClusterLoader(store, SEQ_LEN, input_nodes="valid", reorder=reorder, parts=4, seed=0)
    labels = np.asarray(store.labels)
    for batch in loader:
        ids = batch.node_ids[0].numpy()
        real = ids >= 0
        assert np.array_equal(real, batch.mask[0].numpy())
        assert ids[0] == -1 and real[1:].all()  # the token at position 0
        assert batch.x.dtype == torch.float32 and batch.x.shape == (1, batch.seq_len, 6)
        assert np.array_equal(batch.x[0].numpy()[real], store.features(ids[real]))
        assert not batch.x[0, ~batch.mask[0]].any()
        expected = np.where(labels[ids[real]] < 0, -100, labels[ids[real]])
        assert np.array_equal(batch.y[0].numpy()[real], expected)
        assert batch.y[0, 0] == -100 and (batch.y == -100).any()
        assert batch.graph_y is None and batch.global_token


def test_float_labels_nan_and_array_input() -> None:
    indptr = np.array([0, 1, 2, 3, 3], dtype=np.int64)
    indices = np.array([1, 2, 0], dtype=np.int64)
    y = np.array([1.0, np.nan, -1.0, 2.0])
    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    loader = ClusterLoader({"indptr": indptr, "indices": indices, "x": x, "y": y}, 5,
                           input_nodes="all", shuffle=False, reorder="none")
    (batch,) = list(loader)
    assert batch.y.tolist() == [[-100, 1, -100, -100, 2]]
    assert torch.equal(batch.x[0, 1:], torch.from_numpy(x))


@pytest.mark.parametrize("reorder", ["metis", "none"])
@pytest.mark.parametrize("token", [True, False])
def test_pattern_equals_oracle(store: GraphStore, reorder: str, token: bool) -> None:
    loader = ClusterLoader(store, SEQ_LEN, input_nodes="train", reorder=reorder, parts=4,
                           global_token=token, spd_max_len=0)
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    for batch in loader:
        size = batch.seq_len
        assert batch.indptr.shape == (size + 1,) and batch.indptr[-1] == batch.indices.shape[0]
        assert batch.indices.dtype == batch.edge_kind.dtype == batch.indptr.dtype == torch.int64
        for row in range(size):
            keys = batch.indices[batch.indptr[row]:batch.indptr[row + 1]]
            assert keys.numel() >= 1 and bool((keys[1:] > keys[:-1]).all())  # sorted, distinct
        oracle = _oracle_entries(indptr, indices, _slice_ids(batch).tolist(), token, size)
        assert _entries(batch) == oracle
        if token:  # O3: the token row and column hold every node; +2n entries
            assert int((batch.edge_kind == 2).sum()) == 2 * (size - 1)


def test_reorder_metis_clusters_contiguous(store: GraphStore) -> None:
    loader = ClusterLoader(store, SEQ_LEN, input_nodes="train", reorder="metis", parts=4,
                           spd_max_len=0)
    for batch, sequence in zip(loader, loader.epoch_batches(0)):
        perm, inverse = batch.perm[0].numpy(), batch.inverse[0].numpy()
        size = batch.seq_len
        assert np.array_equal(_slice_ids(batch), sequence)
        assert np.array_equal(np.sort(perm), np.arange(size))
        assert np.array_equal(inverse[perm], np.arange(size))
        assert perm[0] == 0  # the token stays in front
        # un-reorder gives back the slice
        slice_ids = _slice_ids(batch)
        node_ids = batch.node_ids[0].numpy()
        assert np.array_equal(node_ids[1:], slice_ids[perm[1:] - 1])
        parts = loader.partitioner(slice_ids).parts  # cached: the loader's own clustering
        offsets = batch.offsets.numpy()
        assert offsets.shape == (4 + 2,) and offsets[0] == 0 and offsets[1] == 1
        assert offsets[-1] == size and np.all(np.diff(offsets) >= 0)
        for c in range(4):
            lo, hi = offsets[c + 1], offsets[c + 2]
            assert np.all(parts[perm[lo:hi] - 1] == c)
            assert np.all(np.diff(perm[lo:hi]) > 0)  # original order kept inside a cluster
    assert loader.partitioner.misses == len(loader)
    hits = loader.partitioner.hits
    list(loader)  # the second epoch (shuffle="once": same sequences) hits the cache
    assert loader.partitioner.misses == len(loader)
    assert loader.partitioner.hits == hits + len(loader)


def test_reorder_none_identity(store: GraphStore) -> None:
    batch = next(iter(ClusterLoader(store, SEQ_LEN, reorder="none", spd_max_len=0)))
    assert torch.equal(batch.perm[0], torch.arange(SEQ_LEN))
    assert torch.equal(batch.inverse[0], torch.arange(SEQ_LEN)) and batch.offsets is None


def test_reorder_store_partition(tmp_path: Path) -> None:
    fresh = _rmat_store(tmp_path / "rmat")
    with pytest.raises(ValueError, match="'reorder'"):
        ClusterLoader(fresh, SEQ_LEN, reorder="store", parts=3)
    write_partition(fresh, 3)
    fresh = GraphStore.open(fresh.path)
    global_parts = np.asarray(fresh.array("partition/k3/part"))
    loader = ClusterLoader(fresh, SEQ_LEN, reorder="store", parts=3, spd_max_len=0)
    indptr, indices = np.asarray(fresh.indptr), np.asarray(fresh.indices)
    for batch in loader:
        ids = batch.node_ids[0].numpy()[1:]
        perm = batch.perm[0].numpy()[1:]
        assert np.all(np.diff(global_parts[ids]) >= 0)
        for c in range(3):  # order kept within clusters
            inside = global_parts[ids] == c
            assert np.all(np.diff(perm[inside]) > 0)
            lo, hi = batch.offsets[c + 1], batch.offsets[c + 2]
            assert inside.sum() == hi - lo and inside[lo - 1:hi - 1].all()
        assert _entries(batch) == _oracle_entries(indptr, indices, _slice_ids(batch).tolist(),
                                                  True, batch.seq_len)


def test_degrees_clamped(store: GraphStore) -> None:
    max_degree = 5
    loader = ClusterLoader(store, SEQ_LEN, max_degree=max_degree, spd_max_len=0)
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    in_all = np.diff(indptr)
    out_all = np.bincount(indices, minlength=store.num_nodes)
    clamped_some = False
    for batch in loader:
        ids = batch.node_ids[0].numpy()
        real = ids >= 0
        assert batch.in_degree[0, 0] == 0 and batch.out_degree[0, 0] == 0
        assert np.array_equal(batch.in_degree[0].numpy()[real], np.minimum(in_all[ids[real]], 5))
        assert np.array_equal(batch.out_degree[0].numpy()[real], np.minimum(out_all[ids[real]], 5))
        clamped_some |= bool((in_all[ids[real]] > max_degree).any())
    assert clamped_some


@pytest.mark.parametrize("token", [True, False])
def test_spd_equals_bfs(store: GraphStore, token: bool) -> None:
    max_dist = 3
    loader = ClusterLoader(store, 40, input_nodes="test", parts=3, max_dist=max_dist,
                           global_token=token, spd_max_len=64)
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    seen = set()
    for batch in loader:
        size = batch.seq_len
        oracle = _oracle_spd(indptr, indices, _slice_ids(batch).tolist(), token, size, max_dist)
        perm = batch.perm[0].numpy()
        assert batch.spd.shape == (1, size, size) and batch.spd.dtype == torch.int64
        assert np.array_equal(batch.spd[0].numpy(), oracle[np.ix_(perm, perm)])
        seen |= set(np.unique(oracle).tolist())
    assert {0, 1, 2, max_dist} <= seen
    assert next(iter(ClusterLoader(store, 40, spd_max_len=39))).spd is None


@pytest.mark.parametrize("placement", ["random", "cover"])
def test_cluster_sparse_equals_direct_call(store: GraphStore, placement: str) -> None:
    loader = ClusterLoader(store, SEQ_LEN, parts=4, pattern="cluster-sparse", block=4,
                           threshold=5.0, placement=placement, seed=7, spd_max_len=0)
    transferred = 0
    for batch in loader:
        cs = batch.cluster_sparse
        beta_g = batch.indices.shape[0] / batch.seq_len ** 2
        direct = cluster_sparse_pattern(batch.indptr.numpy(), batch.indices.numpy(),
                                        batch.offsets.numpy(), threshold=5.0 * beta_g,
                                        block_size=4, placement=placement, seed=7)
        assert np.array_equal(cs.blocks, direct.blocks)
        assert np.array_equal(cs.residual_indptr, direct.residual_indptr)
        assert np.array_equal(cs.residual_indices, direct.residual_indices)
        assert cs.threshold == pytest.approx(5.0 * beta_g)
        transferred += int(cs.transferred.sum())
    assert transferred > 0


def test_cluster_sparse_absolute_threshold_and_tuner(store: GraphStore) -> None:
    loader = ClusterLoader(store, SEQ_LEN, parts=4, pattern="cluster-sparse", block=4,
                           threshold=0.0, threshold_relative=False, spd_max_len=0)
    batch = next(iter(loader))
    assert batch.cluster_sparse.num_blocks == 0  # threshold 0 rewrites nothing
    tuner = ThresholdTuner()
    loader.set_threshold(tuner)
    batch = next(iter(loader))
    beta_g = batch.indices.shape[0] / batch.seq_len ** 2
    assert batch.cluster_sparse.threshold == pytest.approx(tuner.threshold(beta_g))
    none_batch = next(iter(ClusterLoader(store, SEQ_LEN, reorder="none", pattern="cluster-sparse",
                                         spd_max_len=0)))
    assert none_batch.offsets is None
    assert none_batch.cluster_sparse.offsets.tolist() == [0, 1, SEQ_LEN]


def test_deterministic(store: GraphStore) -> None:
    def run(seed: int) -> list[SequenceBatch]:
        loader = ClusterLoader(store, SEQ_LEN, shuffle=True, seed=seed, parts=4,
                               pattern="cluster-sparse", block=4)
        loader.set_epoch(3)
        return list(loader)

    a, b, c = run(11), run(11), run(12)
    for p, q in zip(a, b):
        for name in ("node_ids", "x", "y", "indptr", "indices", "edge_kind", "perm", "spd"):
            assert torch.equal(getattr(p, name), getattr(q, name))
        assert np.array_equal(p.cluster_sparse.blocks, q.cluster_sparse.blocks)
    assert not torch.equal(a[0].node_ids, c[0].node_ids)


def test_vocab_sizes(store: GraphStore, graph_store: GraphStore) -> None:
    loader = ClusterLoader(store, SEQ_LEN, max_degree=9, max_dist=5)
    assert (loader.degree_vocab, loader.spd_vocab, loader.num_classes) == (10, 7, 5)
    batch = next(iter(loader))
    assert int(batch.in_degree.max()) < loader.degree_vocab
    assert int(batch.spd.max()) < loader.spd_vocab
    assert ClusterLoader(graph_store, batch_size=2).num_classes == 3


def test_to_device_keeps_everything(store: GraphStore) -> None:
    batch = next(iter(ClusterLoader(store, SEQ_LEN, pattern="cluster-sparse")))
    moved = batch.to("cpu")
    assert isinstance(moved, SequenceBatch) and moved.seq_len == batch.seq_len
    assert torch.equal(moved.indices, batch.indices) and moved.cluster_sparse is batch.cluster_sparse


def test_pad_multiple(store: GraphStore) -> None:
    loader = ClusterLoader(store, 50, input_nodes=np.arange(60), shuffle=False, pad_multiple=8)
    batches = list(loader)
    assert [b.seq_len for b in batches] == [56, 16]
    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    for batch in batches:
        assert batch.mask.sum() == (49 if batch.seq_len == 56 else 11)
        assert _entries(batch) == _oracle_entries(indptr, indices, _slice_ids(batch).tolist(),
                                                  True, batch.seq_len)
        assert batch.offsets[-1] == batch.seq_len  # padding: one more cluster at the end


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"seq_len": 0}, "seq_len"),
    ({"seq_len": 1}, "seq_len"),  # a token needs a node after it
    ({"seq_len": None}, "seq_len"),
    ({"input_nodes": "nope"}, "input_nodes"),
    ({"input_nodes": np.array([1, 1])}, "input_nodes"),
    ({"input_nodes": np.array([-1])}, "input_nodes"),
    ({"reorder": "spectral"}, "reorder"),
    ({"pattern": "dense"}, "pattern"),
    ({"parts": 0}, "parts"),
    ({"block": 0}, "block"),
    ({"placement": "grid"}, "placement"),
    ({"threshold": -1.0}, "threshold"),
    ({"shuffle": "twice"}, "shuffle"),
    ({"batch_size": 4}, "batch_size"),
    ({"max_dist": 0}, "max_dist"),
    ({"pad_multiple": 0}, "pad_multiple"),
    ({"seed": -3}, "seed"),
    ({"device": "no-such-device"}, "device"),
])
def test_bad_arguments(store: GraphStore, kwargs: dict, name: str) -> None:
    args = {"seq_len": 16, **kwargs}
    with pytest.raises(ValueError, match=f"'{name}'"):
        ClusterLoader(store, **args)
    with pytest.raises(ValueError, match="'epoch'"):
        ClusterLoader(store, 16).set_epoch(-1)


def test_seq_len_one_without_token(store: GraphStore) -> None:
    loader = ClusterLoader(store, 1, global_token=False, input_nodes=np.array([3, 4]))
    batches = list(loader)
    assert len(batches) == 2 and all(b.seq_len == 1 and b.indices.tolist() == [0] for b in batches)


# ------------------------------------------------------------------------------ graph-level


def test_graph_level_store_layout(graph_store: GraphStore) -> None:
    assert validate(graph_store.path) == []
    ptr = np.asarray(graph_store.array("graph/ptr"))
    assert ptr[0] == 0 and ptr[-1] == graph_store.num_nodes
    graph_of = np.repeat(np.arange(ptr.shape[0] - 1), np.diff(ptr))
    dst = np.repeat(np.arange(graph_store.num_nodes), np.diff(graph_store.indptr))
    assert np.array_equal(graph_of[np.asarray(graph_store.indices)], graph_of[dst])  # no edge crosses
    splits = np.concatenate([graph_store.split(s) for s in ("train", "valid", "test")])
    assert np.array_equal(np.sort(splits), np.arange(ptr.shape[0] - 1))  # graph IDs


@pytest.mark.parametrize("reorder", ["metis", "none"])
def test_graph_level_batches(graph_store: GraphStore, reorder: str) -> None:
    loader = ClusterLoader(graph_store, batch_size=4, input_nodes="train", reorder=reorder, parts=3,
                           max_dist=4, max_degree=6)
    ptr = np.asarray(graph_store.array("graph/ptr"))
    labels = np.asarray(graph_store.array("graph/label"))
    indptr, indices = np.asarray(graph_store.indptr), np.asarray(graph_store.indices)
    train = graph_store.split("train")
    batches = list(loader)
    assert len(batches) == len(loader) == -(-train.shape[0] // 4)
    seen = []
    for batch, graphs in zip(batches, loader.epoch_batches(0)):
        sizes = np.diff(ptr)[graphs]
        assert batch.batch_size == len(graphs) and batch.seq_len == sizes.max() + 1
        assert torch.equal(batch.graph_y, torch.from_numpy(labels[graphs]))
        assert bool((batch.y == -100).all())
        oracle = set()
        for b, g in enumerate(graphs.tolist()):
            nodes = list(range(ptr[g], ptr[g + 1]))
            assert batch.mask[b].sum() == len(nodes) and not batch.mask[b, 0]
            assert sorted(batch.node_ids[b][batch.mask[b]].tolist()) == nodes
            assert not batch.x[b, ~batch.mask[b]].any()
            assert np.array_equal(batch.x[b][batch.mask[b]].numpy(),
                                  graph_store.features(batch.node_ids[b][batch.mask[b]].numpy()))
            assert np.array_equal(_slice_ids(batch, b), nodes)  # un-reorder: the graph's order
            padding = np.arange(len(nodes) + 1, batch.seq_len)
            assert np.array_equal(batch.perm[b].numpy()[padding], padding)
            assert np.array_equal(batch.node_ids[b].numpy()[padding], -np.ones_like(padding))
            oracle |= _oracle_entries(indptr, indices, nodes, True, batch.seq_len, b)
            # degrees inside the graph (= the whole graph here: no edge leaves a graph)
            ids = batch.node_ids[b][batch.mask[b]].numpy()
            in_deg = np.diff(indptr)[ids]
            out_deg = np.bincount(indices, minlength=graph_store.num_nodes)[ids]
            assert np.array_equal(batch.in_degree[b][batch.mask[b]].numpy(), np.minimum(in_deg, 6))
            assert np.array_equal(batch.out_degree[b][batch.mask[b]].numpy(), np.minimum(out_deg, 6))
            assert not batch.in_degree[b, ~batch.mask[b]].any()
            spd = _oracle_spd(indptr, indices, nodes, True, batch.seq_len, 4)
            perm = batch.perm[b].numpy()
            assert np.array_equal(batch.spd[b].numpy(), spd[np.ix_(perm, perm)])
        assert _entries(batch) == oracle  # padding rows: exactly their self-loop
        assert batch.offsets is None or batch.batch_size == 1
        seen += graphs.tolist()
    assert sorted(seen) == train.tolist()


def test_graph_level_fixed_len_and_cluster_sparse(graph_store: GraphStore) -> None:
    ptr = np.asarray(graph_store.array("graph/ptr"))
    longest = int(np.diff(ptr).max()) + 1
    with pytest.raises(ValueError, match="'seq_len'"):
        ClusterLoader(graph_store, longest - 1, input_nodes="all")
    with pytest.raises(ValueError, match="'pattern'"):
        ClusterLoader(graph_store, batch_size=2, pattern="cluster-sparse")
    with pytest.raises(ValueError, match="'input_nodes'"):
        ClusterLoader(graph_store, input_nodes=np.array([len(ptr) - 1]))
    loader = ClusterLoader(graph_store, longest + 3, batch_size=1, input_nodes="all", parts=2,
                           pattern="cluster-sparse", block=2, shuffle=False)
    assert len(loader) == len(ptr) - 1
    for g, batch in enumerate(loader):
        assert batch.seq_len == longest + 3 and batch.graph_y.shape == (1,)
        n = ptr[g + 1] - ptr[g]
        offsets = batch.offsets.tolist()
        assert offsets[:2] == [0, 1] and offsets[-2:] == [n + 1, longest + 3]
        direct = cluster_sparse_pattern(batch.indptr, batch.indices, batch.offsets,
                                        threshold=batch.cluster_sparse.threshold, block_size=2,
                                        seed=loader.seed)
        assert np.array_equal(direct.blocks, batch.cluster_sparse.blocks)
        if g == 3:
            break
