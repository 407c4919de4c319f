"""GraphBolt's OnDiskDataset preprocessing of a CSV edge list + .npy features (run with .venv-dgl).

Usage: .venv-dgl/bin/python benchmarks/peers/graphbolt_ingest.py DATASET_DIR
DATASET_DIR holds edges.csv (headerless "src,dst"), feat.npy, train.npy and
metadata.yaml (written by benchmarks/ingest.py). Prints one JSON line with the
seconds spent in ``OnDiskDataset(...).load()`` (which preprocesses: reads the
CSV with pandas, builds the fused CSC sampling graph, copies features) and the
process's peak RSS.
"""

import json
import resource
import sys
import time

import dgl.graphbolt as gb

directory = sys.argv[1]
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
t0 = time.perf_counter()
dataset = gb.OnDiskDataset(directory, force_preprocess=True).load()
graph = dataset.graph
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss": peak, "baseline_rss": baseline,
                  "num_nodes": int(graph.total_num_nodes), "num_edges": int(graph.total_num_edges)}))
