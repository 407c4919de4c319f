"""R-GCN training step: graphpipe's RGCN vs PyG's RGCNConv / FastRGCNConv vs DGL's
RelGraphConv, same sampled batches, same epochs, test accuracy beside the time (issue 25).

Graph: ``graphpipe.synthetic.mag.mag_dataset`` (ogbn-mag-like: papers, authors,
institutions, fields; the class lives in the typed neighbourhoods) with the reverse of
every relation (PyG's ``ToUndirected``: 7 relations); authors, institutions and fields get
the mean of their papers' features (the OGB-LSC MAG240M baseline's preprocessing), so
every type has ``--dim`` input features and no contender needs embeddings. Batches:
graphpipe's typed ``NeighborLoader`` (PyG's layout), fanouts [15, 10] per relation, batch
1024, sampled once; every contender trains on the same train batches in the same order
for the same epochs and is scored on the same test batches.

Model everywhere: 2 layers, hidden 64, mean over each relation's in-neighbours + a root
weight + bias, ReLU + dropout 0.5, Adam lr 0.01. Every contender computes what the seeds
need only (DGL: one block per layer; PyG: the layer's edges cut to the destinations it
needs, as ``trim_to_layer``; graphpipe: its trimmed layer graphs):

- ``graphpipe RGCN``: ``graphpipe.train.hetero_models.RGCN`` on the batch (its per-relation
  CSCs are built inside the timed step); ablations: without trimming (``untrimmed``), one
  GEMM per relation instead of one per source type (``unbatched``), the linear always
  after the gather (``gather first``).
- ``PyG RGCNConv`` (``aggr="mean"``) on the batch made homogeneous (types concatenated,
  target first); ``PyG FastRGCNConv`` gathers an ``(in, out)`` weight per edge, measured
  only when that fits ``--fast-limit-gb``.
- ``DGL RelGraphConv`` (``regularizer=None, self_loop=True``, ``norm = 1/deg_r``, edges
  sorted by relation, ``presorted=True``) in the DGL peer interpreter
  (``$GRAPHPIPE_DGL_PYTHON``, else ``.venv-dgl/bin/python``; ``benchmarks/peers/dgl_rgcn.py``),
  a live subprocess that takes its turn in every round.

Each round runs one training epoch of every contender in turn (so all see the same load);
the figure is seconds per step (best and median epoch over ``--epochs`` rounds, the first
compiling step taken by a throwaway model), ratios ``peer / graphpipe``.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/rgcn_step.py [--papers 20000] [--epochs 4]
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

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np
import torch
from torch.nn import functional as F

from graphpipe.loaders import GraphData, NeighborLoader
from graphpipe.synthetic.mag import mag_dataset
from graphpipe.train import hetero_layers
from graphpipe.train.hetero_models import RGCN

FANOUTS, BATCH, HIDDEN, LAYERS, DROPOUT, LR = [15, 10], 1024, 64, 2, 0.5, 0.01


# ------------------------------------------------------------------------------------ data
def typed_graph(args):
    ds = mag_dataset(papers=args.papers, authors=int(args.papers * 1.5),
                     institutions=max(8, args.papers // 40), fields=max(16, args.papers // 10),
                     num_classes=args.classes, feature_dim=args.dim, seed=0)
    edges = dict(ds.edges)
    for (s, r, d), (a, b) in ds.edges.items():
        if s != d:
            edges[(d, f"rev_{r}", s)] = (b, a)
    x = {"paper": ds.x.astype(np.float32)}
    for (s, _, d), (a, b) in ds.edges.items():  # mean of the papers' features (OGB-LSC)
        if d == "paper" and s not in x or s == "paper" and d not in x:
            other, pap = (a, b) if d == "paper" else (b, a)
            t = s if d == "paper" else d
            acc = np.zeros((ds.num_nodes_dict[t], args.dim), np.float64)
            np.add.at(acc, other, ds.x[pap])
            x[t] = (acc / np.maximum(np.bincount(other, minlength=acc.shape[0]), 1)[:, None]
                    ).astype(np.float32)
    for (s, _, d), (a, b) in ds.edges.items():  # institutions: the mean of their authors
        if d not in x and s in x:
            acc = np.zeros((ds.num_nodes_dict[d], args.dim), np.float64)
            np.add.at(acc, b, x[s][a])
            x[d] = (acc / np.maximum(np.bincount(b, minlength=acc.shape[0]), 1)[:, None]).astype(np.float32)
    data = GraphData.from_dicts(ds.num_nodes_dict, edges, x=x, y={"paper": ds.y},
                                splits={"paper": ds.splits}, target_type="paper")
    return data, x, ds


def batches(data, ids, count, seed):
    ids = np.random.default_rng(seed).permutation(ids)[: count * BATCH]
    return list(NeighborLoader(data, FANOUTS, input_nodes=("paper", ids), batch_size=BATCH,
                               seed=seed, prefetch=0))


# ------------------------------------------------------------------------------ contenders
def ours(data, args, variant):
    torch.manual_seed(0)
    model = RGCN({t: args.dim for t in data.num_nodes_dict}, data.num_nodes_dict, HIDDEN,
                 args.classes, LAYERS, list(data.edge_types), "paper", dropout=DROPOUT)
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def forward(batch):
        with ablation(variant):
            return model(batch)[: batch.batch_size]
    return model, opt, forward, lambda b: b.y[: b.batch_size]


class ablation:
    """Switch one idea off for the timed call (the benchmark's ablations)."""

    def __init__(self, variant):
        self.variant = variant

    def __enter__(self):
        from graphpipe.train import hetero_models
        self.saved = (hetero_models.layer_graphs, hetero_layers.transform_first,
                      hetero_layers.RelGraphConv._transformed_first)
        if self.variant == "untrimmed":
            hetero_models.layer_graphs = lambda *a: None
        elif self.variant == "gather first":
            hetero_layers.transform_first = lambda *a: False
        elif self.variant == "unbatched":
            batched = self.saved[2]

            def one_by_one(conv, x_src, etypes, graph, out):
                for e in etypes:
                    batched(conv, x_src, [e], graph, out)
            hetero_layers.RelGraphConv._transformed_first = one_by_one

    def __exit__(self, *exc):
        from graphpipe.train import hetero_models
        (hetero_models.layer_graphs, hetero_layers.transform_first,
         hetero_layers.RelGraphConv._transformed_first) = self.saved


def homogeneous(batch, types, rels):
    """PyG's homogeneous view of a typed batch: x concatenated (target type first), per
    layer the edges cut to the destinations that layer writes, relation ids."""
    offset, start = {}, 0
    for t in types:
        offset[t] = start
        start += int(batch.n_id[t].shape[0])
    x = torch.cat([batch.x[t] for t in types])
    known = {t: np.cumsum(batch.num_sampled_nodes[t]) for t in types}
    layers = []
    for layer in range(LAYERS):
        b = LAYERS - layer - 1
        ei, et = [], []
        for r, (s, _, d) in enumerate(rels):
            e = batch.edge_index[(s, _, d)]
            e = e[:, e[1] < int(known[d][b])]
            ei.append(torch.stack([e[0] + offset[s], e[1] + offset[d]]))
            et.append(torch.full((e.shape[1],), r, dtype=torch.int64))
        layers.append((torch.cat(ei, 1), torch.cat(et)))
    return x, layers, batch.y[: batch.batch_size]


def pyg(data, args, kind):
    import torch_geometric.nn as pyg_nn

    rels = list(data.edge_types)
    conv = getattr(pyg_nn, kind)
    torch.manual_seed(0)
    model = torch.nn.ModuleList([conv(args.dim, HIDDEN, len(rels), aggr="mean"),
                                 conv(HIDDEN, args.classes, len(rels), aggr="mean")])
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def forward(h):
        x, layers, _ = h
        for i, (ei, et) in enumerate(layers):
            x = model[i](x, ei, et)
            if i < LAYERS - 1:
                x = F.dropout(F.relu(x), DROPOUT, model.training)
        return x[: h[2].shape[0]]
    return model, opt, forward, lambda h: h[2]


class DglPeer:
    """benchmarks/peers/dgl_rgcn.py in the DGL interpreter, alive across rounds."""

    def __init__(self, folder: Path):
        py = Path(os.environ.get("GRAPHPIPE_DGL_PYTHON") or ROOT / ".venv-dgl" / "bin" / "python")
        if not py.exists():
            raise FileNotFoundError(f"{py} (set GRAPHPIPE_DGL_PYTHON; ../shared/peers/README.md)")
        self.proc = subprocess.Popen([str(py), str(ROOT / "benchmarks/peers/dgl_rgcn.py"), str(folder)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "DGLBACKEND": "pytorch"})
        self.ask(None)

    def ask(self, cmd):
        if cmd is not None:
            self.proc.stdin.write(cmd + "\n")
            self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"DGL peer ended (exit {self.proc.wait()})")
            if line.startswith("{"):
                return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)


def write_peer(folder: Path, x, train, test, args, types, rels):
    for t in types:
        np.save(folder / f"feat_{t}.npy", x[t])
    for split, bs in (("train", train), ("test", test)):
        for i, b in enumerate(bs):
            arrays = {f"n_id_{t}": b.n_id[t].numpy() for t in types}
            arrays.update({f"nsn_{t}": np.asarray(b.num_sampled_nodes[t]) for t in types})
            arrays.update({f"ei_{r}": b.edge_index[e].numpy() for r, e in enumerate(rels)})
            np.savez(folder / f"{split}{i}.npz", y=b.y[: b.batch_size].numpy(), **arrays)
    meta = {"types": types, "relations": [list(e) for e in rels], "layers": LAYERS,
            "in_dim": args.dim, "hidden": HIDDEN, "classes": args.classes, "lr": LR,
            "dropout": DROPOUT, "train_batches": len(train), "test_batches": len(test)}
    (folder / "meta.json").write_text(json.dumps(meta))


# --------------------------------------------------------------------------------- running
class Local:
    """One in-process contender: model, optimiser, its view of each batch."""

    def __init__(self, made, train, test, view):
        self.model, self.opt, self.forward, self.label = made
        self.train, self.test = [view(b) for b in train], [view(b) for b in test]

    def step(self, batch):
        self.opt.zero_grad()
        F.cross_entropy(self.forward(batch), self.label(batch)).backward()
        self.opt.step()

    def epoch(self) -> float:
        self.model.train()
        t0 = time.perf_counter()
        for b in self.train:
            self.step(b)
        return time.perf_counter() - t0

    def accuracy(self) -> float:
        self.model.eval()
        with torch.no_grad():
            right = sum(int((self.forward(b).argmax(1) == self.label(b)).sum()) for b in self.test)
        return right / sum(int(self.label(b).shape[0]) for b in self.test)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--papers", type=int, default=20000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--classes", type=int, default=20)
    ap.add_argument("--train-batches", type=int, default=8)
    ap.add_argument("--test-batches", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--skip-dgl", action="store_true")
    ap.add_argument("--ablations", default="untrimmed,unbatched,gather first")
    ap.add_argument("--fast-limit-gb", type=float, default=1.5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    data, x, ds = typed_graph(args)
    types = ["paper"] + sorted(t for t in data.num_nodes_dict if t != "paper")
    rels = list(data.edge_types)
    train = batches(data, ds.splits["train"], args.train_batches, 0)
    test = batches(data, ds.splits["test"], args.test_batches, 1)
    edges = np.mean([sum(int(e.shape[1]) for e in b.edge_index.values()) for b in train])
    nodes = np.mean([sum(int(n.shape[0]) for n in b.n_id.values()) for b in train])
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, torch threads "
          f"{torch.get_num_threads()}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}; "
          f"data in {time.perf_counter() - t0:.0f} s")
    print("nodes " + ", ".join(f"{t} {n:,}" for t, n in data.num_nodes_dict.items()) +
          f"; {len(rels)} relations; per train batch {nodes:,.0f} nodes, {edges:,.0f} edges; "
          f"{len(train)} train / {len(test)} test batches of {BATCH}, fanouts {FANOUTS}")
    local = {"graphpipe RGCN": Local(ours(data, args, None), train, test, lambda b: b)}
    for v in [v for v in args.ablations.split(",") if v]:
        local[f"graphpipe RGCN, {v}"] = Local(ours(data, args, v), train, test, lambda b: b)
    local["PyG RGCNConv"] = Local(pyg(data, args, "RGCNConv"), train, test,
                                  lambda b: homogeneous(b, types, rels))
    fast_bytes = edges * max(args.dim * HIDDEN, HIDDEN * args.classes) * 4 * 3
    if fast_bytes < args.fast_limit_gb * 2 ** 30:
        local["PyG FastRGCNConv"] = Local(pyg(data, args, "FastRGCNConv"), train, test,
                                          lambda b: homogeneous(b, types, rels))
    else:
        print(f"PyG FastRGCNConv not run: its per-edge weights take ~{fast_bytes / 2**30:.1f} GiB "
              f"(> --fast-limit-gb {args.fast_limit_gb})")
    for name, c in local.items():  # the first (compiling) step on a throwaway copy
        import copy
        twin = copy.deepcopy(c)
        twin.step(twin.train[0])
    times = {name: [] for name in local}
    peer = None
    with tempfile.TemporaryDirectory(prefix="rgcn_peer_") as tmp:
        if not args.skip_dgl:
            try:
                write_peer(Path(tmp), x, train, test, args, types, rels)
                peer = DglPeer(Path(tmp))
                times["DGL RelGraphConv"] = []
            except Exception as exc:  # noqa: BLE001 - a failing peer must not hide our figures
                print(f"DGL not measured: {type(exc).__name__}: {exc}")
        loads = []
        for _ in range(args.epochs):
            loads.append(os.getloadavg()[0])
            for name, c in local.items():
                times[name].append(c.epoch())
            if peer is not None:
                times["DGL RelGraphConv"].append(peer.ask("train")["seconds"])
        acc = {name: c.accuracy() for name, c in local.items()}
        if peer is not None:
            acc["DGL RelGraphConv"] = peer.ask("eval")["acc"]
            peer.close()
    steps = len(train)
    print(f"load average during the rounds: {', '.join(f'{v:.1f}' for v in loads)}")
    print(f"{'contender':<40}{'best s/step':>12}{'median':>10}{'test acc':>10}")
    for name, ts in times.items():
        print(f"{name:<40}{min(ts) / steps:>12.4f}{statistics.median(ts) / steps:>10.4f}{acc[name]:>10.4f}")
    mine = times["graphpipe RGCN"]
    for name, ts in times.items():
        if name != "graphpipe RGCN":
            print(f"ratio {name} / graphpipe RGCN: best {min(ts) / min(mine):.2f}x, "
                  f"median {statistics.median(ts) / statistics.median(mine):.2f}x")


if __name__ == "__main__":
    main()
