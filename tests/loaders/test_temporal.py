"""NeighborLoader's temporal sampling (PyG's time_attr / input_time / temporal_strategy):
batches equal the temporal kernel on the loader's keys, no edge is newer than its
tree's seed time (edge-level and node-level, store and PyG Data), repeated input nodes,
and time_attr=None leaves every batch as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ingest import IngestOptions, ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.loaders.link_loader import LinkNeighborLoader
from graphpipe.loaders.temporal import TemporalSampler
from graphpipe.ops.sampling.temporal import sample_temporal, temporal_graph

N, E = 300, 3000


@pytest.fixture(scope="module")
def arrays():
    rng = np.random.default_rng(0)
    return {"edge_index": rng.integers(0, N, (2, E)), "x": rng.standard_normal((N, 3)).astype(np.float32),
            "y": rng.integers(0, 4, N), "edge_time": rng.integers(0, 1000, E),
            "node_year": rng.integers(0, 1000, N)}


@pytest.fixture(scope="module")
def store(tmp_path_factory, arrays):
    path = tmp_path_factory.mktemp("temporal") / "g.npz"
    np.savez(path, **arrays)
    return ingest(path, path.parent / "store")


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory, arrays):
    path = tmp_path_factory.mktemp("plain") / "g.npz"
    np.savez(path, **{k: v for k, v in arrays.items() if k not in ("edge_time", "node_year")})
    return ingest(path, path.parent / "store", IngestOptions(edge_ids="always"))  # e_id as the other


def _check_no_future(batch, edge_time_of) -> None:
    """Every edge_index column no newer than the seed time of its destination's tree."""
    dst = batch.edge_index[1]
    tree_time = batch.seed_time[batch.batch[dst]]
    assert bool((edge_time_of(batch) <= tree_time).all())
    assert torch.equal(batch.node_seed_time, batch.seed_time[batch.batch])


@pytest.mark.parametrize("strategy", ["uniform", "last"])
@pytest.mark.parametrize("prefetch", [0, 2])
def test_edge_time_batches_are_the_kernel_on_the_loader_keys(store, strategy: str, prefetch: int) -> None:
    rng = np.random.default_rng(1)
    nodes = rng.integers(0, N, 100)                       # repeats: one tree per occurrence
    when = rng.integers(0, 1000, 100)
    loader = NeighborLoader(store, [4, 3], input_nodes=nodes, input_time=torch.from_numpy(when),
                            time_attr="edge_time", temporal_strategy=strategy, batch_size=32,
                            shuffle=True, seed=5, prefetch=prefetch)
    graph = temporal_graph(store.indptr, store.indices, edge_time=store.edge_time())
    keys = loader.batch_keys(0, len(loader))
    positions = loader.epoch_positions(0)
    seen = []
    for batch, key, pos in zip(loader, keys, positions):
        want = sample_temporal(graph, nodes[pos], when[pos], [4, 3], strategy=strategy, seed=key)
        assert torch.equal(batch.n_id, torch.from_numpy(want.n_id))
        assert torch.equal(batch.batch, torch.from_numpy(want.batch))
        assert torch.equal(batch.input_id, torch.from_numpy(pos))
        assert torch.equal(batch.seed_time, torch.from_numpy(when[pos]))
        assert torch.equal(batch.x, torch.from_numpy(store.features(want.n_id)))
        assert torch.equal(batch.edge_time, torch.from_numpy(store.edge_time()[_slots(batch, store)]))
        _check_no_future(batch, lambda b: b.edge_time)
        seen.append(batch.input_id)
    assert sorted(torch.cat(seen).tolist()) == list(range(100))


def _slots(batch, store) -> np.ndarray:
    """CSC slot of every edge_index column (from e_id: the input edge, through csc/edge_id)."""
    slot_of = np.empty(store.edge_id.shape[0], dtype=np.int64)
    slot_of[np.asarray(store.edge_id)] = np.arange(store.edge_id.shape[0])
    return slot_of[batch.e_id.numpy()]


def test_node_time_from_a_store_defaults_seed_times_to_node_times(store) -> None:
    node_time = torch.from_numpy(np.array(store.node_time()))
    loader = NeighborLoader(store, [5, 5], time_attr="time", batch_size=64, seed=2)
    for batch in loader:
        assert torch.equal(batch.seed_time, node_time[batch.n_id[:batch.batch_size]])
        assert torch.equal(batch.time, node_time[batch.n_id])
        _check_no_future(batch, lambda b: b.time[b.edge_index[0]])   # the neighbour's time


def test_pyg_data_node_and_edge_attributes(arrays) -> None:
    from torch_geometric.data import Data

    data = Data(x=torch.from_numpy(arrays["x"]), edge_index=torch.from_numpy(arrays["edge_index"]),
                time=torch.from_numpy(arrays["node_year"]), stamp=torch.from_numpy(arrays["edge_time"]))
    by_node = NeighborLoader(data, [3, 3], time_attr="time", batch_size=50, seed=0)
    for batch in by_node:
        _check_no_future(batch, lambda b: b.time[b.edge_index[0]])
    when = torch.full((N,), 500)
    by_edge = NeighborLoader(data, [3, 3], time_attr="stamp", input_time=when, batch_size=50, seed=0)
    total = 0
    for batch in by_edge:
        assert torch.equal(batch.stamp, data.stamp[batch.e_id])   # PyG's edge attribute, by e_id
        _check_no_future(batch, lambda b: b.stamp)
        total += batch.edge_index.shape[1]
    assert total > 0


def test_time_attr_none_leaves_batches_unchanged(store, plain_store) -> None:
    """A store with timestamps, read without time_attr, gives the batches of the same graph
    without them; and the defaults spelled out change nothing."""
    kwargs = {"batch_size": 40, "shuffle": True, "seed": 9, "disjoint": True}
    a = list(NeighborLoader(store, [4, 2], **kwargs))
    b = list(NeighborLoader(plain_store, [4, 2], **kwargs))
    c = list(NeighborLoader(plain_store, [4, 2], time_attr=None, input_time=None,
                            temporal_strategy="uniform", **kwargs))
    for x, y, z in zip(a, b, c):
        for name in ("n_id", "edge_index", "e_id", "batch", "input_id", "x", "y"):
            assert torch.equal(getattr(x, name), getattr(y, name)) and torch.equal(getattr(y, name), getattr(z, name))
        assert y.seed_time is None and "time" not in y.node_attrs
    assert "seed_time" not in b[0].to_pyg() and "seed_time" in next(iter(NeighborLoader(
        store, [2], time_attr="time", batch_size=4))).to_pyg()


def test_temporal_sampler_alone_and_its_declared_ability(store) -> None:
    graph = temporal_graph(store.indptr, store.indices, edge_time=store.edge_time())
    sampler = TemporalSampler(graph, [3], node_time=store.node_time())
    assert sampler.supports_time and not sampler.supports_stream
    out = sampler.sample_from_nodes([np.array([1, 2]), np.array([3])], [4, 5])   # node times by default
    assert out[0].seed_time.tolist() == np.asarray(store.node_time())[[1, 2]].tolist()
    with pytest.raises(ValueError, match="needs the seeds' times"):
        TemporalSampler(graph, [3]).sample_from_nodes([np.array([1])], [0])


def test_bad_options(store, plain_store) -> None:
    with pytest.raises(ValueError, match="'input_time' is set while 'time_attr' is not set"):
        NeighborLoader(store, [2], input_time=np.zeros(N, dtype=np.int64))
    with pytest.raises(ValueError, match="'temporal_strategy' must be one of"):
        NeighborLoader(store, [2], time_attr="time", temporal_strategy="recent")
    with pytest.raises(ValueError, match="needs 'input_time'"):
        NeighborLoader(store, [2], time_attr="edge_time")
    with pytest.raises(ValueError, match="one time per input node"):
        NeighborLoader(store, [2], time_attr="time", input_time=np.zeros(3, dtype=np.int64))
    with pytest.raises(ValueError, match="frontier 'new'"):
        NeighborLoader(store, [2], time_attr="time", frontier="all")
    with pytest.raises(ValueError, match="has no timestamps"):
        NeighborLoader(plain_store, [2], time_attr="time")
    with pytest.raises(ValueError, match="neither a node-level nor an edge-level"):
        NeighborLoader((store.indptr, store.indices), [2], time_attr="time", features=False)
    with pytest.raises(ValueError, match="runs on the CPU"):
        NeighborLoader(store, [2], time_attr="time", sampler_backend="cuda")
    with pytest.raises(ValueError, match="yields MiniBatches"):
        NeighborLoader(store, [2], time_attr="time", output="dgl")
    with pytest.raises(ValueError, match="needs 'edge_label_time'"):   # temporal links: tests/loaders/test_link_temporal.py
        LinkNeighborLoader(store, [2], time_attr="time", edge_label_index=(np.array([0]), np.array([1])))
    with pytest.raises(ValueError, match="must not repeat a node"):   # only temporal seeds may repeat
        NeighborLoader(store, [2], input_nodes=np.array([1, 1]))


def test_store_path_and_to_pyg(store) -> None:
    loader = NeighborLoader(str(store.path), [2, 2], time_attr="node_time", batch_size=8, seed=3,
                            input_nodes=np.arange(8), input_time=np.arange(8) * 100)
    data = next(iter(loader)).to_pyg()
    assert data.seed_time.tolist() == [0, 100, 200, 300, 400, 500, 600, 700]
    assert data.batch.shape == data.n_id.shape and data.time.shape == data.n_id.shape


def test_input_id_of_a_mask_is_the_node_id_as_pyg(store) -> None:
    mask = np.zeros(N, dtype=bool)
    mask[[3, 7, 250]] = True
    loader = NeighborLoader(store, [2], input_nodes=mask, input_time=np.array([5, 6, 7]), time_attr="time",
                            batch_size=2)
    batches = list(loader)
    assert [b.input_id.tolist() for b in batches] == [[3, 7], [250]]
    assert [b.seed_time.tolist() for b in batches] == [[5, 6], [7]]
