"""Which ``match_reorder`` setting is fastest per feature tier (issue 19: defaults are the
fastest safe setting; issue 16 item 2: Match-Reorder on the disk tier).

For each setting (``True`` = Match-Reorder, ``"match"``, ``False``) and round, one
subprocess builds ``NeighborLoader(store, fanouts, batch_size, input_nodes="train",
shuffle=True, seed=0, match_reorder=SETTING)``, iterates ``--batches`` batches
(reading ``batch.x``) and prints rows/s, the rows read from the store (or disk) and the
hit rate. Settings alternate within each round; the table gives the median over rounds.
Every setting delivers the same batches (same seed; Reorder only permutes them).

* ``--tier ram``: the loader benchmark's R-MAT store (``benchmarks/loader.py``
  ``bench_store``, built once), features in memory, no cap;
* ``--tier disk``: a store whose features exceed ``--cap`` (default: the store of
  ``benchmarks/disk_features.py``), each run under ``memlimit.sh CAP``: the disk tier.

::

    .venv/bin/python benchmarks/defaults.py --tier ram --rounds 3 --batches 60
    .venv/bin/python benchmarks/defaults.py --tier disk --rounds 3 --batches 40 --cap 1G
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

import numpy as np

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as benchmarks/loader.py
ROOT = Path(__file__).resolve().parents[1]
MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or ROOT.parent / "shared" / "tools" / "memlimit.sh")
SETTINGS = {"Match-Reorder (True)": True, "Match (\"match\")": "match", "no reuse (False)": False}


def run_one(store: Path, setting: bool | str, fanouts: list[int], batch: int, batches: int) -> dict:
    """rows/s of one loader over ``batches`` batches (this process)."""
    from graphpipe.loaders import NeighborLoader

    loader = NeighborLoader(store, fanouts, batch_size=batch, input_nodes="train", shuffle=True,
                            seed=0, match_reorder=setting)
    rows, check = 0, 0.0
    t0 = time.perf_counter()
    for i, b in enumerate(loader):
        rows += int(b.x.shape[0])
        check += float(b.x[:, 0].double().sum())
        if i + 1 == batches:
            break
    seconds = time.perf_counter() - t0
    s = loader.stats
    return {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds, "tier": type(loader.rows).__name__,
            "rows_gathered": s.rows_gathered, "rows_disk": s.rows_disk, "hit_rate": s.hit_rate,
            "checksum": check}


def child(args: argparse.Namespace, name: str) -> dict:
    cmd = [sys.executable, __file__, "--child", name, "--store", str(args.store), "--fanouts", args.fanouts,
           "--batch", str(args.batch), "--batches", str(args.batches)]
    if args.tier == "disk":
        cmd = [str(MEMLIMIT)] + (["--keep-caches"] if args.keep_caches else []) + [args.cap] + cmd
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"error": f"rc={proc.returncode}: {(proc.stderr.strip().splitlines() or ['?'])[-1]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tier", choices=("ram", "disk"), default="ram")
    p.add_argument("--store", type=Path, default=None)
    p.add_argument("--fanouts", default=None, help="ram: 15,10,5; disk: 10,10")
    p.add_argument("--batch", type=int, default=None, help="ram: 1024; disk: 512")
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cap", default="1G")
    p.add_argument("--keep-caches", action="store_true", help="pass --keep-caches to memlimit.sh")
    p.add_argument("--child", choices=list(SETTINGS), help=argparse.SUPPRESS)
    args = p.parse_args()
    ram = args.tier == "ram"
    args.fanouts = args.fanouts or ("15,10,5" if ram else "10,10")
    args.batch = args.batch or (1024 if ram else 512)
    fanouts = [int(v) for v in args.fanouts.split(",")]
    if args.child:
        print(json.dumps(run_one(args.store, SETTINGS[args.child], fanouts, args.batch, args.batches)))
        return
    if args.store is None:
        if ram:
            sys.path.insert(0, str(ROOT / "benchmarks"))
            from loader import bench_store

            args.store = bench_store(scale=20)[0].path
        else:
            args.store = Path(tempfile.gettempdir()) / "graphpipe-disk-features" / "store"
    print(f"tier={args.tier} store={args.store} fanouts={fanouts} batch={args.batch} "
          f"batches={args.batches} rounds={args.rounds}" + ("" if ram else f" cap={args.cap}"), flush=True)
    runs: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    for r in range(args.rounds):
        names = list(SETTINGS) if r % 2 == 0 else list(SETTINGS)[::-1]  # alternate the order
        for name in names:
            out = child(args, name)
            runs[name].append(out)
            print(f"round {r} {name:22s} " + (out["error"] if "error" in out else
                  f"{out['rows_per_s']:>10,.0f} rows/s  {out['seconds']:6.2f} s  tier {out['tier']}  "
                  f"gathered {out['rows_gathered']:,}  disk {out['rows_disk']:,}  hit {out['hit_rate']:.1%}  "
                  f"check {out['checksum']:.6g}"), flush=True)
    print(f"\n{'setting':24s} {'median rows/s':>14s} {'vs False':>9s} {'gathered':>12s} {'from disk':>11s}")
    ok = {n: [o for o in v if "error" not in o] for n, v in runs.items()}
    base = float(np.median([o["rows_per_s"] for o in ok["no reuse (False)"]])) if ok["no reuse (False)"] else float("nan")
    for name, outs in ok.items():
        if not outs:
            continue
        med = float(np.median([o["rows_per_s"] for o in outs]))
        print(f"{name:24s} {med:>14,.0f} {med / base:>8.2f}x {outs[0]['rows_gathered']:>12,} "
              f"{int(np.median([o['rows_disk'] for o in outs])):>11,}")


if __name__ == "__main__":
    main()
