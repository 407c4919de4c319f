"""Models, layers, Trainer and `graphpipe train`.

- :mod:`graphpipe.train.layers`: :class:`GCNConv`, :class:`SAGEConv`, :class:`GINConv`,
  :class:`GATConv` on :mod:`graphpipe.ops.aggregate` (blocks or PyG ``edge_index``);
- :mod:`graphpipe.train.models`: :class:`GCN`, :class:`GraphSAGE`, :class:`GIN`,
  :class:`GAT`, :class:`MLP` and :func:`build_model`;
- :mod:`graphpipe.train.loop`: the one loop every trainer runs (batches through the
  trainer's ``step``, evaluation schedule, early stopping, metrics log, checkpoints with
  exact resume);
- :mod:`graphpipe.train.trainer`: :class:`Trainer` (NeighborLoader epochs, layer-wise
  full-neighbour or sampled evaluation) and :class:`TypedTrainer` (typed stores);
- :mod:`graphpipe.train.link`: :class:`LinkTrainer` (link prediction);
- :mod:`graphpipe.train.distributed`: :class:`DistributedTrainer` (data-parallel ranks on
  ``torch.distributed``: DDP, seed shards, rank 0 evaluates and writes), ``launch``;
- :mod:`graphpipe.train.checkpoint`: atomic checkpoint files;
- :mod:`graphpipe.train.graph_transformer`: :class:`GraphormerSlim` and :class:`GT` on
  ClusterLoader sequences, attention modes in :mod:`graphpipe.train.sequence_attention`;
- :mod:`graphpipe.train.interleave`: Dual-interleaved attention (structure search and
  schedule);
- :mod:`graphpipe.train.sequence_trainer`: :class:`SequenceTrainer` for the transformers.

``import graphpipe`` sets ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already sets
it (see :mod:`graphpipe.omp`): the loader's Numba kernels run in background threads
while torch computes, and with OpenMP's default spin-waiting the two thread pools starve
each other — a training step on 2 cores was 8× slower (0.9 s vs 0.11 s on a scale-14
R-MAT batch). Import graphpipe before torch (the runtime reads the variable when torch
loads it), or set ``OMP_WAIT_POLICY=PASSIVE`` in the environment; otherwise the loader
warns once (:class:`graphpipe.omp.OpenMPWaitPolicyWarning`).
"""

from graphpipe.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from graphpipe.train.graph_transformer import GT, GraphormerSlim
from graphpipe.train.interleave import InterleaveScheduler, StructureSearch, full_iterations
from graphpipe.train.layers import GATConv, GCNConv, GINConv, SAGEConv
from graphpipe.train.link import LinkTrainer
from graphpipe.train.models import (
    GAT,
    GCN,
    GIN,
    MLP,
    MODELS,
    SEQUENCE_MODELS,
    BlockModel,
    GraphSAGE,
    build_model,
)
from graphpipe.train.sequence_trainer import SequenceTrainer
from graphpipe.train.trainer import Trainer, TrainResult, TypedTrainer, accuracy

__all__ = [
    "GAT",
    "GCN",
    "GIN",
    "GT",
    "MLP",
    "MODELS",
    "SEQUENCE_MODELS",
    "BlockModel",
    "CheckpointError",
    "GATConv",
    "GCNConv",
    "GINConv",
    "GraphSAGE",
    "GraphormerSlim",
    "InterleaveScheduler",
    "LinkTrainer",
    "SAGEConv",
    "SequenceTrainer",
    "StructureSearch",
    "TrainResult",
    "Trainer",
    "TypedTrainer",
    "accuracy",
    "build_model",
    "full_iterations",
    "load_checkpoint",
    "save_checkpoint",
]
