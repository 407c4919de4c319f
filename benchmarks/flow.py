"""Flow Parallelism and the Bubble Interleaver (issue 26, UniTG §5.4/§5.8) on the
`graphpipe generate tag` graph: a RevGCN on 1 stage vs 2 gloo stages (accuracy, epoch
time, bubble fraction), and UniTG on 2 stages with the LM in the bubbles vs in line.

    nice python benchmarks/flow.py --dir bench-data/unitg --parts gnn --layers 8 --hidden 64
    nice python benchmarks/flow.py --dir bench-data/unitg --parts unitg --layers 16 --hidden 128

Every run is one call of `run_flow` / `run_unitg_flow` (ranks spawned; one stage in
process). Bubble fraction = sum over stages of the time a stage waited for a message /
sum of its step times (steps only: evaluation and syncs excluded); "unfilled" subtracts
the LM's CPU seconds spent in the bubbles. Results printed and written to
benchmarks/results/flow-<parts>-<layers>x<hidden>.json. Say how loaded the machine was (load recorded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _row(name: str, r: dict, seconds: float) -> dict:
    idle, step = sum(r["idle_seconds"]), sum(r["step_seconds"])
    lm = r.get("lm_cpu_seconds", 0.0) if "interleave" in name else 0.0
    row = {"run": name, "test_acc": round(r["test_acc"], 4), "stages": r["stages"],
           "microbatches": r["microbatches"], "epoch_s": round(r["epoch_seconds"], 3),
           "bubble": round(idle / max(step, 1e-9), 3), "gpipe_formula": round(r["gpipe_bubble"], 3),
           "unfilled_bubble": round(max(idle - lm, 0.0) / max(step, 1e-9), 3),
           "train_wall_s": round(r["wall_seconds"], 1), "process_s": round(seconds, 1)}
    for key in ("lm_steps", "lm_planned", "syncs"):
        if key in r:
            row[key] = r[key]
    if "lm_cpu_seconds" in r:
        row["lm_cpu_s"] = round(r["lm_cpu_seconds"], 1)
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    from unitg import _store

    from graphpipe.train.flow.launch import run_flow, run_unitg_flow
    from graphpipe.train.flow.trainer import FlowConfig
    from graphpipe.train.text.build import TextConfig

    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="bench-data/unitg")
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lm-epochs", type=int, default=3)
    ap.add_argument("--parts", default="gnn,unitg")
    args = ap.parse_args()
    folder = Path(args.dir)
    folder.mkdir(parents=True, exist_ok=True)
    store = _store(folder, args.nodes, 0)
    flow = FlowConfig(hidden=args.hidden, layers=args.layers, epochs=args.epochs, eval_every=5)
    text = TextConfig(lm_epochs=args.lm_epochs)
    rows, load = [], [os.getloadavg()[0]]
    runs = []
    if "gnn" in args.parts:
        runs += [("revgcn 1 stage", lambda: run_flow(store, 1, flow)),
                 ("revgcn 2 stages", lambda: run_flow(store, 2, flow))]
    if "unitg" in args.parts:
        runs += [("unitg 2 stages, LM in line", lambda: run_unitg_flow(
                     store, 2, text, flow, interleave=False)),
                 ("unitg 2 stages, interleaved", lambda: run_unitg_flow(store, 2, text, flow,
                                                                           interleave=True))]
    for name, fn in runs:
        t0 = time.perf_counter()
        rows.append(_row(name, fn(), time.perf_counter() - t0))
    load.append(os.getloadavg()[0])
    out = {"nodes": args.nodes, "epochs": args.epochs, "gnn": f"revgcn {args.layers}x{args.hidden}",
           "lm": f"bert {text.lm_layers}x{text.lm_hidden}, {args.lm_epochs} epoch(s)",
           "load": load, "rows": rows}
    name = f"flow-{args.parts.replace(',', '-')}-{args.layers}x{args.hidden}.json"
    path = ROOT / "benchmarks" / "results" / name
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"load {load[0]:.1f} -> {load[1]:.1f}; written {path}")


if __name__ == "__main__":
    main()
