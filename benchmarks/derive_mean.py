"""`graphpipe derive --mean-features` beyond RAM (issue 25): the OGB-LSC baseline's author
and institution features on a MAG240M-layout store whose paper features are 3x or more the
memory cap, each run under ``shared/tools/memlimit.sh CAP`` (page cache dropped first).

    GRAPHPIPE_MEMLIMIT=../shared/tools/memlimit.sh nice .venv/bin/python benchmarks/derive_mean.py \\
        --work bench-data/derive --papers 2100000 --cap 1G [--accumulate float64,float32]

Stages: ``generate`` + ``ingest`` as ``typed_disk.py`` makes them (kept when present);
then per ``--accumulate``: ``graphpipe derive STORE --mean-features author --via
author___writes___paper --overwrite`` in a capped process that prints its own
``/proc/self/io`` ``read_bytes`` (what came from the device), wall time and max RSS beside
the cgroup's peak; then the institutions from the authors. Afterwards (uncapped) a sample of
authors and every institution is checked against a NumPy reference (the float64 sum in
ascending source order, cast to float16) read straight from the store's arrays.
Delete ``--work`` afterwards.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from typed_disk import capped, generate, run_ingest

CHILD = ("import resource, sys, time\nfrom graphpipe.cli.main import main\nt0 = time.perf_counter()\n"
         "rc = main(sys.argv[1:])\n"
         "io = dict(l.split(': ') for l in open('/proc/self/io').read().splitlines())\n"
         "print(f'child: read_bytes {int(io[\"read_bytes\"])} wall {time.perf_counter() - t0:.1f} '\n"
         "      f'maxrss_kb {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', flush=True)\n"
         "sys.exit(rc)")


def derive(store: Path, cap: str, ntype: str, via: str, accumulate: str) -> dict:
    """One capped ``graphpipe derive``: its printed line and the child's own figures."""
    cmd = [sys.executable, "-c", CHILD, "derive", str(store), "--mean-features", ntype, "--via", via,
           "--accumulate", accumulate, "--overwrite"]
    rc, out, line, seconds = capped(cap, cmd)
    child = next((ln for ln in out.splitlines() if ln.startswith("child:")), "child: -")
    said = next((ln for ln in out.splitlines() if "features" in ln), out.strip()[-300:])
    fields = child.split()
    read = int(fields[2]) if len(fields) > 2 else 0
    print(f"derive {ntype} ({accumulate}): rc {rc}, {seconds:.0f} s wall, device read "
          f"{read / 1e9:.1f} GB, {line}\n    {said.split(': ', 1)[-1]}\n    {child}", flush=True)
    return {"rc": rc, "seconds": seconds, "read_bytes": read}


def check(store_path: Path, sample: int = 2000) -> None:
    """Authors (a sample) and institutions against the NumPy reference."""
    from graphpipe.store import open_store

    store = open_store(store_path)
    for ntype, other, etype, owner_is_src in (
            ("author", "paper", ("author", "writes", "paper"), True),
            ("institution", "author", ("author", "affiliated_with", "institution"), False)):
        indptr, indices = (np.asarray(a) for a in store.typed_csc(etype))
        dst = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
        owner, src = (indices, dst) if owner_is_src else (dst, indices)
        n = store.num_nodes_dict[ntype]
        rows = np.random.default_rng(0).choice(n, min(sample, n), replace=False)
        keep = np.isin(owner, rows)
        o, s = owner[keep], src[keep]
        order = np.lexsort((s, o))
        x = store.typed_features(other)
        local = np.searchsorted(np.sort(rows), o[order])
        sums = np.zeros((len(rows), x.shape[1]), np.float64)
        np.add.at(sums, local, np.asarray(x[s[order]], np.float64))
        deg = np.bincount(local, minlength=len(rows))[:, None]
        want = np.divide(sums, deg, out=np.zeros_like(sums), where=deg > 0).astype(x.dtype)
        got = np.asarray(store.typed_features(ntype)[np.sort(rows)])
        diff = np.abs(got.astype(np.float32) - want.astype(np.float32))
        ulp = np.spacing(np.abs(want)).astype(np.float32)
        print(f"check {ntype}: {len(rows)} rows, equal to the NumPy reference bit for bit: "
              f"{np.array_equal(got, want)} ({int((got != want).sum())} of {got.size} values differ, "
              f"by at most {float((diff / ulp).max()):.0f} ulp)", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--papers", type=int, default=2_100_000)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--cap", default="1G")
    p.add_argument("--ingest-cap", default="1536M")
    p.add_argument("--accumulate", default="float64")
    p.add_argument("--stages", default="generate,ingest,derive,check")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    stages = args.stages.split(",")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    src = generate(args.work, args.papers, args.dim) if "generate" in stages else args.work / "src"
    if "ingest" in stages and not (args.work / "store" / "manifest.json").exists():
        run_ingest(args.work, src, args.ingest_cap)
    store = args.work / "store"
    feat = store / "typed" / "paper" / "feat"
    size = sum(f.stat().st_size for f in feat.rglob("*") if f.is_file())
    print(f"paper features {size / 1e9:.2f} GB on disk, cap {args.cap}", flush=True)
    if "derive" in stages:
        for acc in args.accumulate.split(","):
            t0 = time.perf_counter()
            derive(store, args.cap, "author", "author___writes___paper", acc)
            derive(store, args.cap, "institution", "author___affiliated_with___institution", acc)
            print(f"both: {time.perf_counter() - t0:.0f} s", flush=True)
    if "check" in stages:
        check(store)


if __name__ == "__main__":
    main()
