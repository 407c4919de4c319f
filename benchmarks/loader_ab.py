"""Before/after check of NeighborLoader's default settings for a refactor: the graphpipe of
one checkout (``ROOT``, e.g. a worktree at the old commit) through the same store, seed
batches and measurement as ``benchmarks/loader.py`` (its ``bench_store`` / ``run_graphpipe``
from this checkout). Run it alternately for the two checkouts, several times, on one machine:

    for i in 1 2 3 4 5; do for r in OLD NEW; do
      nice .venv/bin/python benchmarks/loader_ab.py $r; done; done

Prints one JSON line: ms per batch (30 timed batches of 1024 seeds, [15, 10, 5], R-MAT
scale 21, store read into memory) for "no reuse, prefetch 2" (the CPU default) and
"no reuse, no prefetch".
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main() -> None:
    root = str(Path(sys.argv[1]).resolve())
    sys.path.insert(0, root)  # the graphpipe measured
    sys.path.insert(1, str(Path(__file__).resolve().parent))  # this checkout's loader.py
    import numpy as np
    from loader import bench_store, run_graphpipe

    import graphpipe
    from graphpipe.store import GraphStore

    assert graphpipe.__file__.startswith(root), graphpipe.__file__
    store, _ = bench_store()
    mem = GraphStore.open(store.path, in_memory="auto")
    mem.indptr, mem.indices, mem.feature_chunks(), mem.labels  # read now, not timed
    perm = np.random.default_rng(12345).permutation(store.split("train"))
    batches = [perm[i * 1024:(i + 1) * 1024] for i in range(31)]
    out = {"root": root}
    for name, kwargs in (("no reuse, prefetch 2", {"match_reorder": False, "prefetch": 2}),
                         ("no reuse, no prefetch", {"match_reorder": False, "prefetch": 0})):
        run = run_graphpipe(mem, batches, **kwargs)
        out[name] = round(1000 * run["seconds"] / run["batches"], 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
