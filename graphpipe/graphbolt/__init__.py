"""GraphBolt's datapipe API (``dgl.graphbolt``, DGL 2.1) over a graphpipe store: a
GraphBolt script changes its import only.

    import dgl.graphbolt as gb          # becomes: import graphpipe.graphbolt as gb
    dataset = gb.OnDiskDataset(path).load()
    datapipe = gb.ItemSampler(dataset.tasks[0].train_set, batch_size=1024, shuffle=True)
    datapipe = datapipe.sample_neighbor(dataset.graph, [10, 10, 10])
    datapipe = datapipe.fetch_feature(dataset.feature, node_feature_keys=["feat"])
    datapipe = datapipe.copy_to(device)
    for data in gb.DataLoader(datapipe):
        logits = model(data.blocks, data.node_features["feat"])

One stage per file, as GraphBolt keeps them: :mod:`~graphpipe.graphbolt.item_sampler`,
:mod:`~graphpipe.graphbolt.subgraph_sampler` (``sample_neighbor``),
:mod:`~graphpipe.graphbolt.feature_fetcher` (``fetch_feature``),
:mod:`~graphpipe.graphbolt.copy_to`, :mod:`~graphpipe.graphbolt.dataloader`; every stage
takes and returns a :class:`MiniBatch` (:mod:`~graphpipe.graphbolt.minibatch`, whose
``blocks`` are DGL blocks when DGL imports, else :class:`graphpipe.dgl.Block`).
:mod:`~graphpipe.graphbolt.dataset` is the ``OnDiskDataset`` face (graph, features, tasks).
Homogeneous graphs and node classification only.
"""

from graphpipe.graphbolt.base import Datapipe, functional_datapipe
from graphpipe.graphbolt.copy_to import CopyTo
from graphpipe.graphbolt.dataloader import DataLoader
from graphpipe.graphbolt.dataset import OnDiskDataset, Task
from graphpipe.graphbolt.feature_fetcher import FeatureFetcher
from graphpipe.graphbolt.feature_store import FeatureStore
from graphpipe.graphbolt.item_sampler import ItemSampler
from graphpipe.graphbolt.itemset import ItemSet
from graphpipe.graphbolt.minibatch import MiniBatch, SampledSubgraph
from graphpipe.graphbolt.sampling_graph import SamplingGraph
from graphpipe.graphbolt.subgraph_sampler import NeighborSampler

__all__ = ["CopyTo", "DataLoader", "Datapipe", "FeatureFetcher", "FeatureStore", "ItemSampler",
           "ItemSet", "MiniBatch", "NeighborSampler", "OnDiskDataset", "SampledSubgraph",
           "SamplingGraph", "Task", "functional_datapipe"]
