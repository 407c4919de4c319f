"""Issue 19, drop-in for PyG: per-epoch time and accuracy of the ported products script
(examples/pyg_products_sage.py) against PyG's original loader, in one run.

Three loaders feed the same model (the example's 3-layer SAGE, hidden 256, Adam 0.003,
fanouts [15, 10, 5], batch 1024, layer-wise inference with num_neighbors=[-1], batch
4096) on one generated products-like graph (community SBM, 47 classes, 100 features,
OGB products' 8/2/90 split):

* ``pyg Data``: PyG's NeighborLoader on a ``torch_geometric.data.Data`` in memory (the
  original script's loader);
* ``pyg backend``: PyG's NeighborLoader on ``graphpipe.to_pyg_backend(store)`` (the port);
* ``graphpipe``: graphpipe's own NeighborLoader on the store (its current signature:
  ``NeighborLoader(store, fanouts, batch_size, input_nodes=..., shuffle=...)``).

Epochs run round robin (epoch e of each loader, then e+1), each model from the same
initial weights; the first epoch includes warm-up (Numba compilation, page faults) and
is reported apart. Accuracy: OGB's Evaluator on the test split after the last epoch.

    .venv/bin/python benchmarks/dropin_pyg.py [--nodes 200000] [--epochs 3] [--write]
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(tempfile.gettempdir()) / "graphpipe_bench_dropin"
FANOUTS, BATCH, INFER_BATCH, HIDDEN, LR, CLASSES, DIM = [15, 10, 5], 1024, 4096, 256, 0.003, 47, 100


def make_store(nodes: int, avg_degree: float):
    """The products-like store (generated once into the temp directory, then reused)."""
    from graphpipe.ingest import ingest
    from graphpipe.store import GraphStore
    from graphpipe.synthetic import community_graph

    path = CACHE / f"products{nodes}_d{avg_degree:g}"
    if not (path / "store" / "manifest.json").exists():
        g = community_graph(nodes, CLASSES, feature_dim=DIM, avg_degree=avg_degree,
                            train_frac=0.08, valid_frac=0.02, seed=0)
        path.mkdir(parents=True, exist_ok=True)
        np.savez(path / "g.npz", src=g.src, dst=g.dst, x=g.features, y=g.labels, num_nodes=nodes,
                 train_idx=g.splits["train"], valid_idx=g.splits["valid"], test_idx=g.splits["test"])
        ingest(path / "g.npz", path / "store")
        (path / "g.npz").unlink()
    return GraphStore.open(path / "store", in_memory="auto")


def sage(in_dim: int, out_dim: int) -> torch.nn.Module:
    from torch_geometric.nn import SAGEConv

    class SAGE(torch.nn.Module):  # the example's model
        def __init__(self):
            super().__init__()
            dims = [in_dim, HIDDEN, HIDDEN, out_dim]
            self.convs = torch.nn.ModuleList(SAGEConv(a, b) for a, b in itertools.pairwise(dims))

        def forward(self, x, edge_index):
            for i, conv in enumerate(self.convs):
                x = conv(x, edge_index)
                if i < len(self.convs) - 1:
                    x = F.dropout(x.relu(), p=0.5, training=self.training)
            return x.log_softmax(dim=-1)

        @torch.no_grad()
        def inference(self, x_all, loader):
            for i, conv in enumerate(self.convs):
                outs = []
                for batch in loader:
                    x = conv(x_all[batch.n_id], batch.edge_index)[:batch.batch_size]
                    outs.append(x.relu() if i < len(self.convs) - 1 else x)
                x_all = torch.cat(outs, dim=0)
            return x_all

    return SAGE()


def loaders(kind: str, store, data, train_idx: torch.Tensor, workers: int):
    """``(train_loader, subgraph_loader)`` for one contender."""
    if kind == "graphpipe":
        from graphpipe.loaders import NeighborLoader

        return (NeighborLoader(store, FANOUTS, BATCH, input_nodes=train_idx, shuffle=True),
                NeighborLoader(store, [-1], INFER_BATCH, input_nodes=None, shuffle=False))
    from torch_geometric.loader import NeighborLoader

    every = torch.arange(store.num_nodes) if kind == "pyg backend" else None
    return (NeighborLoader(data, input_nodes=train_idx, num_neighbors=FANOUTS, batch_size=BATCH,
                           shuffle=True, num_workers=workers),
            NeighborLoader(data, input_nodes=every, num_neighbors=[-1], batch_size=INFER_BATCH,
                           num_workers=workers))


def train_epoch(model, optimizer, loader) -> tuple[float, int]:
    model.train()
    t0, steps = time.perf_counter(), 0
    for batch in loader:
        optimizer.zero_grad()
        out = model(batch.x, batch.edge_index)[:batch.batch_size]
        loss = F.nll_loss(out, batch.y[:batch.batch_size].view(-1))
        loss.backward()
        optimizer.step()
        steps += 1
    return time.perf_counter() - t0, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--avg-degree", type=float, default=20.0)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=0,
                        help="PyG loaders' num_workers (0: sampling in the training process)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import warnings

    warnings.filterwarnings("ignore")
    from ogb.nodeproppred import Evaluator
    from torch_geometric.data import Data

    t0 = time.perf_counter()
    store = make_store(args.nodes, args.avg_degree)
    indptr, indices = store.topology()
    dst = np.repeat(np.arange(store.num_nodes), np.diff(indptr))
    data_mem = Data(x=torch.from_numpy(np.array(store.feat)), y=torch.from_numpy(np.array(store.labels)),
                    edge_index=torch.from_numpy(np.stack([np.asarray(indices, dtype=np.int64), dst])),
                    num_nodes=store.num_nodes)
    from graphpipe import to_pyg_backend

    backend = to_pyg_backend(store)
    split = {k: torch.from_numpy(store.split(k)) for k in ("train", "valid", "test")}
    print(f"graph: {store.num_nodes:,} nodes, {store.num_edges:,} edges, train {len(split['train']):,}; "
          f"setup {time.perf_counter() - t0:.1f} s", flush=True)
    kinds = {"pyg Data": data_mem, "pyg backend": backend, "graphpipe": None}
    runs = {}
    for kind, data in kinds.items():
        torch.manual_seed(0)
        model = sage(DIM, CLASSES)
        runs[kind] = {"model": model, "opt": torch.optim.Adam(model.parameters(), lr=LR),
                      "loaders": loaders(kind, store, data, split["train"], args.workers),
                      "epochs": [], "x": data_mem.x}
    for epoch in range(1, args.epochs + 1):
        for kind, r in runs.items():
            seconds, steps = train_epoch(r["model"], r["opt"], r["loaders"][0])
            r["epochs"].append(seconds)
            print(f"epoch {epoch} {kind:12s} {seconds:7.2f} s ({steps} steps)", flush=True)
    evaluator = Evaluator(name="ogbn-products")
    y_true = data_mem.y.view(-1, 1)
    for kind, r in runs.items():
        r["model"].eval()
        x_all = backend.x if kind != "pyg Data" else data_mem.x  # the port reads data.x
        t = time.perf_counter()
        pred = r["model"].inference(x_all, r["loaders"][1]).argmax(dim=-1, keepdim=True)
        r["infer"] = time.perf_counter() - t
        r["acc"] = {k: evaluator.eval({"y_true": y_true[split[k]], "y_pred": pred[split[k]]})["acc"]
                    for k in ("valid", "test")}
        print(f"{kind:12s} inference {r['infer']:.2f} s, valid {r['acc']['valid']:.4f}, "
              f"test {r['acc']['test']:.4f}", flush=True)
    report = render(args, store, split, runs)
    print(report)
    if args.write:
        out = ROOT / "benchmarks" / "results" / "dropin_pyg.md"
        out.write_text(report)
        print(f"wrote {out}")


def render(args, store, split, runs) -> str:
    base = runs["pyg Data"]

    def later(r: dict) -> float:
        return float(np.mean(r["epochs"][1:] or r["epochs"]))

    lines = ["# Drop-in for PyG (issue 19): the products example's loaders, one run", "",
             "Command:", "", "    .venv/bin/python benchmarks/dropin_pyg.py " + " ".join(sys.argv[1:]), "",
             (f"Machine: {platform.machine()}, {os.cpu_count()} cores, {args.threads} torch threads, "
             f"PyG loaders with num_workers={args.workers}. Graph: community SBM, "
             f"{store.num_nodes:,} nodes, {store.num_edges:,} edges, {DIM} features, {CLASSES} classes, "
             f"train/valid/test {len(split['train']):,}/{len(split['valid']):,}/{len(split['test']):,}. "
             f"Model: the example's SAGE (hidden {HIDDEN}), fanouts {FANOUTS}, batch {BATCH}; "
             f"inference layer by layer, num_neighbors=[-1], batch {INFER_BATCH}. Epoch 1 includes "
             f"warm-up; 'later epochs' is the mean of epochs 2..{args.epochs}."), "",
             "| loader | epoch 1 s | later epochs s | vs pyg Data | inference s | vs pyg Data | valid acc | test acc |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for kind, r in runs.items():
        lines.append(f"| {kind} | {r['epochs'][0]:.2f} | {later(r):.2f} | {later(base) / later(r):.2f}× | "
                     f"{r['infer']:.2f} | {base['infer'] / r['infer']:.2f}× | {r['acc']['valid']:.4f} | "
                     f"{r['acc']['test']:.4f} |")
    lines += ["", "`vs pyg Data` > 1 means faster than PyG's loader on an in-memory Data."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
