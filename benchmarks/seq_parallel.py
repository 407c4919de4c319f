"""Sequence parallelism (issue 18, TorchGT): the longest sequence one training step fits at
P=1 and at P=2 under the same per-process memory cap, and the all-to-all bytes per layer.

Each trial is one real training step (ClusterLoader sequence with METIS reordering,
Graphormer-slim forward + backward, gradient all-reduce, AdamW step) through
:class:`graphpipe.train.sequence_parallel_trainer.SequenceParallelTrainer`, as P
processes started the way torchrun starts them (``RANK``, ``WORLD_SIZE``, ``MASTER_*``;
P=1: one process, no process group), **each in its own memory cgroup** capped at
``--cap`` (``../shared/tools/memlimit.sh`` beside the repository; the kernel kills a rank that goes over,
exit 137). The sequence length is binary-searched (geometric steps, to ``--tol``) on a
generated community graph; the P=2 search starts from the P=1 result.

    .venv/bin/python benchmarks/seq_parallel.py --cap 1G --write

prints one row per trial and the summary, and with ``--write`` puts them in
``benchmarks/results/seq_parallel.md``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEMLIMIT = os.environ.get("GRAPHPIPE_MEMLIMIT") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "tools", "memlimit.sh")
RESULTS = Path(__file__).with_name("results") / "seq_parallel.md"
MODEL = {"name": "graphormer", "hidden": 64, "layers": 4, "heads": 8}   # TorchGT's GPH_Slim


# --------------------------------------------------------------------------- one rank
def trial(store: str, seq_len: int, parts: int, attention: str) -> None:
    """One training step as one rank; prints a JSON line (rank, peak RSS, all-to-all)."""
    import graphpipe  # noqa: F401  (OpenMP wait policy before torch)

    # isort: split
    import torch

    from graphpipe.train import build_model
    from graphpipe.train.sequence_parallel import HeadExchange, init_from_env
    from graphpipe.train.sequence_parallel_trainer import SequenceParallelTrainer

    torch.set_num_threads(1)
    if "WORLD_SIZE" in os.environ:
        init_from_env()
    exchange = HeadExchange()
    from graphpipe.store import GraphStore

    opened = GraphStore.open(store)
    classes = int(opened.manifest["labels"]["num_classes"])
    torch.manual_seed(0)
    model = build_model(MODEL["name"], opened.feature_dim, MODEL["hidden"], classes,
                        MODEL["layers"], heads=MODEL["heads"])
    t0 = time.perf_counter()
    trainer = SequenceParallelTrainer(model, store, exchange=exchange, seq_len=seq_len,
                                      attention=attention, parts=parts, epochs=1, max_steps=1,
                                      evaluation="none", quiet=True)
    record = trainer.fit().history[-1]
    print(json.dumps({"rank": exchange.rank, "world": exchange.world, "seq_len": seq_len,
                      "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "seconds": time.perf_counter() - t0, "step_seconds": record["seconds"],
                      "comm": record["comm"]}), flush=True)
    if exchange.world > 1:
        import torch.distributed as dist

        dist.barrier()
        dist.destroy_process_group()


# --------------------------------------------------------------------------- driver
def make_store(root: Path, nodes: int, features: int) -> str:
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph, write_ogb_raw

    write_ogb_raw(root / "raw", community_graph(nodes, 16, avg_degree=8, feature_dim=features,
                                                train_frac=0.9, valid_frac=0.05, seed=0))
    return str(ingest(root / "raw", root / "store").path)


def _kill(proc: subprocess.Popen) -> None:
    """End a trial rank we started (its own session: memlimit.sh and its python)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            continue


def run_trial(args: argparse.Namespace, world: int, seq_len: int, logdir: Path) -> dict:
    """P ranks of one training step, each under its own cap; ``ok`` unless any failed."""
    from graphpipe.train.sequence_parallel import free_port

    port, procs, logs = free_port(), [], []
    for r in range(world):
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        if args.mmap_threshold:
            env["MALLOC_MMAP_THRESHOLD_"] = str(args.mmap_threshold)
        if world > 1:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r),
                       LOCAL_RANK=str(r), WORLD_SIZE=str(world))
        out = open(logdir / f"p{world}_s{seq_len}_r{r}.out", "w+")  # noqa: SIM115 (closed below)
        err = open(logdir / f"p{world}_s{seq_len}_r{r}.err", "w+")  # noqa: SIM115
        cmd = [MEMLIMIT, "--keep-caches", args.cap, sys.executable, __file__, "--trial",
               args.store, str(seq_len), "--parts", str(args.parts), "--attention", args.attention]
        procs.append(subprocess.Popen(cmd, env=env, stdout=out, stderr=err, start_new_session=True))
        logs.append((out, err))
    deadline, failed = time.monotonic() + args.timeout, False
    while any(p.poll() is None for p in procs):
        if any(p.poll() not in (None, 0) for p in procs) or time.monotonic() > deadline:
            failed = True
            for p in procs:
                _kill(p)
            break
        time.sleep(0.2)
    rows, peaks, codes = [], [], [p.returncode for p in procs]
    for out, err in logs:
        out.seek(0)
        err.seek(0)
        rows += [json.loads(line) for line in out.read().splitlines() if line.startswith("{")]
        m = re.search(r"memlimit: cap=\S+ peak=(\S+) rc=(-?\d+)", err.read())
        if m:
            peaks.append(m.group(1))
        out.close()
        err.close()
    ok = not failed and codes == [0] * world and len(rows) == world
    return {"world": world, "seq_len": seq_len, "ok": ok, "codes": codes, "peaks": peaks,
            "rows": rows}


def longest(args: argparse.Namespace, world: int, lo: int, max_len: int, logdir: Path,
            trials: list[dict]) -> dict | None:
    """The longest fitting sequence from ``lo`` up: doubling until a length fails (or
    ``max_len``), then geometric bisection to ``tol``."""
    def attempt(s: int) -> dict:
        t = run_trial(args, world, s, logdir)
        trials.append(t)
        rss = max((r["maxrss_mb"] for r in t["rows"]), default=float("nan"))
        print(f"P={world} seq_len={s:>7}: {'fits' if t['ok'] else 'FAILS'} codes={t['codes']} "
              f"cgroup peak={t['peaks']} max RSS={rss:.0f} MB", flush=True)
        return t

    best = attempt(lo)
    if not best["ok"]:
        return None
    hi = None
    while hi is None and lo < max_len:
        s = min(2 * lo, max_len)
        t = attempt(s)
        if t["ok"]:
            lo, best = s, t
        else:
            hi = s
    while hi is not None and hi / lo > 1 + args.tol:
        mid = int(math.sqrt(lo * hi)) // 64 * 64
        if mid <= lo or mid >= hi:
            break
        t = attempt(mid)
        if t["ok"]:
            lo, best = mid, t
        else:
            hi = mid
    return best


def summarise(args: argparse.Namespace, results: dict[int, dict | None]) -> list[str]:
    head = (f"cap {args.cap} per process; graphormer hidden {MODEL['hidden']}, "
            f"{MODEL['layers']} layers, {MODEL['heads']} heads; attention {args.attention}; "
            f"METIS k={args.parts}; community graph {args.nodes} nodes (avg degree 8, "
            f"{args.features} features); malloc: "
            + (f"MALLOC_MMAP_THRESHOLD_={args.mmap_threshold}" if args.mmap_threshold
               else "glibc default (dynamic mmap threshold)"))
    columns = ("| P | longest seq_len | max RSS per rank (MB) | step s | all-to-all per layer, "
               "each way, per rank | measured / 4·(S/P)·d·4 B |")
    lines = [head, "", columns,
             "| --- | --- | --- | --- | --- | --- |"]
    for world, t in results.items():
        if t is None:
            lines.append(f"| {world} | none fits | | | | |")
            continue
        rows = t["rows"]
        c = rows[0]["comm"]
        s = t["seq_len"]
        fwd = c["forward_bytes_per_layer_step"]
        padded = math.ceil(s / world) * world
        expect = 4 * (padded // world) * MODEL["hidden"] * 4 if world > 1 else 0
        ratio = f"{fwd / expect:.3f}" if expect else "-"
        lines.append(f"| {world} | {s} | {max(r['maxrss_mb'] for r in rows):.0f} | "
                     f"{max(r['step_seconds'] for r in rows):.2f} | {fwd / 2**20:.2f} MiB | {ratio} |")
    one, two = results.get(1), results.get(2)
    if one and two:
        lines += ["", f"P=2 / P=1 longest sequence: **{two['seq_len'] / one['seq_len']:.2f}x**"]
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trial", nargs=2, metavar=("STORE", "SEQ_LEN"), help=argparse.SUPPRESS)
    p.add_argument("--cap", default="1G", help="memory cap per process (memlimit.sh size)")
    p.add_argument("--nodes", type=int, default=160_000)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--attention", default="sparse", choices=["sparse", "cluster-sparse"])
    p.add_argument("--start", type=int, default=4096, help="a length P=1 surely fits")
    p.add_argument("--tol", type=float, default=0.08, help="stop when hi/lo <= 1 + tol")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per trial")
    p.add_argument("--mmap-threshold", type=int, default=0,
                   help="set glibc's MALLOC_MMAP_THRESHOLD_ in every rank (e.g. 131072: freed "
                        "tensors go back to the OS at once instead of staying in the heap); "
                        "0: glibc's default dynamic threshold")
    p.add_argument("--store", default=None, help="reuse a store (default: generate one)")
    p.add_argument("--write", action="store_true", help=f"append to {RESULTS}")
    args = p.parse_args()
    if args.trial:
        trial(args.trial[0], int(args.trial[1]), args.parts, args.attention)
        return
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="seqpar_bench_") as tmp:
        tmp = Path(tmp)
        if args.store is None:
            args.store = make_store(tmp, args.nodes, args.features)
        from graphpipe.store import GraphStore

        max_len = len(GraphStore.open(args.store).split("train")) + 1
        trials: list[dict] = []
        one = longest(args, 1, args.start, max_len, tmp, trials)
        results: dict[int, dict | None] = {1: one}
        start = one["seq_len"] if one else args.start
        results[2] = longest(args, 2, start, max_len, tmp, trials)
    lines = summarise(args, results)
    lines.append(f"\nwall time {time.perf_counter() - t0:.0f} s, {len(trials)} trials")
    print("\n".join(lines))
    if args.write:
        cmd = "python benchmarks/seq_parallel.py " + " ".join(
            a for a in sys.argv[1:] if a != "--write")
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        trial_lines = [f"- P={t['world']} S={t['seq_len']}: {'fits' if t['ok'] else 'fails'} "
                       f"(exit {t['codes']}, cgroup peak {t['peaks']})" for t in trials]
        with open(RESULTS, "a", encoding="utf-8") as f:
            f.write(f"\n## {stamp}: `{cmd}` (load {os.getloadavg()[0]:.1f})\n\n"
                    + "\n".join(lines) + "\n\ntrials:\n\n" + "\n".join(trial_lines) + "\n")


if __name__ == "__main__":
    main()
