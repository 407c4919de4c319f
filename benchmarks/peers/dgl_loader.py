"""DGL / GraphBolt side of benchmarks/loader.py (run with .venv-dgl/bin/python).

    .venv-dgl/bin/python benchmarks/peers/dgl_loader.py GRAPH_DIR SEEDS_NPY FEAT_NPY [REPEATS [THREADS]]

THREADS (default 2) sets torch's thread count; run it with OMP_NUM_THREADS=THREADS too
(DGL's sampler uses OpenMP).

Loads the CSC cached by benchmarks/sampling.py (rmat21_ef16_indptr.npy / _indices.npy),
the seed batches (B+1 rows; row 0 is a warm-up batch) and the features (.npy), and
prints one JSON line with, per loader, the batches, seconds, sampled edges (all
blocks) and feature rows delivered, the fastest of REPEATS (default 3) timed passes:

- "DGL DataLoader (NeighborSampler + prefetch_node_feats)": ``dgl.dataloading.DataLoader``
  over the seed nodes, ``NeighborSampler([5, 10, 15], prefetch_node_feats=["feat"])``
  (DGL's order: input layer first, i.e. [15, 10, 5] seed hop first), num_workers=0;
- "DGL sample_blocks + index_select(feat)": the sampler called directly, features gathered
  with ``torch.index_select`` (no DataLoader machinery);
- "GraphBolt DataLoader": ``ItemSampler → sample_neighbor(graph, [5, 10, 15]) →
  fetch_feature(BasicFeatureStore, ["feat"])`` through ``gb.DataLoader`` (num_workers=0).
"""

import json
import os
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import dgl.graphbolt as gb
import numpy as np
import torch

DGL_FANOUTS = [5, 10, 15]  # input layer first = [15, 10, 5] seed hop first


def best_of(repeats: int, run) -> dict:
    """The fastest of ``repeats`` runs (the machine is shared), with every run's seconds."""
    runs = [run() for _ in range(repeats)]
    best = dict(min(runs, key=lambda r: r["seconds"]))
    best["all_seconds"] = [r["seconds"] for r in runs]
    return best


def main() -> None:
    graph_dir, seeds_path, feat_path = sys.argv[1], sys.argv[2], sys.argv[3]
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    threads = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    torch.set_num_threads(threads)
    tag = f" [{threads} thread{'s' if threads > 1 else ''}]"
    indptr = torch.from_numpy(np.load(os.path.join(graph_dir, "rmat21_ef16_indptr.npy")))
    indices = torch.from_numpy(np.load(os.path.join(graph_dir, "rmat21_ef16_indices.npy")).astype(np.int64))
    feat = torch.from_numpy(np.load(feat_path))
    seed_batches = np.load(seeds_path)
    batch_size = seed_batches.shape[1]
    warm = torch.from_numpy(seed_batches[0].astype(np.int64))
    timed = torch.from_numpy(seed_batches[1:].reshape(-1).astype(np.int64))
    results = {}

    # -- DGL DataLoader ------------------------------------------------------------------------
    g = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))),
                  num_nodes=indptr.shape[0] - 1)
    g.create_formats_()
    g.ndata["feat"] = feat
    sampler = dgl.dataloading.NeighborSampler(DGL_FANOUTS, prefetch_node_feats=["feat"])

    def dgl_run(seeds: torch.Tensor) -> dict:
        loader = dgl.dataloading.DataLoader(g, seeds, sampler, batch_size=batch_size, shuffle=False,
                                            drop_last=False, num_workers=0)
        count = edges = rows = 0
        t0 = time.perf_counter()
        for _input_nodes, _output_nodes, blocks in loader:
            x = blocks[0].srcdata["feat"]
            rows += int(x.shape[0])
            edges += sum(int(b.num_edges()) for b in blocks)
            count += 1
        return {"batches": count, "seconds": time.perf_counter() - t0, "edges": edges, "rows": rows}

    dgl_run(warm)
    results["DGL DataLoader (NeighborSampler + node features)" + tag] = best_of(repeats, lambda: dgl_run(timed))

    plain = dgl.dataloading.NeighborSampler(DGL_FANOUTS)

    def dgl_manual(batches: np.ndarray) -> dict:
        count = edges = rows = 0
        t0 = time.perf_counter()
        for b in batches:
            input_nodes, _, blocks = plain.sample_blocks(g, torch.from_numpy(b.astype(np.int64)))
            x = torch.index_select(feat, 0, input_nodes)
            rows += int(x.shape[0])
            edges += sum(int(blk.num_edges()) for blk in blocks)
            count += 1
        return {"batches": count, "seconds": time.perf_counter() - t0, "edges": edges, "rows": rows}

    dgl_manual(seed_batches[:1])
    results["DGL sample_blocks + index_select(feat)" + tag] = best_of(repeats, lambda: dgl_manual(seed_batches[1:]))

    # -- GraphBolt DataLoader ------------------------------------------------------------------
    graph = gb.fused_csc_sampling_graph(indptr, indices)
    features = gb.BasicFeatureStore({("node", None, "feat"): gb.TorchBasedFeature(feat)})

    def gb_run(seeds: torch.Tensor) -> dict:
        datapipe = gb.ItemSampler(gb.ItemSet(seeds, names="seed_nodes"), batch_size=batch_size,
                                  shuffle=False)
        datapipe = datapipe.sample_neighbor(graph, DGL_FANOUTS)
        datapipe = datapipe.fetch_feature(features, node_feature_keys=["feat"])
        loader = gb.DataLoader(datapipe, num_workers=0)
        count = edges = rows = 0
        t0 = time.perf_counter()
        for mb in loader:
            x = mb.node_features["feat"]
            rows += int(x.shape[0])
            edges += sum(int(s.sampled_csc.indices.shape[0]) for s in mb.sampled_subgraphs)
            count += 1
        return {"batches": count, "seconds": time.perf_counter() - t0, "edges": edges, "rows": rows}

    gb_run(warm)
    results["GraphBolt DataLoader (sample_neighbor + fetch_feature)" + tag] = best_of(repeats, lambda: gb_run(timed))
    print(json.dumps(results))


if __name__ == "__main__":
    main()
