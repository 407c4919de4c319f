"""The dataset of the DGL examples on a machine without ogbn-products: a graphpipe store
(a synthetic graph of products' shape, ``benchmarks/dropin_dgl.py`` writes one) as the
object ``AsNodePredDataset(DglNodePropPredDataset("ogbn-products"))`` is: ``dataset[0]``
a ``DGLGraph`` with ``ndata["feat"]`` / ``["label"]``, ``train_idx`` / ``val_idx`` /
``test_idx``, ``num_classes``. Shared by dgl_node_classification.orig.py and its port."""

import numpy as np
import torch

import dgl
from graphpipe.store import GraphStore


class _NodePredDataset:
    def __init__(self, g, splits, num_classes):
        self._g = g
        self.train_idx, self.val_idx, self.test_idx = splits
        self.num_classes = num_classes

    def __getitem__(self, i):
        assert i == 0
        return self._g

    def __len__(self):
        return 1


def node_pred_dataset(path):
    """The store at ``path`` as a one-graph node prediction dataset (edges in the store's
    edge order, so edge IDs are the store's)."""
    store = GraphStore.open(path)
    indptr = np.asarray(store.indptr)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    src = np.asarray(store.indices, dtype=np.int64)
    if store.has_edge_ids:
        order = np.argsort(np.asarray(store.edge_id), kind="stable")
        src, dst = src[order], dst[order]
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=store.num_nodes)
    g.ndata["feat"] = torch.from_numpy(np.array(store.features()))
    g.ndata["label"] = torch.from_numpy(np.array(store.labels, dtype=np.int64))
    splits = [torch.from_numpy(store.split(name)) for name in ("train", "valid", "test")]
    return _NodePredDataset(g, splits, int(store.num_classes))
