"""Temporal LinkNeighborLoader (``edge_label_time``, ``time_attr``) against the non-temporal one
on the same graph and supervision edges, in one run (positive edges per second, ratio
printed), plus PyG's temporal ``LinkNeighborLoader`` when it can run (it needs pyg-lib; its
refusal is printed otherwise).

Graph and edges as ``link_loader.py`` (R-MAT both directions, ``--dim`` features, random
graph edges as supervision edges, binary negatives, shuffled), with edge times uniform in
``[0, 1000)`` (``edge_time``, ingested from an ``.npz`` as ``csc/time``) and supervision times uniform in ``[0, 1000)`` (about half
of each row in the past), or ``1000`` ("every edge valid": the same work as the
non-temporal sampler but one tree per endpoint). Also counts sampled edges newer than
their supervision edge (must be 0).

    python benchmarks/link_temporal.py --scale 15 --edges 50000 --batches 20 --rounds 3 --write
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from link_loader import build, time_loader

PLAIN = "non-temporal LinkNeighborLoader"


def contenders(store, label_index, times, fanouts, batch_size):
    from graphpipe.loaders import LinkNeighborLoader

    common = {"edge_label_index": label_index, "neg_sampling": "binary", "batch_size": batch_size,
              "shuffle": True, "seed": 0}
    late = torch.full_like(times, 1000)
    return {
        PLAIN: lambda: LinkNeighborLoader(store, fanouts, **common),
        "temporal, uniform (times in [0, 1000))":
            lambda: LinkNeighborLoader(store, fanouts, time_attr="edge_time", edge_label_time=times, **common),
        "temporal, last (times in [0, 1000))":
            lambda: LinkNeighborLoader(store, fanouts, time_attr="edge_time", edge_label_time=times,
                                       temporal_strategy="last", **common),
        "temporal, uniform, every edge valid (time 1000)":
            lambda: LinkNeighborLoader(store, fanouts, time_attr="edge_time", edge_label_time=late, **common),
    }


def newer_edges(loader, batches: int) -> tuple[int, float, float]:
    """(sampled edges newer than their tree's supervision edge, nodes / batch, edges / batch)."""
    bad, nodes, edges = 0, [], []
    for _, batch in zip(range(batches), loader):
        if batch.seed_time is not None:
            bad += int((batch.edge_time > batch.seed_time[batch.batch[batch.edge_index[1]]]).sum())
        nodes.append(batch.n_id.numel())
        edges.append(batch.edge_index.shape[1])
    return bad, float(np.mean(nodes)), float(np.mean(edges))


def pyg_refusal(data, label_index, times, fanouts, batch_size) -> str:
    from torch_geometric.loader import LinkNeighborLoader as PygLinkLoader

    try:
        loader = PygLinkLoader(data, fanouts, edge_label_index=label_index, edge_label_time=times,
                               time_attr="edge_time", neg_sampling="binary", batch_size=batch_size)
        next(iter(loader))
    except Exception as exc:  # noqa: BLE001 - reported, not handled
        return f"PyG refused: {type(exc).__name__}: {str(exc).splitlines()[0]}"
    return "PyG ran (not timed here)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=int, default=15)
    ap.add_argument("--edge-factor", type=int, default=8)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--edges", type=int, default=50_000)
    ap.add_argument("--fanouts", default="10,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/link_temporal.md")
    args = ap.parse_args()
    fanouts = [int(v) for v in args.fanouts.split(",")]
    data, label_index = build(args.scale, args.edge_factor, args.dim, args.edges)
    rng = np.random.default_rng(2)
    data.edge_time = torch.from_numpy(rng.integers(0, 1000, data.edge_index.shape[1]))
    times = torch.from_numpy(rng.integers(0, 1000, label_index.shape[1]))
    refusal = pyg_refusal(data, label_index, times, fanouts, args.batch_size)
    print(refusal, flush=True)
    from graphpipe.ingest import ingest
    from graphpipe.store import GraphStore

    with tempfile.TemporaryDirectory() as tmp:   # an .npz's edge_time -> the store's csc/time
        np.savez(Path(tmp) / "g.npz", edge_index=data.edge_index.numpy(), x=data.x.numpy(),
                 edge_time=data.edge_time.numpy())
        ingest(Path(tmp) / "g.npz", Path(tmp) / "g")
        store = GraphStore.open(Path(tmp) / "g", in_memory="auto")
        makers = contenders(store, label_index, times, fanouts, args.batch_size)
        shape = {name: newer_edges(make(), 3) for name, make in makers.items()}  # also the warm-up
        runs: dict[str, list[float]] = {name: [] for name in makers}
        for r in range(args.rounds):
            for name, make in makers.items():
                runs[name].append(args.batches * args.batch_size / time_loader(make(), args.batches))
                print(f"round {r + 1} {name}: {runs[name][-1]:,.0f} positive edges/s", flush=True)
    report(args, data, runs, shape, refusal)


def report(args, data, runs, shape, refusal: str) -> None:
    from _measure import machine_note

    plain = statistics.median(runs[PLAIN])
    lines = ["# Temporal LinkNeighborLoader vs the non-temporal one\n",
             (f"Command: `python benchmarks/link_temporal.py --scale {args.scale} --edge-factor "
              f"{args.edge_factor} --dim {args.dim} --edges {args.edges} --fanouts {args.fanouts} "
              f"--batch-size {args.batch_size} --batches {args.batches} --rounds {args.rounds}`\n"),
             (f"Graph: {data.num_nodes:,} nodes, {data.edge_index.shape[1]:,} edges (both directions, "
              f"times uniform in [0, 1000)), {args.dim} features; binary negatives, shuffled.\n"),
             f"Peer: {refusal}\n", machine_note() + "\n",
             ("| loader | positive edges/s (median) | rounds | vs non-temporal | nodes / batch | "
             "edges / batch | edges newer than their supervision edge |"),
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for name, values in runs.items():
        med = statistics.median(values)
        bad, nodes, edges = shape[name]
        lines.append(f"| {name} | {med:,.0f} | {', '.join(f'{v:,.0f}' for v in values)} | "
                     f"{med / plain:.2f}x | {nodes:,.0f} | {edges:,.0f} | "
                     f"{'-' if name == PLAIN else bad} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "benchmarks" / "results" / "link_temporal.md").write_text(text)


if __name__ == "__main__":
    main()
