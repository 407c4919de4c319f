"""DGL / GraphBolt side of benchmarks/sampling.py (run with .venv-dgl/bin/python).

    .venv-dgl/bin/python benchmarks/peers/dgl_sampling.py GRAPH_DIR SEEDS_NPY [--scale 21 --edge-factor 16 --repeats 3]

Loads the CSC written by benchmarks/sampling.py (rmat21_ef16_indptr.npy /
_indices.npy), the seed batches (B+1 rows; row 0 is a warm-up batch), and prints one
JSON line: {"DGL NeighborSampler": {...}, "GraphBolt sample_neighbors": {...}} with the
sampled edges over all blocks, seconds and batch count of the fastest of
``--repeats`` runs (all run times in "all_seconds"). Fanouts [15, 10, 5] seed hop
first, i.e. DGL's NeighborSampler([5, 10, 15]).
"""

import argparse
import json
import os
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import dgl.graphbolt as gb
import numpy as np
import torch

FANOUTS_SEED_FIRST = [15, 10, 5]


def best_of(repeats: int, fn) -> dict:
    runs = [fn() for _ in range(repeats)]
    best = min(runs, key=lambda r: r["seconds"])
    return {**best, "all_seconds": [round(r["seconds"], 4) for r in runs]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph_dir")
    ap.add_argument("seeds_path")
    ap.add_argument("--scale", type=int, default=21)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    graph_dir, seeds_path, scale, ef = args.graph_dir, args.seeds_path, args.scale, args.edge_factor
    torch.set_num_threads(2)
    indptr = torch.from_numpy(np.load(os.path.join(graph_dir, f"rmat{scale}_ef{ef}_indptr.npy")))
    indices = torch.from_numpy(np.load(os.path.join(graph_dir, f"rmat{scale}_ef{ef}_indices.npy")).astype(np.int64))
    batches = [torch.from_numpy(b.astype(np.int64)) for b in np.load(seeds_path)]
    results = {}

    g = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))),
                  num_nodes=indptr.shape[0] - 1)
    g.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(list(reversed(FANOUTS_SEED_FIRST)))
    sampler.sample_blocks(g, batches[0])

    def run_dgl() -> dict:
        edges = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for b in batches[1:]:
            _, _, blocks = sampler.sample_blocks(g, b)
            edges += sum(int(blk.num_edges()) for blk in blocks)
        return {"edges": edges, "seconds": time.perf_counter() - t0,
                "cpu_seconds": time.process_time() - c0, "batches": len(batches) - 1}

    results["DGL NeighborSampler"] = best_of(args.repeats, run_dgl)


    graph = gb.fused_csc_sampling_graph(indptr, indices)

    def sample(seeds: torch.Tensor) -> int:
        n = 0
        for fanout in FANOUTS_SEED_FIRST:
            sub = graph.sample_neighbors(seeds, torch.LongTensor([fanout]), replace=False)
            n += int(sub.sampled_csc.indices.shape[0])
            seeds, _ = gb.unique_and_compact_csc_formats(sub.sampled_csc, seeds)
        return n

    sample(batches[0])

    def run_gb() -> dict:
        edges = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for b in batches[1:]:
            edges += sample(b)
        return {"edges": edges, "seconds": time.perf_counter() - t0,
                "cpu_seconds": time.process_time() - c0, "batches": len(batches) - 1}

    results["GraphBolt sample_neighbors"] = best_of(args.repeats, run_gb)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
