"""NeighborLoader end to end on a small store: features bit for bit, labels, epoch coverage,
Match-Reorder order, statistics, PyG equivalence, determinism, prefetch and errors."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.derive import write_centrality
from graphpipe.loaders import BaseSampler, MiniBatch, NeighborLoader
from graphpipe.ops.features.reorder import greedy_reorder, match_degree_matrix, overlap_matrix
from graphpipe.ops.sampling import sample_neighbors
from graphpipe.store import GraphStore, StoreWriter

N, DIM, CHUNK_ROWS = 3000, 8, 256
FANOUTS = [5, 4, 3]


def _graph(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """CSC of a graph with skewed sources (hubs) so that batches overlap."""
    rng = np.random.default_rng(seed)
    deg = rng.integers(0, 16, size=N)
    deg[rng.choice(N, 100, replace=False)] = 0  # some zero-in-degree nodes
    indptr = np.zeros(N + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    weights = 1.0 / np.arange(1, N + 1) ** 0.8
    weights /= weights.sum()
    indices = np.empty(int(indptr[-1]), dtype=np.int32)
    for v in range(N):
        k = int(deg[v])
        indices[indptr[v]:indptr[v + 1]] = np.sort(rng.choice(N, size=k, replace=False, p=weights))
    return indptr, indices


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> GraphStore:
    path = tmp_path_factory.mktemp("loader") / "store"
    indptr, indices = _graph()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, DIM)).astype(np.float32)
    y = rng.integers(0, 7, size=N).astype(np.int64)
    perm = rng.permutation(N)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(len(indices), dtype=np.int64))
        w.write_array("node/feat", x, chunk_rows=CHUNK_ROWS)
        w.write_array("node/label", y)
        w.write_splits({"train": np.sort(perm[:1700]), "valid": np.sort(perm[1700:2300]),
                        "test": np.sort(perm[2300:])})
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, len(indices)
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [N], "dtype": "int64", "task_type": "multiclass", "num_classes": 7}
        w.commit()
    opened = GraphStore.open(path)
    assert len(opened.feature_chunks()[0]) > 1  # the gather crosses chunk views
    return opened


def _epoch(loader: NeighborLoader) -> list[MiniBatch]:
    return list(loader)


def _same_batches(a: list[MiniBatch], b: list[MiniBatch]) -> None:
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert torch.equal(p.n_id, q.n_id) and torch.equal(p.edge_index, q.edge_index)
        assert torch.equal(p.x, q.x) and torch.equal(p.y, q.y)
        for bp, bq in zip(p.blocks, q.blocks):
            assert torch.equal(bp.indptr, bq.indptr) and torch.equal(bp.indices, bq.indices)


@pytest.mark.parametrize("match_reorder", [True, "match", False])
@pytest.mark.parametrize("cache", [None, "degree"])
def test_features_labels_bitwise(store: GraphStore, match_reorder, cache) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=128, match_reorder=match_reorder, window=4, cache=cache,
                            cache_rows=0.1, seed=3, prefetch=1, input_nodes="train", shuffle=True)
    labels = store.labels
    for _ in range(2):  # the second epoch matches against the last batch of the first
        for batch in loader:
            n_id = batch.n_id.numpy()
            expected = store.features(n_id)
            assert batch.x.dtype == torch.float32
            assert np.array_equal(batch.x.numpy().view(np.uint32), expected.view(np.uint32))
            assert np.array_equal(batch.y.numpy(), labels[n_id])  # every node, seeds first
        s = loader.stats
        assert s.rows_needed == s.rows_gathered + s.rows_reused + s.rows_cached
        assert s.batches == len(loader) and s.seeds == 1700
        if match_reorder is False:
            assert s.rows_reused == 0
        else:
            assert s.rows_reused > 0
        assert (s.rows_cached > 0) == (cache == "degree")
        assert 0.0 < s.match_degree_mean <= 1.0


def test_degree_cache_uses_stored_order(store: GraphStore, tmp_path: Path) -> None:
    write_centrality(store, "quartile", 4)
    loader = NeighborLoader(store, FANOUTS, batch_size=256, cache="degree", cache_rows=50, seed=0, input_nodes="train", shuffle=True)
    stored = store.array("derived/degree_order")
    assert np.array_equal(loader.cache.ids, stored[:50])
    assert np.array_equal(loader.cache.rows, store.features(stored[:50]))


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("drop_last", [True, False])
def test_every_seed_once(store: GraphStore, shuffle: bool, drop_last: bool) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=300, shuffle=shuffle, drop_last=drop_last, window=3, seed=5, input_nodes="train")
    train = store.split("train")
    seen = np.concatenate([b.seeds.numpy() for b in loader])
    expected = len(train) // 300 if drop_last else -(-len(train) // 300)
    assert len(loader) == expected
    assert len(np.unique(seen)) == len(seen)
    assert set(seen.tolist()) <= set(train.tolist())
    if not drop_last:
        assert np.array_equal(np.sort(seen), train)
    else:
        assert len(seen) == expected * 300
        planned = np.concatenate(loader.epoch_batches(0))
        assert np.array_equal(np.sort(seen), np.sort(planned))  # the dropped tail is the plan's
    for b in loader:
        assert b.batch_size == len(b.seeds) and b.blocks[-1].num_dst == b.batch_size
        assert b.blocks[0].num_src == b.num_nodes


def test_batches_follow_greedy_order(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, window=5, seed=11, shuffle=True, input_nodes="train",
                            match_reorder=True)
    batches = _epoch(loader)
    planned = loader.epoch_batches(0)
    keys = loader.batch_keys(0, len(planned))
    index_of = {int(seeds[0]): i for i, seeds in enumerate(planned)}
    produced = [index_of[int(b.seeds[0])] for b in batches]
    assert sorted(produced) == list(range(len(planned)))
    for start in range(0, len(planned), 5):
        window = list(range(start, min(start + 5, len(planned))))
        outs = [sample_neighbors(store.indptr, store.indices, planned[i], FANOUTS, seed=keys[i])
                for i in window]
        expected = [start + int(i) for i in greedy_reorder(match_degree_matrix([o.n_id for o in outs]))] \
            if len(window) > 2 else window
        assert produced[start:start + len(window)] == expected
        for i in window:
            got = batches[produced.index(i)]
            assert np.array_equal(got.n_id.numpy(), outs[i - start].n_id)


def test_match_reorder_reads_fewer_rows(store: GraphStore) -> None:
    gathered = {}
    for mode in (False, "match", True):
        loader = NeighborLoader(store, FANOUTS, batch_size=100, match_reorder=mode, window=8, seed=2, input_nodes="train", shuffle=True)
        _epoch(loader)
        gathered[mode] = loader.stats.rows_gathered
    assert gathered["match"] < gathered[False]
    assert gathered[True] <= gathered["match"] * 1.05  # statistical (fastgl.md R8), not per window


def test_pyg_sage_on_batch_equals_hand_built_subgraph(store: GraphStore) -> None:
    from torch_geometric.nn import SAGEConv

    torch.manual_seed(0)
    conv = SAGEConv(DIM, 5)
    loader = NeighborLoader(store, FANOUTS, batch_size=64, seed=7, shuffle=True, input_nodes="train")
    indptr, indices = store.indptr, store.indices
    for batch in list(loader)[:3]:
        data = batch.to_pyg()
        n_id = batch.n_id.numpy()
        local = {int(g): i for i, g in enumerate(n_id)}
        # by hand: the edges' store positions -> global (src, dst) -> local IDs of n_id
        e_id = data.e_id.numpy()
        src_global = indices[e_id].astype(np.int64)
        dst_global = np.searchsorted(indptr, e_id, side="right") - 1
        hand = torch.tensor([[local[int(s)] for s in src_global], [local[int(d)] for d in dst_global]])
        assert torch.equal(hand, data.edge_index)
        x = torch.from_numpy(store.features(n_id))
        assert torch.equal(conv(x, hand), conv(data.x, data.edge_index))
        # PyG semantics: hop 1 targets the seeds; every node's in-edges come from one hop only
        hop1 = data.edge_index[:, : batch.num_sampled_edges[0]]
        assert int(hop1[1].max()) < batch.batch_size
        assert sum(batch.num_sampled_edges) == data.edge_index.shape[1]
        assert sum(batch.num_sampled_nodes) == batch.num_nodes
        starts = np.cumsum([0] + batch.num_sampled_nodes)
        col = data.edge_index[1].numpy()
        offsets = np.cumsum([0] + batch.num_sampled_edges)
        for h in range(len(FANOUTS)):
            part = col[offsets[h]:offsets[h + 1]]
            assert part.size == 0 or (part.min() >= starts[h] and part.max() < starts[h + 1])
            if h == 0:  # every seed with in-edges gets min(fanout, deg) of them
                deg = np.diff(indptr)[n_id[: batch.batch_size]]
                assert np.array_equal(np.bincount(part, minlength=batch.batch_size),
                                      np.minimum(deg, FANOUTS[0]))


def test_deterministic_and_prefetch_invariant(store: GraphStore) -> None:
    runs = [_epoch(NeighborLoader(store, FANOUTS, batch_size=200, seed=42, prefetch=p, window=w, input_nodes="train", shuffle=True))
            for p, w in ((0, 4), (3, 4), (2, 4))]
    _same_batches(runs[0], runs[1])
    _same_batches(runs[0], runs[2])
    other = _epoch(NeighborLoader(store, FANOUTS, batch_size=200, seed=43, prefetch=0, window=4, input_nodes="train", shuffle=True))
    assert not all(torch.equal(a.n_id, b.n_id) for a, b in zip(runs[0], other))
    loader = NeighborLoader(store, FANOUTS, batch_size=200, seed=42, prefetch=0, window=4, input_nodes="train", shuffle=True)
    first, second = _epoch(loader), _epoch(loader)
    _same_batches(first, runs[0])
    assert not torch.equal(first[0].n_id, second[0].n_id)  # a new shuffle each epoch


class _WrappedSampler(BaseSampler):
    """A pluggable sampler: one batch at a time through the public kernel."""

    def __init__(self, store: GraphStore):
        self.store = store
        self.calls = 0

    def sample_from_nodes(self, seed_batches, seeds):
        self.calls += 1
        return [sample_neighbors(self.store.indptr, self.store.indices, b, FANOUTS, seed=k)
                for b, k in zip(seed_batches, seeds)]


def test_pluggable_sampler(store: GraphStore) -> None:
    plugged = _WrappedSampler(store)
    a = _epoch(NeighborLoader(store, FANOUTS, batch_size=200, seed=9, sampler=plugged, window=3, input_nodes="train", shuffle=True))
    b = _epoch(NeighborLoader(store, FANOUTS, batch_size=200, seed=9, window=3, input_nodes="train", shuffle=True))
    _same_batches(a, b)
    assert plugged.calls == -(-len(a) // 3)


class _FailingSampler(BaseSampler):
    def sample_from_nodes(self, seed_batches, seeds):
        raise RuntimeError("sampler exploded")


def test_sampler_error_reaches_the_caller(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=200, sampler=_FailingSampler(), prefetch=2, input_nodes="train", shuffle=True)
    with pytest.raises(RuntimeError, match="exploded"):
        next(iter(loader))
    assert not [t for t in threading.enumerate() if t.name.startswith("graphpipe-prefetch")]


def _loader_threads() -> list[threading.Thread]:
    """Threads a loader starts (the sampler's own worker pool is long-lived by design)."""
    return [t for t in threading.enumerate()
            if t.name.startswith(("graphpipe-prefetch", "graphpipe-sample-ahead"))]


def test_abandoned_iterator_leaks_no_thread(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=50, prefetch=2, window=2, seed=1, input_nodes="train", shuffle=True)
    it = iter(loader)
    next(it)
    next(it)
    assert _loader_threads()  # the prefetch (and sample-ahead) threads run
    del it
    gc.collect()
    assert not _loader_threads()
    # a new epoch after an abandoned one still yields correct features
    for batch in list(loader)[:5]:
        assert np.array_equal(batch.x.numpy(), store.features(batch.n_id.numpy()))
    it = iter(loader)
    next(it)
    iter(loader)  # starting another epoch closes the running one
    assert sum(t.name.startswith("graphpipe-prefetch") for t in threading.enumerate()) <= 1


def test_reorder_by_overlap(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, window=6, seed=12, reorder_by="overlap", input_nodes="train", shuffle=True,
                            match_reorder=True)
    batches = _epoch(loader)
    planned = loader.epoch_batches(0)
    keys = loader.batch_keys(0, len(planned))
    index_of = {int(seeds[0]): i for i, seeds in enumerate(planned)}
    produced = [index_of[int(b.seeds[0])] for b in batches]
    outs = [sample_neighbors(store.indptr, store.indices, planned[i], FANOUTS, seed=keys[i])
            for i in range(6)]
    counts = overlap_matrix([o.n_id for o in outs])[0].astype(float)
    assert produced[:6] == greedy_reorder(counts).tolist()
    assert sorted(produced) == list(range(len(planned)))
    for b in batches:
        assert np.array_equal(b.x.numpy(), store.features(b.n_id.numpy()))
    with pytest.raises(ValueError, match="'reorder_by'"):
        NeighborLoader(store, FANOUTS, batch_size=100, reorder_by="size", input_nodes="train", shuffle=True)


def test_array_inputs_and_no_features(store: GraphStore) -> None:
    x = torch.from_numpy(store.features())
    y = torch.from_numpy(np.asarray(store.labels))
    train = store.split("train")
    tup = NeighborLoader((store.indptr, store.indices, x, y), FANOUTS, batch_size=256, input_nodes=train, seed=4, shuffle=True)
    dic = NeighborLoader({"indptr": store.indptr, "indices": store.indices, "x": x, "y": y,
                          "splits": {"train": train}}, FANOUTS, batch_size=256, seed=4, input_nodes="train", shuffle=True)
    ref = NeighborLoader(store, FANOUTS, batch_size=256, seed=4, input_nodes="train", shuffle=True)
    _same_batches(_epoch(tup), _epoch(ref))
    _same_batches(_epoch(dic), _epoch(NeighborLoader(store, FANOUTS, batch_size=256, seed=4, input_nodes="train", shuffle=True)))
    mask = np.zeros(N, dtype=bool)
    mask[train] = True
    masked = NeighborLoader(str(store.path), FANOUTS, batch_size=256, input_nodes=torch.from_numpy(mask), seed=4, shuffle=True)
    _same_batches(_epoch(masked), _epoch(NeighborLoader(store, FANOUTS, batch_size=256, seed=4, input_nodes="train", shuffle=True)))
    topo = NeighborLoader((store.indptr, store.indices), FANOUTS, batch_size=500, input_nodes=None, features=False, shuffle=True)
    batches = _epoch(topo)
    assert all(b.x is None and b.y is None for b in batches) and len(batches) == 6
    assert topo.stats.rows_needed == 0


def test_progress_bar_runs_and_stops(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=500, progress=True, input_nodes="valid", shuffle=True)
    assert len(_epoch(loader)) == 2
    before = set(threading.enumerate())
    it = iter(loader)
    next(it)
    del it  # abandoned: the bar's refresh thread stops too
    gc.collect()
    assert set(threading.enumerate()) <= before


def test_to_device_cpu_roundtrip(store: GraphStore) -> None:
    batch = next(iter(NeighborLoader(store, FANOUTS, batch_size=100, seed=0, prefetch=0, input_nodes="train", shuffle=True)))
    moved = batch.to("cpu")
    assert torch.equal(moved.x, batch.x) and moved.blocks[0].num_src == batch.blocks[0].num_src
    dst = batch.blocks[-1].dst_of_edges()
    assert dst.numel() == batch.blocks[-1].num_edges and int(dst.max()) < batch.batch_size


def test_errors(store: GraphStore) -> None:
    cases = [
        ({"fanouts": []}, "'fanouts'"),
        ({"fanouts": [5, -2]}, "'fanouts'"),
        ({"batch_size": 0}, "'batch_size'"),
        ({"input_nodes": np.array([0, N])}, "'input_nodes'"),
        ({"input_nodes": np.array([-1])}, "'input_nodes'"),
        ({"input_nodes": "holdout"}, "'input_nodes'"),
        ({"window": 0}, "'window'"),
        ({"prefetch": -1}, "'prefetch'"),
        ({"cache": "lru"}, "'cache'"),
        ({"cache": "degree", "cache_rows": 1.5}, "'cache_rows'"),
        ({"match_reorder": "yes"}, "'match_reorder'"),
        ({"device": "warp-drive"}, "'device'"),
    ]
    for kwargs, name in cases:
        args = {"fanouts": FANOUTS, "batch_size": 10} | kwargs
        with pytest.raises(ValueError, match=name):
            NeighborLoader(store, **args)
    with pytest.raises(ValueError, match="'data'"):
        NeighborLoader((store.indptr, store.indices), FANOUTS, batch_size=10, input_nodes=None, shuffle=True)
    with pytest.raises(ValueError, match="'data'"):
        NeighborLoader(42, FANOUTS, batch_size=10, input_nodes="train", shuffle=True)


@pytest.mark.parametrize("cache", [None, "degree"])
def test_device_assembly_path_on_cpu(store: GraphStore, cache) -> None:
    """The CUDA path (store rows staged, reused rows copied from the previous batch's device
    buffer by the transfer stage) run on the CPU: same rows, bit for bit, also when an
    abandoned epoch leaves the plan pointing at a batch that never reached the device."""
    loader = NeighborLoader(store, FANOUTS, batch_size=150, window=4, seed=21, cache=cache, cache_rows=0.05,
                            prefetch=2, input_nodes="train", shuffle=True,
                            match_reorder=True)  # what "auto" gives on a CUDA device
    loader.gather.on_device = True  # what device="cuda" selects
    it = iter(loader)
    next(it)
    del it
    gc.collect()
    for _ in range(2):
        for batch in loader:
            assert np.array_equal(batch.x.numpy(), store.features(batch.n_id.numpy()))
        s = loader.stats
        assert s.rows_needed == s.rows_gathered + s.rows_reused + s.rows_cached and s.rows_reused > 0


def test_recycled_buffers_never_overwrite_held_rows(store: GraphStore) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=30, prefetch=0, window=3, input_nodes="train", shuffle=True)
    kept = []
    seen_buffers = set()
    for i, batch in enumerate(loader):
        assert np.array_equal(batch.x.numpy(), store.features(batch.n_id.numpy()))
        seen_buffers.add(batch.x.numpy().__array_interface__["data"][0])
        if i % 5 == 0:  # hold a slice of some batches: their buffers must stay untouched
            kept.append((batch.x[:7], store.features(batch.n_id.numpy()[:7])))
        del batch
    assert len(loader.gather._pool) <= loader.gather._POOL_SIZE
    assert len(seen_buffers) < len(loader)  # released buffers were reused
    for rows, expected in kept:
        assert np.array_equal(rows.numpy(), expected)


def test_store_without_features(tmp_path: Path) -> None:
    indptr, indices = _graph(3)
    with StoreWriter(tmp_path / "topo") as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_splits({"train": np.arange(100)})
        w.manifest["num_nodes"], w.manifest["num_edges"] = N, len(indices)
        w.commit()
    with pytest.raises(ValueError, match="'data' has no node features"):
        NeighborLoader(tmp_path / "topo", FANOUTS, batch_size=10, input_nodes="train", shuffle=True)
    topo = NeighborLoader(tmp_path / "topo", FANOUTS, batch_size=40, features=False, cache="degree", input_nodes="train", shuffle=True)
    batches = _epoch(topo)
    assert len(batches) == 3 and all(b.x is None and b.y is None for b in batches)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_cuda_without_cuda_is_an_error(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="'device'"):
        NeighborLoader(store, FANOUTS, batch_size=10, device="cuda", input_nodes="train", shuffle=True)


@pytest.mark.parametrize("prefetch", [0, 2])
def test_in_place_change_of_x_is_caught(store: GraphStore, prefetch: int) -> None:
    loader = NeighborLoader(store, FANOUTS, batch_size=100, seed=3, prefetch=prefetch, input_nodes="train", shuffle=True,
                            match_reorder=True)
    it = iter(loader)
    batch = next(it)
    batch.x.mul_(2.0)  # rows the next batch reuses are no longer the store's
    with pytest.raises(RuntimeError, match="modified in place"):
        next(it)
    assert not _loader_threads()
    # without Match nothing is reused, so in-place work on x is harmless
    plain = NeighborLoader(store, FANOUTS, batch_size=100, seed=3, prefetch=prefetch, match_reorder=False, input_nodes="train", shuffle=True)
    for batch in plain:
        batch.x.mul_(2.0)
        assert np.array_equal(batch.x.numpy(), 2.0 * store.features(batch.n_id.numpy()))
    # cloning first is the documented way
    for batch in NeighborLoader(store, FANOUTS, batch_size=100, seed=3, prefetch=prefetch, input_nodes="train", shuffle=True,
                                match_reorder=True):
        x = batch.x.clone()
        x.mul_(2.0)
        assert np.array_equal(batch.x.numpy(), store.features(batch.n_id.numpy()))


@pytest.mark.parametrize("match_reorder,cache", [(True, None), ("match", "degree"), (False, None)])
def test_store_path_loads_in_memory_and_yields_the_same_batches(store: GraphStore, match_reorder,
                                                                cache) -> None:
    """A loader given a store path opens it with in_memory="auto" (one in-memory feature array:
    the single-array gather path); its batches equal those over the memory-mapped store."""
    kwargs = {"match_reorder": match_reorder, "window": 4, "cache": cache, "cache_rows": 0.1,
              "seed": 5, "prefetch": 1}
    from_path = NeighborLoader(store.path, FANOUTS, batch_size=128, **kwargs)
    assert from_path.graph.store.in_memory_arrays == ["csc/indices", "csc/indptr", "node/feat",
                                                     "node/label"]
    assert len(from_path.graph.feature_chunks) == 1 and len(store.feature_chunks()[0]) > 1
    mapped = NeighborLoader(store, FANOUTS, batch_size=128, **kwargs)
    for _ in range(2):
        a, b = _epoch(from_path), _epoch(mapped)
        _same_batches(a, b)
        for batch in a:
            expected = store.features(batch.n_id.numpy())
            assert np.array_equal(batch.x.numpy().view(np.uint32), expected.view(np.uint32))
    assert from_path.stats.as_dict() | {"sample_s": 0, "gather_s": 0, "wait_s": 0, "reorder_s": 0} == \
        mapped.stats.as_dict() | {"sample_s": 0, "gather_s": 0, "wait_s": 0, "reorder_s": 0}


def test_in_place_change_of_n_id_does_not_mislead_match(store: GraphStore) -> None:
    """Match finds reusable rows by the previous batch's IDs; the loader keeps its own copy,
    so a caller rewriting batch.n_id in place cannot make it copy rows of the wrong nodes."""
    loader = NeighborLoader(store, FANOUTS, batch_size=128, match_reorder=True, window=4, seed=11, prefetch=0, input_nodes="train", shuffle=True)
    for batch in loader:
        n_id = batch.n_id.numpy()
        expected = store.features(n_id)
        assert np.array_equal(batch.x.numpy().view(np.uint32), expected.view(np.uint32))
        batch.n_id[:] = batch.n_id.flip(0)  # scramble the IDs the caller holds
    assert loader.stats.rows_reused > 0
