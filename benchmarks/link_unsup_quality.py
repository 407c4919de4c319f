"""Does PyG's unsupervised GraphSAGE example learn as well with graphpipe's LinkNeighborLoader?

PyG's ``examples/graph_sage_unsup.py`` (GraphSAGE, ``LinkNeighborLoader(batch_size=256,
shuffle=True, neg_sampling_ratio=1.0, num_neighbors=[10, 10])``, BCE on dot products,
logistic regression on the embeddings) on a Cora-shaped community graph (2,708 nodes,
~10.5K directed edges, 7 classes, 1,433 features), run with PyG's loader and with
graphpipe's, the import being the only change, alternating, one seed per run pair.

    python benchmarks/link_unsup_quality.py --runs 20 --epochs 3

Prints per-run test accuracies and final losses, the mean and standard deviation per
loader, how many runs stayed on the loss plateau (last epoch's mean BCE per
prediction > 0.68, about ln 2: positives and negatives not yet separated) and a Mann-Whitney U
test.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
import torch.nn.functional as F


def _bag_of_words(labels: np.ndarray, num_classes: int, seed: int, words: int = 1433,
                  per_node: int = 18, topic: int = 200, on_topic: float = 0.5) -> np.ndarray:
    """Cora-like binary features: ``per_node`` words per node, a fraction ``on_topic`` of
    them from its class's ``topic`` words, the rest from the whole vocabulary."""
    rng = np.random.default_rng([seed, 7])
    topics = np.stack([rng.choice(words, topic, replace=False) for _ in range(num_classes)])
    n = labels.shape[0]
    own = rng.random((n, per_node)) < on_topic
    picks = np.where(own, topics[labels[:, None], rng.integers(0, topic, (n, per_node))],
                     rng.integers(0, words, (n, per_node)))
    x = np.zeros((n, words), dtype=np.float32)
    x[np.arange(n)[:, None], picks] = 1.0
    return x


def make_data(seed: int = 0, on_topic: float = 0.5):
    from torch_geometric.data import Data

    from graphpipe.synthetic.community import community_graph

    g = community_graph(2708, 7, avg_degree=3.9, feature_dim=8, seed=seed)
    x = torch.from_numpy(_bag_of_words(g.labels, 7, seed, on_topic=on_topic))
    x = x / x.sum(dim=1, keepdim=True).clamp_min(1e-12)   # as NormalizeFeatures
    edge_index = torch.from_numpy(np.stack([g.src, g.dst]).astype(np.int64))
    n = g.num_nodes
    masks = {}
    for name in ("train", "valid", "test"):
        m = torch.zeros(n, dtype=torch.bool)
        m[torch.from_numpy(np.asarray(g.splits[name], dtype=np.int64))] = True
        masks[name] = m
    return Data(x=x, edge_index=edge_index, y=torch.from_numpy(np.asarray(g.labels)),
                train_mask=masks["train"], val_mask=masks["valid"], test_mask=masks["test"],
                num_nodes=n)


def run(data, which: str, epochs: int, seed: int) -> tuple[float, float, float]:
    """One run of the upstream script: ``(test accuracy, last epoch's loss, seconds)``."""
    from sklearn.linear_model import LogisticRegression
    from torch_geometric.nn import GraphSAGE

    if which == "pyg":
        from torch_geometric.loader import LinkNeighborLoader
    else:
        from graphpipe.loaders import LinkNeighborLoader
    torch.manual_seed(seed)
    loader = LinkNeighborLoader(data, batch_size=256, shuffle=True, neg_sampling_ratio=1.0,
                                num_neighbors=[10, 10])
    model = GraphSAGE(data.num_node_features, hidden_channels=64, num_layers=2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    start = time.perf_counter()
    for _ in range(epochs):
        model.train()
        total, count = 0.0, 0
        for batch in loader:
            optimizer.zero_grad()
            h = model(batch.x, batch.edge_index)
            pred = (h[batch.edge_label_index[0]] * h[batch.edge_label_index[1]]).sum(dim=-1)
            loss = F.binary_cross_entropy_with_logits(pred, batch.edge_label)
            loss.backward()
            optimizer.step()
            total += float(loss) * pred.size(0)
            count += pred.size(0)
        epoch_loss = total / count   # per prediction (upstream prints total / num_nodes)
    seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        out = model(data.x, data.edge_index)
    clf = LogisticRegression(max_iter=1000)
    clf.fit(out[data.train_mask], data.y[data.train_mask])
    return float(clf.score(out[data.test_mask], data.y[data.test_mask])), epoch_loss, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--plateau", type=float, default=0.68)
    parser.add_argument("--on-topic", type=float, default=0.5,
                        help="fraction of a node's words drawn from its class's topic")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = make_data(on_topic=args.on_topic)
    results: dict[str, list] = {"pyg": [], "graphpipe": []}
    for r in range(args.runs):
        order = ("pyg", "graphpipe") if r % 2 == 0 else ("graphpipe", "pyg")
        for which in order:
            acc, loss, secs = run(data, which, args.epochs, seed=r)
            results[which].append((acc, loss, secs))
            print(f"run {r:2d} {which:9s} test acc {acc:.4f} loss {loss:.4f} {secs:.1f}s", flush=True)
    from scipy.stats import mannwhitneyu

    print(f"\n{args.runs} runs x {args.epochs} epochs, on-topic {args.on_topic}")
    for which, rows in results.items():
        acc = np.array([a for a, _, _ in rows])
        loss = np.array([x for _, x, _ in rows])
        stuck = int((loss > args.plateau).sum())
        print(f"{which:9s} acc mean {acc.mean():.4f} sd {acc.std(ddof=1):.4f} median "
              f"{np.median(acc):.4f}  plateau {stuck}/{len(rows)}  s/run {np.mean([s for *_, s in rows]):.1f}")
    p = mannwhitneyu([a for a, _, _ in results["pyg"]], [a for a, _, _ in results["graphpipe"]]).pvalue
    print(f"Mann-Whitney U p = {p:.3f}")


if __name__ == "__main__":
    main()
