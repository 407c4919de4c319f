"""Models, layers, Trainer and `graphpipe train`.

- :mod:`graphpipe.train.layers`: :class:`GCNConv`, :class:`SAGEConv`, :class:`GINConv`,
  :class:`GATConv` on :mod:`graphpipe.ops.aggregate` (blocks or PyG ``edge_index``);
- :mod:`graphpipe.train.models`: :class:`GCN`, :class:`GraphSAGE`, :class:`GIN`,
  :class:`GAT`, :class:`MLP` and :func:`build_model`;
- :mod:`graphpipe.train.trainer`: :class:`Trainer` (evaluation, early stopping, metrics
  log, checkpoints with exact resume);
- :mod:`graphpipe.train.checkpoint`: atomic checkpoint files.

``import graphpipe`` sets ``OMP_WAIT_POLICY=PASSIVE`` unless the environment already sets
it (see ``graphpipe/__init__.py``): the loader's Numba kernels run in background threads
while torch computes, and with OpenMP's default spin-waiting the two thread pools starve
each other — a training step on 2 cores was 8× slower (0.9 s vs 0.11 s on a scale-14
R-MAT batch).
"""

from graphpipe.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from graphpipe.train.layers import GATConv, GCNConv, GINConv, SAGEConv
from graphpipe.train.models import GAT, GCN, GIN, MLP, MODELS, BlockModel, GraphSAGE, build_model
from graphpipe.train.trainer import Trainer, TrainResult, accuracy

__all__ = [
    "GAT",
    "GCN",
    "GIN",
    "MLP",
    "MODELS",
    "BlockModel",
    "CheckpointError",
    "GATConv",
    "GCNConv",
    "GINConv",
    "GraphSAGE",
    "SAGEConv",
    "TrainResult",
    "Trainer",
    "accuracy",
    "build_model",
    "load_checkpoint",
    "save_checkpoint",
]
