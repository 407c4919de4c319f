"""Run in the DGL environment by tests/export/test_graphbolt.py: ``python graphbolt_child.py
DATASET STORE``: GraphBolt 2.1 loads the exported folder, its arrays match the store, and
it samples a mini-batch. Prints ``ok``."""

from __future__ import annotations

import sys

import dgl.graphbolt as gb
import numpy as np
import torch

from graphpipe.store import GraphStore

dataset = gb.OnDiskDataset(sys.argv[1]).load()
store = GraphStore.open(sys.argv[2])
graph = dataset.graph
assert graph.total_num_nodes == store.num_nodes and graph.total_num_edges == store.num_edges
indptr = graph.csc_indptr.numpy()
assert np.array_equal(indptr, store.indptr)
indices = graph.indices.numpy()
for v in range(store.num_nodes):  # same in-neighbours (as multisets) per node
    lo, hi = indptr[v], indptr[v + 1]
    assert np.array_equal(np.sort(indices[lo:hi]), np.sort(store.indices[lo:hi])), v
feat = dataset.feature.read("node", None, "feat").numpy()
assert np.array_equal(feat, store.features())
train = dataset.tasks[0].train_set
seeds, labels = (torch.stack([item[i] for item in train]).numpy() for i in (0, 1))
assert np.array_equal(seeds, store.split("train"))
assert np.array_equal(labels, np.asarray(store.labels)[store.split("train")])
assert dataset.tasks[0].metadata["num_classes"] == store.manifest["labels"]["num_classes"]
datapipe = gb.ItemSampler(train, batch_size=32, shuffle=False)
datapipe = datapipe.sample_neighbor(graph, [4, 3])
datapipe = datapipe.fetch_feature(dataset.feature, node_feature_keys=["feat"])
batch = next(iter(gb.DataLoader(datapipe)))
blocks = batch.blocks
assert len(blocks) == 2 and blocks[-1].num_dst_nodes() == 32
assert torch.equal(batch.node_features["feat"], torch.from_numpy(feat)[batch.input_nodes])
print("ok")
