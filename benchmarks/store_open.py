"""What the store checks cost: ``GraphStore.open``, the first topology use and the
NeighborLoader's first and later batches, with and without the checks (issue 14).

Graph: ``--nodes`` (default 1M) nodes, ``--degree`` (default 15) random in-neighbours
each, ``--dim`` (default 64) float32 features, labels and a 10% train split, written
once as a graphpipe store under ``--cache``. Every measurement runs in a fresh
interpreter (:mod:`benchmarks._measure`), with ``GRAPHPIPE_SKIP_STORE_CHECKS=1``
("off") or unset ("on"), alternating, ``--repeats`` times each; the median is reported.

Rows:

* ``open``: ``GraphStore.open(path)`` (manifest checks), mean of ``--opens`` opens;
* ``open auto``: ``GraphStore.open(path, in_memory="auto")``, same;
* ``topology``: open, then ``store.topology()`` (reads indptr/indices from the memory
  maps; with checks, the one Numba pass over N + E entries);
* ``first batch``: ``NeighborLoader(open(path, "auto"), [15, 10, 5], batch_size=1024)`` built and
  its first batch taken (what a training script waits for);
* ``later batches``: seconds per batch over ``--batches`` batches after the first (the
  checks never run per batch: the ratio should be 1.00).

    .venv/bin/python benchmarks/store_open.py [--nodes 1000000] [--repeats 5] [--json out.json]

Prints one line per row: median seconds off, on, and the ratio on/off.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _measure import machine_note, measure, median_of

DEFAULT_CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench"
SKIP_ENV = "GRAPHPIPE_SKIP_STORE_CHECKS"


def build_store(cache: Path, nodes: int, degree: int, dim: int) -> Path:
    """The benchmark store (built once): random in-neighbours, features, labels, splits."""
    from graphpipe.store import StoreWriter

    path = cache / f"store_open_n{nodes}_d{degree}_f{dim}"
    if (path / "manifest.json").is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    edges = nodes * degree
    dst = np.sort(rng.integers(0, nodes, edges))
    indptr = np.zeros(nodes + 1, np.int64)
    np.cumsum(np.bincount(dst, minlength=nodes), out=indptr[1:])
    del dst
    perm = rng.permutation(nodes)
    with StoreWriter(path, name=path.name) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", rng.integers(0, nodes, edges, dtype=np.int32))
        w.write_array("csc/edge_id", np.arange(edges, dtype=np.int64))
        feats = w.create_array("node/feat", (nodes, dim), np.float32)
        step = 1 << 18
        for lo in range(0, nodes, step):
            feats[lo:lo + step] = rng.standard_normal((min(step, nodes - lo), dim), dtype=np.float32)
        w.write_array("node/label", rng.integers(0, 16, nodes))
        w.write_splits({"train": perm[: nodes // 10], "valid": perm[nodes // 10: nodes // 5],
                        "test": perm[nodes // 5: nodes // 5 + nodes // 10]})
        w.manifest.update(num_nodes=nodes, num_edges=edges,
                          node_features={"dim": dim, "dtype": "float32"},
                          labels={"shape": [nodes], "dtype": "int64", "task_type": "multiclass",
                                  "num_classes": 16})
        w.commit()
    return path


SETUP = """
from graphpipe.store import GraphStore
from graphpipe.loaders import NeighborLoader
path = {path!r}
"""
# The compiled topology scan is not warmed up: "topology" and "first batch" with checks
# include loading it from Numba's on-disk cache, as a user's first open does (the very
# first run of all compiles it; the median over --repeats leaves that run out).

WORK = {
    "open": "for _ in range({opens}): GraphStore.open(path)\nresult = {opens}",
    "open auto": "for _ in range({opens}): GraphStore.open(path, in_memory='auto')\nresult = {opens}",
    "topology": "store = GraphStore.open(path)\nindptr, indices = store.topology()\n"
                "result = int(indptr[-1])",
    "first batch": "loader = NeighborLoader(GraphStore.open(path, in_memory='auto'), [15, 10, 5], batch_size=1024, "
                   "seed=0)\nbatch = next(iter(loader))\nresult = int(batch.n_id.shape[0])",
}
LATER = """
import time
loader = NeighborLoader(GraphStore.open(path, in_memory='auto'), [15, 10, 5], batch_size=1024, input_nodes='train', shuffle=True, frontier='all', seed=0)
it = iter(loader)
next(it)
"""
LATER_WORK = "for _ in range({batches}): next(it)\nresult = {batches}"


def run(path: Path, repeats: int, opens: int, batches: int) -> dict[str, dict[str, float]]:
    """Median seconds of each row with the checks off and on."""
    setup = SETUP.format(path=str(path))
    jobs = {name: (setup, work.format(opens=opens)) for name, work in WORK.items()}
    jobs["later batches"] = (setup + LATER, LATER_WORK.format(batches=batches))
    per = {"open": opens, "open auto": opens, "later batches": batches}
    out: dict[str, dict[str, float]] = {}
    for name, (job_setup, work) in jobs.items():
        runs: dict[str, list] = {"off": [], "on": []}
        for _ in range(repeats):
            for mode, env in (("off", {SKIP_ENV: "1"}), ("on", {SKIP_ENV: "0"})):
                runs[mode].append(measure(job_setup, work, env=env))
        out[name] = {mode: median_of(r)["seconds"] / per.get(name, 1) for mode, r in runs.items()}
        out[name]["ratio"] = out[name]["on"] / out[name]["off"]
        print(f"{name:>14}: off {out[name]['off'] * 1e3:10.3f} ms   on {out[name]['on'] * 1e3:10.3f} ms"
              f"   on/off {out[name]['ratio']:.3f}", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--degree", type=int, default=15)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--opens", type=int, default=200, help="opens averaged in one open row")
    ap.add_argument("--batches", type=int, default=20, help="batches timed after the first")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args(argv)
    path = build_store(args.cache, args.nodes, args.degree, args.dim)
    print(f"store {path} ({args.nodes:,} nodes, {args.nodes * args.degree:,} edges); {machine_note()}")
    figures = run(path, args.repeats, args.opens, args.batches)
    if args.json is not None:
        args.json.write_text(json.dumps({"store": str(path), "machine": machine_note(),
                                         "seconds": figures}, indent=2))


if __name__ == "__main__":
    main()
