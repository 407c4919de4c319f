"""Micro benchmark of graphpipe.ingest.csc_builder.

In-memory path: time of ``build_csc`` (excluding parsing: the edges are already int64
arrays) for a power-law-ish random graph of 4.2M and 33M edges, with the default options
and with reverse edges + dedup + self-loop removal. Out-of-core path: edges 4x the memory
limit, in a child process that reports peak RSS growth (VmHWM, reset after warm-up) vs
the limit.

    .venv/bin/python benchmarks/csc_builder.py [--sizes 4200000,33000000]
        [--ooc-edges 2000000,33000000]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, build_csc, warm_up
from graphpipe.store import StoreWriter

CHUNK = 1 << 20


def make_edges(num_edges: int, num_nodes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sources uniform, destinations Zipf-like (skewed in-degrees), int64."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, num_nodes, num_edges, dtype=np.int64)
    dst = (num_nodes * rng.random(num_edges) ** 2).astype(np.int64)
    return src, dst


def chunks_of(src: np.ndarray, dst: np.ndarray):
    for start in range(0, src.shape[0], CHUNK):
        yield EdgeChunk(src[start:start + CHUNK], dst[start:start + CHUNK], start, "bench", start + 1)


def time_in_memory(num_edges: int, options: CscOptions, repeats: int = 3) -> tuple[float, int]:
    num_nodes = max(1, num_edges // 25)
    src, dst = make_edges(num_edges, num_nodes)
    best = float("inf")
    slots = 0
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        for _ in range(repeats):
            with StoreWriter(Path(tmp) / "s", name="bench", overwrite=True) as writer:
                t0 = time.perf_counter()
                stats = build_csc(chunks_of(src, dst), num_nodes, writer, options)
                best = min(best, time.perf_counter() - t0)
                slots = stats.num_edges
    return best, slots


CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
import numpy as np
from graphpipe.ingest.chunks import EdgeChunk
from graphpipe.ingest.csc_builder import CscOptions, build_csc, warm_up
from graphpipe.store import StoreWriter

num_edges, limit, reverse = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "1"
warm_up()

def hwm_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])

def rss_kb():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def gen(num_nodes):
    rng = np.random.default_rng(0)
    step = 1 << 16
    for start in range(0, num_edges, step):
        n = min(step, num_edges - start)
        src = rng.integers(0, num_nodes, n, dtype=np.int64)
        dst = (num_nodes * rng.random(n) ** 2).astype(np.int64)
        yield EdgeChunk(src, dst, start, "gen", start + 1)

num_nodes = max(1, num_edges // 20)
with tempfile.TemporaryDirectory(dir=".") as tmp:
    with StoreWriter(Path(tmp) / "s", name="ooc") as writer:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        base = rss_kb()
        t0 = time.perf_counter()
        opts = CscOptions(add_reverse_edges=reverse, deduplicate=True, memory_limit=limit)
        stats = build_csc(gen(num_nodes), num_nodes, writer, opts)
        seconds = time.perf_counter() - t0
        peak = hwm_kb()
print(json.dumps({"baseline_rss_mb": base / 1024, "peak_growth_mb": (peak - base) / 1024,
                  "limit_mb": limit / 2**20, "seconds": seconds, "slots": stats.num_edges,
                  "runs": stats.runs, "groups": stats.groups,
                  "spilled_mb": stats.spilled_bytes / 2**20}))
"""


def out_of_core(num_edges: int, limit: int, reverse: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(num_edges), str(limit),
                          "1" if reverse else "0"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4200000,33000000")
    parser.add_argument("--ooc-edges", default="2000000,33000000")
    args = parser.parse_args()
    warm_up()
    print("## in-memory path (best of 3, edges already parsed)")
    print("| edges | options | seconds | M edges/s | slots |")
    print("| ---: | --- | ---: | ---: | ---: |")
    for size in (int(s) for s in args.sizes.split(",")):
        for label, opts in (("default (sorted)", CscOptions()),
                            ("reverse+dedup+no-loops", CscOptions(add_reverse_edges=True,
                                                                  deduplicate=True,
                                                                  remove_self_loops=True))):
            seconds, slots = time_in_memory(size, opts)
            print(f"| {size:,} | {label} | {seconds:.3f} | {size / seconds / 1e6:.1f} | {slots:,} |",
                  flush=True)
    print()
    print("## out-of-core path (dedup, edge arrays 4x the limit)")
    print("| edges | reverse | limit MB | peak RSS growth MB | seconds | runs | groups "
          "| spilled MB |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for num_edges in (int(s) for s in args.ooc_edges.split(",")):
        for reverse in (False, True):
            limit = 16 * num_edges // 4
            r = out_of_core(num_edges, limit, reverse)
            print(f"| {num_edges:,} | {reverse} | {r['limit_mb']:.1f} | {r['peak_growth_mb']:.1f} "
                  f"| {r['seconds']:.2f} | {r['runs']} | {r['groups']} | {r['spilled_mb']:.0f} |",
                  flush=True)


if __name__ == "__main__":
    main()
