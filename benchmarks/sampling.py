"""Neighbour-sampling throughput: graphpipe Fused-Map sampler vs PyG, DGL and GraphBolt.

Graph: R-MAT scale 21 (2,097,152 nodes), edge factor 16, a=0.57 b=0.19 c=0.19,
directed, self-loops removed, duplicates kept (the peers README's 33,552,999 edges);
CSC by destination built with a numpy argsort. Fanouts [15, 10, 5] seed hop first,
batch 1024, the same seed batches for every sampler. Metric: sampled edges per second
summed over all layers' blocks (each sampler's own count), seconds per batch.

    .venv/bin/python benchmarks/sampling.py [--batches 40] [--rounds 5] [--write]

DGL and GraphBolt run as a subprocess with ``.venv-dgl/bin/python
benchmarks/peers/dgl_sampling.py`` on the same graph saved as .npy; it stays alive and
the samplers take turns, one pass each per round, so all of them see the same load on
the shared machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from graphpipe.ops.sampling import sample_neighbors, sample_neighbors_batches

FANOUTS = [15, 10, 5]


def _rmat_fallback(scale: int, edge_factor: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    import numba

    @numba.njit(cache=False, nogil=True)
    def kernel(scale, num_edges, seed, src, dst):
        np.random.seed(seed)
        for e in range(num_edges):
            s = 0
            d = 0
            for _ in range(scale):
                u = np.random.random()
                s <<= 1
                d <<= 1
                if u < 0.57:
                    pass
                elif u < 0.76:
                    d |= 1
                elif u < 0.95:
                    s |= 1
                else:
                    s |= 1
                    d |= 1
            src[e] = s
            dst[e] = d

    n = (1 << scale) * edge_factor
    src = np.empty(n, np.int64)
    dst = np.empty(n, np.int64)
    kernel(scale, n, seed, src, dst)
    perm = np.random.default_rng(seed).permutation(1 << scale)
    return perm[src], perm[dst]


def build_graph(cache_dir: Path, scale: int = 21, edge_factor: int = 16, seed: int = 0) -> tuple[np.ndarray, np.ndarray, str]:
    """CSC (indptr int64, indices int32) of the benchmark graph, cached as .npy."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    p_ptr = cache_dir / f"rmat{scale}_ef{edge_factor}_indptr.npy"
    p_idx = cache_dir / f"rmat{scale}_ef{edge_factor}_indices.npy"
    p_src = cache_dir / f"rmat{scale}_ef{edge_factor}_generator.txt"
    if p_ptr.exists() and p_idx.exists() and p_src.exists():
        return np.load(p_ptr), np.load(p_idx, mmap_mode=None), p_src.read_text()
    try:
        from graphpipe.synthetic.rmat import rmat_edges

        src, dst = rmat_edges(scale, edge_factor, a=0.57, b=0.19, c=0.19, seed=seed)
        generator = "graphpipe.synthetic.rmat.rmat_edges"
    except ImportError:
        src, dst = _rmat_fallback(scale, edge_factor, seed)
        generator = "benchmarks/sampling.py _rmat_fallback"
    keep = src != dst
    src, dst = src[keep], dst[keep]
    num_nodes = 1 << scale
    order = np.argsort(dst, kind="stable")
    indices = src[order].astype(np.int32)
    del src, order
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=num_nodes), out=indptr[1:])
    np.save(p_ptr, indptr)
    np.save(p_idx, indices)
    p_src.write_text(generator)
    return indptr, indices, generator


def run_graphpipe(indptr, indices, batches, threads: int, window: int = 8) -> dict:
    # warm-up (compilation is cached on disk; this also faults the graph into memory)
    sample_neighbors(indptr, indices, batches[0], FANOUTS, seed=0)
    edges = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    if threads == 1:
        for i, b in enumerate(batches):
            out = sample_neighbors(indptr, indices, b, FANOUTS, seed=i)
            edges += sum(out.num_sampled_edges)
    else:
        for w in range(0, len(batches), window):
            outs = sample_neighbors_batches(indptr, indices, batches[w:w + window], FANOUTS,
                                            seeds=list(range(w, w + len(batches[w:w + window]))),
                                            num_threads=threads)
            edges += sum(sum(o.num_sampled_edges) for o in outs)
    dt = time.perf_counter() - t0
    return {"edges": edges, "seconds": dt, "cpu_seconds": time.process_time() - c0, "batches": len(batches)}


def run_pyg(indptr, indices, batches) -> dict:
    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_sparse import SparseTensor

    torch.set_num_threads(2)
    n = indptr.shape[0] - 1
    adj_t = SparseTensor(rowptr=torch.from_numpy(indptr), col=torch.from_numpy(indices.astype(np.int64)),
                         sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    data = Data(adj_t=adj_t, num_nodes=n)
    seeds = torch.from_numpy(np.concatenate(batches))
    loader = NeighborLoader(data, num_neighbors=FANOUTS, batch_size=len(batches[0]), input_nodes=seeds,
                            shuffle=False, frontier="all")
    it = iter(loader)
    next(it)  # warm-up batch (not counted)
    edges = 0
    count = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for batch in it:
        edges += int(batch.adj_t.nnz()) if hasattr(batch, "adj_t") and batch.adj_t is not None else int(batch.edge_index.shape[1])
        count += 1
    dt = time.perf_counter() - t0
    return {"edges": edges, "seconds": dt, "cpu_seconds": time.process_time() - c0, "batches": count}


class PeerProcess:
    """The DGL/GraphBolt side, alive across rounds: one timed pass per request."""

    def __init__(self, graph_dir: Path, seeds_path: Path, scale: int, edge_factor: int):
        py = ROOT / ".venv-dgl" / "bin" / "python"
        if not py.exists():
            raise FileNotFoundError(f"{py} not found (see ../shared/peers/README.md)")
        self.proc = subprocess.Popen(
            [str(py), str(ROOT / "benchmarks" / "peers" / "dgl_sampling.py"), str(graph_dir), str(seeds_path),
             "--scale", str(scale), "--edge-factor", str(edge_factor)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, "DGLBACKEND": "pytorch"})
        self.names = json.loads(self._readline())["ready"]

    def _readline(self) -> str:
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"peer process ended (exit code {self.proc.wait()})")
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=21)
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=40, help="batches timed for graphpipe and DGL/GraphBolt")
    ap.add_argument("--pyg-batches", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds; each sampler makes one timed pass per round (interleaved)")
    ap.add_argument("--pyg-rounds", type=int, default=2, help="rounds in which PyG (slow) also runs")
    ap.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--write", action="store_true", help="write benchmarks/results/sampling.md")
    args = ap.parse_args()

    t0 = time.perf_counter()
    indptr, indices, generator = build_graph(args.cache_dir, args.scale, args.edge_factor)
    n = indptr.shape[0] - 1
    print(f"graph: {n:,} nodes, {indices.shape[0]:,} edges ({generator}), ready in {time.perf_counter() - t0:.1f}s", flush=True)
    rng = np.random.default_rng(12345)
    perm = rng.permutation(n)
    batches = [perm[i * args.batch_size:(i + 1) * args.batch_size] for i in range(args.batches + 1)]
    seeds_path = args.cache_dir / "seed_batches.npy"
    np.save(seeds_path, np.stack(batches))

    load_before = os.getloadavg()
    runs: dict[str, list[dict]] = {"graphpipe (1 thread)": [], "graphpipe (2 threads)": []}
    errors: dict[str, str] = {}
    peer = None
    pyg = "PyG NeighborLoader + torch-sparse"
    if not args.skip_peers:
        try:
            peer = PeerProcess(args.cache_dir, seeds_path, args.scale, args.edge_factor)
            runs.update({name: [] for name in peer.names})
        except Exception as exc:  # noqa: BLE001 - a failing peer must not hide graphpipe's figures
            errors["DGL / GraphBolt"] = repr(exc)
        runs[pyg] = []
    # rounds: every sampler makes one pass per round, so all see the same (shared) machine
    for rnd in range(args.rounds):
        runs["graphpipe (1 thread)"].append(run_graphpipe(indptr, indices, batches[1:], 1))
        runs["graphpipe (2 threads)"].append(run_graphpipe(indptr, indices, batches[1:], 2))
        if peer is not None:
            for name in peer.names:
                runs[name].append(peer.run(name))
        if pyg in runs and rnd < args.pyg_rounds and pyg not in errors:
            try:
                runs[pyg].append(run_pyg(indptr, indices, batches[: args.pyg_batches + 1]))
            except Exception as exc:  # noqa: BLE001
                errors[pyg] = repr(exc)
        print(f"round {rnd + 1}/{args.rounds}: "
              + ", ".join(f"{k.split()[0]} {v[-1]['edges'] / v[-1]['seconds'] / 1e6:.1f}M/s"
                          for k, v in runs.items() if v), flush=True)
    if peer is not None:
        peer.close()
    results: dict[str, dict] = {}
    for name, passes in runs.items():
        if not passes:
            results[name] = {"error": errors.get(name, errors.get("DGL / GraphBolt", "no run"))}
            continue
        best = min(passes, key=lambda r: r["seconds"])
        median_seconds = float(np.median([r["seconds"] for r in passes]))
        results[name] = {**best, "median_seconds": median_seconds,
                         "all_seconds": [round(r["seconds"], 4) for r in passes]}
    for name, err in errors.items():
        results.setdefault(name, {"error": err})

    def rate(r: dict) -> float:
        return r["edges"] / r["seconds"] if "edges" in r else float("nan")

    peers = [k for k in results if not k.startswith("graphpipe") and "error" not in results[k]]
    def short(name: str) -> str:
        return name.split()[0]

    def cpu_rate(r: dict) -> float:
        return r["edges"] / r["cpu_seconds"] if "cpu_seconds" in r else float("nan")

    def median_rate(r: dict) -> float:
        return r["edges"] / r["median_seconds"] if "median_seconds" in r else float("nan")

    header = ("| sampler | sampled edges/s (best pass) | median pass | s/batch | edges/batch | edges per CPU-second | "
              + " | ".join(f"x vs {short(p)}" for p in peers) + " | x vs DGL (medians) |")
    lines = [header, "|" + " --- |" * (7 + len(peers))]
    dgl_name = next((p for p in peers if p.startswith("DGL")), None)
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | error: {r['error'].splitlines()[-1] if r['error'] else '?'} | | | | |"
                         + " |" * (len(peers) + 1))
            continue
        ratios = " | ".join(f"{rate(r) / rate(results[p]):.2f}" for p in peers)
        vs_dgl_median = median_rate(r) / median_rate(results[dgl_name]) if dgl_name else float("nan")
        lines.append(f"| {name} | {rate(r) / 1e6:.2f} M | {median_rate(r) / 1e6:.2f} M | {r['seconds'] / r['batches']:.4f}"
                     f" | {r['edges'] / r['batches']:,.0f} | {cpu_rate(r) / 1e6:.2f} M | {ratios} | {vs_dgl_median:.2f} |")
    table = "\n".join(lines)
    load_after = os.getloadavg()
    print()
    print(table)
    if args.write:
        out = ROOT / "benchmarks" / "results" / "sampling.md"
        cmd = "  ".join(["." + "/.venv/bin/python benchmarks/sampling.py"] + sys.argv[1:])
        out.write_text(
            "# Neighbour sampling throughput\n\n"
            f"Command: `{cmd}`\n\n"
            f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average"
            f" {load_before[0]:.1f} before, {load_after[0]:.1f} after), Python {platform.python_version()}."
            f" {args.rounds} interleaved rounds (PyG in the first {args.pyg_rounds}); each sampler makes one"
            " timed pass over the batches per round; ratios use each sampler's fastest pass (least disturbed"
            " by the other jobs), the last column the median passes.\n"
            f"Graph: R-MAT scale {args.scale} ({n:,} nodes, {indices.shape[0]:,} edges, directed, self-loops removed,"
            f" generated by {generator}); fanouts {FANOUTS} seed hop first; batch {args.batch_size}; the same seed"
            " batches for every sampler. Sampled edges are counted over all layers' blocks; graphpipe and DGL"
            " resample every destination in each block (DGL block convention), PyG samples only each hop's"
            " frontier, so the edge counts per batch differ and edges/s is the comparable figure. Ratios are of"
            " wall-clock edges/s; 'edges per CPU-second' divides by the process CPU time of the same run (all"
            " threads), a figure less sensitive to other jobs on the machine.\n\n"
            + table + "\n\nRaw:\n\n```\n" + json.dumps(results, indent=1) + "\n```\n")
        print(f"wrote {out}")


if __name__ == "__main__":
    main()
