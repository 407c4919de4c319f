"""UniTG (issue 26) on a text-attributed graph: accuracy and makespan of unitg, lm,
a GNN on the raw features, tape and glem; Lazy Tuner fine-tuning time against full depth
per grouping; a 1M-node text column tokenized under a memory cap.

    python benchmarks/unitg.py --dir bench-data/unitg [--nodes 4000] [--part all]

Every model is one `graphpipe train` process (wall time = its makespan, imports
included; `nice`d). The Lazy Tuner part times one LM fine-tuning epoch in process.
Results: printed, and JSON in benchmarks/results/unitg.json. Say how loaded the
machine was (the load average is recorded at start and end).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GP = [sys.executable, "-m", "graphpipe.cli.main"]


def _run(args: list[str]) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    out = subprocess.run(["nice", *GP, *args], capture_output=True, text=True, env=env,
                         check=False)
    seconds = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed: {out.stderr[-2000:]}")
    return seconds, out.stdout


def _store(folder: Path, nodes: int, seed: int) -> Path:
    store = folder / f"tag{nodes}"
    if not store.exists():
        raw = folder / f"tag{nodes}-raw"
        if not raw.exists():
            _run(["generate", "tag", str(raw), "--nodes", str(nodes), "--seed", str(seed), "-q"])
        _run(["ingest", str(raw), str(store), "--text", str(raw / "titleabs.tsv"), "-q"])
    return store


def accuracy(store: Path, gnn_epochs: int, lm_epochs: int, seed: int) -> list[dict]:
    common = ["--seed", str(seed), "--quiet"]
    runs = {
        "gnn-raw (sage)": ["--model", "sage", "--layers", "2", "--hidden", "128", "--fanouts",
                           "10,10", "--epochs", str(gnn_epochs // 2)],
        "lm": ["--model", "lm", "--epochs", str(lm_epochs)],
        "unitg": ["--model", "unitg", "--epochs", str(gnn_epochs), "--lm-epochs", str(lm_epochs)],
        "tape": ["--model", "tape", "--epochs", str(gnn_epochs), "--lm-epochs", str(lm_epochs)],
        "glem": ["--model", "glem", "--epochs", str(gnn_epochs), "--lm-epochs", str(lm_epochs)],
    }
    rows = []
    for name, args in runs.items():
        seconds, out = _run(["train", str(store), *args, *common])
        acc = float(re.findall(r"test acc (\d\.\d+)", out)[-1])
        rows.append({"model": name, "test_acc": acc, "seconds": round(seconds, 1),
                     "command": "graphpipe train STORE " + " ".join(args + common)})
        print(f"{name:16s} test acc {acc:.4f}  wall {seconds:7.1f} s", flush=True)
    return rows


def lazy(store: Path, seed: int, epochs: int = 1) -> list[dict]:
    """LM fine-tuning time: full depth (one exit) vs the Lazy Tuner per grouping."""
    sys.path.insert(0, str(ROOT))
    from graphpipe.store import GraphStore
    from graphpipe.train.text.build import TextConfig, build_lm_trainer
    from graphpipe.train.text.lazy_tuner import node_groups
    from graphpipe.train.text.task import TextTask

    config = TextConfig(seed=seed, lm_epochs=epochs)
    task = TextTask.from_store(GraphStore.open(store), config.max_len)
    rows = []
    for grouping in ("full depth", "quartile", "equal-width"):
        if grouping == "full depth":
            trainer = build_lm_trainer(task, config, quiet=True)
        else:
            groups = node_groups(task.degrees, grouping)
            trainer = build_lm_trainer(task, config, groups=groups, num_groups=4, quiet=True)
        trainer.evaluation = "none"
        fraction = trainer.loader.compute_fraction(trainer.model.depths,
                                                   trainer.model.encoder.num_layers)
        t0 = time.perf_counter()
        trainer.fit()
        seconds = time.perf_counter() - t0
        accs = trainer.evaluate()
        sizes = (trainer.loader.groups[:, None] == range(4)).sum(0).tolist() \
            if grouping != "full depth" else [len(trainer.loader.groups)]
        rows.append({"grouping": grouping, "seconds": round(seconds, 1),
                     "depth_fraction": round(fraction, 3), "train_group_sizes": sizes,
                     "valid_acc": round(accs["valid"], 4), "test_acc": round(accs["test"], 4)})
        print(f"{grouping:12s} {seconds:7.1f} s  depth {fraction:.3f}  groups {sizes}  "
              f"test {accs['test']:.4f}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--gnn-epochs", type=int, default=100)
    parser.add_argument("--lm-epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--part", choices=["all", "accuracy", "lazy"], default="all")
    args = parser.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    store = _store(args.dir, args.nodes, args.seed)
    report: dict = {"nodes": args.nodes, "load_start": os.getloadavg(), "cpus": os.cpu_count()}
    if args.part in ("all", "accuracy"):
        report["accuracy"] = accuracy(store, args.gnn_epochs, args.lm_epochs, args.seed)
    if args.part in ("all", "lazy"):
        report["lazy"] = lazy(store, args.seed)
    report["load_end"] = os.getloadavg()
    out = ROOT / "benchmarks" / "results" / f"unitg-{args.part}.json"
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps({k: report[k] for k in ("load_start", "load_end")}))


if __name__ == "__main__":
    main()
