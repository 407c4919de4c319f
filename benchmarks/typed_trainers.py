"""Issue 25: every trainer for typed graphs, on one generated ogbn-mag-like graph
(``graphpipe.synthetic.mag``), in one run.

1. **Typed link loader**: :class:`graphpipe.loaders.TypedLinkNeighborLoader` against PyG's
   ``LinkNeighborLoader`` on the same ``HeteroData`` (the store's relations and their
   reverses), relation ``author___writes___paper``, binary negatives, fanouts
   ``--fanouts``, batch ``--batch-size`` positive edges, shuffled; ``--batches`` batches per
   round after one untimed warm-up batch, rounds interleaved, the median round reported
   (positive edges per second, ratio).
2. **Typed link training**: ``graphpipe train STORE --task link --relation
   author___writes___paper`` (a fresh process, R-GCN, random link split 70/10/20): the
   split, epoch times and ``test mrr`` (OGB's Evaluator, 100 negatives per held-out edge)
   as printed.
3. **Typed data parallel**: ``graphpipe train STORE`` (R-GCN on the papers) in one process
   with batch ``2 B`` against ``--nproc 2`` with batch ``B`` per rank (the same global
   batch, the same number of steps), each a fresh process; epoch time (slowest rank) from
   the metrics log and ``test acc``.
4. **Typed link data parallel** (``linkdp``): the same for ``--task link --relation
   author___writes___paper`` (``B`` positive edges per rank), ``test mrr``.

    nice .venv/bin/python benchmarks/typed_trainers.py --papers 20000 --epochs 2 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch starts its OpenMP threads

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REL = ("author", "writes", "paper")


def make_store(root: Path, papers: int) -> Path:
    from graphpipe.ingest import ingest
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    if not (root / "store").is_dir():
        data = mag_dataset(papers=papers, authors=int(papers * 1.5), institutions=max(papers // 40, 5),
                           fields=max(papers // 20, 8), num_classes=8, feature_dim=64, seed=0)
        ingest(write_ogb_mag(root / "src", data), root / "store")
    return root / "store"


def to_hetero(graph):
    """The graph's relations (with reverses) and features as a PyG ``HeteroData``."""
    from torch_geometric.data import HeteroData

    data = HeteroData()
    for t, n in graph.num_nodes_dict.items():
        x = graph.typed_features(t)
        if x is not None:
            data[t].x = torch.from_numpy(np.array(x))
        else:
            data[t].num_nodes = n
    for et in graph.edge_types:
        indptr, indices = graph.typed_csc(et)
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        data[et].edge_index = torch.from_numpy(np.stack([np.asarray(indices, np.int64), dst]))
    return data


def time_loader(loader, batches: int) -> float:
    it = iter(loader)
    next(it)  # warm-up batch (untimed)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return time.perf_counter() - t0


def loader_rounds(store: Path, args) -> dict[str, float]:
    from torch_geometric.loader import LinkNeighborLoader as PyGLink

    from graphpipe.loaders import TypedLinkNeighborLoader
    from graphpipe.train.trainer import typed_training_data

    graph = typed_training_data(store)
    hetero = to_hetero(graph)
    edges = hetero[REL].edge_index
    fanouts = [int(f) for f in args.fanouts.split(",")]
    make = {
        "graphpipe": lambda: TypedLinkNeighborLoader(graph, fanouts, edge_label_index=(REL, edges),
                                                     neg_sampling="binary", batch_size=args.batch_size,
                                                     shuffle=True, seed=0),
        "pyg": lambda: PyGLink(hetero, fanouts, edge_label_index=(REL, edges), neg_sampling="binary",
                               batch_size=args.batch_size, shuffle=True),
    }
    runs: dict[str, list[float]] = {k: [] for k in make}
    for r in range(args.rounds):
        for name, build in make.items():
            seconds = time_loader(build(), args.batches)
            runs[name].append(args.batches * args.batch_size / seconds)
            print(f"round {r} {name}: {runs[name][-1]:,.0f} positive edges/s", flush=True)
    return {k: statistics.median(v) for k, v in runs.items()}


def graphpipe_train(store: Path, *args: str) -> tuple[str, float]:
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphpipe.cli.main", "train", str(store), *args],
                          capture_output=True, text=True, env=env, check=False, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return proc.stdout, time.perf_counter() - t0


def data_parallel(store: Path, args, tmp: Path, task: tuple[str, ...] = ()) -> list[dict]:
    """One process at batch ``2 B`` and ``--nproc 2`` at ``B`` per rank (``task``: more
    ``graphpipe train`` options, e.g. typed link prediction)."""
    rows = []
    for ranks in (1, 2):
        log = tmp / f"dp{ranks}{'-'.join(task[:2])}.jsonl"
        extra = [] if ranks == 1 else ["--nproc", "2"]
        out, wall = graphpipe_train(store, *task, "--epochs", str(args.epochs), "--batch-size",
                                    str(2 * args.dp_batch // ranks), "--fanouts", "10,10",
                                    "--metrics-log", str(log), *extra)
        records = [json.loads(line) for line in log.read_text().splitlines()]
        rows.append({"ranks": ranks, "epoch_s": records[-1]["seconds"], "steps": records[-1]["steps"],
                     "test": out.strip().splitlines()[-1], "wall": wall})
        print(f"ranks {ranks}: {rows[-1]}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", type=int, default=20000)
    ap.add_argument("--fanouts", default="10,10")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--dp-batch", type=int, default=512, help="seeds per rank at --nproc 2")
    ap.add_argument("--dir", default=None, help="where the graph is generated (default: a temp dir)")
    ap.add_argument("--parts", default="loader,link,dp,linkdp",
                    help="which of loader, link, dp, linkdp to run")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(args.dir or tmp_name)
        store = make_store(tmp, args.papers)
        print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores", flush=True)
        if "loader" in parts:
            rates = loader_rounds(store, args)
            print(f"typed link loader, {args.batches} batches x {args.batch_size} positives, median "
                  f"of {args.rounds}: graphpipe {rates['graphpipe']:,.0f} /s, PyG {rates['pyg']:,.0f} "
                  f"/s, ratio {rates['graphpipe'] / rates['pyg']:.2f}x", flush=True)
        if "link" in parts:
            out, wall = graphpipe_train(store, "--task", "link", "--relation", "___".join(REL),
                                        "--epochs", str(args.epochs), "--fanouts", args.fanouts)
            print(out + f"(wall {wall:.1f}s)", flush=True)
        runs = {"dp": ("typed data parallel", ()),
                "linkdp": ("typed link data parallel", ("--task", "link", "--relation", "___".join(REL)))}
        for part, (title, task) in runs.items():
            if part not in parts:
                continue
            one, two = data_parallel(store, args, tmp, task)
            print(f"{title}: 1 process {one['epoch_s']:.2f}s/epoch ({one['steps']} steps, "
                  f"{one['test']}), 2 ranks {two['epoch_s']:.2f}s/epoch ({two['steps']} steps, "
                  f"{two['test']}), speed-up {one['epoch_s'] / two['epoch_s']:.2f}x; load average "
                  f"{os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
