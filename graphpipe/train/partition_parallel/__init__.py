"""Full-graph partition-parallel training (Sylvie): each rank holds one METIS part plus its
halo and exchanges boundary embeddings layer by layer, per-row quantized (1/2/4/8 bits or
degree-ranked ``auto``) with bounded staleness.

One module per job: :mod:`.partition` (inner nodes, halo, exchange lists),
:mod:`.quantized` (row widths and the wire codec), :mod:`.exchange` (the autograd
exchange over ``torch.distributed``), :mod:`.staleness` (reuse for at most ``S`` epochs),
:mod:`.model` (GCN / GraphSAGE on ``[inner | halo]`` rows), :mod:`.trainer` (one rank's
training), :mod:`.launch` (torchrun or local spawn).
"""

from .exchange import ExchangeStats, HaloExchange
from .launch import resolve_parts, run_partition_parallel
from .model import PartitionModel
from .partition import LocalPartition, local_partition
from .quantized import HALO_BITS, RowCodec, auto_bits, row_bits
from .staleness import StaleHalo, StalenessClock
from .trainer import PartitionConfig, PartitionTrainer

__all__ = [
    "HALO_BITS",
    "ExchangeStats",
    "HaloExchange",
    "LocalPartition",
    "PartitionConfig",
    "PartitionModel",
    "PartitionTrainer",
    "RowCodec",
    "StaleHalo",
    "StalenessClock",
    "auto_bits",
    "local_partition",
    "resolve_parts",
    "row_bits",
    "run_partition_parallel",
]
