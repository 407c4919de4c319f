"""Match-Reorder per node type (issue 17): feature rows read per epoch by the typed NeighborLoader
with ``match_reorder`` False / "match" / True, with and without the per-type degree cache,
on the ogbn-mag-like graph of ``hetero_sampling.py`` (features on papers, 128-d, and on
authors, 64-d, so two types carry rows). One shuffled epoch of the train papers, the same
seed for every setting (same batches); rows counted by the loader's ``stats``.

    .venv/bin/python benchmarks/hetero_match_reorder.py [--scale 0.1] [--batch 1024]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hetero_sampling import FANOUTS, mag_like, with_reverse

from graphpipe.loaders import GraphData, NeighborLoader


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--window", type=int, default=8)
    args = parser.parse_args()
    counts, edges, x, y, train = mag_like(args.scale)
    author_x = np.random.default_rng(1).standard_normal((counts["author"], 64), dtype=np.float32)
    data = GraphData.from_dicts(counts, with_reverse(edges), x={"paper": x, "author": author_x},
                                      y={"paper": y}, splits={"paper": {"train": train}})
    print("nodes: " + ", ".join(f"{t} {n:,}" for t, n in counts.items())
          + f"; fanouts {FANOUTS}, batch {args.batch}, window {args.window}, one shuffled epoch")
    print(f"{'setting':<40}{'paper read':>12}{'author read':>13}{'bytes read':>14}{'of plain':>10}"
          f"{'reused':>10}{'held':>10}{'s':>7}")
    plain_bytes = None
    for cache in (None, "degree"):
        for mode in (False, "match", True):
            loader = NeighborLoader(data, FANOUTS, input_nodes=("paper", "train"), batch_size=args.batch,
                                    shuffle=True, seed=0, window=args.window, match_reorder=mode,
                                    cache=cache, cache_rows=0.1, prefetch=0)
            t0 = time.perf_counter()
            for _ in loader:
                pass
            seconds = time.perf_counter() - t0
            st = loader.stats
            nbytes = st.read.get("paper", 0) * 128 * 4 + st.read.get("author", 0) * 64 * 4
            plain_bytes = plain_bytes or nbytes
            name = f"match_reorder={mode!r}" + (", degree cache 10%" if cache else "")
            print(f"{name:<40}{st.read.get('paper', 0):>12,}{st.read.get('author', 0):>13,}"
                  f"{nbytes / 1e6:>12,.0f}MB{nbytes / plain_bytes:>10.1%}"
                  f"{sum(st.reused.values()):>10,}{sum(st.held.values()):>10,}{seconds:>7.1f}")


if __name__ == "__main__":
    main()
