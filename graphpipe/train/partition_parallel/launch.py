"""Starting the ranks: under ``torchrun`` (``env://``: ``MASTER_ADDR``/``MASTER_PORT``,
``RANK``, ``WORLD_SIZE`` set) or as ``P`` local processes
(:func:`graphpipe.train.distributed.launch`: a rank killed or stuck ends the run with
one line, :mod:`graphpipe.train.ranks`).

:func:`run_partition_parallel` is the one entry point: it resolves the parts (the store's
``partition/k{P}/part`` written by ``graphpipe partition``, else METIS computed here with
seed 0), runs :class:`.trainer.PartitionTrainer` on every rank and returns rank 0's
summary (:meth:`.trainer.PartitionTrainer.summary`, a dict). Spawned ranks hand it back through a
JSON file; parameters, when asked for (tests), through an ``.npz`` (no pickle).
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from graphpipe.train.distributed import free_port, init_process_group, launch
from graphpipe.train.ranks import check_same_run, rank_timeout_s

from .trainer import PartitionConfig, PartitionTrainer

__all__ = ["free_port", "resolve_parts", "run_partition_parallel", "under_torchrun"]


def under_torchrun() -> bool:
    """Whether this process is a rank started by ``torchrun`` (or any ``env://`` launcher)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))


def resolve_parts(store: Any, num_parts: int) -> np.ndarray:
    """int64 ``(N,)``: the stored ``partition/k{P}/part`` if there is one, else METIS now."""
    from graphpipe.ops.partition import metis_partition
    from graphpipe.store.derived import partition_keys

    key = partition_keys(num_parts)["part"]
    if store.has_array(key):
        parts = np.asarray(store.array(key), dtype=np.int64)
        if parts.shape != (store.num_nodes,) or (parts.size and (
                parts.min() < 0 or parts.max() >= num_parts)):
            raise ValueError(f"{store.path}: {key} must hold {store.num_nodes} parts in "
                             f"[0, {num_parts})")
        return parts
    if num_parts == 1:
        return np.zeros(store.num_nodes, dtype=np.int64)
    return metis_partition(*store.topology(), num_parts, seed=0).parts.astype(np.int64)


def _rank_main(rank: int, world: int, init: str, store_path: str, parts: np.ndarray | None,
               config: dict, out_dir: str | None, spawned: bool = True,
               options: dict | None = None) -> dict:
    """One rank: join the group at ``init`` (``env://`` or ``tcp://127.0.0.1:PORT``), train
    (``options``: the :class:`PartitionTrainer` keywords and ``resume``), write ``out_dir``
    files (rank 0: ``result.json``; every rank its parameters)."""
    if spawned:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        torch.set_num_threads(1)
    from graphpipe.store import open_store

    if init == "env://":
        init_process_group("cpu")
    else:
        dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=rank_timeout_s()))
    try:
        store = open_store(store_path)
        check_same_run(store.manifest, {"config": config, **(options or {})})
        if parts is None:
            parts = resolve_parts(store, dist.get_world_size()) if dist.get_rank() == 0 else \
                np.zeros(store.num_nodes, dtype=np.int64)
        options = dict(options or {})
        resume = options.pop("resume", None)
        trainer = PartitionTrainer(store, parts, PartitionConfig(**config), **options)
        result = trainer.summary(trainer.fit(resume))
        if out_dir is not None:
            out = Path(out_dir)
            state = {k: v.detach().numpy() for k, v in trainer.model.base.state_dict().items()}
            np.savez(out / f"params_rank{dist.get_rank()}.npz", **state)
            if dist.get_rank() == 0:
                (out / "result.json").write_text(json.dumps(result))
        dist.barrier()
        return result
    finally:
        dist.destroy_process_group()


def _spawned_rank(world: int, *args: Any) -> None:
    """A rank started by :func:`graphpipe.train.distributed.launch` (``RANK`` set):
    :func:`_rank_main` over ``env://``."""
    _rank_main(int(os.environ["RANK"]), world, "env://", *args)


def run_partition_parallel(store_path: str | os.PathLike, num_parts: int,
                           config: PartitionConfig, *, out_dir: str | os.PathLike | None = None,
                           resume: str | os.PathLike | None = None, quiet: bool = True,
                           **options: Any) -> dict:
    """Train with ``num_parts`` ranks; returns rank 0's result dict
    (:meth:`PartitionTrainer.summary`: records, test_acc, bytes_per_epoch, max_staleness, ...).

    Under ``torchrun`` this process is one rank (``num_parts`` must equal ``WORLD_SIZE``);
    otherwise ``num_parts`` local processes are spawned (one: this process). ``out_dir``
    (optional) receives ``result.json`` and each rank's parameters ``params_rank{r}.npz``.
    ``resume`` continues the run of a checkpoint; ``quiet`` (default) prints no epoch
    lines; ``options``: the other :class:`PartitionTrainer` keywords (``checkpoint``,
    ``metrics_log``, ``patience``, ``evaluation``, ``eval_every``).

    >>> import tempfile
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.synthetic import community_graph, write_ogb_raw
    >>> tmp = tempfile.TemporaryDirectory()
    >>> _ = write_ogb_raw(tmp.name + "/raw", community_graph(120, 3, feature_dim=8, seed=0))
    >>> _ = ingest(tmp.name + "/raw", tmp.name + "/store")
    >>> result = run_partition_parallel(tmp.name + "/store", 1,
    ...                                 PartitionConfig(hidden=8, epochs=3, bits=4))
    >>> len(result["records"]), result["bytes_per_epoch"], result["halo_rows"]  # one part: no halo
    (3, 0.0, 0)
    >>> 0.0 <= result["test_acc"] <= 1.0
    True
    >>> tmp.cleanup()
    """
    config.check()
    store_path = str(store_path)
    options = {key: (str(v) if isinstance(v, os.PathLike) else v) for key, v in
               {**options, "resume": resume, "quiet": quiet}.items()}
    if under_torchrun():
        if int(os.environ["WORLD_SIZE"]) != num_parts:
            raise ValueError(f"--partition-parallel {num_parts} but torchrun started "
                             f"WORLD_SIZE={os.environ['WORLD_SIZE']} ranks")
        return _rank_main(int(os.environ["RANK"]), num_parts, "env://", store_path, None,
                          asdict(config), None if out_dir is None else str(out_dir), False, options)
    from graphpipe.store import open_store

    parts = resolve_parts(open_store(store_path), num_parts)
    target = None if out_dir is None else str(out_dir)
    if num_parts == 1:  # one rank: this process
        return _rank_main(0, 1, f"tcp://127.0.0.1:{free_port()}", store_path, parts,
                          asdict(config), target, False, options)
    with tempfile.TemporaryDirectory() as tmp:
        target = target or tmp
        launch(_spawned_rank, num_parts, (num_parts, store_path, parts, asdict(config), target,
                                          True, options))
        return json.loads((Path(target) / "result.json").read_text())
