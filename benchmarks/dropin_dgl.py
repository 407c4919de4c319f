"""Issue 28, DGL drop-in: two upstream DGL 2.1 example scripts against their ports whose
only change is the import (examples/*.diff), in one run on one graph.

* ``dgl_node_classification``: DGL's examples/pytorch/graphsage/node_classification.py
  (``dgl.dataloading.DataLoader`` + ``NeighborSampler([10, 10, 10])``, layer-wise
  inference with ``MultiLayerFullNeighborSampler(1)``) and its port on ``graphpipe.dgl``;
* ``graphbolt_node_classification``: DGL's examples/sampling/graphbolt/node_classification.py
  (``ItemSampler`` -> ``sample_neighbor`` -> ``fetch_feature`` -> ``copy_to`` ->
  ``DataLoader``) on the graph exported as an on-disk dataset, and its port on
  ``graphpipe.graphbolt`` reading the same folder (ingested once into a store).

The graph is a community SBM with products' 100 features (``--classes``, default 8:
``make_data``). Every script runs whole, as a user runs it (``.venv-dgl``, a fresh process each), in
rounds that alternate which goes first, each with ``OMP_WAIT_POLICY`` unset and set to
``PASSIVE`` in the environment (the upstream scripts import torch, and DGL with its own
OpenMP runtime, before anything of graphpipe, whose import sets it otherwise). Reported
per script and setting: median epoch time over the epochs after the first (the first
includes warm-up), the ratio port / original (below 1: the port is faster), validation
accuracy after the last epoch and test accuracy, means over the rounds.

    .venv/bin/python benchmarks/dropin_dgl.py [--nodes 20000] [--degree 10] [--epochs 3] [--rounds 2] [--write]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
CACHE = Path(tempfile.gettempdir()) / "graphpipe_bench_dropin_dgl"
SCRIPTS = {"dgl_node_classification": "--store", "graphbolt_node_classification": "--dataset"}
EPOCH = re.compile(r"Epoch (\d+) \| Loss ([\d.]+) \| Accuracy ([\d.]+) \| Time ([\d.]+)")
TEST = re.compile(r"Test [Aa]ccuracy ([\d.]+)")


def make_data(nodes: int, degree: float, classes: int, train: float, valid: float) -> tuple[Path, Path]:
    """A community graph with products' 100 features (products: 47 classes and an
    8/2/90 split; the defaults here, 8 classes and 60/10/30, let the upstream model, Adam
    at 1e-3, learn within a few epochs: at 47 classes it stays near chance for 3 epochs
    with either loader) as a store and as a GraphBolt on-disk dataset folder, made once
    into the temp directory."""
    from graphpipe.export import write_graphbolt
    from graphpipe.ingest import IngestOptions, ingest
    from graphpipe.synthetic import community_graph

    path = CACHE / f"community{nodes}_d{degree:g}_c{classes}_t{train:g}_v{valid:g}"
    store, folder = path / "store", path / "gb"
    if not (folder / "metadata.yaml").exists():
        g = community_graph(nodes, classes, feature_dim=100, avg_degree=degree, train_frac=train,
                            valid_frac=valid, seed=0)
        path.mkdir(parents=True, exist_ok=True)
        np.savez(path / "g.npz", src=g.src, dst=g.dst, x=g.features, y=g.labels, num_nodes=nodes,
                 train_idx=g.splits["train"], valid_idx=g.splits["valid"], test_idx=g.splits["test"])
        write_graphbolt(ingest(path / "g.npz", store, IngestOptions(edge_ids="always")), folder)
        (path / "g.npz").unlink()
    return store, folder


def run(python: str, script: str, data: Path, epochs: int, passive: bool) -> dict:
    """One whole run of ``examples/<script>.py``: its epochs, test accuracy, wall time."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"}
    env.pop("OMP_WAIT_POLICY", None)
    if passive:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run(["nice", python, str(EXAMPLES / f"{script}.py"), SCRIPTS[script.split(".")[0]],
                           str(data), "--epochs", str(epochs)], env=env, capture_output=True, text=True,
                          timeout=3600, check=False)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    epochs_seen = [(float(t), float(acc)) for _, _, acc, t in EPOCH.findall(proc.stdout)]
    test = TEST.findall(proc.stdout)
    return {"epochs": epochs_seen, "test": float(test[-1]), "wall": wall, "load": load}


def summary(runs: list[dict]) -> dict:
    later = [t for r in runs for t, _ in r["epochs"][1:]]
    return {"epoch_s": statistics.median(later), "first_s": statistics.median(r["epochs"][0][0] for r in runs),
            "val": statistics.mean(r["epochs"][-1][1] for r in runs),
            "test": statistics.mean(r["test"] for r in runs), "wall": statistics.median(r["wall"] for r in runs),
            "load": statistics.mean(r["load"] for r in runs), "n": len(runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--degree", type=float, default=10)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--train-frac", type=float, default=0.6)
    parser.add_argument("--valid-frac", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--python", default=str(ROOT / ".venv-dgl" / "bin" / "python"))
    parser.add_argument("--only", choices=sorted(SCRIPTS), default=None)
    parser.add_argument("--write", action="store_true", help="append the table to results/dropin_dgl.md")
    args = parser.parse_args()
    store, folder = make_data(args.nodes, args.degree, args.classes, args.train_frac, args.valid_frac)
    print(f"graph: {args.nodes} nodes, average degree {args.degree:g}, {args.classes} classes, train/valid {args.train_frac:g}/"
          f"{args.valid_frac:g}; {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    rows = []
    for script in ([args.only] if args.only else SCRIPTS):
        data = store if script.startswith("dgl_") else folder
        variants = {"original": (f"{script}.orig", False), "port": (script, False),
                    "original+PASSIVE": (f"{script}.orig", True), "port+PASSIVE": (script, True)}
        runs: dict[str, list] = {name: [] for name in variants}
        for r in range(args.rounds):
            names = list(variants) if r % 2 == 0 else list(reversed(variants))
            for name in names:
                result = run(args.python, variants[name][0], data, args.epochs, variants[name][1])
                runs[name].append(result)
                print(f"  {script} {name}: epochs {[round(t, 2) for t, _ in result['epochs']]} s, "
                      f"val {result['epochs'][-1][1]:.4f}, test {result['test']:.4f}, "
                      f"wall {result['wall']:.1f} s, load {result['load']:.1f}", flush=True)
        for env in ("", "+PASSIVE"):
            a, b = summary(runs["original" + env]), summary(runs["port" + env])
            rows.append(f"| {script} | {env[1:] or 'unset'} | {a['epoch_s']:.2f} | {b['epoch_s']:.2f} | "
                        f"**{b['epoch_s'] / a['epoch_s']:.2f}** | {a['val']:.4f} / {b['val']:.4f} | "
                        f"{a['test']:.4f} / {b['test']:.4f} | {a['wall']:.0f} / {b['wall']:.0f} | "
                        f"{(a['load'] + b['load']) / 2:.1f} | {a['n']} |")
    header = ("| script | OMP_WAIT_POLICY | original epoch s | port epoch s | port / original | "
              "val acc (orig / port) | test acc (orig / port) | wall s | load | runs each |")
    table = [header, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |", *rows]
    print("\n".join(table))
    if args.write:
        out = ROOT / "benchmarks" / "results" / "dropin_dgl.md"
        head = "" if out.exists() else "# DGL drop-in: upstream scripts against their one-import ports\n"
        with out.open("a") as f:
            f.write(f"{head}\n`{' '.join(sys.argv)}` ({args.nodes} nodes, degree {args.degree:g}, "
                    f"{args.classes} classes, train/valid {args.train_frac:g}/{args.valid_frac:g}, "
                    f"{args.epochs} epochs, {args.rounds} rounds; {os.cpu_count()} cores, "
                    f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n" + "\n".join(table) + "\n")


if __name__ == "__main__":
    main()
