"""LinkNeighborLoader: graphpipe's against PyG's on the same graph and the same supervision
edges, in one run (positive edges per second, ratio printed).

Graph: R-MAT (``--scale``, ``--edge-factor``) with both directions of every edge, random
``--dim`` features, written as a graphpipe store (``graphpipe.from_pyg``) and opened with
``in_memory="auto"`` (PyG holds its ``Data`` in memory too). Supervision edges: a random
sample of ``--edges`` graph edges; binary negatives (one per positive), fanouts
``--fanouts``, batch ``--batch-size``, shuffled. Each contender runs ``--batches`` batches
per round (timed from the start of the epoch, after an untimed warm-up\nepoch of one batch each), rounds interleaved; the median round is reported.

    python benchmarks/link_loader.py --scale 17 --edge-factor 8 --rounds 3 --write
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def build(scale: int, edge_factor: int, dim: int, num_edges: int, seed: int = 0):
    from torch_geometric.data import Data

    from graphpipe.synthetic import rmat_edges

    src, dst = rmat_edges(scale, edge_factor, seed=seed)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    edge_index = torch.from_numpy(np.stack([np.r_[src, dst], np.r_[dst, src]]).astype(np.int64))
    n = 1 << scale
    x = torch.from_numpy(np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32))
    pick = np.random.default_rng(seed + 1).choice(edge_index.shape[1], num_edges, replace=False)
    return Data(x=x, edge_index=edge_index, num_nodes=n), edge_index[:, torch.from_numpy(pick)]


def time_loader(loader, batches: int) -> float:
    """Seconds from the start of an epoch to its ``batches``-th batch (pipeline fill included)."""
    t0 = time.perf_counter()
    it = iter(loader)
    for _ in range(batches):
        next(it)
    seconds = time.perf_counter() - t0
    close = getattr(it, "close", None)
    if close is not None:
        close()
    return seconds


def contenders(store, data, label_index, fanouts, batch_size):
    from torch_geometric.loader import LinkNeighborLoader as PygLinkLoader

    from graphpipe.loaders import LinkNeighborLoader

    common = {"edge_label_index": label_index, "neg_sampling": "binary", "batch_size": batch_size,
              "shuffle": True}
    return {
        "graphpipe LinkNeighborLoader (defaults: prefetch 2)":
            lambda: LinkNeighborLoader(store, fanouts, seed=0, **common),
        "graphpipe LinkNeighborLoader, exclude_seed_edges=True":
            lambda: LinkNeighborLoader(store, fanouts, seed=0, exclude_seed_edges=True, **common),
        "graphpipe LinkNeighborLoader, prefetch 0":
            lambda: LinkNeighborLoader(store, fanouts, seed=0, prefetch=0, **common),
        "PyG LinkNeighborLoader + torch-sparse":
            lambda: PygLinkLoader(data, fanouts, **common),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=17)
    ap.add_argument("--edge-factor", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--edges", type=int, default=200_000)
    ap.add_argument("--fanouts", default="10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/link_loader.md")
    args = ap.parse_args()
    fanouts = [int(v) for v in args.fanouts.split(",")]
    data, label_index = build(args.scale, args.edge_factor, args.dim, args.edges)
    from graphpipe import from_pyg
    from graphpipe.store import GraphStore

    with tempfile.TemporaryDirectory() as tmp:
        from_pyg(data, Path(tmp) / "g")
        store = GraphStore.open(Path(tmp) / "g", in_memory="auto")
        makers = contenders(store, data, label_index, fanouts, args.batch_size)
        runs: dict[str, list[float]] = {name: [] for name in makers}
        for make in makers.values():  # warm-up: JIT compilation, first touches of the data
            time_loader(make(), 1)
        for r in range(args.rounds):
            for name, make in makers.items():
                seconds = time_loader(make(), args.batches)
                runs[name].append(args.batches * args.batch_size / seconds)
                print(f"round {r + 1} {name}: {runs[name][-1]:,.0f} positive edges/s", flush=True)
    report(args, data, runs)


def report(args, data, runs: dict[str, list[float]]) -> None:
    from _measure import machine_note

    pyg = statistics.median(runs["PyG LinkNeighborLoader + torch-sparse"])
    lines = ["# LinkNeighborLoader: graphpipe vs PyG\n",
             (f"Command: `python benchmarks/link_loader.py --scale {args.scale} --edge-factor "
              f"{args.edge_factor} --dim {args.dim} --edges {args.edges} --fanouts {args.fanouts} "
              f"--batch-size {args.batch_size} --batches {args.batches} --rounds {args.rounds}`\n"),
             (f"Graph: {data.num_nodes:,} nodes, {data.edge_index.shape[1]:,} edges (both "
              f"directions), {args.dim} features; binary negatives (1 per positive), shuffled.\n"),
             machine_note() + "\n",
             "| loader | positive edges/s (median) | rounds | vs PyG |",
             "| --- | --- | --- | --- |"]
    for name, values in runs.items():
        med = statistics.median(values)
        lines.append(f"| {name} | {med:,.0f} | {', '.join(f'{v:,.0f}' for v in values)} | "
                     f"{med / pyg:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "link_loader.md").write_text(text)


if __name__ == "__main__":
    main()
