"""DGL side of benchmarks/rgcn_step.py (run with the DGL peer interpreter).

    .venv-dgl/bin/python benchmarks/peers/dgl_rgcn.py GRAPH_DIR

GRAPH_DIR (written by rgcn_step.py): meta.json (node types, target first; relations;
widths; classes; lr, dropout, batch counts), feat_<ntype>.npy, and per batch
``{train,test}<i>.npz`` with ``n_id_<t>``, ``ei_<r>`` (PyG layout, local IDs), ``nsn_<t>``
(PyG's num_sampled_nodes) and ``y`` (the seeds' labels). Each batch becomes one
homogeneous DGL block per layer (what DGL's DataLoader + ``dgl.to_homogeneous`` give):
layer ``l`` of ``L`` reads the nodes of hops ``<= L - l`` and writes those of hops
``< L - l`` (destinations first), edges sorted by relation, ``norm = 1 / deg_r(dst)`` so
that the sum is a mean per relation. Model: ``L`` ``dgl.nn.RelGraphConv(regularizer=None,
self_loop=True)``, ReLU + dropout between, Adam. Prints {"ready": true}, then serves
"train" (one epoch over the train batches: {"seconds", "steps"}) and "eval" ({"acc"}).
"""

import json
import os
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import numpy as np
import torch
from dgl.nn import RelGraphConv
from torch import nn
from torch.nn import functional as F


def _flat(order):
    return [(t, i) for t, lo, hi in order for i in range(lo, hi)]


def blocks_of(npz, meta, feats):
    types, rels, layers = meta["types"], meta["relations"], meta["layers"]
    known = {t: np.cumsum(npz[f"nsn_{t}"]) for t in types}
    blocks, perm_in = [], None
    prev_order = None
    for layer in range(layers):
        a, b = layers - layer, layers - layer - 1
        order = [(t, 0, known[t][b]) for t in types] + [(t, known[t][b], known[t][a]) for t in types]
        pos, start = {}, 0
        for t, lo, hi in order:
            pos.setdefault(t, np.full(known[t][a], -1, np.int64))
            pos[t][lo:hi] = np.arange(start, start + hi - lo)
            start += hi - lo
        if prev_order is None:
            perm_in = order
        elif _flat(prev_order) != _flat(order):
            raise SystemExit("layer outputs are not in the next layer's read order (put the "
                             "target type first)")
        num_dst = sum(known[t][b] for t in types)
        src, dst, et, norm = [], [], [], []
        for r, (s, _, d) in enumerate(rels):
            ei = npz[f"ei_{r}"]
            keep = ei[1] < known[d][b]
            u, v = ei[0][keep], ei[1][keep]
            deg = np.bincount(v, minlength=known[d][b])
            src.append(pos[s][u]); dst.append(pos[d][v]); et.append(np.full(u.shape[0], r))
            norm.append(1.0 / deg[v])
        g = dgl.create_block((torch.from_numpy(np.concatenate(src)), torch.from_numpy(np.concatenate(dst))),
                             num_src_nodes=int(start), num_dst_nodes=int(num_dst))
        blocks.append((g, torch.from_numpy(np.concatenate(et)),
                       torch.from_numpy(np.concatenate(norm)).float()[:, None]))
        # the next layer reads this layer's outputs: their order must be its read order
        prev_order = [(t, 0, known[t][b]) for t in types]
    x = torch.from_numpy(np.concatenate([feats[t][npz[f"n_id_{t}"][lo:hi]] for t, lo, hi in perm_in]))
    return blocks, x, torch.from_numpy(npz["y"])


class Net(nn.Module):
    def __init__(self, meta):
        super().__init__()
        dims = [meta["in_dim"]] + [meta["hidden"]] * (meta["layers"] - 1) + [meta["classes"]]
        self.convs = nn.ModuleList(RelGraphConv(dims[i], dims[i + 1], len(meta["relations"]),
                                                regularizer=None, self_loop=True)
                                   for i in range(meta["layers"]))
        self.dropout = meta["dropout"]

    def forward(self, blocks, x):
        h = x
        for i, (conv, (g, et, norm)) in enumerate(zip(self.convs, blocks)):
            h = conv(g, h, et, norm, presorted=True)
            if i < len(self.convs) - 1:
                h = F.dropout(F.relu(h), self.dropout, self.training)
        return h


def main() -> None:
    graph_dir = sys.argv[1]
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    with open(os.path.join(graph_dir, "meta.json")) as fh:
        meta = json.load(fh)
    feats = {t: np.load(os.path.join(graph_dir, f"feat_{t}.npy")) for t in meta["types"]}
    data = {split: [blocks_of(np.load(os.path.join(graph_dir, f"{split}{i}.npz")), meta, feats)
                    for i in range(meta[f"{split}_batches"])] for split in ("train", "test")}
    torch.manual_seed(0)
    model = Net(meta)
    opt = torch.optim.Adam(model.parameters(), lr=meta["lr"])
    warm = Net(meta)  # a throwaway model takes the first (compiling) step
    wopt = torch.optim.Adam(warm.parameters(), lr=meta["lr"])

    def step(net, optim, batch):
        blocks, x, y = batch
        optim.zero_grad()
        loss = F.cross_entropy(net(blocks, x), y)
        loss.backward()
        optim.step()

    step(warm, wopt, data["train"][0])
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "train":
            model.train()
            t0 = time.perf_counter()
            for batch in data["train"]:
                step(model, opt, batch)
            print(json.dumps({"seconds": time.perf_counter() - t0, "steps": len(data["train"])}), flush=True)
        elif cmd == "eval":
            model.eval()
            right = total = 0
            with torch.no_grad():
                for blocks, x, y in data["test"]:
                    right += int((model(blocks, x).argmax(1) == y).sum())
                    total += int(y.shape[0])
            print(json.dumps({"acc": right / total}), flush=True)
        else:
            break


if __name__ == "__main__":
    main()
