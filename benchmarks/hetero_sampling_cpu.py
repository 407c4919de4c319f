"""The typed sampler alone, one thread, in CPU seconds: for before/after comparisons on a
loaded machine, where wall-clock passes vary by 2-3x (``hetero_sampling.py`` has the
peers and the wall clock).

Graph: ``hetero_sampling.py``'s ogbn-mag-like generator (reverse relations included, 7
relations) at ``--scale``; 20 batches of 1024 papers, fanouts [15, 10] per relation, in
windows of 4 (``sample_neighbors_batches(..., num_threads=1)``); 5 passes. Prints seeds per
CPU-second (``time.process_time``) and per wall-second, best and median pass. Run it from
each checkout to compare, alternating:

    nice .venv/bin/python benchmarks/hetero_sampling_cpu.py [--scale 0.1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import hetero_sampling

from graphpipe.ops.sampling import sample_neighbors_batches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.1, help="fraction of ogbn-mag's sizes")
    parser.add_argument("--passes", type=int, default=5)
    args = parser.parse_args()
    graph = hetero_sampling.load_data(argparse.Namespace(scale=args.scale, store=None)).graph
    rng = np.random.default_rng(0)
    batches = [rng.choice(graph.num_nodes["paper"], 1024, replace=False) for _ in range(20)]

    def window(i: int) -> None:
        sample_neighbors_batches(graph, [{"paper": b} for b in batches[i:i + 4]], [15, 10],
                                 seeds=list(range(i, i + 4)), num_threads=1)

    window(0)  # compile / load the kernels
    cpu, wall = [], []
    for _ in range(args.passes):
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(0, len(batches), 4):
            window(i)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - t0)
    seeds = 1024 * len(batches)
    print(f"typed sampler, 1 thread: seeds/CPU-s best {seeds / min(cpu):,.0f} median "
          f"{seeds / statistics.median(cpu):,.0f}; seeds/s (wall) best {seeds / min(wall):,.0f} "
          f"median {seeds / statistics.median(wall):,.0f}")


if __name__ == "__main__":
    main()
