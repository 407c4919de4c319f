"""What the gather stage hands the transfer stage: a :class:`PreparedBatch` (the
:class:`MiniBatch` on the host, plus its rows in packed form or a :class:`RowPlan` for
assembly on the device), and the token that keeps the two stages in step: each batch
the gather stage produces gets the next token; a plan names the token of the batch its
reused rows come from, so the transfer stage copies them device to device only when
that batch is the one it delivered last."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from graphpipe.loaders.minibatch import MiniBatch
from graphpipe.ops.features.quantize import QuantizedRows

__all__ = ["PreparedBatch", "RowPlan"]


@dataclass
class RowPlan:
    """Where each feature row of a batch comes from, for assembly on the device.

    Attributes:
        cache_pos: int64 ``(k,)`` row in the held (cached) rows or -1.
        prev_pos: int64 ``(k,)`` row in the previous batch or -1 (only where not cached).
        store_idx: int64 ``(s,)`` positions (in the batch) of the rows read from the store.
        store_rows: ``(s, dim)`` those rows (pinned host memory when CUDA).
        prev_token: sequence number of the batch ``prev_pos`` refers to (-1: none).
    """

    cache_pos: np.ndarray
    prev_pos: np.ndarray
    store_idx: np.ndarray
    store_rows: torch.Tensor
    prev_token: int


@dataclass
class PreparedBatch:
    """A batch on the host, ready for the ``transfer`` stage."""

    batch: MiniBatch
    plan: RowPlan | None
    token: int
    reused_rows: int = 0
    """Rows copied from the batch produced before this one (Match)."""
    quantized: QuantizedRows | None = None
    """The batch's feature rows in low-bit form (``feature_bits``); ``batch.x`` is None
    until ``transfer`` dequantizes them."""
