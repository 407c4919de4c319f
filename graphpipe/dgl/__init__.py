"""DGL's data loading API on graphpipe: a DGL script changes its import only.

    from dgl.dataloading import DataLoader, NeighborSampler, MultiLayerFullNeighborSampler
    # becomes
    from graphpipe.dgl import DataLoader, NeighborSampler, MultiLayerFullNeighborSampler

* :class:`DataLoader` (:mod:`graphpipe.dgl.dataloader`): DGL's arguments, batch order and
  ``(input_nodes, output_nodes, blocks)``, over a ``DGLGraph`` or a graphpipe store;
* :class:`NeighborSampler`, :class:`MultiLayerFullNeighborSampler`
  (:mod:`graphpipe.dgl.sampler`): fanouts input layer first, ``prefetch_*``;
* :class:`Block` (:mod:`graphpipe.dgl.block`): the block face used when DGL is not
  installed (with DGL, real ``DGLBlock``s); :mod:`graphpipe.dgl.graph`: what is sampled;
  :mod:`graphpipe.dgl.seeds`: default seeds (shared with :mod:`graphpipe.graphbolt`).

GraphBolt's datapipe stages are :mod:`graphpipe.graphbolt`. DGL is imported only when it
is installed, to build its blocks.
"""

from graphpipe.dgl.block import EID, NID, Block
from graphpipe.dgl.dataloader import DataLoader
from graphpipe.dgl.sampler import MultiLayerFullNeighborSampler, NeighborSampler

__all__ = ["EID", "NID", "Block", "DataLoader", "MultiLayerFullNeighborSampler", "NeighborSampler"]
