"""DGL / GraphBolt side of benchmarks/sampling.py (run with .venv-dgl/bin/python).

    .venv-dgl/bin/python benchmarks/peers/dgl_sampling.py GRAPH_DIR SEEDS_NPY [--scale 21 --edge-factor 16]

Loads the CSC written by benchmarks/sampling.py (rmat21_ef16_indptr.npy /
_indices.npy) and the seed batches (B+1 rows; row 0 is a warm-up batch), prints
{"ready": [...names]}, then serves timing requests on stdin so the parent can
interleave its own runs with these (the machine is shared; interleaving gives every
sampler the same conditions): each line names a sampler ("DGL NeighborSampler" or
"GraphBolt sample_neighbors"), and one timed pass over the batches answers with a JSON
line {"edges", "seconds", "cpu_seconds", "batches"}; "quit" ends. Fanouts [15, 10, 5]
seed hop first, i.e. DGL's NeighborSampler([5, 10, 15]).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("DGLBACKEND", "pytorch")

import dgl
import dgl.graphbolt as gb
import numpy as np
import torch

FANOUTS_SEED_FIRST = [15, 10, 5]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph_dir")
    ap.add_argument("seeds_path")
    ap.add_argument("--scale", type=int, default=21)
    ap.add_argument("--edge-factor", type=int, default=16)
    args = ap.parse_args()
    scale, ef = args.scale, args.edge_factor
    torch.set_num_threads(2)
    indptr = torch.from_numpy(np.load(os.path.join(args.graph_dir, f"rmat{scale}_ef{ef}_indptr.npy")))
    indices = torch.from_numpy(
        np.load(os.path.join(args.graph_dir, f"rmat{scale}_ef{ef}_indices.npy")).astype(np.int64))
    batches = [torch.from_numpy(b.astype(np.int64)) for b in np.load(args.seeds_path)]

    g = dgl.graph(("csc", (indptr, indices, torch.empty(0, dtype=torch.int64))),
                  num_nodes=indptr.shape[0] - 1)
    g.create_formats_()
    sampler = dgl.dataloading.NeighborSampler(list(reversed(FANOUTS_SEED_FIRST)))
    graph = gb.fused_csc_sampling_graph(indptr, indices)

    def dgl_batch(seeds: torch.Tensor) -> int:
        _, _, blocks = sampler.sample_blocks(g, seeds)
        return sum(int(blk.num_edges()) for blk in blocks)

    def graphbolt_batch(seeds: torch.Tensor) -> int:
        n = 0
        for fanout in FANOUTS_SEED_FIRST:
            sub = graph.sample_neighbors(seeds, torch.LongTensor([fanout]), replace=False)
            n += int(sub.sampled_csc.indices.shape[0])
            seeds, _ = gb.unique_and_compact_csc_formats(sub.sampled_csc, seeds)
        return n

    samplers = {"DGL NeighborSampler": dgl_batch, "GraphBolt sample_neighbors": graphbolt_batch}
    for fn in samplers.values():
        fn(batches[0])  # warm-up
    print(json.dumps({"ready": list(samplers)}), flush=True)
    # one timed pass over batches[1:] per request line (the sampler's name); "quit" ends
    for line in sys.stdin:
        name = line.strip()
        if name == "quit" or not name:
            break
        fn = samplers[name]
        edges = 0
        c0 = time.process_time()
        t0 = time.perf_counter()
        for b in batches[1:]:
            edges += fn(b)
        print(json.dumps({"edges": edges, "seconds": time.perf_counter() - t0,
                          "cpu_seconds": time.process_time() - c0, "batches": len(batches) - 1}), flush=True)


if __name__ == "__main__":
    main()
