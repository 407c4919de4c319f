"""Minibatch GraphSAGE node classification in DGL 2.1's idiom (the shape of DGL's
examples/pytorch/graphsage/node_classification.py: NeighborSampler + DataLoader, three
SAGEConv layers, layer-wise inference) on a graphpipe store. dgl_graphsage_dgl.py reads it
through DGL's DataLoader, dgl_graphsage.py through graphpipe's NeighborLoader (output="dgl");
dgl_graphsage.diff is the change. Needs DGL and graphpipe in one environment (make peers).

    python examples/dgl_graphsage[_dgl].py --store STORE [--epochs 10] [--max-steps N]
"""

import argparse
import time

import dgl
import dgl.nn as dglnn
import numpy as np
import torch
import torch.nn.functional as F
from dgl.dataloading import DataLoader, MultiLayerFullNeighborSampler, NeighborSampler
from torch import nn

from graphpipe.store import GraphStore


class SAGE(nn.Module):
    def __init__(self, in_size, hid_size, out_size):
        super().__init__()
        self.layers = nn.ModuleList([dglnn.SAGEConv(in_size, hid_size, "mean"),
                                     dglnn.SAGEConv(hid_size, hid_size, "mean"),
                                     dglnn.SAGEConv(hid_size, out_size, "mean")])
        self.dropout = nn.Dropout(0.5)
        self.hid_size, self.out_size = hid_size, out_size

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i != len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h

    def inference(self, g, feat, batch_size):
        """Layer-wise inference over all nodes (batches in node order)."""
        sampler = MultiLayerFullNeighborSampler(1)
        loader = DataLoader(g, torch.arange(g.num_nodes()), sampler,
                            batch_size=batch_size, shuffle=False, drop_last=False, num_workers=0)
        for i, layer in enumerate(self.layers):
            y = torch.empty(feat.shape[0], self.hid_size if i != len(self.layers) - 1 else self.out_size)
            for input_nodes, output_nodes, blocks in loader:
                h = layer(blocks[0], feat[input_nodes])
                if i != len(self.layers) - 1:
                    h = F.relu(h)
                y[output_nodes[0]:output_nodes[-1] + 1] = h
            feat = y
        return feat


def accuracy(logits, labels):
    return (logits.argmax(1) == labels).float().mean().item()


def evaluate(model, loader):
    model.eval()
    ys, y_hats = [], []
    with torch.no_grad():
        for input_nodes, output_nodes, blocks in loader:
            ys.append(blocks[-1].dstdata["label"])
            y_hats.append(model(blocks, blocks[0].srcdata["feat"]))
    return accuracy(torch.cat(y_hats), torch.cat(ys))


def train(args, g, splits, model):
    sampler = NeighborSampler([10, 10, 10], prefetch_node_feats=["feat"], prefetch_labels=["label"])
    train_loader = DataLoader(g, splits["train"], sampler,
                              batch_size=args.batch_size, shuffle=True, drop_last=False, num_workers=0)
    val_loader = DataLoader(g, splits["valid"], sampler,
                            batch_size=args.batch_size, shuffle=True, drop_last=False, num_workers=0)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=5e-4)
    steps = 0
    for epoch in range(args.epochs):
        model.train()
        total_loss, started = 0.0, time.perf_counter()
        for it, (input_nodes, output_nodes, blocks) in enumerate(train_loader):
            x = blocks[0].srcdata["feat"]
            y = blocks[-1].dstdata["label"]
            loss = F.cross_entropy(model(blocks, x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total_loss += loss.item()
            steps += 1
            if args.max_steps and steps >= args.max_steps:
                break
        seconds = time.perf_counter() - started
        print(f"Epoch {epoch:05d} | Loss {total_loss / (it + 1):.4f} | "
              f"Accuracy {evaluate(model, val_loader):.4f} | {seconds:.2f} s")
        if args.max_steps and steps >= args.max_steps:
            break


def load_graph(path):
    """The store as a DGLGraph with ndata feat/label, its splits and class count."""
    store = GraphStore.open(path)
    dst = np.repeat(np.arange(store.num_nodes), np.diff(store.indptr))
    g = dgl.graph((torch.from_numpy(np.asarray(store.indices, dtype=np.int64)), torch.from_numpy(dst)),
                  num_nodes=store.num_nodes)
    g.ndata["feat"] = torch.from_numpy(store.features())
    g.ndata["label"] = torch.from_numpy(np.array(store.labels))
    splits = {name: torch.from_numpy(store.split(name)) for name in ("train", "valid", "test")}
    return g, splits, int(store.manifest["labels"]["num_classes"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(0)
    g, splits, num_classes = load_graph(args.store)
    feat, labels = g.ndata["feat"], g.ndata["label"]
    model = SAGE(feat.shape[1], 256, num_classes)
    train(args, g, splits, model)
    model.eval()
    with torch.no_grad():
        pred = model.inference(g, feat, batch_size=4096)
    test = splits["test"]
    print(f"Test Accuracy {accuracy(pred[test], labels[test]):.4f}")
