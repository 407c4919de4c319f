"""Rank bodies for test_exchange.py (spawned processes import this file by name: the test
puts its folder on sys.path, which spawn hands to the children)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.distributed import exit_spawned_rank


def exchange_rank(rank: int, world: int, port: int, data: str, out: str) -> None:
    """Exchange the rows of X at each width, backward through a fixed linear loss, save
    what arrived, the gradient and the byte counters of each width."""
    from graphpipe.train.partition_parallel import HaloExchange, local_partition

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        arrays = np.load(data)
        part = local_partition(arrays["indptr"], arrays["indices"], arrays["parts"], rank, world)
        x, g = torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["g"])
        saved = {}
        for bits in (32, 8, 4, 2, 1, "auto"):
            ex = HaloExchange(part, bits, seed=7)
            h = x[torch.from_numpy(part.inner)].clone().requires_grad_(True)
            halo = ex.exchange(h, layer=1)
            (halo * g[torch.from_numpy(part.halo)]).sum().backward()
            saved[f"halo_{bits}"] = halo.detach().numpy()
            saved[f"grad_{bits}"] = h.grad.numpy()
            saved[f"stats_{bits}"] = np.array([ex.stats.sent["forward"], ex.stats.sent["backward"],
                                               ex.stats.received["forward"],
                                               ex.stats.received["backward"]])
            saved[f"recv_bits_{bits}"] = np.concatenate(ex.recv_bits)
            saved[f"send_bits_{bits}"] = np.concatenate([b for b in ex.send_bits])
        saved.update(_stale_epochs(part, x, g))
        np.savez(Path(out) / f"rank{rank}.npz", **saved)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    exit_spawned_rank(0)  # as graphpipe's ranks end: no finalization tearing down gloo (SIGABRT)


def _stale_epochs(part, x: torch.Tensor, g: torch.Tensor) -> dict:
    """Three epochs with S=1 (float32): fresh, stale, fresh. Inputs change every epoch
    (x * (t + 1)), the loss weights too (g * (t + 1)); saves each epoch's halo, inner
    gradient and bytes sent."""
    from graphpipe.train.partition_parallel import HaloExchange, StaleHalo

    stale = StaleHalo(HaloExchange(part, 32, seed=3), staleness=1)
    inner, halo_ids = torch.from_numpy(part.inner), torch.from_numpy(part.halo)
    saved = {}
    for t in range(3):
        before = stale.exchange.stats.total_sent()
        h = (x[inner] * (t + 1)).requires_grad_(True)
        rows = stale.halo(h, layer=1, epoch=t)
        (rows * g[halo_ids] * (t + 1)).sum().backward()
        saved[f"stale_halo_{t}"] = rows.detach().numpy()
        saved[f"stale_grad_{t}"] = h.grad.numpy()
        saved[f"stale_sent_{t}"] = np.array(stale.exchange.stats.total_sent() - before)
    saved["stale_ages"] = np.array(stale.ages)
    return saved
