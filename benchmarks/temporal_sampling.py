"""Temporal neighbour sampling (issue 17): graphpipe's temporal sampler against PyG's
temporal ``NeighborLoader`` on the same graph, seeds and seed times, in one run.

PyG samples by time only through pyg-lib (temporal sampling implies ``disjoint=True``,
which torch-sparse refuses; edge-level time needs a recent pyg-lib). Without pyg-lib its
error is printed and the comparison falls back to graphpipe's own *non-temporal* disjoint
sampler (``DisjointSampler(LocalSampler)``, one tree per seed, the same tree layout and
RNG) on the same seeds, plus PyG's non-temporal, non-disjoint torch-sparse sampler for
scale; neither does the temporal filtering, which the table says.

Graph: graphpipe's community SBM (products-like, undirected), CSC by destination; edge
times uniform in ``[0, 1000)``, node times too; seeds: the first ``--batches`` batches of
1024 of the shuffled train split, seed times uniform in ``[0, 1000)`` (about half of every
neighbourhood is in a seed's past). Fanouts [15, 10]. Per contender: seeds/s over the
batches (sampling only, one thread, median of ``--rounds`` interleaved rounds), nodes and
edges per batch; for graphpipe's temporal runs the number of sampled edges newer than their
seed (must be 0). "every edge valid" gives every seed the time ``HORIZON`` (no edge is in
its future): the same work as the non-temporal disjoint sampler, so that ratio is the cost
of the temporal machinery itself. The one-time preparation (rows sorted by time) is timed apart.

Then (``--loader``, default) whole loaders from a store with 64-d float32 features:
``NeighborLoader(time_attr="edge_time", input_time=...)`` against
``NeighborLoader(disjoint=True)`` on the same seeds (sample + rows + batch, seeds/s).

    .venv/bin/python benchmarks/temporal_sampling.py [--nodes 100000] [--batches 20] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphpipe.loaders import LocalSampler
from graphpipe.loaders.disjoint import DisjointSampler
from graphpipe.loaders.temporal import TemporalSampler
from graphpipe.ops.sampling.temporal import temporal_graph
from graphpipe.synthetic.community import community_graph

FANOUTS = [15, 10]
BATCH = 1024
HORIZON = 1000


def csc(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(indptr, indices, order)``: CSC by destination and each slot's input edge."""
    order = np.argsort(g.dst, kind="stable")
    indptr = np.zeros(g.num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.num_nodes), out=indptr[1:])
    return indptr, g.src[order].astype(np.int64), order


def pyg_temporal(g, edge_time, node_time, batches, times) -> str | None:
    """PyG's temporal NeighborLoader on the same seeds; None if it ran, else its error."""
    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader

    data = Data(edge_index=torch.from_numpy(np.stack([g.src, g.dst]).astype(np.int64)),
                num_nodes=g.num_nodes, time=torch.from_numpy(node_time),
                edge_time=torch.from_numpy(edge_time))
    seeds = torch.from_numpy(np.concatenate(batches))
    errors = []
    for attr in ("time", "edge_time"):
        try:
            loader = NeighborLoader(data, FANOUTS, input_nodes=seeds, batch_size=BATCH, time_attr=attr,
                                    input_time=torch.from_numpy(np.concatenate(times)))
            t0 = time.perf_counter()
            for _ in loader:
                pass
            return f"ran ({attr}): {len(batches) * BATCH / (time.perf_counter() - t0):,.0f} seeds/s"
        except Exception as exc:  # noqa: BLE001 - the peer's refusal is the finding
            errors.append(f"time_attr={attr!r}: {type(exc).__name__}: {exc}")
    return "PyG refused: " + " | ".join(errors)


def pyg_plain(indptr, indices, batches) -> Callable[[], tuple[int, int]]:
    import torch
    import torch_sparse  # noqa: F401 - registers torch.ops.torch_sparse

    colptr, row = torch.from_numpy(indptr), torch.from_numpy(indices)

    def run() -> tuple[int, int]:
        nodes = edges = 0
        for b in batches:
            node, row_, _col, _e = torch.ops.torch_sparse.neighbor_sample(
                colptr, row, torch.from_numpy(b), FANOUTS, False, True)
            nodes += node.numel()
            edges += row_.numel()
        return nodes, edges

    return run


def ours(sampler, batches, times) -> Callable[[], tuple[int, int]]:
    def run() -> tuple[int, int]:
        nodes = edges = 0
        for i, b in enumerate(batches):
            if times is None:
                out = sampler.sample_from_nodes([b], [i])[0]
            else:
                out = sampler.sample_from_nodes([b], [i], seed_times=[times[i]])[0]
            nodes += out.n_id.shape[0]
            edges += sum(blk.num_edges for blk in out.blocks)
        return nodes, edges

    return run


def violations(sampler, edge_time, batches, times) -> int:
    bad = 0
    for i, b in enumerate(batches):
        out = sampler.sample_from_nodes([b], [i], seed_times=[times[i]])[0]
        for blk in out.blocks:
            tree = out.batch[blk.dst_of_edges()]
            bad += int((edge_time[blk.edge_ids] > times[i][tree]).sum())
    return bad


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--loader", action=argparse.BooleanOptionalAction, default=True,
                        help="also time whole loaders (store with 64-d features)")
    args = parser.parse_args()
    g = community_graph(args.nodes, 47, avg_degree=25, feature_dim=4, seed=0)
    rng = np.random.default_rng(0)
    indptr, indices, order = csc(g)
    input_time = rng.integers(0, HORIZON, g.src.shape[0])          # per input edge
    edge_time, node_time = input_time[order], rng.integers(0, HORIZON, g.num_nodes)
    train = rng.permutation(g.splits["train"])
    batches = [train[i:i + BATCH] for i in range(0, BATCH * args.batches, BATCH)]
    times = [rng.integers(0, HORIZON, len(b)) for b in batches]
    print(f"graph: {g.num_nodes:,} nodes, {indices.shape[0]:,} edges; fanouts {FANOUTS}, batch {BATCH}, "
          f"{len(batches)} batches, times uniform in [0, {HORIZON}); one sampling thread")
    print(pyg_temporal(g, input_time, node_time, batches, times))

    t0 = time.perf_counter()
    tg = temporal_graph(indptr, indices, edge_time=edge_time)
    prep = time.perf_counter() - t0
    t0 = time.perf_counter()
    temporal_graph(indptr, indices, edge_time=edge_time)
    print(f"graphpipe temporal_graph (rows sorted by time, once): {prep:.2f} s first call "
          f"(with JIT), {time.perf_counter() - t0:.2f} s again")
    tgn = temporal_graph(indptr, indices, node_time=node_time)
    contenders = {
        "graphpipe temporal, edge time, uniform": ours(TemporalSampler(tg, FANOUTS, num_threads=1), batches, times),
        "graphpipe temporal, edge time, last": ours(TemporalSampler(tg, FANOUTS, strategy="last", num_threads=1),
                                                    batches, times),
        "graphpipe temporal, node time, uniform": ours(TemporalSampler(tgn, FANOUTS, num_threads=1), batches, times),
        "graphpipe temporal, every edge valid": ours(TemporalSampler(tg, FANOUTS, num_threads=1), batches,
                                                     [np.full(len(b), HORIZON) for b in batches]),
        "graphpipe disjoint, NOT temporal": ours(DisjointSampler(LocalSampler(
            indptr, indices, FANOUTS, num_threads=1, backend="cpu")), batches, None),
    }
    try:
        contenders["PyG torch-sparse, NOT temporal, NOT disjoint"] = pyg_plain(indptr, indices, batches)
    except ImportError as exc:
        print(f"torch-sparse not available ({exc})")
    for run in contenders.values():   # compile / warm up
        run()
    seconds: dict[str, list[float]] = {name: [] for name in contenders}
    sizes = {}
    for _ in range(args.rounds):
        for name, run in contenders.items():
            t0 = time.perf_counter()
            sizes[name] = run()
            seconds[name].append(time.perf_counter() - t0)
    n = len(batches)
    print(f"{'contender':<46}{'seeds/s':>10}{'nodes/batch':>13}{'edges/batch':>13}")
    rate = {name: n * BATCH / statistics.median(s) for name, s in seconds.items()}
    for name in contenders:
        print(f"{name:<46}{rate[name]:>10,.0f}{sizes[name][0] / n:>13,.0f}{sizes[name][1] / n:>13,.0f}")
    base = rate["graphpipe disjoint, NOT temporal"]
    for name in contenders:
        print(f"ratio {name} / graphpipe disjoint NOT temporal: {rate[name] / base:.2f}x")
    bad = violations(TemporalSampler(tg, FANOUTS, num_threads=1), edge_time, batches, times)
    print(f"graphpipe temporal (edge time, uniform): sampled edges newer than their seed: {bad}")
    if args.loader:
        loaders(g, input_time, batches, times, args.rounds)


def loaders(g, input_time, batches, times, rounds: int) -> None:
    """Whole loaders (sample + feature rows + batch), 64-d float32 features, from a store."""
    import tempfile

    from graphpipe.ingest import ingest
    from graphpipe.loaders import NeighborLoader

    x = np.random.default_rng(1).standard_normal((g.num_nodes, 64), dtype=np.float32)
    seeds, when = np.concatenate(batches), np.concatenate(times)
    with tempfile.TemporaryDirectory() as tmp:
        np.savez(f"{tmp}/g.npz", edge_index=np.stack([g.src, g.dst]), x=x, edge_time=input_time)
        store = ingest(f"{tmp}/g.npz", f"{tmp}/store")
        common = {"input_nodes": seeds, "batch_size": BATCH, "seed": 0, "num_threads": 1}
        runs = {
            "graphpipe NeighborLoader time_attr='edge_time'": lambda: NeighborLoader(
                store, FANOUTS, time_attr="edge_time", input_time=when, **common),
            "graphpipe NeighborLoader disjoint=True, NOT temporal": lambda: NeighborLoader(
                store, FANOUTS, disjoint=True, **common),
        }
        rates: dict[str, list[float]] = {name: [] for name in runs}
        nodes = {}
        for name, make in runs.items():   # warm up (JIT, page cache)
            next(iter(make()))
        for _ in range(rounds):
            for name, make in runs.items():
                loader = make()
                t0 = time.perf_counter()
                total = sum(b.n_id.numel() for b in loader)
                rates[name].append(len(seeds) / (time.perf_counter() - t0))
                nodes[name] = total / len(loader)
        print(f"{'loader (64-d features, prefetch 2)':<56}{'seeds/s':>10}{'nodes/batch':>13}")
        for name in runs:
            print(f"{name:<56}{statistics.median(rates[name]):>10,.0f}{nodes[name]:>13,.0f}")
        a, b = (statistics.median(rates[n]) for n in runs)
        print(f"ratio temporal / disjoint NOT temporal (loaders): {a / b:.2f}x")


if __name__ == "__main__":
    main()
