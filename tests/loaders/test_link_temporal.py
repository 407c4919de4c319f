"""Temporal link prediction (LinkNeighborLoader with edge_label_time / time_attr): each batch
equals the plain temporal oracle run on its seeds (one tree per endpoint and negative, the
supervision edge's time), no sampled edge is newer than its supervision edge, PyG's
disjoint layout (binary and triplet), seed-edge exclusion across trees, a store's link
split years, and one-line refusals of inconsistent options."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.loaders import LinkNeighborLoader
from graphpipe.loaders.link_seeds import NegativeSpec
from graphpipe.loaders.link_temporal import plan_temporal_link_batch
from graphpipe.ops.sampling.temporal_reference import sample_temporal_reference
from graphpipe.store.link import read_link_split
from graphpipe.synthetic.link import link_dataset, write_ogb_link


def _graph(seed: int, n: int = 60, e: int = 400):
    """A random graph, unique directed pairs both ways, with edge and node times."""
    from torch_geometric.data import Data

    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, e), rng.integers(0, n, e)
    keep = src != dst
    pairs = np.unique(np.stack([np.r_[src[keep], dst[keep]], np.r_[dst[keep], src[keep]]]), axis=1)
    edge_time = rng.integers(0, 50, pairs.shape[1])
    node_time = rng.integers(0, 50, n)
    data = Data(x=torch.from_numpy(rng.standard_normal((n, 3)).astype(np.float32)),
                edge_index=torch.from_numpy(pairs), edge_time=torch.from_numpy(edge_time),
                node_time=torch.from_numpy(node_time), num_nodes=n)
    return data, pairs, edge_time, node_time


def _time_of_pairs(pairs: np.ndarray, edge_time: np.ndarray) -> dict[tuple[int, int], int]:
    return {(int(u), int(v)): int(t) for (u, v), t in zip(pairs.T, edge_time)}


def _csc_time(loader, pair_time: dict) -> np.ndarray:
    """The edge time of every CSC slot of the loader's graph, found by its (src, dst) pair."""
    indptr, indices = np.asarray(loader.graph.indptr), np.asarray(loader.graph.indices)
    dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
    return np.array([pair_time[(int(u), int(v))] for u, v in zip(indices, dst)], dtype=np.int64)


def _key_of(loader, input_id: torch.Tensor) -> int:
    """The key of the batch whose positives are ``input_id`` (batches may be reordered)."""
    batches = loader.epoch_edge_batches(0)
    keys = loader.batch_keys(0, len(batches))
    where = [i for i, b in enumerate(batches) if np.array_equal(b, input_id.numpy())]
    assert len(where) == 1
    return keys[where[0]]


def _reference_pairs(ref, banned: set) -> set[tuple[int, int, int]]:
    """``(tree, src, dst)`` of every reference edge (global IDs), banned pairs dropped."""
    out = set()
    n_id, batch = ref.n_id, ref.batch
    for block in ref.blocks:
        dst = np.repeat(np.arange(block.num_dst), np.diff(block.indptr))
        for u, v in zip(block.indices, dst):
            pair = (int(n_id[u]), int(n_id[v]))
            if pair not in banned:
                out.add((int(batch[v]), *pair))
    return out


def _batch_pairs(batch) -> set[tuple[int, int, int]]:
    src, dst = batch.edge_index
    return set(zip(batch.batch[dst].tolist(), batch.n_id[src].tolist(), batch.n_id[dst].tolist()))


@pytest.mark.parametrize("graph_seed", range(6))
@pytest.mark.parametrize("mode", [None, "binary", "triplet"])
def test_batches_are_the_oracle_per_endpoint_and_never_newer_than_their_edge(graph_seed, mode) -> None:
    data, pairs, edge_time, _node_time = _graph(graph_seed)
    rng = np.random.default_rng(100 + graph_seed)
    label_index = pairs[:, rng.choice(pairs.shape[1], 40, replace=False)]
    label_time = rng.integers(0, 50, 40)
    strategy = ["uniform", "last"][graph_seed % 2]
    exclude = graph_seed % 3 == 0
    neg = None if mode is None else {"mode": mode, "amount": 2}
    loader = LinkNeighborLoader(data, [3, 2], edge_label_index=torch.from_numpy(label_index),
                                edge_label_time=torch.from_numpy(label_time), time_attr="edge_time",
                                temporal_strategy=strategy, neg_sampling=neg, batch_size=8,
                                shuffle=True, seed=graph_seed, exclude_seed_edges=exclude)
    pair_time = _time_of_pairs(pairs, edge_time)
    csc_time = _csc_time(loader, pair_time)
    seen, removed = [], 0
    for batch in loader:
        pos = batch.input_id.numpy()
        p, seeds = pos.shape[0], batch.n_id[:batch.batch_size].numpy()
        t = label_time[pos]
        # the supervision edges and their times, PyG's disjoint layout
        if mode == "triplet":
            assert np.array_equal(seeds[batch.src_index], label_index[0][pos])
            assert np.array_equal(seeds[batch.dst_pos_index], label_index[1][pos])
            assert batch.dst_neg_index.shape == (p, 2)
            assert np.array_equal(batch.seed_time[batch.dst_neg_index].numpy(), np.stack([t, t], 1))
            assert np.array_equal(batch.edge_label_time.numpy(), t)
        else:
            eli = batch.edge_label_index.numpy()
            assert np.array_equal(eli, np.arange(seeds.shape[0]).reshape(2, -1))
            assert np.array_equal(seeds[eli[:, :p]], label_index[:, pos])
            m = 0 if mode is None else 2 * p
            assert np.array_equal(batch.edge_label_time.numpy(), np.resize(t, p + m))
            assert np.array_equal(batch.seed_time.numpy(), np.tile(np.resize(t, p + m), 2))
        # the plain oracle: one temporal tree per seed at its time, on the batch's key
        ref = sample_temporal_reference(loader.graph.indptr, loader.graph.indices, seeds,
                                        batch.seed_time.numpy(), [3, 2], edge_time=csc_time,
                                        strategy=strategy, seed=_key_of(loader, batch.input_id))
        assert torch.equal(batch.n_id, torch.from_numpy(ref.n_id))
        assert torch.equal(batch.batch, torch.from_numpy(ref.batch))
        banned = set()
        if exclude:
            banned = {(int(u), int(v)) for u, v in label_index[:, pos].T} | \
                     {(int(v), int(u)) for u, v in label_index[:, pos].T}
        got = _batch_pairs(batch)
        assert got == _reference_pairs(ref, banned)
        removed += len(_reference_pairs(ref, set()) - got)
        assert not (exclude and {(u, v) for _, u, v in got} & banned)
        # the property itself: no sampled edge newer than its tree's supervision edge
        for tree, u, v in got:
            assert pair_time[(u, v)] <= int(batch.seed_time[tree])
            assert pair_time[(u, v)] <= int(t[tree % p])
        assert torch.equal(batch.edge_time, torch.from_numpy(csc_time[_slots(loader, batch)]))
        seen.append(batch.input_id)
    assert sorted(torch.cat(seen).tolist()) == list(range(40))
    assert (removed > 0) == exclude   # the supervision edges were there to remove


def _slots(loader, batch) -> np.ndarray:
    """CSC slot of each edge_index column, found by its (src, dst) pair."""
    indptr, indices = np.asarray(loader.graph.indptr), np.asarray(loader.graph.indices)
    out = []
    for u, v in batch.n_id[batch.edge_index].T.tolist():
        row = np.arange(indptr[v], indptr[v + 1])
        out.append(int(row[indices[row] == u][0]))
    return np.array(out, dtype=np.int64)


@pytest.mark.parametrize("mode", ["binary", "triplet"])
def test_node_time_negatives_are_never_newer_than_their_edge(mode) -> None:
    data, _pairs, _edge_time, node_time = _graph(7)
    rng = np.random.default_rng(7)
    label_index = data.edge_index[:, rng.choice(data.edge_index.shape[1], 30, replace=False)]
    label_time = torch.from_numpy(rng.integers(10, 50, 30))
    loader = LinkNeighborLoader(data, [-1, -1], edge_label_index=label_index, edge_label_time=label_time,
                                time_attr="node_time", neg_sampling={"mode": mode, "amount": 3},
                                batch_size=10, seed=1)
    node_time = torch.from_numpy(node_time)
    for batch in loader:
        seeds = batch.n_id[:batch.batch_size]
        neg = seeds[batch.edge_label_index[:, batch.edge_label == 0]].reshape(-1) if mode == "binary" \
            else seeds[batch.dst_neg_index].reshape(-1)
        neg_time = (batch.seed_time[batch.edge_label_index[:, batch.edge_label == 0]].reshape(-1)
                    if mode == "binary" else batch.seed_time[batch.dst_neg_index].reshape(-1))
        assert bool((node_time[neg] <= neg_time).all())
        # node-level time: every sampled neighbour is no newer than its tree's time
        src, dst = batch.edge_index
        assert bool((node_time[batch.n_id[src]] <= batch.seed_time[batch.batch[dst]]).all())
        ref = sample_temporal_reference(loader.graph.indptr, loader.graph.indices, seeds.numpy(),
                                        batch.seed_time.numpy(), [-1, -1], node_time=node_time.numpy(),
                                        seed=_key_of(loader, batch.input_id))
        assert torch.equal(batch.n_id, torch.from_numpy(ref.n_id))
        assert _batch_pairs(batch) == _reference_pairs(ref, set())
        assert (batch.edge_index.shape[1] > 0)


def test_negatives_are_redrawn_until_valid_then_the_oldest_node() -> None:
    node_time = np.array([0, 100, 100, 100, 100, 100, 100, 100])  # only node 0 is old enough
    s = plan_temporal_link_batch(np.array([0, 1]), np.array([1, 2]), np.array([2, 3]), np.array([5, 5]),
                                 None, NegativeSpec("binary", 4), 8, key=3, node_time=node_time)
    neg = s.nodes[s.edge_label_index[:, 2:]].reshape(-1)
    assert (node_time[neg] <= 5).all() and (neg == 0).all()


@pytest.fixture(scope="module")
def link_store(tmp_path_factory):
    root = tmp_path_factory.mktemp("tlink")
    folder = write_ogb_link(root / "collab", link_dataset(200, avg_degree=6, feature_dim=4, pool=20),
                            num_neg=20)
    return ingest(folder, root / "store")


def test_a_store_split_uses_its_years_and_time_attr_none_changes_nothing(link_store) -> None:
    train = read_link_split(link_store, "train")
    assert train.year is not None
    loader = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", time_attr="edge_time",
                                neg_sampling="binary", batch_size=64, seed=3, exclude_seed_edges=True)
    named = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", edge_label_time="train",
                               time_attr="edge_time", neg_sampling="binary", batch_size=64, seed=3,
                               exclude_seed_edges=True, prefetch=0)
    csc_time = link_store.edge_time()
    for a, b in zip(loader, named):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_label_time, b.edge_label_time)
        p = a.input_id.numel()
        assert torch.equal(a.edge_label_time[:p], torch.from_numpy(train.year[a.input_id.numpy()]))
        assert bool((a.edge_time <= a.seed_time[a.batch[a.edge_index[1]]]).all())
        assert a.edge_time.numel() == a.edge_index.shape[1] and csc_time is not None
    pyg = a.to_pyg()
    assert torch.equal(pyg.edge_label_time, a.edge_label_time) and torch.equal(pyg.seed_time, a.seed_time)
    plain = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", neg_sampling="binary",
                               batch_size=64, seed=3)
    last = LinkNeighborLoader(link_store, [4, 2], edge_label_index="train", neg_sampling="binary",
                              batch_size=64, seed=3, temporal_strategy="last")   # no time_attr: no effect
    for a, b in zip(plain, last):
        assert a.edge_label_time is None and a.seed_time is None
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
    assert math.ceil(train.num_pos / 64) == len(loader)


@pytest.mark.parametrize("kwargs, message", [
    ({"edge_label_time": np.zeros(5, np.int64)}, "'edge_label_time' is set while 'time_attr' is not set"),
    ({"temporal_strategy": "recent"}, "must be one of"),
    ({"time_attr": "edge_time"}, "needs 'edge_label_time'"),
    ({"time_attr": "edge_time", "edge_label_time": np.zeros(4, np.int64)}, r"shape \(5,\)"),
    ({"time_attr": "edge_time", "edge_label_time": np.zeros(5, np.int64), "temporal_strategy": "new"},
     "temporal_strategy"),
    ({"time_attr": "nope", "edge_label_time": np.zeros(5, np.int64)}, "neither"),
    ({"time_attr": "edge_time", "edge_label_time": np.zeros(5, np.int64), "input_time": [1]}, "input_time"),
    ({"time_attr": "edge_time", "edge_label_time": np.full(5, 0.5)}, "integer timestamps"),
])
def test_inconsistent_options_are_refused_in_one_line(kwargs, message) -> None:
    data, pairs, _t, _n = _graph(1)
    with pytest.raises(ValueError, match=message) as err:
        LinkNeighborLoader(data, [2], edge_label_index=torch.from_numpy(pairs[:, :5]), **kwargs)
    assert "\n" not in str(err.value)


def test_split_without_years_is_refused(link_store) -> None:
    with pytest.raises(ValueError, match="names another split"):
        LinkNeighborLoader(link_store, [2], edge_label_index="train", edge_label_time="valid",
                           time_attr="edge_time")
    src, dst = read_link_split(link_store, "train").src[:4], read_link_split(link_store, "train").dst[:4]
    with pytest.raises(ValueError, match="needs 'edge_label_time'"):
        LinkNeighborLoader(link_store, [2], edge_label_index=(src, dst), time_attr="edge_time")
