"""Sylvie's tables on graphpipe: bytes of halo exchanged per epoch and test accuracy of
full-graph partition-parallel training, float32 against 8 / 4 / 2 / 1 bits and degree-ranked
``auto``, with staleness S = 0 and S = 2, on the same split.

Data: ``graphpipe generate community DEST --nodes N --feature-noise X`` (10 classes, 64
features; a larger X makes the neighbours, hence the halo, matter more),
``graphpipe ingest``, ``graphpipe partition --parts P`` (METIS), built once under
$TMPDIR/graphpipe_bench_sylvie. Training: P gloo ranks on loopback (spawned once; every
configuration runs in the same process group, one after another), the same model and
seed for every configuration: GraphSAGE (or GCN), hidden 128, 3 layers (two hidden layers
exchange halo rows; input features are read once, not exchanged), dropout 0.5, Adam
0.01, E full-graph epochs, test accuracy at the best valid epoch.

Bytes: what the ranks hand to ``isend`` in forward (embeddings) and backward (embedding
gradients), all ranks together, averaged over the epochs (stale epochs send nothing);
quantized rows cost ``ceil(D*b/8)`` bytes of codes + 8 bytes of float32 min/scale.
Epoch time is the training step only (2 shared cores: not a speed claim).

    .venv/bin/python benchmarks/sylvie.py [--nodes 20000] [--parts 2] [--epochs 100]
        [--feature-noise 0.8] [--model sage] [--seeds 0,1] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench_sylvie"
WIDTHS = (32, 8, 4, 2, 1, "auto")
STALENESS = (0, 2)
HIDDEN, LAYERS, DROPOUT, LR = 128, 3, 0.5, 0.01


def _graphpipe(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "graphpipe.cli.main", *args], check=True,
                   stdout=subprocess.DEVNULL)


def build_store(nodes: int, parts: int, noise: float) -> Path:
    root = CACHE / f"community{nodes}_noise{noise:g}"
    store = root / "store"
    if not (store / "manifest.json").exists():
        _graphpipe("generate", "community", str(root / "raw"), "--nodes", str(nodes),
                   "--feature-noise", str(noise), "--overwrite", "-q")
        _graphpipe("ingest", str(root / "raw"), str(store), "--overwrite")
    from graphpipe.store import GraphStore

    if not GraphStore.open(store).has_array(f"partition/k{parts}/part"):
        _graphpipe("partition", str(store), "--parts", str(parts))
    return store


def _rank(rank: int, world: int, port: int, store: str, configs: list[dict], out: str) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist

    from graphpipe.store import GraphStore
    from graphpipe.train.partition_parallel import PartitionConfig, PartitionTrainer, resolve_parts

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    opened = GraphStore.open(store)
    parts = resolve_parts(opened, world)
    rows = []
    for config in configs:
        trainer = PartitionTrainer(opened, parts, PartitionConfig(**config), quiet=True)
        result = trainer.summary(trainer.fit())
        times = [r["seconds"] for r in result["records"]]
        rows.append({**config, "bytes_per_epoch": result["bytes_per_epoch"],
                     "test_acc": result["test_acc"], "best_valid_acc": result["best_valid_acc"],
                     "final_loss": result["records"][-1]["loss"],
                     "max_staleness": result["max_staleness"], "halo_rows": result["halo_rows"],
                     "epoch_s": float(np.median(times))})
        if rank == 0:
            print(json.dumps(rows[-1]), flush=True)
    if rank == 0:
        Path(out).write_text(json.dumps(rows))
    dist.barrier()
    dist.destroy_process_group()


def run(store: Path, parts: int, model: str, epochs: int, seeds: list[int]) -> list[dict]:
    import torch

    from graphpipe.train.partition_parallel.launch import free_port

    configs = [{"model": model, "hidden": HIDDEN, "layers": LAYERS, "dropout": DROPOUT, "lr": LR,
                "epochs": epochs, "bits": bits, "staleness": s, "seed": seed}
               for seed in seeds for s in STALENESS for bits in WIDTHS]
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "rows.json")
        torch.multiprocessing.spawn(_rank, args=(parts, free_port(), str(store), configs, out),
                                    nprocs=parts, join=True)
        return json.loads(Path(out).read_text())


def table(rows: list[dict]) -> str:
    import numpy as np

    lines = [("| halo bits | S | bytes / epoch (all ranks) | vs fp32 | test acc (mean ± std) | "
             "final loss | epoch s (median) |"), "| --- | --- | --- | --- | --- | --- | --- |"]
    base = np.mean([r["bytes_per_epoch"] for r in rows if r["bits"] == 32 and r["staleness"] == 0])
    for s in STALENESS:
        for bits in WIDTHS:
            sel = [r for r in rows if r["bits"] == bits and r["staleness"] == s]
            if not sel:
                continue
            b = float(np.mean([r["bytes_per_epoch"] for r in sel]))
            acc = np.array([r["test_acc"] for r in sel])
            lines.append(f"| {'fp32' if bits == 32 else bits} | {s} | {b / 2**20:.3f} MiB | "
                         f"{b / base:.3f} ({base / b:.1f}x less) | {acc.mean():.4f} ± "
                         f"{acc.std():.4f} | {np.mean([r['final_loss'] for r in sel]):.4f} | "
                         f"{np.median([r['epoch_s'] for r in sel]):.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20000)
    parser.add_argument("--parts", type=int, default=2)
    parser.add_argument("--feature-noise", type=float, default=0.8,
                        help="graphpipe generate community --feature-noise (0.8: its default)")
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--model", default="sage", choices=["sage", "gcn"])
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--write", action="store_true",
                        help="append the table to benchmarks/results/sylvie.md")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    store = build_store(args.nodes, args.parts, args.feature_noise)
    t0 = time.perf_counter()
    rows = run(store, args.parts, args.model, args.epochs, seeds)
    text = (f"community graph {args.nodes} nodes (graphpipe generate community --feature-noise "
            f"{args.feature_noise:g}), P={args.parts} "
            f"METIS parts, {args.model} hidden {HIDDEN} x {LAYERS} layers, {args.epochs} epochs, "
            f"seeds {seeds}; halo rows {rows[0]['halo_rows']}; wall {time.perf_counter() - t0:.0f} s\n\n"
            + table(rows))
    print(text)
    if args.write:
        path = ROOT / "benchmarks" / "results" / "sylvie.md"
        with path.open("a") as f:
            f.write(f"\n## {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n\n"
                    f"`{' '.join(['.venv/bin/python', 'benchmarks/sylvie.py', *sys.argv[1:]])}`\n\n"
                    f"{text}\n\nraw rows:\n\n```\n{json.dumps(rows, indent=None)}\n```\n")


if __name__ == "__main__":
    main()
