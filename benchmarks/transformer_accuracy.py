"""Benchmark 4: graph-transformer accuracy after equal epochs, by attention (TorchGT Fig. 10
analogue).

A generated community graph (degree-corrected SBM, features = noisy class centroids,
random 60/20/20 split) is ingested into a store; Graphormer-slim (and GT) train on
ClusterLoader sequences of ``--seq-len`` training nodes (METIS-reordered, ``--parts``
clusters; Graphormer with a global token) for the same number of epochs with:

- ``sparse``: the topology-induced pattern every step;
- ``cluster-sparse`` ``random`` / ``cover``: the cluster-sparse format (threshold
  ``--threshold``·β_G, d_b ``--block``) with TorchGT's random sub-block placement or the
  cover placement;
- ``interleaved``: ``--switch-freq`` dense iterations per epoch, plus every iteration
  whose structure search fails self-loops or reachability within L layers (always, for
  GT without a global token on sparse sequences), the rest sparse;
- ``interleaved, schedule only``: the schedule alone (the artifact's ``hybrid`` mode);
- ``dense``: full attention every step (where it fits the memory budget).

Evaluation follows TorchGT: sequences of valid / test nodes alone, exact sparse pattern
(dense for the dense run). Reported: test accuracy at the best valid epoch, test
accuracy after the last epoch, the best valid accuracy, median training-epoch time and
the dense steps run. Every configuration starts from the same initial weights (per
model and seed) and sees the same sequences.

    .venv/bin/python benchmarks/transformer_accuracy.py [--nodes 4096] [--degree 30] [--seq-len 512]
        [--epochs 40] [--models graphormer,gt] [--seeds 0,1,2] [--threads 2]

Not part of the test run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = [
    ("sparse", {"attention": "sparse"}),
    ("cluster-sparse random", {"attention": "cluster-sparse", "placement": "random"}),
    ("cluster-sparse cover", {"attention": "cluster-sparse", "placement": "cover"}),
    ("interleaved", {"attention": "interleaved"}),
    ("interleaved, schedule only", {"attention": "interleaved", "enforce": ()}),
    ("dense", {"attention": "dense"}),
]
MODEL_SHAPES = {"graphormer": {"hidden": 64, "layers": 4, "heads": 8},
                "gt": {"hidden": 128, "layers": 4, "heads": 8}}


def make_store(root: Path, args: argparse.Namespace) -> Path:
    """The community graph's store (cached under ``root`` by its parameters)."""
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph, write_ogb_raw

    name = (f"community_n{args.nodes}_c{args.classes}_f{args.features}_d{args.degree}"
            f"_h{args.homophily}_z{args.feature_noise}")
    store = root / name / "store"
    if not (store / "manifest.json").exists():
        graph = community_graph(args.nodes, args.classes, avg_degree=args.degree,
                                feature_dim=args.features, homophily=args.homophily,
                                feature_noise=args.feature_noise, seed=0)
        write_ogb_raw(root / name / "raw", graph)
        ingest(root / name / "raw", store)
    return store


def run_one(store: Path, model_name: str, seed: int, config: dict, args: argparse.Namespace
            ) -> dict:
    import torch

    from graphpipe.train import SequenceTrainer, build_model
    from graphpipe.train.sequence_trainer import format_sequence_epoch

    shape = MODEL_SHAPES[model_name]
    torch.manual_seed(seed)
    model = build_model(model_name, args.features, shape["hidden"], args.classes, shape["layers"],
                        heads=shape["heads"], dropout=0.1)
    options = {"placement": "random", **config}
    if options["attention"] == "cluster-sparse":
        options["threshold"] = args.threshold
    trainer = SequenceTrainer(
        model, store, seq_len=args.seq_len, epochs=args.epochs, lr=args.lr, parts=args.parts,
        block=args.block, switch_freq=args.switch_freq, seed=seed, quiet=True,
        dense_budget=args.dense_budget_mb << 20,
        on_epoch=(lambda r: print("    " + format_sequence_epoch(r), flush=True))
        if args.verbose else None, **options)
    t0 = time.perf_counter()
    result = trainer.fit()
    wall = time.perf_counter() - t0
    hist = result.history
    attention = [r["attention"] for r in hist]
    return {
        "best_test": result.test_acc, "last_test": hist[-1]["test_acc"],
        "best_valid": result.best_valid_acc, "best_epoch": result.best_epoch,
        "epoch_s": statistics.median(r["seconds"] for r in hist), "wall_s": wall,
        "dense_steps": sum(a.get("dense", 0) for a in attention),
        "fallback_steps": sum(a.get("fallback", 0) for a in attention),
        "steps": sum(r["steps"] for r in hist), "sequences": len(trainer.loader),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=4096)
    p.add_argument("--classes", type=int, default=8)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--degree", type=float, default=30)
    p.add_argument("--homophily", type=float, default=0.8)
    p.add_argument("--feature-noise", type=float, default=1.0)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--block", type=int, default=16)
    p.add_argument("--threshold", type=float, default=5.0, help="multiplier of beta_G")
    p.add_argument("--switch-freq", type=int, default=2)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--models", default="graphormer,gt")
    p.add_argument("--configs", default=";".join(name for name, _ in CONFIGS),
                   help="';'-separated names of the configurations to run")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--dense-budget-mb", type=int, default=4096)
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--cache", default=os.environ.get(
        "GRAPHPIPE_BENCH_CACHE", os.path.join(tempfile.gettempdir(), "graphpipe-bench-tacc")))
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    chosen = [c for c in CONFIGS if c[0] in args.configs.split(";")]
    seeds = [int(s) for s in args.seeds.split(",")]
    load_start = os.getloadavg()
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {os.cpu_count()} cores, torch threads {args.threads}, load average "
          f"{load_start[0]:.2f} {load_start[1]:.2f} {load_start[2]:.2f} at start, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    store = make_store(Path(args.cache), args)
    print(f"graph: community, {args.nodes} nodes, {args.classes} classes, {args.features} "
          f"features, degree {args.degree}, homophily {args.homophily}, feature noise "
          f"{args.feature_noise}; seq-len {args.seq_len}, parts {args.parts}, epochs {args.epochs}, "
          f"lr {args.lr}, switch-freq {args.switch_freq}, threshold {args.threshold}·β_G, "
          f"d_b {args.block}", flush=True)
    rows = []
    for model_name in args.models.split(","):
        for name, config in chosen:
            runs = []
            for seed in seeds:
                r = run_one(store, model_name, seed, config, args)
                runs.append(r)
                print(f"  {model_name:<10} {name:<22} seed {seed}: best-valid test {r['best_test']:.4f} "
                      f"last {r['last_test']:.4f} valid {r['best_valid']:.4f} (epoch "
                      f"{r['best_epoch']}) epoch {r['epoch_s']:.2f}s dense steps "
                      f"{r['dense_steps']}/{r['steps']} fallback {r['fallback_steps']}", flush=True)
            rows.append((model_name, name, runs))
    load_end = os.getloadavg()
    print()
    print("| model | attention | test acc @ best valid | test acc, last epoch | best valid "
          "| epoch s | dense steps / steps |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for model_name, name, runs in rows:
        def mean(key: str, runs=runs) -> float:
            return statistics.mean(r[key] for r in runs)

        def spread(key: str, runs=runs) -> str:
            if len(runs) < 2:
                return ""
            return f" ± {statistics.stdev(r[key] for r in runs):.4f}"

        dense = f"{sum(r['dense_steps'] for r in runs)} / {sum(r['steps'] for r in runs)}"
        if any(r["fallback_steps"] for r in runs):
            dense += f" ({sum(r['fallback_steps'] for r in runs)} fell back)"
        print(f"| {model_name} | {name} | {mean('best_test'):.4f}{spread('best_test')} | "
              f"{mean('last_test'):.4f}{spread('last_test')} | {mean('best_valid'):.4f} | "
              f"{mean('epoch_s'):.2f} | {dense} |")
    print(f"\nload average {load_end[0]:.2f} {load_end[1]:.2f} {load_end[2]:.2f} at the end, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


if __name__ == "__main__":
    main()
