"""PyG's node set per hop (``frontier="new"``) against DGL's (``frontier="all"``): what a
batch holds and what it costs, and PyG's own sampler (torch-sparse ``neighbor_sample``)
on the same graph as the reference for ``"new"``.

Graph: graphpipe's community SBM (products-like: 200,000 nodes, mean in-degree 25,
undirected), CSC by destination. Fanouts [15, 10, 5], batch 1024, the first ``--batches``
batches of the train split. Per batch: nodes (rows of ``x``), rows with no edge in the
PyG ``edge_index`` (nodes reached only by re-sampling earlier nodes), sampled edges (all
blocks) and seconds (sampling only, one thread).

    .venv/bin/python benchmarks/frontier.py [--nodes 200000] [--batches 40]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphpipe.loaders.from_sample import pyg_edges
from graphpipe.ops.sampling import sample_neighbors_batches
from graphpipe.synthetic.community import community_graph

FANOUTS = [15, 10, 5]


def csc(g) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(g.dst, kind="stable")
    indptr = np.zeros(g.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.num_nodes), out=indptr[1:])
    return indptr, g.src[order].astype(np.int64)


def measure(indptr, indices, batches, frontier: str) -> dict[str, float]:
    keys = list(range(len(batches)))
    sample_neighbors_batches(indptr, indices, batches[:2], FANOUTS, seeds=keys[:2], num_threads=1,
                             frontier=frontier)  # compile
    t0 = time.perf_counter()
    outs = sample_neighbors_batches(indptr, indices, batches, FANOUTS, seeds=keys, num_threads=1,
                                    frontier=frontier)
    seconds = time.perf_counter() - t0
    nodes = isolated = edges = 0
    for out in outs:
        edge_index, _, _ = pyg_edges(out.blocks)
        k = out.n_id.shape[0]
        nodes += k
        isolated += k - np.unique(edge_index).shape[0]
        edges += sum(b.num_edges for b in out.blocks)
    n = len(outs)
    return {"nodes": nodes / n, "isolated": isolated / n, "edges": edges / n, "s": seconds / n}


def torch_sparse_nodes(indptr, indices, batches) -> float | None:
    try:
        import torch
        import torch_sparse  # noqa: F401 - registers torch.ops.torch_sparse
    except ImportError:
        return None
    colptr, row = torch.from_numpy(indptr), torch.from_numpy(indices)
    nodes = 0
    for b in batches:
        node, *_ = torch.ops.torch_sparse.neighbor_sample(colptr, row, torch.from_numpy(b), FANOUTS,
                                                          False, True)
        nodes += node.numel()
    return nodes / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=40)
    args = parser.parse_args()
    g = community_graph(args.nodes, 47, avg_degree=25, feature_dim=4, seed=0)
    indptr, indices = csc(g)
    train = np.random.default_rng(0).permutation(g.splits["train"])
    batches = [train[i:i + 1024] for i in range(0, 1024 * args.batches, 1024)]
    print(f"graph: {g.num_nodes:,} nodes, {indices.shape[0]:,} edges; fanouts {FANOUTS}, "
          f"batch 1024, {len(batches)} batches")
    rows = {f: measure(indptr, indices, batches, f) for f in ("all", "new")}
    print(f"{'frontier':<10}{'nodes/batch':>14}{'no-edge rows':>14}{'edges/batch':>14}{'ms/batch':>10}")
    for f, r in rows.items():
        print(f"{f:<10}{r['nodes']:>14,.0f}{r['isolated']:>14,.0f}{r['edges']:>14,.0f}{1e3 * r['s']:>10.1f}")
    a, n = rows["all"], rows["new"]
    print(f"ratio all/new: nodes {a['nodes'] / n['nodes']:.3f}x, edges {a['edges'] / n['edges']:.3f}x, "
          f"time {a['s'] / n['s']:.2f}x; no-edge rows under 'all': {a['isolated'] / a['nodes']:.1%}")
    ref = torch_sparse_nodes(indptr, indices, batches)
    if ref is not None:
        print(f"torch-sparse neighbor_sample (PyG): {ref:,.0f} nodes/batch; 'new' / PyG "
              f"{n['nodes'] / ref:.3f}x")


if __name__ == "__main__":
    main()
