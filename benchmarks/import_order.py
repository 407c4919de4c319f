"""Issue 28, point 8: does the import order decide the speed of a PyG-style training script?

`import graphpipe` sets ``OMP_WAIT_POLICY=PASSIVE`` for torch's OpenMP pool, which only
takes effect when graphpipe is imported before torch (libgomp reads it once, when torch
loads it). This runs the same script both ways, alternating, each in a fresh process:
graphpipe's NeighborLoader (background prefetch threads) feeding a 2-layer PyG GraphSAGE,
one warm-up epoch, then timed epochs; wall and CPU seconds per epoch. ``--contention K``
adds K busy processes (pure Python loops) for the whole run, as on a shared machine.

    .venv/bin/python benchmarks/import_order.py [--nodes 30000] [--rounds 3] [--contention 0]
        [--variants torch-first,graphpipe-first]

Variants: ``torch-first`` (``import torch, graphpipe``: what every upstream PyG script
does), ``graphpipe-first`` (``import graphpipe, torch``), ``torch-first-passive``
(torch first, ``OMP_WAIT_POLICY=PASSIVE`` in the environment, i.e. what graphpipe-first
gives torch), ``torch-first-active`` (torch first, ``OMP_WAIT_POLICY=ACTIVE``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CACHE = Path(tempfile.gettempdir()) / "graphpipe_bench_import_order"

CHILD = r'''
import json, os, resource, sys, time
path, first, epochs, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if first == "torch":
    import torch
    import graphpipe
else:
    import graphpipe
    import torch
import torch.nn.functional as F
from torch_geometric.nn import SAGEConv
from graphpipe import GraphStore
from graphpipe.loaders import NeighborLoader

if threads:
    torch.set_num_threads(threads)
if os.environ.get("BENCH_LOADER_THREADS_1"):  # graphpipe's background threads: 1 Numba thread
    import threading
    import numba
    _run = threading.Thread.run

    def run(self):
        if self.name.startswith("graphpipe"):
            numba.set_num_threads(1)
        _run(self)

    threading.Thread.run = run
torch.manual_seed(0)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


store = GraphStore.open(path, in_memory="auto")
loader = NeighborLoader(store, [10, 5], batch_size=512, input_nodes="train", shuffle=True,
                        seed=0, prefetch=int(os.environ.get("BENCH_PREFETCH", "2")))
dim, classes = store.features([0]).shape[1], store.num_classes


class SAGE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = SAGEConv(dim, 128), SAGEConv(128, classes)

    def forward(self, x, edge_index):
        return self.c2(F.relu(self.c1(x, edge_index)), edge_index)


model = SAGE()
opt = torch.optim.Adam(model.parameters(), lr=0.01)


def epoch():
    for batch in loader:
        out = model(batch.x, batch.edge_index)[: batch.batch_size]
        loss = F.cross_entropy(out, batch.y[: batch.batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()


epoch()  # warm-up: Numba kernels from the cache, pages faulted in
rows = []
for _ in range(epochs):
    t0, c0 = time.perf_counter(), cpu()
    epoch()
    rows.append((time.perf_counter() - t0, cpu() - c0))
print("@@" + json.dumps({"wall": [r[0] for r in rows], "cpu": [r[1] for r in rows],
                         "torch_threads": torch.get_num_threads()}))
'''

VARIANTS = {  # name: (imported first, OMP_WAIT_POLICY, other environment, torch threads)
    "torch-first": ("torch", None, {}, 0),
    "graphpipe-first": ("graphpipe", None, {}, 0),
    "torch-first-passive": ("torch", "PASSIVE", {}, 0),
    "torch-first-active": ("torch", "ACTIVE", {}, 0),
    "torch-first-numba1": ("torch", None, {"NUMBA_NUM_THREADS": "1"}, 0),
    "torch-first-torch1": ("torch", None, {}, 1),
    "torch-first-bg1": ("torch", None, {"BENCH_LOADER_THREADS_1": "1"}, 0),
    "torch-first-noprefetch": ("torch", None, {"BENCH_PREFETCH": "0"}, 0),
    "graphpipe-first-noprefetch": ("graphpipe", None, {"BENCH_PREFETCH": "0"}, 0),
}


def make_store(nodes: int) -> Path:
    """A community graph (avg degree 10, 100 features, 20 classes, half of the nodes train)."""
    from graphpipe.ingest import ingest
    from graphpipe.synthetic import community_graph

    path = CACHE / f"community{nodes}"
    if not (path / "store" / "manifest.json").exists():
        g = community_graph(nodes, 20, feature_dim=100, avg_degree=10, train_frac=0.5,
                            valid_frac=0.1, seed=0)
        path.mkdir(parents=True, exist_ok=True)
        np.savez(path / "g.npz", src=g.src, dst=g.dst, x=g.features, y=g.labels, num_nodes=nodes,
                 train_idx=g.splits["train"], valid_idx=g.splits["valid"],
                 test_idx=g.splits["test"])
        ingest(path / "g.npz", path / "store")
        (path / "g.npz").unlink()
    return path / "store"


def run(store: Path, variant: str, epochs: int, threads: int) -> dict:
    first, policy, extra, variant_threads = VARIANTS[variant]
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    env.update(extra)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(store), first, str(epochs),
                           str(variant_threads or threads)], env=env, capture_output=True,
                          text=True, check=False,
                          timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise RuntimeError(f"{variant} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per run")
    parser.add_argument("--contention", type=int, default=0, help="busy processes beside")
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: keep)")
    parser.add_argument("--variants", default="torch-first,graphpipe-first")
    args = parser.parse_args()
    variants = args.variants.split(",")
    store = make_store(args.nodes)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.contention)]
    results: dict[str, list] = {v: [] for v in variants}
    try:
        for r in range(args.rounds):
            order = variants if r % 2 == 0 else variants[::-1]  # alternate who goes first
            for variant in order:
                out = run(store, variant, args.epochs, args.threads)
                results[variant].append(out)
                print(f"round {r} {variant:20s} wall {[f'{w:.2f}' for w in out['wall']]} "
                      f"cpu {[f'{c:.1f}' for c in out['cpu']]} torch threads "
                      f"{out['torch_threads']}", flush=True)
    finally:
        for p in busy:
            p.kill()
    print(f"\n{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end, "
          f"{args.contention} busy processes beside, {args.nodes} nodes")
    base = statistics.median(w for out in results[variants[0]] for w in out["wall"])
    for variant in variants:
        walls = [w for out in results[variant] for w in out["wall"]]
        cpus = [c for out in results[variant] for c in out["cpu"]]
        print(f"{variant:20s} median epoch {statistics.median(walls):6.2f} s "
              f"(cpu {statistics.median(cpus):6.1f} s)  {statistics.median(walls) / base:.2f}x "
              f"of {variants[0]}  [{time.strftime('%H:%M')}]")


if __name__ == "__main__":
    main()
