"""GraphBolt's OnDiskDataset preprocessing of a CSV edge list + .npy features (run with .venv-dgl).

Usage: .venv-dgl/bin/python benchmarks/peers/graphbolt_ingest.py DATASET_DIR
DATASET_DIR holds edges.csv (headerless "src,dst"), feat.npy, train.npy and
metadata.yaml (written by benchmarks/ingest.py). Prints one JSON line with the
seconds spent in ``OnDiskDataset(...).load()`` (which preprocesses: reads the
CSV with pandas, builds the fused CSC sampling graph, copies features) and the
process's peak RSS.
"""

import json
import sys
import time

import dgl.graphbolt as gb


def peak_rss() -> int:
    """VmHWM (ru_maxrss would carry over the parent's resident size across fork + exec)."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM")


directory = sys.argv[1]
baseline = peak_rss()
t0 = time.perf_counter()
dataset = gb.OnDiskDataset(directory, force_preprocess=True).load()
graph = dataset.graph
seconds = time.perf_counter() - t0
peak = peak_rss()
print(json.dumps({"seconds": seconds, "peak_rss": peak, "baseline_rss": baseline,
                  "num_nodes": int(graph.total_num_nodes), "num_edges": int(graph.total_num_edges)}))
