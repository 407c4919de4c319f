"""`graphpipe train` under a 1 GB memory cap on the scaled papers100M store (issue 16, item 3).

The store of ``benchmarks/disk_features.py`` (8.4M nodes, R-MAT topology, 8.4M x 128
float32 features = 4.3 GB) has no labels and one ``train`` split of every node. This
script copies it (``--src`` -> ``--dest``) and adds, through :class:`graphpipe.store.StoreEditor`,
what ``graphpipe train`` needs, shaped like ogbn-papers100M:

* ``node/label`` int64 ``(N,)``, 10 classes: ``argmax(X[:, :10])`` (a function of the
  node's own features, so the model has something to learn);
* splits with papers100M's proportions (1.2M / 125K / 214K of 111M nodes: 1.09% train,
  0.11% valid, 0.19% test), drawn at random (seed 0).

Then it runs, under ``memlimit.sh CAP`` (which drops the clean page cache first)::

    graphpipe train DEST --model sage [--epochs E] [--max-steps S]

and prints the command, its output and memlimit's peak line. Everything else is the
CLI's defaults (``in_memory="auto"``, the feature tier, the cache size and the evaluation
mode chosen from the cgroup limit).

    .venv/bin/python benchmarks/train_1g.py --src STORE --dest COPY [--cap 1G] [--epochs 1]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or ROOT.parent / "shared" / "tools" / "memlimit.sh")
FRACTIONS = {"train": 1_207_179 / 111_059_956, "valid": 125_265 / 111_059_956,
             "test": 214_338 / 111_059_956}
CLASSES = 10


def add_labels_and_splits(dest: Path, seed: int = 0) -> None:
    """``node/label`` and papers100M-shaped splits written into the store at ``dest``."""
    from graphpipe.store import GraphStore, StoreEditor
    from graphpipe.store.tables import splits_table

    store = GraphStore.open(dest)
    n = store.num_nodes
    labels = np.empty(n, dtype=np.int64)
    step = 1 << 18
    for lo in range(0, n, step):
        ids = np.arange(lo, min(n, lo + step))
        labels[lo:lo + ids.shape[0]] = store.features(ids)[:, :CLASSES].argmax(1)
    perm = np.random.default_rng(seed).permutation(n)
    sizes = {k: round(f * n) for k, f in FRACTIONS.items()}
    cut = np.cumsum([0, *sizes.values()])
    splits = {k: np.sort(perm[cut[i]:cut[i + 1]]).astype(np.int64) for i, k in enumerate(sizes)}
    with StoreEditor(dest) as editor:
        editor.write_array("node/label", labels)
        editor.write_table("tables/splits.parquet", splits_table(splits), replace=True)
        editor.manifest["labels"] = {"shape": [n], "dtype": "int64",
                                     "task_type": "multiclass classification", "num_classes": CLASSES}
        editor.manifest["splits"] = {k: int(v.shape[0]) for k, v in splits.items()}
        editor.commit()


def prepare(src: Path, dest: Path) -> None:
    """The labelled copy at ``dest`` (copied from ``src`` and labelled unless already there)."""
    manifest = dest / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("labels"):
        return
    if not manifest.exists():
        print(f"copying {src} -> {dest} ...", flush=True)
        shutil.copytree(src, dest)
    t0 = time.perf_counter()
    add_labels_and_splits(dest)
    print(f"labels and splits added in {time.perf_counter() - t0:.1f} s", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--src", type=Path, required=True, help="the disk_features.py store")
    p.add_argument("--dest", type=Path, required=True, help="the labelled copy (made once)")
    p.add_argument("--cap", default="1G")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None)
    p.add_argument("--extra", default="", help="more `graphpipe train` options")
    args = p.parse_args()
    prepare(args.src, args.dest)
    cmd = [str(MEMLIMIT), args.cap, str(Path(sys.executable).parent / "graphpipe"), "train",
           str(args.dest), "--model", "sage", "--epochs", str(args.epochs)]
    if args.max_steps is not None:
        cmd += ["--max-steps", str(args.max_steps)]
    cmd += args.extra.split()
    print("$ " + " ".join(["memlimit.sh", *cmd[1:]]), flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    print(proc.stdout, end="")
    print(proc.stderr, end="")
    print(f"rc {proc.returncode}, wall {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
