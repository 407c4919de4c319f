"""graphpipe.graphbolt's stages over a store, in the main environment (blocks are
graphpipe.dgl.Block without DGL): item order and shuffling, GraphBolt's sampling rule,
features bit for bit, the OnDiskDataset face (over a store and over a GraphBolt folder),
the DataLoader. Against GraphBolt itself: test_against_graphbolt.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import graphpipe.graphbolt as gb
from graphpipe.dgl import EID, NID
from graphpipe.export import write_graphbolt
from graphpipe.store import GraphStore


@pytest.fixture(scope="module")
def dataset(gb_store: GraphStore) -> gb.OnDiskDataset:
    return gb.OnDiskDataset(gb_store.path).load()


def _pipe(dataset: gb.OnDiskDataset, fanouts: list[int], *, shuffle: bool = False, seed: int = 0,
          items: gb.ItemSet | None = None) -> gb.Datapipe:
    pipe = gb.ItemSampler(items or dataset.tasks[0].train_set, batch_size=100, shuffle=shuffle, seed=seed)
    pipe = pipe.sample_neighbor(dataset.graph, fanouts, seed=seed)
    return pipe.fetch_feature(dataset.feature, node_feature_keys=["feat"]).copy_to("cpu")


def test_dataset_face(dataset: gb.OnDiskDataset, gb_store: GraphStore) -> None:
    task = dataset.tasks[0]
    assert task.metadata["num_classes"] == gb_store.num_classes
    for item_set, split in ((task.train_set, "train"), (task.validation_set, "valid"), (task.test_set, "test")):
        ids, labels = item_set._items
        assert item_set.names == ("seed_nodes", "labels")
        assert np.array_equal(ids.numpy(), gb_store.split(split))
        assert np.array_equal(labels.numpy(), np.asarray(gb_store.labels)[gb_store.split(split)])
    assert dataset.graph.total_num_nodes == len(dataset.all_nodes_set) == gb_store.num_nodes
    assert dataset.feature.size("node", None, "feat") == torch.Size([gb_store.feature_dim])


def test_a_graphbolt_folder_is_ingested_once(gb_store: GraphStore, tmp_path) -> None:
    folder = write_graphbolt(gb_store, tmp_path / "gb")
    first = gb.OnDiskDataset(folder).load()
    assert (folder / "graphpipe-store").is_dir()
    again = gb.OnDiskDataset(folder).load()
    for data in (first, again):
        assert data.graph.total_num_edges == gb_store.num_edges
        assert np.array_equal(data.tasks[0].train_set._items[0].numpy(), gb_store.split("train"))
        assert torch.equal(data.feature.read("node", None, "feat"), torch.from_numpy(np.array(gb_store.features())))


def test_item_sampler_order_and_shuffle() -> None:
    items = gb.ItemSet((torch.arange(10, 20), torch.arange(10)), names=("seeds", "labels"))
    ordered = list(gb.ItemSampler(items, batch_size=4))
    assert [b.seeds.tolist() for b in ordered] == [[10, 11, 12, 13], [14, 15, 16, 17], [18, 19]]
    assert [b.labels.tolist() for b in ordered][-1] == [8, 9]
    sampler = gb.ItemSampler(items, batch_size=4, shuffle=True, drop_last=True, seed=1)
    epochs = [torch.cat([b.seed_nodes for b in sampler]) for _ in range(3)]
    assert all(len(e) == 8 and len(set(e.tolist())) == 8 for e in epochs)
    assert len({tuple(e.tolist()) for e in epochs}) == 3        # a new order every epoch
    again = gb.ItemSampler(items, batch_size=4, shuffle=True, drop_last=True, seed=1)
    assert torch.equal(torch.cat([b.seed_nodes for b in again]), epochs[0])
    with pytest.raises(ValueError, match="names"):
        gb.ItemSet(torch.arange(3), names=("a", "b"))
    with pytest.raises(ValueError, match="not supported"):
        next(iter(gb.ItemSampler(gb.ItemSet(torch.arange(3), names="node_pairs"), batch_size=2)))


def test_sampling_rule_and_features(dataset: gb.OnDiskDataset, gb_store: GraphStore) -> None:
    """Per layer (input first) min(fanout, in-degree) distinct in-edges per destination;
    each layer expands every node of the one after it; features are rows of input_nodes."""
    fanouts = [2, 5, 3]
    indptr, edge_id = np.asarray(gb_store.indptr), np.asarray(gb_store.edge_id)
    slot_of = np.empty_like(edge_id)
    slot_of[edge_id] = np.arange(edge_id.shape[0])
    feat = np.array(gb_store.features())
    labels = np.asarray(gb_store.labels)
    for batch in gb.DataLoader(_pipe(dataset, fanouts)):
        subs = batch.sampled_subgraphs
        assert torch.equal(batch.input_nodes, subs[0].original_row_node_ids)
        assert torch.equal(subs[-1].original_column_node_ids, batch.seed_nodes)
        for inner, outer in zip(subs[1:], subs[:-1]):
            assert torch.equal(inner.original_row_node_ids, outer.original_column_node_ids)
        for sub, fanout in zip(subs, fanouts):
            dst = sub.original_column_node_ids.numpy()
            assert torch.equal(sub.original_row_node_ids[:len(dst)], sub.original_column_node_ids)
            assert np.array_equal(np.diff(sub.indptr.numpy()), np.minimum(np.diff(indptr)[dst], fanout))
            slots = slot_of[sub.original_edge_ids.numpy()]
            assert np.unique(slots).shape == slots.shape
            src = sub.original_row_node_ids[sub.indices].numpy()
            assert np.array_equal(np.asarray(gb_store.indices)[slots], src)
            owner = np.repeat(dst, np.diff(sub.indptr.numpy()))
            assert np.array_equal(np.searchsorted(indptr, slots, side="right") - 1, owner)
        assert np.array_equal(batch.node_features["feat"].numpy(), feat[batch.input_nodes.numpy()])
        assert np.array_equal(batch.labels.numpy(), labels[batch.seed_nodes.numpy()])


def test_blocks(dataset: gb.OnDiskDataset) -> None:
    batch = next(iter(gb.DataLoader(_pipe(dataset, [-1, 4]))))
    blocks = batch.blocks
    assert len(blocks) == 2 and blocks is batch.blocks
    assert torch.equal(blocks[0].srcdata[NID], batch.input_nodes)
    for block, sub in zip(blocks, batch.sampled_subgraphs):
        assert block.num_src_nodes() == len(sub.original_row_node_ids)
        assert block.num_dst_nodes() == len(sub.original_column_node_ids)
        assert torch.equal(block.edata[EID], sub.original_edge_ids)
    assert blocks[-1].num_dst_nodes() == len(batch.seeds)


def test_same_seed_same_batches_and_prefetch(dataset: gb.OnDiskDataset) -> None:
    def run(seed: int, prefetch: int) -> list:
        loader = gb.DataLoader(_pipe(dataset, [3, 3], shuffle=True, seed=seed), prefetch=prefetch)
        return [(b.seed_nodes.tolist(), b.input_nodes.tolist()) for b in loader]

    assert run(2, 2) == run(2, 0) != run(3, 2)
    assert len(gb.DataLoader(_pipe(dataset, [3]))) == -(-len(dataset.tasks[0].train_set) // 100)


def test_errors_reach_the_caller(dataset: gb.OnDiskDataset) -> None:
    pipe = gb.ItemSampler(dataset.tasks[0].train_set, batch_size=100).fetch_feature(
        dataset.feature, node_feature_keys=["nope"])
    with pytest.raises(KeyError, match="nope"):
        list(gb.DataLoader(pipe))
    with pytest.raises(ValueError, match="prob_name"):
        gb.ItemSampler(dataset.all_nodes_set, 2).sample_neighbor(dataset.graph, [2], prob_name="w")
    with pytest.raises(ValueError, match="per edge type"):
        gb.ItemSampler(dataset.all_nodes_set, 2).sample_neighbor(dataset.graph, [torch.tensor([2, 3])])
    with pytest.raises(AttributeError, match="sample_layer_neighbor"):
        gb.ItemSampler(dataset.all_nodes_set, 2).sample_layer_neighbor(dataset.graph, [2])


def test_layerwise_inference_idiom(dataset: gb.OnDiskDataset, gb_store: GraphStore) -> None:
    """GraphBolt's example: full-neighbour batches over all nodes in order (output nodes
    contiguous), then features.update with the layer's output."""
    features = gb.OnDiskDataset(gb_store.path).load().feature
    pipe = gb.ItemSampler(dataset.all_nodes_set, batch_size=500).sample_neighbor(dataset.graph, [-1])
    pipe = pipe.fetch_feature(features, node_feature_keys=["feat"])
    out = torch.empty(gb_store.num_nodes, 2)
    for batch in gb.DataLoader(pipe):
        seeds = batch.seed_nodes
        assert torch.equal(seeds, torch.arange(int(seeds[0]), int(seeds[-1]) + 1))
        out[seeds[0]:seeds[-1] + 1] = batch.node_features["feat"][:len(seeds), :2] * 2
    features.update("node", None, "feat", out)
    batch = next(iter(pipe))
    assert torch.equal(batch.node_features["feat"], out[batch.input_nodes])
    assert dataset.feature.size("node", None, "feat") == torch.Size([gb_store.feature_dim])  # its own copy


def test_typed_folder_is_refused_by_the_homogeneous_face(tmp_path) -> None:
    """A typed GraphBolt folder ingests as a typed store; this face says in one line that it
    reads homogeneous datasets."""
    from graphpipe.ingest import ingest
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    store = ingest(write_ogb_mag(tmp_path / "mag", mag_dataset(papers=30, authors=20, institutions=2,
                                                               fields=4, num_classes=2, feature_dim=3)),
                   tmp_path / "store")
    folder = write_graphbolt(store, tmp_path / "gb")
    with pytest.raises(ValueError, match="a typed dataset .* reads homogeneous ones"):
        gb.OnDiskDataset(folder).load()
