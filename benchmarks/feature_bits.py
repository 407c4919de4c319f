"""Low-bit feature transfer: bytes moved per epoch and GraphSAGE test accuracy with
``feature_bits`` None (float32) / 8 / 4 on a generated community graph.

Data: ``community_graph(20000, 10, feature_dim=64, seed=0)`` → ``write_ogb_raw`` →
``ingest`` (built once under $TMPDIR/graphpipe_bench_feature_bits). Training:
``graphpipe.train.Trainer(feature_bits=...)`` (the same SAGE setup as benchmarks/train.py:
fanouts [15, 10, 5], hidden 256, 3 layers, dropout 0.5, Adam 0.003, batch 1024), full
(float32) evaluation of valid/test after every epoch; test accuracy at the best valid epoch.
Bytes: the training loader's ``feature_bytes_gathered`` (rows read from the store as they
are transferred: packed codes + 8 bytes min/scale per row when quantized) and
``feature_bytes_full`` (those rows in float32), per epoch.

    .venv/bin/python benchmarks/feature_bits.py [--epochs 5] [--seed 0] [--write]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FANOUTS = [15, 10, 5]
HIDDEN, LAYERS, DROPOUT, LR, BATCH = 256, 3, 0.5, 0.003, 1024
CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench_feature_bits"


def community_store(num_nodes: int):
    from graphpipe.ingest import ingest
    from graphpipe.store import GraphStore
    from graphpipe.synthetic import community_graph, write_ogb_raw

    root = CACHE / f"community{num_nodes}"
    if not (root / "store" / "manifest.json").exists():
        graph = community_graph(num_nodes, 10, feature_dim=64, seed=0)
        root.mkdir(parents=True, exist_ok=True)
        write_ogb_raw(root / "raw", graph)
        ingest(root / "raw", root / "store")
    return GraphStore.open(root / "store")


def run(store, bits: int | None, epochs: int, seed: int, max_steps: int | None = None) -> dict:
    import torch

    from graphpipe.train import Trainer, build_model

    torch.manual_seed(seed)
    num_classes = int(store.manifest["labels"]["num_classes"])
    model = build_model("sage", store.feature_dim, HIDDEN, num_classes, LAYERS, dropout=DROPOUT)
    t0 = time.perf_counter()
    result = Trainer(model, store, fanouts=FANOUTS, batch_size=BATCH, epochs=epochs, lr=LR, seed=seed,
                     feature_bits=bits, quiet=True, max_steps=max_steps).fit()
    seconds = time.perf_counter() - t0
    loaders = [h["loader"] for h in result.history]
    gathered = sum(s["feature_bytes_gathered"] for s in loaders) / len(loaders)
    full = sum(s["feature_bytes_full"] for s in loaders) / len(loaders)
    return {"bits": "32 (None)" if bits is None else str(bits), "test_acc": result.test_acc,
            "best_valid_acc": result.best_valid_acc, "bytes_gathered": gathered, "bytes_full": full,
            "rows_gathered": sum(s["rows_gathered"] for s in loaders) / len(loaders),
            "rows_needed": sum(s["rows_needed"] for s in loaders) / len(loaders), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bits", default="32,8,4", help="comma list; 32 = None (float32)")
    parser.add_argument("--write", action="store_true", help="write benchmarks/results/feature_bits.md")
    args = parser.parse_args()
    store = community_store(args.nodes)
    for b in args.bits.split(","):  # untimed warm-up: JIT compilation of every path
        run(store, None if int(b) == 32 else int(b), 1, args.seed, max_steps=2)
    rows = []
    for b in args.bits.split(","):
        bits = None if int(b) == 32 else int(b)
        rows.append(run(store, bits, args.epochs, args.seed))
        print(rows[-1], flush=True)
    base = rows[0]["bytes_gathered"]
    lines = [("| feature_bits | store rows/epoch | MB moved/epoch | MB as float32 | vs float32 "
              "| best valid acc | test acc | wall s |"),
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['bits']} | {r['rows_gathered']:.0f} of {r['rows_needed']:.0f} "
                     f"| {r['bytes_gathered'] / 1e6:.2f} | {r['bytes_full'] / 1e6:.2f} "
                     f"| {r['bytes_gathered'] / base:.3f} | {r['best_valid_acc']:.4f} "
                     f"| {r['test_acc']:.4f} | {r['seconds']:.1f} |")
    table = "\n".join(lines)
    print(table)
    if args.write:
        cmd = " ".join(["OMP_WAIT_POLICY=PASSIVE", ".venv/bin/python", "benchmarks/feature_bits.py",
                        *sys.argv[1:]])
        text = (f"# Low-bit feature transfer (NeighborLoader feature_bits)\n\n"
                f"Command: `{cmd}`\n\n"
                f"Data: community_graph({args.nodes}, 10, feature_dim=64, seed=0) -> write_ogb_raw -> "
                f"ingest. SAGE, fanouts {FANOUTS}, hidden {HIDDEN}, {LAYERS} layers, dropout "
                f"{DROPOUT}, Adam lr {LR}, batch {BATCH}, {args.epochs} epochs, seed {args.seed}; "
                f"loader defaults (Match-Reorder on, no cache). Training batches are quantized; "
                f"evaluation (Trainer's full layer-wise inference) reads float32 features. Bytes "
                f"are per training epoch (mean over epochs): rows read from the store, packed codes "
                f"+ 8 bytes (min, scale) per row when quantized. Machine shared with other jobs "
                f"(2 cores): wall times (after an untimed warm-up) are indicative only.\n\n{table}\n")
        out = ROOT / "benchmarks" / "results" / "feature_bits.md"
        out.write_text(text)
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
