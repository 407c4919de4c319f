"""Run in the DGL environment by tests/export/test_graphbolt.py: ``python graphbolt_typed_child.py
DATASET STORE``: GraphBolt 2.1 loads graphpipe's typed export; its node and edge counts per
type, features per type, the target type's train set and ``num_classes`` match the store.
Prints ``ok``."""

from __future__ import annotations

import sys

import dgl.graphbolt as gb
import numpy as np

from graphpipe.store import GraphStore

dataset = gb.OnDiskDataset(sys.argv[1]).load()
store = GraphStore.open(sys.argv[2])
graph = dataset.graph
assert graph.total_num_nodes == sum(store.num_nodes_dict.values())
assert graph.total_num_edges == sum(store.num_edges_dict.values())
offsets = graph.node_type_offset.numpy()
for ntype, type_id in graph.node_type_to_id.items():
    assert offsets[type_id + 1] - offsets[type_id] == store.num_nodes_dict[ntype], ntype
edge_counts = np.bincount(graph.type_per_edge.numpy(), minlength=len(graph.edge_type_to_id))
for etype, type_id in graph.edge_type_to_id.items():
    assert edge_counts[type_id] == store.num_edges_dict[tuple(etype.split(":"))], etype
for ntype in store.node_types:
    feat = store.typed_features(ntype)
    if feat is not None:
        assert np.array_equal(dataset.feature.read("node", ntype, "feat").numpy(), feat), ntype
task = dataset.tasks[0]
assert task.metadata["num_classes"] == store.typed_num_classes(store.target_type)
assert len(task.train_set) == sum(len(store.typed_split(t, "train")) for t in store.node_types
                                  if "train" in store.typed_split_names(t))
print("ok")
