"""Data-parallel training on this machine, and what it projects to on many.

1. **Partition-aware seeds** (loaders only, in this process): for ``W`` in 2, 4, 8 ranks,
   each rank's training loader (``match_reorder=True``, the trainer's ``frontier="all"``)
   runs one epoch of its shard, random (:class:`SeedShard`) or by METIS parts
   (:class:`PartitionShard`, ``partition/k8``; in the permutation's order, or ``by_part``:
   one part after another); per rank: rows needed (distinct input
   nodes summed over batches: what a loader without reuse gathers), rows gathered from
   the store with Match-Reorder, rows reused.
2. **Epoch time and communication** (real gloo ranks, ``graphpipe.train.distributed.launch``):
   a plain one-process :class:`Trainer`, then :class:`DistributedTrainer` at N=1, N=2
   (random shards) and N=2 (``shard="parts"``), ``--epochs`` epochs each, evaluation off;
   the last epoch's time (slowest rank), per-rank steps, seeds, rows and the gradient
   all-reduces DDP ran (calls, bytes: counted by the communication hook). Each rank also
   times the model step alone (forward + backward + Adam on ``--probe`` prepared batches)
   and one all-reduce of the gradient's size (``--reps`` times).
3. **Projection** to M machines (one rank each, this machine's step time) from the
   measured per-batch step time ``t_step`` at N=1 and the gradient bytes ``P``:
   ``t_ar(M) = 2 (M-1) * (alpha + P / (M * BW))`` (ring all-reduce: 2(M-1) steps of P/M
   bytes each), ``T_epoch(M) = ceil(n_train / (M * B)) * (t_step + t_ar(M))`` with no
   overlap of communication and backward (DDP overlaps them: an upper bound), ``BW`` =
   ``--gbit`` Gbit/s, ``alpha`` = ``--latency-us`` per message; for this store's train
   split and for papers100M's (1,207,179 seeds), with the step time measured here and
   with :data:`STEP_CASES` (a quiet-machine and a GPU-class step).

    .venv/bin/python benchmarks/ddp.py [--nodes 50000] [--epochs 2] [--write]

Model: 3-layer SAGE, hidden 256, fanouts [15, 10, 5], batch 1024 per rank, Adam; a
community graph with 100 float32 features, 47 classes, 60% train. ``--write`` writes
benchmarks/results/ddp.md.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FANOUTS, HIDDEN, LAYERS, BATCH, DIM, CLASSES = [15, 10, 5], 256, 3, 1024, 100, 47
PAPERS100M_TRAIN = 1_207_179
SHARD_NAMES = {"seeds": "random", "parts": "METIS parts", "grouped": "METIS parts, by part"}
STEP_CASES = ((0.082, "this model on a quiet 2-core run, benchmarks/train.py"),
              (0.010, "an assumed GPU-class step"))
"""Step times the projection is also made for, besides the one measured here."""


# ------------------------------------------------------------------------------------ data
def make_store(root: Path, nodes: int) -> Path:
    from graphpipe.derive import write_partition
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph, write_ogb_raw

    graph = community_graph(nodes, CLASSES, avg_degree=15, feature_dim=DIM, seed=0)
    write_ogb_raw(root / "raw", graph)
    store = ingest(root / "raw", root / "store")
    write_partition(store, 8)
    return root / "store"


# ------------------------------------------------------------------------ 1. seed shards
def shard_rows(store_path: Path, world: int, mode: str) -> list[dict[str, int]]:
    """Per rank: rows needed / gathered / reused over one epoch of its shard."""
    from graphpipe.loaders import NeighborLoader, PartitionShard, SeedShard
    from graphpipe.store import GraphStore

    store = GraphStore.open(store_path)
    part = np.asarray(store.array("partition/k8/part"))
    train = np.asarray(store.split("train"))
    out = []
    for rank in range(world):
        shard = (SeedShard(rank, world) if mode == "seeds"
                 else PartitionShard(part, rank, world, seeds=train, by_part=mode == "grouped"))
        loader = NeighborLoader(store, FANOUTS, "train", batch_size=BATCH, shuffle=True, seed=0,
                                frontier="all", match_reorder=True, shard=shard)
        touched = np.zeros(store.num_nodes, dtype=bool)
        for batch in loader:
            touched[batch.n_id.numpy()] = True
        s = loader.stats
        out.append({"batches": s.batches, "rows_needed": s.rows_needed,
                    "rows_gathered": s.rows_gathered, "rows_reused": s.rows_reused,
                    "distinct": int(touched.sum())})
    return out


def shard_table(store_path: Path) -> list[str]:
    lines = [("| ranks | shard | distinct rows / rank / epoch | rows needed / rank "
              "| gathered (Match-Reorder) / rank | reused / rank | gathered vs random |"),
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for world in (2, 4, 8):
        base = None
        for mode in ("seeds", "parts", "grouped"):
            ranks = shard_rows(store_path, world, mode)
            mean = {k: float(np.mean([r[k] for r in ranks])) for k in ranks[0]}
            base = base or mean["rows_gathered"]
            lines.append(f"| {world} | {SHARD_NAMES[mode]} | "
                         f"{mean['distinct']:,.0f} | {mean['rows_needed']:,.0f} | {mean['rows_gathered']:,.0f} | "
                         f"{mean['rows_reused']:,.0f} ({mean['rows_reused'] / mean['rows_needed']:.1%}) | "
                         f"{mean['rows_gathered'] / base:.3f} |")
    return lines


# ------------------------------------------------------------------------- 2. DDP ranks
def _model(store):
    import torch

    from graphpipe.train import build_model

    torch.manual_seed(0)
    return build_model("sage", store.feature_dim, HIDDEN, CLASSES, LAYERS, dropout=0.5)


def _probe_step(trainer, batches: list, reps: int) -> tuple[float, float]:
    """Seconds per model step on prepared batches; seconds per gradient-sized all-reduce."""
    import torch
    import torch.distributed as dist
    from torch.nn import functional as F

    model = trainer.forward_model
    t0 = time.perf_counter()
    for batch in batches:
        loss = F.cross_entropy(model(batch), batch.y[: batch.batch_size].reshape(-1))
        trainer.optimizer.zero_grad()
        loss.backward()
        trainer.optimizer.step()
    step = (time.perf_counter() - t0) / len(batches)
    grad = torch.zeros(sum(p.numel() for p in trainer.model.parameters()))
    if not dist.is_initialized():
        return step, 0.0
    dist.all_reduce(grad)
    t0 = time.perf_counter()
    for _ in range(reps):
        dist.all_reduce(grad)
    return step, (time.perf_counter() - t0) / reps


def rank_run(store_path: str, out: str, mode: str, epochs: int, probe: int, reps: int) -> None:
    """One process of a timed run (``mode``: plain, seeds or parts)."""
    import torch.distributed as dist

    from graphpipe.store import GraphStore
    from graphpipe.train import Trainer
    from graphpipe.train.distributed import DistributedTrainer, init_process_group

    store = GraphStore.open(store_path, in_memory="auto")
    options = {"fanouts": FANOUTS, "batch_size": BATCH, "epochs": epochs, "evaluation": "none",
               "quiet": True, "seed": 0}
    if mode != "plain":
        init_process_group()
        trainer = DistributedTrainer(_model(store), store, shard=mode, **options)
    else:
        trainer = Trainer(_model(store), store, **options)
    t0 = time.perf_counter()
    history = trainer.fit().history
    wall = time.perf_counter() - t0
    batches = [b for _, b in zip(range(probe), trainer.loader)]
    step, allreduce = _probe_step(trainer, batches, reps)
    result = {"mode": mode, "wall": wall, "history": history, "step_s": step, "allreduce_s": allreduce,
              "param_bytes": sum(p.numel() * p.element_size() for p in trainer.model.parameters())}
    if mode != "plain":
        result["world_size"], rank = trainer.world_size, trainer.rank
        Path(out, f"{mode}_w{trainer.world_size}_rank{rank}.json").write_text(json.dumps(result))
        dist.barrier()
        dist.destroy_process_group()
    else:
        Path(out, "plain.json").write_text(json.dumps(result))


def timed_runs(store_path: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    from graphpipe.train.distributed import launch

    runs = [("plain", 1), ("seeds", 1), ("seeds", 2), ("parts", 2)]
    results = []
    for mode, nproc in runs:
        launch(rank_run, nproc, (str(store_path), str(out), mode, args.epochs, args.probe, args.reps))
        names = ["plain.json"] if mode == "plain" else [f"{mode}_w{nproc}_rank{r}.json" for r in range(nproc)]
        results.append({"mode": mode, "nproc": nproc,
                        "ranks": [json.loads((out / n).read_text()) for n in names]})
    return results


def timing_table(results: list[dict]) -> list[str]:
    lines = [("| run | last epoch s (slowest rank) | steps / rank | seeds / rank | rows gathered / rank "
             "| all-reduces / step | bytes / step / rank | model step s (probe) | all-reduce s (probe) |"),
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for run in results:
        last = [r["history"][-1] for r in run["ranks"]]
        rec = last[0]
        per = rec.get("ranks") or [{"steps": rec["steps"], "seeds": None, "allreduce_calls": 0,
                                    "allreduce_bytes": 0,
                                    "rows_gathered": rec["loader"]["rows_gathered"]}]
        steps = per[0]["steps"]
        name = "Trainer (no DDP)" if run["mode"] == "plain" else f"DDP N={run['nproc']} {run['mode']}"
        seeds = "-" if per[0]["seeds"] is None else per[0]["seeds"]
        rows = " / ".join(f"{p['rows_gathered']:,}" for p in per)
        step_s = " / ".join(f"{r['step_s']:.3f}" for r in run["ranks"])
        ar_ms = " / ".join(f"{r['allreduce_s'] * 1e3:.2f} ms" for r in run["ranks"])
        lines.append(f"| {name} | {rec['seconds']:.2f} | {steps} | {seeds} | {rows} | "
                     f"{per[0]['allreduce_calls'] / max(steps, 1):.0f} | "
                     f"{per[0]['allreduce_bytes'] / max(steps, 1):,.0f} | {step_s} | {ar_ms} |")
    return lines


# ------------------------------------------------------------------------- 3. projection
def allreduce_s(machines: int, nbytes: float, gbit: float, latency_s: float) -> float:
    """Ring all-reduce of ``nbytes`` over ``machines``: 2(M-1) steps of nbytes/M each."""
    if machines == 1:
        return 0.0
    return 2 * (machines - 1) * (latency_s + nbytes / machines / (gbit * 1e9 / 8))


def projection(step_s: float, nbytes: float, n_train: int, args: argparse.Namespace) -> list[str]:
    lines = [(f"n_train = {n_train:,}, t_step = {step_s:.3f} s, P = {nbytes:,.0f} B, "
             f"BW = {args.gbit} Gbit/s, alpha = {args.latency_us} us"), "",
             "| machines | steps / epoch | t_ar ms | comm share | epoch s | speedup |",
             "| --- | --- | --- | --- | --- | --- |"]
    base = None
    for m in (1, 2, 8, 64):
        steps = math.ceil(n_train / (m * BATCH))
        t_ar = allreduce_s(m, nbytes, args.gbit, args.latency_us * 1e-6)
        epoch = steps * (step_s + t_ar)
        base = base or epoch
        lines.append(f"| {m} | {steps:,} | {t_ar * 1e3:.3f} | {t_ar / (step_s + t_ar):.2%} | "
                     f"{epoch:,.1f} | {base / epoch:.1f}x |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--probe", type=int, default=8, help="prepared batches timed per rank")
    ap.add_argument("--reps", type=int, default=30, help="all-reduces timed per rank")
    ap.add_argument("--gbit", type=float, default=25.0)
    ap.add_argument("--latency-us", type=float, default=50.0)
    ap.add_argument("--only-shards", action="store_true", help="section 1 only")
    ap.add_argument("--write", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        store_path = make_store(Path(tmp), args.nodes)
        from graphpipe.store import GraphStore

        n_train = len(GraphStore.open(store_path).split("train"))
        text = [(f"# data-parallel training ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                f"{platform.node()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"), "",
                (f"`.venv/bin/python benchmarks/ddp.py {' '.join(sys.argv[1:])}`; community graph "
                f"{args.nodes:,} nodes, {n_train:,} train seeds; SAGE {LAYERS}x{HIDDEN}, fanouts "
                f"{FANOUTS}, batch {BATCH} per rank"), "", "## 1. seed shards: rows per rank, one epoch", ""]
        text += shard_table(store_path)
        if args.only_shards:
            print("\n".join(text))
            return
        out = Path(tmp) / "out"
        out.mkdir()
        results = timed_runs(store_path, out, args)
        text += ["", "## 2. epoch time and communication (this machine)", ""] + timing_table(results)
        single = results[0]["ranks"][0]  # the one-process Trainer: no all-reduce in its step
        cases = [("this store, measured step", n_train, single["step_s"]),
                 ("papers100M train split, measured step", PAPERS100M_TRAIN, single["step_s"])]
        cases += [(f"papers100M train split, t_step {t} s ({why})", PAPERS100M_TRAIN, t)
                  for t, why in STEP_CASES]
        for title, n, step in cases:
            text += ["", f"## 3. projection: {title}", ""] + projection(step, single["param_bytes"], n, args)
        text += ["", f"total {time.perf_counter() - t0:.0f} s"]
    print("\n".join(text))
    if args.write:
        (ROOT / "benchmarks" / "results" / "ddp.md").write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
