"""The stages of the neighbour-loader pipeline, one per module, each a small object that
can be swapped or moved to another thread (GraphBolt style):

``sample``   :class:`SampleStage`: a window of seed batches → sampled subgraphs (a sampler).
``reorder``  :class:`ReorderStage`: Greedy Reorder of the window by match degree.
``gather``   :class:`GatherStage`: Match, then each batch's feature rows from a row source
             (:mod:`graphpipe.loaders.rows`: the store, a degree cache, quantization);
             a sampled subgraph in, a :class:`graphpipe.loaders.prepared.PreparedBatch`
             (its :class:`graphpipe.loaders.MiniBatch`) out.
``transfer`` :class:`TransferStage`: a prepared batch in, a :class:`MiniBatch` on the
             device out (pinned host memory on CUDA; reused rows copied device to device).
"""

from graphpipe.loaders.stages.gather import GatherStage
from graphpipe.loaders.stages.reorder import ReorderStage
from graphpipe.loaders.stages.sample import SampleStage
from graphpipe.loaders.stages.transfer import TransferStage

__all__ = ["GatherStage", "ReorderStage", "SampleStage", "TransferStage"]
