"""Starting the stages of a Flow Parallelism run: :func:`run_flow` spawns ``P`` local
gloo ranks with :func:`graphpipe.train.distributed.launch` (rank ``s`` runs stage ``s``;
one stage runs in this process) and returns rank 0's result dict
(:meth:`.trainer.FlowTrainer.fit`). The METIS parts are computed once, here, and handed
to every rank. Ranks write ``result.json`` (rank 0) and, when ``out_dir`` is given, their
stage's parameters ``stage{s}.npz`` (no pickle).

>>> import tempfile
>>> from graphpipe.ingest import ingest
>>> from graphpipe.synthetic import community_graph, write_ogb_raw
>>> tmp = tempfile.TemporaryDirectory()
>>> _ = write_ogb_raw(tmp.name + "/raw", community_graph(120, 3, feature_dim=8, seed=0))
>>> _ = ingest(tmp.name + "/raw", tmp.name + "/store")
>>> result = run_flow(tmp.name + "/store", 1, FlowConfig(hidden=8, layers=2, epochs=2))
>>> len(result["records"]), result["stages"], result["microbatches"]
(2, 1, 1)
>>> tmp.cleanup()
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch.distributed as dist

from graphpipe.train.flow.microbatches import metis_parts
from graphpipe.train.flow.schedule import microbatch_count
from graphpipe.train.flow.trainer import FlowConfig, FlowData, FlowTrainer

__all__ = ["run_flow"]


def _write(trainer: FlowTrainer, result: dict[str, Any], out: Path) -> None:
    np.savez(out / f"stage{trainer.rank}.npz", **trainer.stage_state())
    if trainer.rank == 0:
        (out / "result.json").write_text(json.dumps(result))


def _rank(store_path: str, config: dict[str, Any], parts: np.ndarray, out: str,
          extra: dict[str, Any] | None = None) -> None:
    """One spawned rank: join the group, train its stage, write its files."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import init_process_group

    init_process_group("cpu", timeout_s=config["timeout_s"])
    try:
        data = FlowData.from_store(open_store(store_path))
        trainer = FlowTrainer(data, FlowConfig(**config), rank=dist.get_rank(),
                              stages=dist.get_world_size(), parts=parts)
        result = trainer.fit()
        _write(trainer, result, Path(out))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_flow(store_path: str | os.PathLike, stages: int, config: FlowConfig, *,
             out_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Train ``config`` on ``stages`` stages (module docstring)."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import launch

    store_path = str(store_path)
    store = open_store(store_path)
    count = config.microbatches or microbatch_count(store.num_nodes, stages)
    config = FlowConfig(**{**config.as_dict(), "microbatches": count})
    indptr, indices = (np.asarray(a) for a in store.topology())
    parts = metis_parts(indptr, indices, count, seed=config.seed)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(out_dir) if out_dir is not None else Path(tmp)
        if stages == 1:
            trainer = FlowTrainer(FlowData.from_store(store), config, parts=parts)
            result = trainer.fit()
            _write(trainer, result, out)
            return result
        launch(_rank, stages, (store_path, config.as_dict(), parts, str(out)))
        return json.loads((out / "result.json").read_text())
