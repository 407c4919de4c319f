"""Heterogeneous neighbour sampling: graphpipe's typed Fused-Map sampler and
HeteroNeighborLoader vs PyG's heterogeneous NeighborLoader, on the same typed graph, in one run.

Graph: ogbn-mag-like (``graphpipe.synthetic.mag.mag_dataset`` when present, else the
generator below with the same four relations and Pareto degree skew), plus the reverse of
each relation between two types (``rev_writes``, ``rev_affiliated_with``, ``rev_has_topic``,
as ``T.ToUndirected()`` adds them; ``cites`` stays one-way), so every hop expands papers
and authors. Or a typed store: ``--store PATH`` (e.g. ``graphpipe generate mag`` +
``graphpipe ingest``), read memory-mapped, the reverse of every relation added
(``with_reverse_relations()``, PyG's ``ToUndirected(merge=False)``: 8 relations).
Seeds: papers, batch 1024, fanouts [15, 10] for every relation (PyG's hetero examples).
The same seed batches for every contender; rounds interleave the contenders so all see
the same load. Metric: seeds per second (best and median round), ratio ours / PyG.

- ``sample``: the sampler alone. Ours: ``sample_hetero_neighbors_batches`` (windows of 8
  batches, 1 and 2 threads). PyG: ``NeighborSampler.sample_from_nodes`` (torch-sparse's
  ``hetero_neighbor_sample``: one thread, no pyg-lib wheel for torch 2.13).
- ``loader``: sampling + feature rows of every type + the batch object. Ours:
  ``HeteroNeighborLoader`` (``prefetch=0``, so the work is in the timed thread;
  ``+to_pyg`` also builds the ``HeteroData``). PyG: ``NeighborLoader`` (``num_workers=0``).

    .venv/bin/python benchmarks/hetero_sampling.py [--scale 0.25] [--batches 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphpipe.loaders import HeteroGraphData, HeteroNeighborLoader
from graphpipe.ops.sampling import sample_hetero_neighbors_batches

FANOUTS = [15, 10]
BATCH = 1024
MAG = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_EDGES = {("author", "affiliated_with", "institution"): 1_043_998,
             ("author", "writes", "paper"): 7_145_660, ("paper", "cites", "paper"): 5_416_271,
             ("paper", "has_topic", "field_of_study"): 7_505_078}


def _skewed(rng: np.random.Generator, n: int, count: int, shape: float) -> np.ndarray:
    weights = rng.pareto(shape, n) + 1.0
    return rng.choice(n, size=count, p=weights / weights.sum())


def mag_like(scale: float, seed: int = 0) -> tuple[dict, dict, np.ndarray, np.ndarray, np.ndarray]:
    """``(counts, edges, paper x (N, 128) float32, paper y, train ids)`` of an ogbn-mag-like
    graph at ``scale`` of ogbn-mag's sizes."""
    rng = np.random.default_rng(seed)
    counts = {t: max(8, int(n * scale)) for t, n in MAG.items()}
    edges = {}
    for et, e in MAG_EDGES.items():
        e = int(e * scale)
        edges[et] = (_skewed(rng, counts[et[0]], e, 2.0), _skewed(rng, counts[et[2]], e, 1.5))
    x = rng.standard_normal((counts["paper"], 128), dtype=np.float32)
    y = rng.integers(0, 349, counts["paper"])
    train = np.sort(rng.choice(counts["paper"], int(0.8 * counts["paper"]), replace=False))
    return counts, edges, x, y, train


def with_reverse(edges: dict) -> dict:
    out = dict(edges)
    for (s, r, d), (a, b) in edges.items():
        if s != d:
            out[(d, f"rev_{r}", s)] = (b, a)
    return out


def pyg_hetero(data: HeteroGraphData):
    """The same graph as a PyG HeteroData (edge_index in our CSC order)."""
    from torch_geometric.data import HeteroData

    out = HeteroData()
    for t, n in data.num_nodes_dict.items():
        if t in data.features:
            out[t].x = torch.from_numpy(np.array(data.features[t]))  # a copy: stores map read-only
        else:
            out[t].num_nodes = n
    for t, y in data.labels.items():
        out[t].y = torch.from_numpy(np.array(y))
    for et in data.edge_types:
        indptr, indices = data.typed_csc(et)
        dst = np.repeat(np.arange(indptr.shape[0] - 1), np.diff(indptr))
        out[et].edge_index = torch.from_numpy(np.stack([np.asarray(indices, dtype=np.int64), dst]))
    return out


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def contenders(data: HeteroGraphData, pyg, batches: list[np.ndarray]) -> dict:
    from torch_geometric.loader import NeighborLoader as PyGLoader
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    seeds = np.concatenate(batches)
    keys = list(range(len(batches)))
    pyg_sampler = NeighborSampler(pyg, FANOUTS)

    def ours_sample(threads: int):
        def run():
            for s in range(0, len(batches), 8):
                sample_hetero_neighbors_batches(data.graph, [{"paper": b} for b in batches[s:s + 8]],
                                                FANOUTS, seeds=keys[s:s + 8], num_threads=threads)
        return run

    def pyg_sample():
        for b in batches:
            pyg_sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(b), input_type="paper"))

    def ours_loader(to_pyg: bool):
        loader = HeteroNeighborLoader(data, FANOUTS, input_nodes=("paper", seeds), batch_size=BATCH,
                                      seed=0, prefetch=0)

        def run():
            for batch in loader:
                if to_pyg:
                    batch.to_pyg()
        return run

    pyg_loader = PyGLoader(pyg, FANOUTS, input_nodes=("paper", torch.from_numpy(seeds)),
                           batch_size=BATCH, shuffle=False)

    def pyg_load():
        for _ in pyg_loader:
            pass

    return {"sample: graphpipe 1 thread": ours_sample(1), "sample: graphpipe 2 threads": ours_sample(2),
            "sample: PyG (torch-sparse)": pyg_sample,
            "loader: graphpipe HeteroNeighborLoader": ours_loader(False),
            "loader: graphpipe +to_pyg()": ours_loader(True), "loader: PyG NeighborLoader": pyg_load}


def load_data(args: argparse.Namespace) -> HeteroGraphData:
    if args.store:  # with the reverse of every relation (PyG's ToUndirected(merge=False))
        return HeteroGraphData.open(args.store).with_reverse_relations()
    counts, edges, x, y, train = mag_like(args.scale)
    return HeteroGraphData.from_dicts(counts, with_reverse(edges), x={"paper": x}, y={"paper": y},
                                      splits={"paper": {"train": train}}, target_type="paper")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.25, help="fraction of ogbn-mag's sizes")
    parser.add_argument("--store", default=None, help="a typed store instead of the generator")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    t0 = time.perf_counter()
    data = load_data(args)
    pyg = pyg_hetero(data)
    train = data.typed_split("paper", "train")
    train = np.random.default_rng(0).permutation(train)
    batches = [train[i:i + BATCH] for i in range(0, BATCH * args.batches, BATCH)]
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, torch threads "
          f"{torch.get_num_threads()}; graph built in {time.perf_counter() - t0:.1f} s")
    print("nodes: " + ", ".join(f"{t} {n:,}" for t, n in data.num_nodes_dict.items()))
    print(f"edges: {sum(data.num_edges_dict.values()):,} in {len(data.edge_types)} relations; "
          f"fanouts {FANOUTS} per relation, batch {BATCH}, {len(batches)} batches, {args.rounds} rounds")
    runs = contenders(data, pyg, batches)
    for fn in runs.values():  # warm-up: Numba compilation, page faults
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, fn in runs.items():
            times[name].append(timed(fn))
    seeds = BATCH * len(batches)
    print(f"{'contender':<42}{'best seeds/s':>14}{'median':>10}{'s/batch':>10}")
    for name, ts in times.items():
        print(f"{name:<42}{seeds / min(ts):>14,.0f}{seeds / statistics.median(ts):>10,.0f}"
              f"{min(ts) / len(batches):>10.4f}")
    for kind, ours in (("sample", "sample: graphpipe 2 threads"), ("sample", "sample: graphpipe 1 thread"),
                       ("loader", "loader: graphpipe HeteroNeighborLoader"), ("loader", "loader: graphpipe +to_pyg()")):
        peer = "sample: PyG (torch-sparse)" if kind == "sample" else "loader: PyG NeighborLoader"
        best = min(times[peer]) / min(times[ours])
        med = statistics.median(times[peer]) / statistics.median(times[ours])
        print(f"ratio {ours.split(': ')[1]} / PyG ({kind}): best {best:.2f}x, median {med:.2f}x")


if __name__ == "__main__":
    main()
