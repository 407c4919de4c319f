"""Child of ``test_generation.py``: a reader whose store is replaced while it reads.

``python overwrite_reader_child.py STORE``. Opens the store twice: ``lazy`` (nothing read
yet) and ``epoch`` (a NeighborLoader epoch started: one batch drawn). Prints ``ready`` and
waits for a ``go`` line on stdin (the parent replaces the store in between), then finishes
the epoch, reads ``lazy``'s features for the first time, opens the store afresh, and prints
one JSON line: the feature generations each saw, whether every row was ``X[n_id]``, and
``lazy``'s error line if it failed.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from graphpipe.loaders import NeighborLoader
from graphpipe.store import GraphStore, StoreError


def main(path: str) -> None:
    lazy = GraphStore.open(path)
    loader = NeighborLoader(GraphStore.open(path), [3, 2], batch_size=50, prefetch=0)
    batches = iter(loader)
    seen = [next(batches)]
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go line")
    seen.extend(batches)
    x = [np.asarray(b.x) for b in seen]
    result = {"batches": len(seen), "epoch_generations": sorted({int(v) for r in x for v in r[:, 1]}),
              "rows_are_x_of_n_id": all(bool((r[:, 0] == np.asarray(b.n_id)).all())
                                        for r, b in zip(x, seen))}
    try:
        result["lazy_generation"] = int(lazy.features(np.arange(5))[0, 1])
    except StoreError as exc:
        result["lazy_error"] = str(exc)
    result["fresh_generation"] = int(GraphStore.open(path).features(np.arange(5))[0, 1])
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
