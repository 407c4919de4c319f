"""Heterogeneous neighbour sampling: graphpipe's typed Fused-Map sampler and
NeighborLoader (typed) vs PyG's heterogeneous NeighborLoader and DGL / GraphBolt's
heterogeneous samplers, on the same typed graph and seeds, in one run.

Graph: ogbn-mag-like (``graphpipe.synthetic.mag.mag_dataset`` when present, else the
generator below with the same four relations and Pareto degree skew), plus the reverse of
each relation between two types (``rev_writes``, ``rev_affiliated_with``, ``rev_has_topic``,
as ``T.ToUndirected()`` adds them; ``cites`` stays one-way), so every hop expands papers
and authors. Or a typed store: ``--store PATH`` (e.g. ``graphpipe generate mag`` +
``graphpipe ingest``), read memory-mapped, the reverse of every relation added
(``with_reverse_relations()``, PyG's ``ToUndirected(merge=False)``: 8 relations).
Seeds: papers, batch 1024, fanouts [15, 10] for every relation (PyG's hetero examples).
The same seed batches for every contender; rounds interleave the contenders so all see
the same load. Metric: seeds per second (best and median round), CPU seconds per batch (every
thread of the contender's process), ratios ours / peers (wall best, wall median, CPU time).

- ``sample``: the sampler alone. Ours: ``sample_neighbors_batches`` (windows of 8
  batches, 1 and 2 threads). PyG: ``NeighborSampler.sample_from_nodes`` (torch-sparse's
  ``hetero_neighbor_sample``: one thread, no pyg-lib wheel for torch 2.13).
- ``loader``: sampling + feature rows of every type + the batch object. Ours:
  ``NeighborLoader`` on the typed graph (``prefetch=0``, so the work is in the timed thread;
  ``+to_pyg`` also builds the ``HeteroData``). PyG: ``NeighborLoader`` (``num_workers=0``).
- DGL 2.1 / GraphBolt (``--skip-dgl`` leaves them out): a subprocess with
  ``.venv-dgl/bin/python benchmarks/peers/dgl_hetero_sampling.py`` (``make peers``; or
  ``$GRAPHPIPE_DGL_PYTHON``) on the same relations (CSC, local IDs), seeds and features saved
  as .npy; it stays alive and takes its turn in every round. ``sample``: DGL's
  ``NeighborSampler.sample_blocks`` on a ``dgl.heterograph``, GraphBolt's typed
  ``FusedCSCSamplingGraph.sample_neighbors`` (one fanout per relation) +
  ``unique_and_compact_csc_formats`` per hop; ``loader``: DGL's ``DataLoader`` with the
  feature rows. DGL expands every node of the hop before (seeds included) where PyG
  expands the new ones, so ``graphpipe frontier=all`` (DGL's semantics) is measured too,
  and the sampled edges per batch of every contender are printed.

    .venv/bin/python benchmarks/hetero_sampling.py [--scale 0.25] [--batches 20] [--rounds 3] [--skip-dgl]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphpipe.loaders import GraphData, NeighborLoader
from graphpipe.ops.sampling import sample_neighbors_batches

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


def pyg_hetero(data: GraphData):
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


def timed(fn) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of one pass (CPU: every thread of this process); a peer's
    pass reports its own (a tuple)."""
    t0, c0 = time.perf_counter(), time.process_time()
    own = fn()
    return own if isinstance(own, tuple) else (time.perf_counter() - t0, time.process_time() - c0)


def contenders(data: GraphData, pyg, batches: list[np.ndarray], peer: DglPeer | None) -> dict:
    from torch_geometric.loader import NeighborLoader as PyGLoader
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    seeds = np.concatenate(batches)
    keys = list(range(len(batches)))
    pyg_sampler = NeighborSampler(pyg, FANOUTS)

    def ours_sample(threads: int, frontier: str = "new"):
        def run():
            for s in range(0, len(batches), 8):
                sample_neighbors_batches(data.graph, [{"paper": b} for b in batches[s:s + 8]],
                                         FANOUTS, seeds=keys[s:s + 8], num_threads=threads,
                                         frontier=frontier)
        return run

    def pyg_sample():
        for b in batches:
            pyg_sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(b), input_type="paper"))

    def ours_loader(to_pyg: bool):
        loader = NeighborLoader(data, FANOUTS, input_nodes=("paper", seeds), batch_size=BATCH,
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

    runs = {"sample: graphpipe 1 thread": ours_sample(1), "sample: graphpipe 2 threads": ours_sample(2),
            "sample: graphpipe 1 thread, frontier=all": ours_sample(1, "all"),
            "sample: PyG (torch-sparse)": pyg_sample}
    runs.update({f"sample: {n}": peer_run(peer, n) for n in (peer.names if peer else []) if "DataLoader" not in n})
    runs.update({"loader: graphpipe HeteroNeighborLoader": ours_loader(False),
                 "loader: graphpipe +to_pyg()": ours_loader(True), "loader: PyG NeighborLoader": pyg_load})
    runs.update({f"loader: {n}": peer_run(peer, n) for n in (peer.names if peer else []) if "DataLoader" in n})
    return runs


def peer_run(peer: DglPeer, name: str):
    """One timed pass in the peer process; returns the peer's own (wall, CPU) seconds (no
    pipe time)."""
    def run() -> tuple[float, float]:
        out = peer.run(name)
        peer.work[name] = (out["edges"] / out["batches"], out["nodes"] / out["batches"])
        return out["seconds"], out["cpu_seconds"]
    return run


def work_per_batch(data: GraphData, pyg, batches: list[np.ndarray]) -> dict[str, tuple[float, float]]:
    """Mean sampled edges and nodes (all types) per batch: ours (new / all) on every batch,
    PyG on the first 2 (its sampler is slow)."""
    from torch_geometric.sampler import NeighborSampler, NodeSamplerInput

    out = {}
    for frontier in ("new", "all"):
        res = sample_neighbors_batches(data.graph, [{"paper": b} for b in batches], FANOUTS,
                                       seeds=list(range(len(batches))), frontier=frontier)
        out[f"graphpipe frontier={frontier}"] = (
            float(np.mean([sum(len(r) for r in o.row.values()) for o in res])),
            float(np.mean([sum(len(n) for n in o.n_id.values()) for o in res])))
    sampler = NeighborSampler(pyg, FANOUTS)
    res = [sampler.sample_from_nodes(NodeSamplerInput(None, torch.from_numpy(b), input_type="paper"))
           for b in batches[:2]]
    out["PyG"] = (float(np.mean([sum(len(r) for r in o.row.values()) for o in res])),
                  float(np.mean([sum(len(n) for n in o.node.values()) for o in res])))
    return out


class DglPeer:
    """The DGL / GraphBolt side (benchmarks/peers/dgl_hetero_sampling.py in ``.venv-dgl``),
    alive across rounds: one timed pass per request."""

    def __init__(self, graph_dir: Path):
        py = Path(os.environ.get("GRAPHPIPE_DGL_PYTHON") or ROOT / ".venv-dgl" / "bin" / "python")
        if not py.exists():
            raise FileNotFoundError(f"{py} not found (make peers; see ../shared/peers/README.md)")
        self.proc = subprocess.Popen(
            [str(py), str(ROOT / "benchmarks" / "peers" / "dgl_hetero_sampling.py"), str(graph_dir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "DGLBACKEND": "pytorch"})
        self.names = json.loads(self._readline())["ready"]
        self.work: dict[str, tuple[float, float]] = {}

    def _readline(self) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"DGL peer process ended (exit code {self.proc.wait()})")
            if line.startswith("{"):
                return line

    def run(self, name: str) -> dict:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return json.loads(self._readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("quit\n")
            self.proc.stdin.flush()
            self.proc.wait(timeout=60)


def write_peer_graph(data: GraphData, batches: list[np.ndarray], out: Path) -> None:
    """The relations (CSC, local IDs), seed batches and features as .npy + meta.json."""
    featured = []
    for t in data.num_nodes_dict:
        x = data.typed_features(t)
        if x is not None:
            np.save(out / f"feat_{t}.npy", np.ascontiguousarray(x))
            featured.append(t)
    for i, et in enumerate(data.edge_types):
        indptr, indices = data.typed_csc(et)
        np.save(out / f"rel{i}_indptr.npy", np.asarray(indptr, dtype=np.int64))
        np.save(out / f"rel{i}_indices.npy", np.asarray(indices, dtype=np.int64))
    np.save(out / "seeds.npy", np.stack(batches).astype(np.int64))
    meta = {"num_nodes": {t: int(n) for t, n in data.num_nodes_dict.items()},
            "edge_types": [list(et) for et in data.edge_types], "fanouts": FANOUTS,
            "target": "paper", "batch": BATCH, "featured": featured}
    (out / "meta.json").write_text(json.dumps(meta))


def start_peer(data: GraphData, batches: list[np.ndarray], tmp: Path) -> DglPeer | None:
    try:
        write_peer_graph(data, batches, tmp)
        return DglPeer(tmp)
    except Exception as exc:  # noqa: BLE001 - a failing peer must not hide the other figures
        print(f"DGL / GraphBolt not measured: {type(exc).__name__}: {exc}")
        return None


def load_data(args: argparse.Namespace) -> GraphData:
    if args.store:  # with the reverse of every relation (PyG's ToUndirected(merge=False))
        return GraphData.open(args.store).with_reverse_relations()
    counts, edges, x, y, train = mag_like(args.scale)
    return GraphData.from_dicts(counts, with_reverse(edges), x={"paper": x}, y={"paper": y},
                                      splits={"paper": {"train": train}}, target_type="paper")


def measure(runs: dict, rounds: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """``(wall seconds, CPU seconds)`` of every contender's passes, interleaved rounds."""
    for fn in runs.values():  # warm-up: Numba compilation, page faults
        fn()
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpus: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):  # interleaved: every contender sees the same load
        for name, fn in runs.items():
            wall, cpu = timed(fn)
            times[name].append(wall)
            cpus[name].append(cpu)
    return times, cpus


def report(times: dict[str, list[float]], cpus: dict[str, list[float]], num_batches: int,
           work: dict[str, tuple[float, float]]) -> None:
    """Seeds/s (best, median round), wall and CPU seconds per batch (CPU: the median round,
    every thread of the contender's process; a loaded machine inflates wall time, and torch's
    spinning OpenMP threads inflate DGL's CPU time), and the ratios ours / peers."""
    seeds = BATCH * num_batches
    print(f"{'contender':<46}{'best seeds/s':>14}{'median':>10}{'s/batch':>10}{'CPU s/batch':>13}")
    for name, ts in times.items():
        print(f"{name:<46}{seeds / min(ts):>14,.0f}{seeds / statistics.median(ts):>10,.0f}"
              f"{min(ts) / num_batches:>10.4f}{statistics.median(cpus[name]) / num_batches:>13.4f}")
    print("sampled per batch (edges, nodes of all types): " + "; ".join(
        f"{name} {e:,.0f}, {n:,.0f}" for name, (e, n) in work.items()))
    ours = {"sample": ("sample: graphpipe 2 threads", "sample: graphpipe 1 thread",
                       "sample: graphpipe 1 thread, frontier=all"),
            "loader": ("loader: graphpipe HeteroNeighborLoader", "loader: graphpipe +to_pyg()")}
    for kind, mine in ours.items():
        peers = [n for n in times if n.startswith(kind) and "graphpipe" not in n]
        for name in mine:
            for peer in peers:
                best = min(times[peer]) / min(times[name])
                med = statistics.median(times[peer]) / statistics.median(times[name])
                cpu = statistics.median(cpus[peer]) / statistics.median(cpus[name])
                print(f"ratio {name.split(': ')[1]} / {peer.split(': ')[1]} ({kind}): "
                      f"best {best:.2f}x, median {med:.2f}x, CPU time {cpu:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.25, help="fraction of ogbn-mag's sizes")
    parser.add_argument("--store", default=None, help="a typed store instead of the generator")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-dgl", action="store_true", help="leave DGL / GraphBolt out")
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
    with tempfile.TemporaryDirectory(prefix="hetero_peer_") as tmp:
        peer = None if args.skip_dgl else start_peer(data, batches, Path(tmp))
        try:
            times, cpus = measure(contenders(data, pyg, batches, peer), args.rounds)
        finally:
            if peer is not None:
                peer.close()
    work = work_per_batch(data, pyg, batches)
    if peer is not None:
        work.update({n: w for n, w in peer.work.items() if "DataLoader" not in n})
    report(times, cpus, len(batches), work)


if __name__ == "__main__":
    main()
