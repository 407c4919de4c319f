"""The ``transfer`` stage: a :class:`PreparedBatch` to the loader's device.

* rows assembled on the host: returned as they are on the CPU, copied otherwise (from
  pinned memory, without blocking, on CUDA);
* a :class:`RowPlan` (the gather stage makes one when the device is not the CPU): the
  feature rows are assembled where they land: store rows from the staged copy, held
  (cached) rows from the device copy of the row source's held rows, reused rows from
  the previous batch's buffer on the device (device to device: FastGL's Match). When
  the plan's ``prev_token`` is not the batch delivered last (an abandoned epoch), the
  reused rows are read from the backing source instead;
* packed rows (``feature_bits``): moved as codes + min + scale and dequantized on the
  device (:func:`graphpipe.ops.features.quantize.torch.dequantize_on`; on the CPU the
  Numba :func:`graphpipe.ops.features.quantize.dequantize`).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from graphpipe.loaders.minibatch import MiniBatch
from graphpipe.loaders.prepared import PreparedBatch, RowPlan
from graphpipe.loaders.rows import RowSource
from graphpipe.loaders.stats import StatsRef
from graphpipe.ops.features.quantize import QuantizedRows, dequantize
from graphpipe.ops.features.quantize.torch import dequantize_on

__all__ = ["TransferStage"]


class TransferStage:
    """``transfer``: a prepared batch to ``device``.

    Args:
        device: where batches go.
        rows: the gather stage's row source (its held rows get a device copy), or None
            without features.
        stats_ref: the loader's statistics handle (``transfer_s``).
    """

    def __init__(self, device: torch.device, rows: RowSource | None, stats_ref: StatsRef):
        self.device = device
        self.rows = rows
        self._stats = stats_ref
        self._cache_rows = None
        held = rows.held_rows if rows is not None else None
        if held is not None and len(held):
            self._cache_rows = torch.from_numpy(held).to(device)
        self._resident_x: torch.Tensor | None = None
        self._resident_token = -1

    def __call__(self, prepared: PreparedBatch) -> MiniBatch:
        if prepared.quantized is not None:
            return self._dequantized(prepared)
        plan = prepared.plan
        if plan is None and self.device.type == "cpu":
            return prepared.batch
        t0 = time.perf_counter()
        batch = prepared.batch
        x = batch.x
        batch.x = None
        if self.device.type == "cpu":
            moved = batch
        elif self.device.type == "cuda":
            moved = _pinned(batch).to(self.device, non_blocking=True)
        else:
            moved = batch.to(self.device)
        if plan is not None:
            x = self._assemble(batch.n_id.numpy(), plan)
            self._resident_x, self._resident_token = x, prepared.token
        elif x is not None:
            x = x.to(self.device, non_blocking=self.device.type == "cuda")
        moved.x = x
        self._stats.current.transfer_s += time.perf_counter() - t0
        return moved

    def _dequantized(self, prepared: PreparedBatch) -> MiniBatch:
        """A quantized batch: the packed rows (+ min, scale) move to the device and are
        dequantized there (on the CPU with the Numba kernel)."""
        t0 = time.perf_counter()
        batch, q = prepared.batch, prepared.quantized
        if self.device.type == "cpu":
            batch.x = dequantize(q)
        else:
            batch.x = None
            if self.device.type == "cuda":
                batch = _pinned(batch).to(self.device, non_blocking=True)
                q = QuantizedRows(q.packed.pin_memory(), q.mins.pin_memory(), q.scales.pin_memory(),
                                  q.bits, q.num_cols)
            else:
                batch = batch.to(self.device)
            nb = self.device.type == "cuda"
            batch.x = dequantize_on(q.packed.to(self.device, non_blocking=nb),
                                    q.mins.to(self.device, non_blocking=nb),
                                    q.scales.to(self.device, non_blocking=nb), q.bits, q.num_cols)
        self._stats.current.transfer_s += time.perf_counter() - t0
        return batch

    def _assemble(self, n_id: np.ndarray, plan: RowPlan) -> torch.Tensor:
        dev = self.device
        k = n_id.shape[0]
        x = torch.empty((k, plan.store_rows.shape[1]), dtype=plan.store_rows.dtype, device=dev)
        if plan.store_idx.shape[0]:
            x[torch.from_numpy(plan.store_idx).to(dev)] = plan.store_rows.to(dev, non_blocking=True)
        cached = np.flatnonzero(plan.cache_pos >= 0)
        if cached.shape[0]:
            x[torch.from_numpy(cached).to(dev)] = self._cache_rows[
                torch.from_numpy(plan.cache_pos[cached]).to(dev)]
        reused = np.flatnonzero(plan.prev_pos >= 0)
        if reused.shape[0]:
            idx = torch.from_numpy(reused).to(dev)
            if self._resident_x is not None and self._resident_token == plan.prev_token:
                x[idx] = self._resident_x[torch.from_numpy(plan.prev_pos[reused]).to(dev)]
            else:  # the batch the plan refers to never reached the device: read from the store
                rows = self.rows.backing.gather(n_id[reused])
                x[idx] = torch.from_numpy(rows).to(dev)
        return x


def _pinned(batch: MiniBatch) -> MiniBatch:
    return batch.pin_memory()
