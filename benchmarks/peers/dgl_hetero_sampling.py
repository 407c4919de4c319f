"""DGL / GraphBolt side of benchmarks/hetero_sampling.py (run with .venv-dgl/bin/python).

    .venv-dgl/bin/python benchmarks/peers/dgl_hetero_sampling.py GRAPH_DIR

Loads the typed graph written by benchmarks/hetero_sampling.py into GRAPH_DIR (meta.json:
node counts, relations, fanouts seed hop first, target type; rel<i>_indptr.npy /
rel<i>_indices.npy: relation i's CSC by destination in local IDs; seeds.npy: the seed
batches (B, batch) of the target type; feat_<ntype>.npy: node features), builds the same
graph as ``dgl.heterograph`` and as GraphBolt's ``FusedCSCSamplingGraph``
(``gb.from_dglgraph(g, is_homogeneous=False)``), prints {"ready": [...names]}, then serves
timing requests on stdin so the parent can interleave its own contenders with these: each
line names a contender and one timed pass over the batches answers with a JSON line
{"seconds", "cpu_seconds", "edges", "nodes", "batches"}; "quit" ends.

- ``DGL NeighborSampler``: ``dgl.dataloading.NeighborSampler(fanouts).sample_blocks`` on
  ``{target: seeds}`` (``sample_neighbors`` + ``to_block`` per hop; a hop expands every node
  of the hop before, seeds included: DGL's semantics).
- ``GraphBolt sample_neighbors``: per hop ``FusedCSCSamplingGraph.sample_neighbors`` with one
  fanout per relation + ``gb.unique_and_compact_csc_formats`` (what GraphBolt 2.1's
  ``NeighborSampler`` datapipe does per hop).
- ``DGL DataLoader``: ``dgl.dataloading.DataLoader`` over the same seeds in order
  (``shuffle=False``, ``num_workers=0``), feature rows of every featured type gathered
  (``prefetch_node_feats``).
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


def load(graph_dir: str):
    with open(os.path.join(graph_dir, "meta.json")) as f:
        meta = json.load(f)
    data = {}
    for i, et in enumerate(meta["edge_types"]):
        indptr = torch.from_numpy(np.load(os.path.join(graph_dir, f"rel{i}_indptr.npy")).astype(np.int64))
        indices = torch.from_numpy(np.load(os.path.join(graph_dir, f"rel{i}_indices.npy")).astype(np.int64))
        data[tuple(et)] = ("csc", (indptr, indices, torch.arange(indices.shape[0])))
    g = dgl.heterograph(data, num_nodes_dict=meta["num_nodes"])
    g.create_formats_()
    batches = [torch.from_numpy(b.astype(np.int64)) for b in np.load(os.path.join(graph_dir, "seeds.npy"))]
    return meta, g, batches


def dgl_contenders(meta: dict, g, batches: list) -> dict:
    target = meta["target"]
    fanouts = list(reversed(meta["fanouts"]))  # DGL: last layer (the seed hop) last
    sampler = dgl.dataloading.NeighborSampler(fanouts)

    def sample_blocks(seeds):
        inputs, _, blocks = sampler.sample_blocks(g, {target: seeds})
        return sum(int(b.num_edges()) for b in blocks), sum(int(v.shape[0]) for v in inputs.values())

    feats = {t: ["feat"] for t in meta["featured"]}
    load_sampler = dgl.dataloading.NeighborSampler(fanouts, prefetch_node_feats=feats)
    seeds = torch.cat(batches)
    loader = dgl.dataloading.DataLoader(g, {target: seeds}, load_sampler, batch_size=meta["batch"],
                                        shuffle=False, drop_last=False, num_workers=0)

    def dataloader():
        edges = nodes = 0
        for inputs, _, blocks in loader:
            rows = blocks[0].srcdata.get("feat", {})
            assert all(v.shape[0] == inputs[t].shape[0] for t, v in rows.items())
            edges += sum(int(b.num_edges()) for b in blocks)
            nodes += sum(int(v.shape[0]) for v in inputs.values())
        return edges, nodes

    return {"DGL NeighborSampler": sample_blocks, "DGL DataLoader": dataloader}


def graphbolt_contender(meta: dict, g) -> dict:
    graph = gb.from_dglgraph(g, is_homogeneous=False)
    order = sorted(graph.edge_type_to_id, key=graph.edge_type_to_id.get)
    per_hop = []  # one fanout per relation, in GraphBolt's relation order
    for hop in range(len(meta["fanouts"])):
        per_hop.append(torch.LongTensor([meta["fanouts"][hop]] * len(order)))
    target = meta["target"]

    def sample(seeds):
        seeds = {target: seeds}
        edges = 0
        for fanout in per_hop:
            sub = graph.sample_neighbors(seeds, fanout, replace=False)
            edges += sum(int(c.indices.shape[0]) for c in sub.sampled_csc.values())
            seeds, _ = gb.unique_and_compact_csc_formats(sub.sampled_csc, seeds)
        return edges, sum(int(v.shape[0]) for v in seeds.values())

    return {"GraphBolt sample_neighbors": sample}


def serve(contenders: dict, batches: list) -> None:
    for name, fn in contenders.items():  # warm-up
        fn() if name == "DGL DataLoader" else fn(batches[0])
    print(json.dumps({"ready": list(contenders)}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        if name == "quit" or not name:
            break
        fn = contenders[name]
        c0, t0 = time.process_time(), time.perf_counter()
        if name == "DGL DataLoader":
            edges, nodes = fn()
        else:
            edges = nodes = 0
            for b in batches:
                e, n = fn(b)
                edges, nodes = edges + e, nodes + n
        print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                          "edges": edges, "nodes": nodes, "batches": len(batches)}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph_dir")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    meta, g, batches = load(args.graph_dir)
    contenders = {}
    try:  # before the features: from_dglgraph would carry them into the topology
        contenders.update(graphbolt_contender(meta, g))
    except Exception as exc:  # noqa: BLE001 - a GraphBolt failure must not hide DGL's figures
        print(f"GraphBolt unavailable: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    for t in meta["featured"]:
        g.nodes[t].data["feat"] = torch.from_numpy(np.load(os.path.join(args.graph_dir, f"feat_{t}.npy")))
    contenders = {**dgl_contenders(meta, g, batches), **contenders}
    serve(contenders, batches)


if __name__ == "__main__":
    main()
