"""End-to-end training: graphpipe (NeighborLoader + graphpipe.train SAGE) vs PyG
(NeighborLoader + PyG SAGEConv) vs DGL (GraphBolt DataLoader + dgl.nn.SAGEConv).

Model everywhere: 3 mean-SAGE layers with root weight, hidden 256, ReLU + dropout 0.5,
Adam lr 0.003, cross-entropy on the seeds; fanouts [15, 10, 5] seed hop first; batch
1024; 2 torch threads (``--threads``).

1. **Speed** on an R-MAT graph (scale 20 by default: 1,048,576 nodes, edge factor 16,
   self loops dropped), 100-dim random float32 features, random labels (47 classes):
   the same ``--steps`` seed batches (drawn from the train split) for every system;
   graphpipe and DGL make one untimed pass over them first (compiling; graphpipe's
   memory-mapped features paged in, DGL's are loaded into memory), PyG one batch (its
   features are in memory); then timed passes, round robin (graphpipe, DGL, PyG) so
   that all see the same spells of load from other jobs on this shared machine; the
   figure is the fastest pass (``--repeats``, PyG ``--pyg-repeats``). A full
   epoch (629k train seeds, 615 batches) takes minutes per system on 2 cores, so the
   figure is seconds per training step (sample + features + forward + backward +
   Adam) over a fixed number of steps, and the epoch time it implies.
2. **Accuracy** on a community graph (``community_graph(20000, 10, feature_dim=64,
   avg_degree=10)``, 60/20/20 splits): ``--epochs`` shuffled epochs each; test accuracy
   at the best valid epoch with full-neighbour inference, and seconds per epoch.
   graphpipe's MLP on the same features is the no-graph baseline.

    .venv/bin/python benchmarks/train.py [--scale 20] [--steps 30] [--repeats 2] [--epochs 5] [--write]

DGL runs in ``.venv-dgl`` as a subprocess (``benchmarks/peers/dgl_train.py``) on the
same graph saved as .npy. ``--write`` writes benchmarks/results/train.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# every system runs with OpenMP threads that sleep when idle (graphpipe.train's default;
# the DGL subprocess inherits it); set OMP_WAIT_POLICY=ACTIVE to measure the other way
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FANOUTS = [15, 10, 5]
HIDDEN, LAYERS, DROPOUT, LR, BATCH = 256, 3, 0.5, 0.003, 1024
DIM, CLASSES = 100, 47
CACHE = Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench_train"


# ------------------------------------------------------------------------------------ data
def rmat_data(scale: int, edge_factor: int = 16) -> tuple[object, Path]:
    """The R-MAT store (built once under CACHE) and a folder of .npy files with the same
    CSC, features, labels and train split for the DGL side."""
    from graphpipe.store import GraphStore, StoreWriter

    npy = CACHE / f"rmat{scale}_npy"
    path = CACHE / f"rmat{scale}_store"
    if (path / "manifest.json").exists() and (npy / "labels.npy").exists():
        return GraphStore.open(path), npy
    from graphpipe.synthetic import random_normal, random_splits, rmat_edges

    npy.mkdir(parents=True, exist_ok=True)
    src, dst = rmat_edges(scale, edge_factor, seed=0)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    n = 1 << scale
    order = np.argsort(dst, kind="stable")
    indices = src[order].astype(np.int32)
    del src, order
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    del dst
    feat = random_normal((n, DIM), seed=1)
    labels = np.random.default_rng(2).integers(0, CLASSES, n).astype(np.int64)
    splits = random_splits(n, train_frac=0.6, valid_frac=0.2, seed=3)
    for name, arr in (("indptr", indptr), ("indices", indices), ("feat", feat), ("labels", labels),
                      ("train", splits["train"])):
        np.save(npy / f"{name}.npy", arr)
    with StoreWriter(path, overwrite=True, name=path.name) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(indices.shape[0], dtype=np.int64))
        w.write_array("node/feat", feat)
        w.write_array("node/label", labels)
        w.write_splits(splits)
        w.manifest["num_nodes"], w.manifest["num_edges"] = n, int(indices.shape[0])
        w.manifest["node_features"] = {"dim": DIM, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [n], "dtype": "int64", "task_type": "multiclass",
                                "num_classes": CLASSES}
        w.commit()
    return GraphStore.open(path), npy


def community_data(num_nodes: int) -> tuple[object, Path, object]:
    """The community store (through write_ogb_raw + ingest), .npy copies, the graph."""
    from graphpipe.ingest import ingest
    from graphpipe.store import GraphStore
    from graphpipe.synthetic import community_graph, write_ogb_raw

    graph = community_graph(num_nodes, 10, avg_degree=10, feature_dim=64, seed=0)
    root = CACHE / f"community{num_nodes}"
    npy = root / "npy"
    if not (root / "store" / "manifest.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        write_ogb_raw(root / "raw", graph)
        ingest(root / "raw", root / "store")
    store = GraphStore.open(root / "store")
    if not (npy / "test.npy").exists():
        npy.mkdir(parents=True, exist_ok=True)
        np.save(npy / "indptr.npy", np.asarray(store.indptr))
        np.save(npy / "indices.npy", np.asarray(store.indices))
        np.save(npy / "feat.npy", np.asarray(store.feat))
        np.save(npy / "labels.npy", np.asarray(store.labels))
        for split in ("train", "valid", "test"):
            np.save(npy / f"{split}.npy", store.split(split))
    return store, npy, graph


# ------------------------------------------------------------------------------------ speed
def _summary(runs: list[tuple[int, float]]) -> dict:
    """``runs``: ``(steps, wall seconds, CPU seconds)`` of each pass (CPU: of all the
    system's threads; robust to other jobs' load, where the wall time is not)."""
    steps, seconds, _ = min(runs, key=lambda r: r[1])
    return {"steps": steps, "seconds": seconds, "seconds_per_step": seconds / steps,
            "median_seconds_per_step": float(np.median([r[1] / r[0] for r in runs])),
            "cpu_per_step": float(np.median([r[2] / r[0] for r in runs])),
            "all_seconds": [round(r[1], 2) for r in runs]}


#: ``--ablations``: one idea of graphpipe's SAGE step switched off (issue 25)
ABLATIONS = {
    "unfused": "mean aggregation, then the two linear maps as two GEMMs under autograd "
               "(ops.aggregate.sage_mean_composed) instead of the one-GEMM sage_mean",
    "dgl order": "the linear map before the gather whenever out < in (DGL's rule) instead of "
                 "by cost (transform_first)",
    "torch dropout": "torch's relu + dropout instead of the fused Numba kernel",
}


class ablation:
    """Switch one idea (:data:`ABLATIONS`) off inside the ``with`` block (None: none)."""

    def __init__(self, variant: str | None):
        if variant is not None and variant not in ABLATIONS:
            raise SystemExit(f"error: unknown ablation {variant!r}; expected one of {sorted(ABLATIONS)}")
        self.variant = variant

    def __enter__(self):
        if self.variant is None:
            return
        import torch.nn.functional as F

        from graphpipe.ops.aggregate import sage
        from graphpipe.train import layers, models
        self.saved = (layers.sage_mean, layers.transform_first, models.relu_dropout)
        if self.variant == "unfused":
            layers.sage_mean = sage.sage_mean_composed
        elif self.variant == "dgl order":
            layers.transform_first = lambda in_dim, out_dim, g: out_dim < in_dim
        elif self.variant == "torch dropout":
            models.relu_dropout = lambda h, p, training, **_: F.dropout(F.relu(h), p, training)

    def __exit__(self, *exc):
        if self.variant is None:
            return
        from graphpipe.train import layers, models
        layers.sage_mean, layers.transform_first, models.relu_dropout = self.saved


def speed_graphpipe(store, batches: list[np.ndarray], variant: str | None = None):
    """A function running one timed pass over ``batches[1:]`` (after an untimed warm-up
    pass over the same batches: compiles, and faults the memory-mapped features in, as the
    peers' in-memory features are); returns ``(steps, seconds)``. ``variant``: an
    :data:`ABLATIONS` key, or None for graphpipe as shipped."""
    import torch
    import torch.nn.functional as F

    from graphpipe.loaders import NeighborLoader
    from graphpipe.train import build_model

    torch.manual_seed(0)
    model = build_model("sage", DIM, HIDDEN, CLASSES, LAYERS, dropout=DROPOUT)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def run(seed_batches: list[np.ndarray]) -> tuple[int, float, float]:
        with ablation(variant):
            return timed_pass(seed_batches)

    def timed_pass(seed_batches: list[np.ndarray]) -> tuple[int, float, float]:
        loader = NeighborLoader(store, FANOUTS, batch_size=BATCH, input_nodes=np.concatenate(seed_batches),
                                shuffle=False, seed=0, frontier="all")
        model.train()
        steps = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in loader:
            out = model(batch)
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        return steps, time.perf_counter() - t0, time.process_time() - c0

    run(batches[1:])
    return lambda: run(batches[1:])


def _pyg_sage(in_dim: int, out_dim: int):
    import torch
    import torch.nn.functional as F
    from torch_geometric.nn import SAGEConv

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dims = [in_dim] + [HIDDEN] * (LAYERS - 1) + [out_dim]
            self.convs = torch.nn.ModuleList(SAGEConv(i, o) for i, o in itertools.pairwise(dims))

        def forward(self, x, adj):
            for i, conv in enumerate(self.convs):
                x = conv(x, adj)
                if i < len(self.convs) - 1:
                    x = F.dropout(x.relu(), DROPOUT, self.training)
            return x

    return Sage()


def _pyg_data(store):
    import torch
    from torch_geometric.data import Data
    from torch_sparse import SparseTensor

    n = store.num_nodes
    adj_t = SparseTensor(rowptr=torch.from_numpy(np.asarray(store.indptr)),
                         col=torch.from_numpy(np.asarray(store.indices).astype(np.int64)),
                         sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    return Data(adj_t=adj_t, x=torch.from_numpy(np.array(store.feat)),
                y=torch.from_numpy(np.array(store.labels)), num_nodes=n)


def speed_pyg(store, batches: list[np.ndarray]):
    """Like :func:`speed_graphpipe` (warm-up: one batch; the features are in memory)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.loader import NeighborLoader

    data = _pyg_data(store)
    torch.manual_seed(0)
    model = _pyg_sage(DIM, CLASSES)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def run(seed_batches: list[np.ndarray]) -> tuple[int, float, float]:
        loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH, shuffle=False,
                                input_nodes=torch.from_numpy(np.concatenate(seed_batches)))
        model.train()
        steps = 0
        t0, c0 = time.perf_counter(), time.process_time()
        for batch in loader:
            out = model(batch.x, batch.adj_t)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
        return steps, time.perf_counter() - t0, time.process_time() - c0

    run(batches[:1])
    return lambda: run(batches[1:])


def run_dgl(mode: str, data_dir: Path, count: int, threads: int, extra: int) -> dict:
    py = Path(os.environ.get("GRAPHPIPE_DGL_PYTHON") or ROOT / ".venv-dgl" / "bin" / "python")
    if not py.exists():
        return {"error": f"{py} not found"}
    proc = subprocess.run([str(py), str(ROOT / "benchmarks" / "peers" / "dgl_train.py"), mode,
                           str(data_dir), str(count), str(threads), str(extra)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "DGLBACKEND": "pytorch", "OMP_NUM_THREADS": str(threads),
                               "HIDDEN": str(HIDDEN), "LR": str(LR), "BATCH_SIZE": str(BATCH)})
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------ accuracy
def accuracy_graphpipe(store, name: str, epochs: int, seed: int) -> dict:
    import torch

    from graphpipe.train import Trainer, build_model

    torch.manual_seed(seed)
    num_classes = int(store.manifest["labels"]["num_classes"])
    model = build_model(name, store.feature_dim, HIDDEN, num_classes, LAYERS, dropout=DROPOUT)
    result = Trainer(model, store, fanouts=FANOUTS, batch_size=BATCH, epochs=epochs, lr=LR, seed=seed,
                     quiet=True).fit()
    return {"test_acc": result.test_acc, "best_valid_acc": result.best_valid_acc,
            "epoch_seconds": [h["seconds"] for h in result.history]}


def accuracy_pyg(store, epochs: int, seed: int) -> dict:
    import torch
    import torch.nn.functional as F
    from torch_geometric.loader import NeighborLoader

    data = _pyg_data(store)
    torch.manual_seed(seed)
    model = _pyg_sage(store.feature_dim, int(store.manifest["labels"]["num_classes"]))
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    split = {s: torch.from_numpy(store.split(s)) for s in ("train", "valid", "test")}
    loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=BATCH, shuffle=True,
                            input_nodes=split["train"])
    best_valid, test_at_best, epoch_seconds = -1.0, 0.0, []
    for _ in range(epochs):
        model.train()
        t0 = time.perf_counter()
        for batch in loader:
            out = model(batch.x, batch.adj_t)[: batch.batch_size]
            loss = F.cross_entropy(out, batch.y[: batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
        epoch_seconds.append(time.perf_counter() - t0)
        model.eval()
        with torch.no_grad():
            pred = model(data.x, data.adj_t).argmax(1)
        acc = {k: float((pred[v] == data.y[v]).float().mean()) for k, v in split.items()}
        if acc["valid"] > best_valid:
            best_valid, test_at_best = acc["valid"], acc["test"]
    return {"test_acc": test_at_best, "best_valid_acc": best_valid, "epoch_seconds": epoch_seconds}


# ------------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=20)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3, help="timed passes of graphpipe and DGL")
    parser.add_argument("--pyg-repeats", type=int, default=1, help="timed passes of PyG (slow)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--accuracy-nodes", type=int, default=20000)
    parser.add_argument("--seeds", type=int, default=2, help="accuracy runs per system")
    parser.add_argument("--ablations", default="",
                        help="comma-separated ideas to switch off in extra graphpipe contenders: "
                             + "; ".join(f"'{k}': {v}" for k, v in ABLATIONS.items()))
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    speed: dict[str, dict] = {}
    info: dict[str, object] = {}
    if not args.skip_speed:
        t0 = time.perf_counter()
        store, npy = rmat_data(args.scale)
        info["build_s"] = round(time.perf_counter() - t0, 1)
        info["graph"] = f"R-MAT scale {args.scale}: {store.num_nodes:,} nodes, {store.num_edges:,} edges"
        train = store.split("train")
        info["epoch_steps"] = -(-len(train) // BATCH)
        perm = np.random.default_rng(0).permutation(train)[: (args.steps + 1) * BATCH]
        batches = [perm[i * BATCH:(i + 1) * BATCH] for i in range(args.steps + 1)]
        np.save(npy / "seeds.npy", np.stack(batches))
        names = {"gp": "graphpipe (NeighborLoader + graphpipe.train SAGE)",
                 "pyg": "PyG 2.8 (NeighborLoader + SAGEConv, torch-sparse)",
                 "dgl": "DGL 2.1 (GraphBolt DataLoader + dgl.nn.SAGEConv)"}
        ablations = [a for a in args.ablations.split(",") if a]
        names.update({f"gp {a}": f"graphpipe, {a}" for a in ablations})
        runs: dict[str, list] = {k: [] for k in names}
        gp_passes = {"gp": speed_graphpipe(store, batches)}
        gp_passes.update({f"gp {a}": speed_graphpipe(store, batches, a) for a in ablations})
        pyg_pass = speed_pyg(store, batches) if args.pyg_repeats else None
        # round robin, so that every system sees the same spells of load from other jobs
        for r in range(args.repeats):
            for key, gp_pass in gp_passes.items():
                runs[key].append(gp_pass())
            dgl = run_dgl("time", npy, args.steps, args.threads, 1)
            if "error" in dgl:
                runs["dgl"] = dgl
            elif isinstance(runs["dgl"], list):
                runs["dgl"].append((dgl["steps"], dgl["seconds"], dgl["cpu_seconds"]))
            if pyg_pass is not None and r < args.pyg_repeats:
                runs["pyg"].append(pyg_pass())
            print("round", r, runs, flush=True)
        for key, name in names.items():
            if isinstance(runs[key], dict):
                speed[name] = runs[key]
            elif runs[key]:
                speed[name] = _summary(runs[key])

    accuracy: dict[str, dict] = {}
    if not args.skip_accuracy:
        store, npy, _ = community_data(args.accuracy_nodes)
        info["accuracy_graph"] = (f"community_graph({args.accuracy_nodes}, 10, feature_dim=64, avg_degree=10): "
                                  f"{store.num_edges:,} edges, {len(store.split('train'))} train nodes")
        runs: dict[str, list[dict]] = {"graphpipe SAGE": [], "graphpipe MLP (features only)": [],
                                       "PyG SAGE": [], "DGL SAGE (GraphBolt)": []}
        for seed in range(args.seeds):
            runs["graphpipe SAGE"].append(accuracy_graphpipe(store, "sage", args.epochs, seed))
            runs["graphpipe MLP (features only)"].append(accuracy_graphpipe(store, "mlp", args.epochs, seed))
            runs["PyG SAGE"].append(accuracy_pyg(store, args.epochs, seed))
            runs["DGL SAGE (GraphBolt)"].append(run_dgl("accuracy", npy, args.epochs, args.threads, seed))
        for name, results in runs.items():
            errors = [r["error"] for r in results if "error" in r]
            if errors:
                accuracy[name] = {"error": errors[0]}
                continue
            accuracy[name] = {"test_acc": [round(r["test_acc"], 4) for r in results],
                              "mean_test_acc": float(np.mean([r["test_acc"] for r in results])),
                              "epoch_seconds": float(np.mean([np.mean(r["epoch_seconds"][1:] or
                                                                      r["epoch_seconds"]) for r in results]))}
        print("accuracy", accuracy, flush=True)

    report = render(args, info, speed, accuracy)
    print(report)
    if args.write:
        out = ROOT / "benchmarks" / "results" / "train.md"
        out.write_text(report)
        print(f"wrote {out}")


def render(args, info: dict, speed: dict, accuracy: dict) -> str:
    cmd = "    .venv/bin/python benchmarks/train.py " + " ".join(sys.argv[1:])
    machine = (f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other jobs), "
               f"{args.threads} torch threads per system, "
               f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}; timings are the fastest of "
               f"{args.repeats} passes (PyG: {args.pyg_repeats}), taken round robin. Model: 3-layer mean SAGE, hidden {HIDDEN}, dropout {DROPOUT}, "
               f"Adam lr {LR}; fanouts {FANOUTS} (seed hop first); batch {BATCH}.")
    lines = ["# End-to-end training: graphpipe vs PyG vs DGL/GraphBolt", "",
             "Command:", "", cmd, "", machine, ""]
    if speed:
        ours = speed.get("graphpipe (NeighborLoader + graphpipe.train SAGE)", {})
        base, base_median = ours.get("seconds_per_step"), ours.get("median_seconds_per_step")
        base_cpu = ours.get("cpu_per_step")
        what = (f"{args.steps} training steps (same seed batches for every system) after an untimed "
                f"pass (PyG: one step); a full epoch is {info['epoch_steps']} steps, so the epoch column is "
                "seconds/step × steps/epoch.")
        lines += [f"## Speed: {info['graph']}, {DIM}-dim features", "", what, "",
                  ("| system | s/step | est. epoch s | graphpipe speed-up | median s/step | "
                   "speed-up of medians | CPU s/step (median) | CPU ratio | all passes (s) |"),
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for name, r in speed.items():
            if "error" in r:
                lines.append(f"| {name} | error | | | | | | | {r['error'].splitlines()[-1][:80]} |")
                continue
            sps, median, cpu = r["seconds_per_step"], r["median_seconds_per_step"], r["cpu_per_step"]
            ratio = f"{sps / base:.2f}×" if base else ""
            ratio_median = f"{median / base_median:.2f}×" if base_median else ""
            ratio_cpu = f"{cpu / base_cpu:.2f}×" if base_cpu else ""
            lines.append(f"| {name} | {sps:.3f} | {sps * info['epoch_steps']:.0f} | {ratio} | {median:.3f} | "
                         f"{ratio_median} | {cpu:.3f} | {ratio_cpu} | {r['all_seconds']} |")
        lines.append("")
    if accuracy:
        what = (f"{args.epochs} epochs, {args.seeds} seeds each; test accuracy at the best valid epoch "
                "(full-neighbour inference); epoch time = mean training seconds per epoch after the first.")
        lines += [f"## Accuracy: {info['accuracy_graph']}", "", what, "", "| system | test acc per seed | mean test acc | s/epoch |", "| --- | --- | --- | --- |"]
        for name, r in accuracy.items():
            if "error" in r:
                lines.append(f"| {name} | error: {r['error'].splitlines()[-1][:80]} | | |")
                continue
            lines.append(f"| {name} | {r['test_acc']} | {r['mean_test_acc']:.4f} | {r['epoch_seconds']:.2f} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
