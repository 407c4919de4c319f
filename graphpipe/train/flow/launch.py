"""Starting the stages of a Flow Parallelism run: :func:`run_flow` spawns ``P`` local
gloo ranks with :func:`graphpipe.train.distributed.launch` (rank ``s`` runs stage ``s``;
one stage runs in this process) and returns rank 0's result dict
(:meth:`.trainer.FlowTrainer.fit`). The METIS parts are computed once, here, and handed
to every rank. Ranks write ``result.json`` (rank 0) and, when ``out_dir`` is given, their
stage's parameters ``stage{s}.npz`` (no pickle).

``checkpoint``: the file stage 0 writes after every epoch (:mod:`.checkpoint`);
``resume``: a checkpoint to continue, on any number of stages. :func:`check_resume` checks
one against a run before any rank starts (a :class:`~graphpipe.train.checkpoint.CheckpointError`
naming the file); with no ``microbatches`` given, a resumed run takes the checkpoint's.

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

from graphpipe.train.checkpoint import load_checkpoint
from graphpipe.train.flow import checkpoint as ckpt
from graphpipe.train.flow.microbatches import metis_parts
from graphpipe.train.flow.schedule import microbatch_count
from graphpipe.train.flow.trainer import FlowConfig, FlowData, FlowTrainer

__all__ = ["check_resume", "run_flow", "run_unitg_flow"]


def _write(trainer: FlowTrainer, result: dict[str, Any], out: Path) -> None:
    np.savez(out / f"stage{trainer.rank}.npz", **trainer.stage_state())
    if trainer.rank == 0:
        (out / "result.json").write_text(json.dumps(result))


def _rank(store_path: str, config: dict[str, Any], parts: np.ndarray, out: str,
          checkpoint: str | None, resume: str | None) -> None:
    """One spawned rank: join the group, train its stage, write its files."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import init_process_group
    from graphpipe.train.ranks import check_same_run

    init_process_group("cpu", timeout_s=config["timeout_s"])
    try:
        store = open_store(store_path)
        check_same_run(store.manifest, config)
        data = FlowData.from_store(store)
        trainer = FlowTrainer(data, FlowConfig(**config), rank=dist.get_rank(),
                              stages=dist.get_world_size(), parts=parts, checkpoint=checkpoint)
        result = trainer.fit(resume=resume)
        _write(trainer, result, Path(out))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _unitg_rank(store_path: str, text: dict[str, Any], config: dict[str, Any], parts: np.ndarray,
                out: str, interleave: bool, checkpoint: str | None, resume: str | None) -> None:
    """One spawned rank of :func:`run_unitg_flow`."""
    from graphpipe.store import GraphStore
    from graphpipe.train.distributed import init_process_group
    from graphpipe.train.flow.unitg import UniTGFlow
    from graphpipe.train.ranks import check_same_run
    from graphpipe.train.text.build import TextConfig
    from graphpipe.train.text.task import TextTask

    init_process_group("cpu", timeout_s=config["timeout_s"])
    try:
        text_config = TextConfig(**text)
        store = GraphStore.open(store_path)
        check_same_run(store.manifest, {"text": text, "flow": config, "interleave": interleave})
        task = TextTask.from_store(store, text_config.max_len)
        run = UniTGFlow(task, text_config, FlowConfig(**config), rank=dist.get_rank(),
                        stages=dist.get_world_size(), parts=parts, interleave=interleave,
                        checkpoint=checkpoint)
        result = run.fit(resume=resume)
        _write(run.flow, result, Path(out))
        dist.barrier()
    finally:
        dist.destroy_process_group()


def _resolved(store: Any, stages: int, config: FlowConfig, state: dict[str, Any] | None
              ) -> FlowConfig:
    """``config`` with its microbatch count: the run's own, else a resumed checkpoint's,
    else the Auto Scheduler's rule."""
    count = config.microbatches
    if count is None and state is not None:
        count = ((state.get("train") or {}).get("settings") or {}).get("microbatches")
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        count = microbatch_count(store.num_nodes, stages)
    return FlowConfig(**{**config.as_dict(), "microbatches": count})


def check_resume(store_path: str | os.PathLike, stages: int, config: FlowConfig,
                 resume: str | os.PathLike, *, text: Any = None, interleave: bool = False
                 ) -> FlowConfig:
    """Check, before any rank starts, that the checkpoint ``resume`` continues this run
    (``text``: UniTG's :class:`~graphpipe.train.text.build.TextConfig`, None for revgcn):
    it loads (digest), was written by the same kind of run with the same settings
    (:func:`.checkpoint.resume_settings`) and holds this model's weights. Returns
    ``config`` with its microbatch count resolved; raises
    :class:`~graphpipe.train.checkpoint.CheckpointError` (one line naming the file)."""
    from graphpipe.store import open_store
    from graphpipe.train.flow.revgcn import RevGCN
    from graphpipe.train.loop import check_checkpoint_model

    store = open_store(str(store_path))
    state = load_checkpoint(resume)
    config = _resolved(store, stages, config, state)
    settings, kind = ckpt.resume_settings(config), ckpt.KIND
    if text is not None:
        from graphpipe.train.flow.unitg import resume_settings

        settings.update(resume_settings(text, config.epochs, interleave))
        kind = ckpt.UNITG_KIND
    ckpt.check_settings(state, kind, settings, resume)
    in_dim = text.emb_dim if text is not None else store.feature_dim
    model = RevGCN(in_dim, config.hidden, FlowData.classes_of(store), config.layers,
                   dropout=config.dropout, seed=config.seed)
    check_checkpoint_model(state, model, Path(resume))
    return config


def _prepare(store: Any, stages: int, config: FlowConfig, resume: str | os.PathLike | None
             ) -> tuple[FlowConfig, np.ndarray]:
    state = None if resume is None or config.microbatches else load_checkpoint(resume)
    config = _resolved(store, stages, config, state)
    indptr, indices = (np.asarray(a) for a in store.topology())
    return config, metis_parts(indptr, indices, config.microbatches, seed=config.seed)


def _path(path: str | os.PathLike | None) -> str | None:
    return None if path is None else os.path.abspath(path)


def run_unitg_flow(store_path: str | os.PathLike, stages: int, text: Any, config: FlowConfig, *,
                   interleave: bool = False, checkpoint: str | os.PathLike | None = None,
                   resume: str | os.PathLike | None = None) -> dict[str, Any]:
    """UniTG with its GNN on ``stages`` stages (:mod:`.unitg`; ``text``: a
    :class:`~graphpipe.train.text.build.TextConfig`); rank 0's result. One stage: in
    process, the LM's steps in line (a single stage has no bubbles). ``interleave``: the
    Bubble Interleaver (the LM takes the steps the bubbles have time for: the result then
    depends on timing; off by default, so a run's result is the same every time).
    ``checkpoint``, ``resume``: module docstring."""
    from graphpipe.store import GraphStore
    from graphpipe.train.distributed import launch
    from graphpipe.train.flow.unitg import UniTGFlow
    from graphpipe.train.text.task import TextTask

    store_path = str(store_path)
    store = GraphStore.open(store_path)
    config, parts = _prepare(store, stages, config, resume)
    checkpoint, resume = _path(checkpoint), _path(resume)
    if stages == 1:
        task = TextTask.from_store(store, text.max_len)
        return UniTGFlow(task, text, config, parts=parts, interleave=False,
                         checkpoint=checkpoint).fit(resume=resume)
    with tempfile.TemporaryDirectory() as tmp:
        launch(_unitg_rank, stages, (store_path, text.as_dict(), config.as_dict(), parts, tmp,
                                     bool(interleave), checkpoint, resume))
        return json.loads((Path(tmp) / "result.json").read_text())


def run_flow(store_path: str | os.PathLike, stages: int, config: FlowConfig, *,
             out_dir: str | os.PathLike | None = None, checkpoint: str | os.PathLike | None = None,
             resume: str | os.PathLike | None = None) -> dict[str, Any]:
    """Train ``config`` on ``stages`` stages (module docstring)."""
    from graphpipe.store import open_store
    from graphpipe.train.distributed import launch

    store_path = str(store_path)
    store = open_store(store_path)
    config, parts = _prepare(store, stages, config, resume)
    checkpoint, resume = _path(checkpoint), _path(resume)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(out_dir) if out_dir is not None else Path(tmp)
        if stages == 1:
            trainer = FlowTrainer(FlowData.from_store(store), config, parts=parts,
                                  checkpoint=checkpoint)
            result = trainer.fit(resume=resume)
            _write(trainer, result, out)
            return result
        launch(_rank, stages, (store_path, config.as_dict(), parts, str(out), checkpoint, resume))
        return json.loads((out / "result.json").read_text())
