"""Aggregation and quantization benchmark (CPU).

Forward + backward (gradient w.r.t. x) of sum / mean / GCN aggregation on blocks
shaped like a [15, 10, 5]-fanout, batch-1024 sampled mini-batch, graphpipe's Numba path
against torch_scatter, torch.sparse.mm, PyG's ``utils.scatter`` and PyG's
``SparseTensor`` matmul (torch_sparse). Every method builds what it needs from the
block's CSC each iteration (graphpipe: the validated block and its transposed copy;
torch.sparse: the CSR tensor; torch_sparse: the SparseTensor and its transpose), as a
training loop with fresh blocks would. Then quantize/dequantize throughput.

    .venv/bin/python benchmarks/aggregate.py [--repeats 7] [--batch 1024] [--quick]

Not part of the test run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch

from graphpipe.ops.aggregate import CSCBlock, aggregate

GRAPH_NODES = 2_449_029  # ogbn-products


def sampled_block(num_dst: int, fanout: int, rng: np.random.Generator):
    """A block like one hop of uniform neighbour sampling on a products-sized graph:
    90% of rows get `fanout` neighbours, 10% fewer (low-degree nodes); neighbours
    are drawn from GRAPH_NODES ids and relabelled, destinations first, so the source
    count is realistic; local IDs are then shuffled (no locality assumed)."""
    deg = np.full(num_dst, fanout, dtype=np.int64)
    low = rng.random(num_dst) < 0.1
    deg[low] = rng.integers(0, fanout, low.sum())
    indptr = np.zeros(num_dst + 1, dtype=np.int64)
    np.cumsum(deg, out=indptr[1:])
    num_edges = int(indptr[-1])
    drawn = rng.integers(0, GRAPH_NODES, num_edges)
    uniq = np.unique(drawn)
    # drawn ids that are already destinations do not add a source
    new_nodes = int(uniq.shape[0] * (1.0 - min(1.0, num_dst / GRAPH_NODES)))
    num_src = num_dst + new_nodes
    indices = rng.integers(0, num_src, num_edges)
    return torch.from_numpy(indptr), torch.from_numpy(indices), num_src


def timed(fn: Callable[[], None], repeats: int) -> float:
    fn()  # warm-up (JIT, caches)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def timed_round_robin(fns: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds per function; the functions take turns in every round, so load
    from other processes on the machine drifts over all of them alike."""
    for fn in fns.values():
        fn()  # warm-up (JIT, caches)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: statistics.median(v) for name, v in samples.items()}


def methods(indptr: torch.Tensor, indices: torch.Tensor, num_src: int, x: torch.Tensor,
            g: torch.Tensor, kind: str) -> dict[str, Callable[[], None]]:
    import torch_scatter
    import torch_sparse
    from torch_geometric.utils import scatter as pyg_scatter

    num_dst = indptr.shape[0] - 1
    reduce = "mean" if kind == "mean" else "sum"
    norm = "gcn" if kind == "gcn" else None

    def edge_setup():
        deg = indptr[1:] - indptr[:-1]
        dst = torch.repeat_interleave(torch.arange(num_dst), deg, output_size=indices.shape[0])
        w = None
        if kind == "gcn":
            d_dst = deg.clamp(min=1).float().rsqrt()
            d_src = torch.bincount(indices, minlength=num_src).clamp(min=1).float().rsqrt()
            w = d_dst[dst] * d_src[indices]
        return dst, w

    def ours():
        xr = x.detach().requires_grad_(True)
        block = CSCBlock(indptr, indices, num_src)
        out = aggregate(indptr, indices, xr, num_dst=num_dst, reduce=reduce, norm=norm,
                        backend="cpu", block=block)
        out.backward(g)

    def scatter_ts():
        xr = x.detach().requires_grad_(True)
        dst, w = edge_setup()
        msg = xr[indices] if w is None else xr[indices] * w[:, None]
        if reduce == "mean":
            out = torch_scatter.scatter_mean(msg, dst, dim=0, dim_size=num_dst)
        else:
            out = torch_scatter.scatter_add(msg, dst, dim=0, dim_size=num_dst)
        out.backward(g)

    def scatter_pyg():
        xr = x.detach().requires_grad_(True)
        dst, w = edge_setup()
        msg = xr[indices] if w is None else xr[indices] * w[:, None]
        out = pyg_scatter(msg, dst, dim=0, dim_size=num_dst, reduce=reduce)
        out.backward(g)

    def sparse_mm():
        xr = x.detach().requires_grad_(True)
        dst, w = edge_setup()
        values = torch.ones(indices.shape[0]) if w is None else w
        if reduce == "mean":
            values = values / (indptr[1:] - indptr[:-1]).clamp(min=1).float()[dst]
        a = torch.sparse_csr_tensor(indptr, indices, values, (num_dst, num_src))
        out = torch.sparse.mm(a, xr)
        out.backward(g)

    def sparse_tensor_pyg():
        xr = x.detach().requires_grad_(True)
        _, w = edge_setup()
        adj_t = torch_sparse.SparseTensor(rowptr=indptr, col=indices, value=w,
                                          sparse_sizes=(num_dst, num_src), is_sorted=True)
        out = torch_sparse.matmul(adj_t, xr, reduce=reduce)
        out.backward(g)

    return {"graphpipe.cpu": ours, "torch_scatter": scatter_ts, "pyg.utils.scatter": scatter_pyg,
            "torch.sparse.mm(csr)": sparse_mm, "pyg SparseTensor matmul": sparse_tensor_pyg}


def bench_aggregate(args) -> None:
    rng = np.random.default_rng(0)
    shapes = []
    num_dst = args.batch
    for fanout in (15, 10, 5):
        indptr, indices, num_src = sampled_block(num_dst, fanout, rng)
        shapes.append((fanout, indptr, indices, num_src))
        num_dst = num_src
    print(f"torch threads={torch.get_num_threads()}  repeats={args.repeats} "
          "(median, methods interleaved round-robin)")
    header = ("| hop (fanout) | dst | src | edges | F | op | graphpipe.cpu | torch_scatter | "
              "pyg.utils.scatter | torch.sparse.mm(csr) | pyg SparseTensor matmul | "
              "best other / ours |")
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for hop, (fanout, indptr, indices, num_src) in enumerate(shapes, 1):
        if args.hops and hop not in args.hops:
            continue
        # hidden 256 on the small hops; the last (largest) hop sees input features (100),
        # as the first layer of a products model would; F=256 there only without --quick.
        feats = (256, 100) if hop < 3 or not args.quick else (100,)
        for feat in feats:
            if hop == 3 and feat == 256 and args.skip_big:
                continue
            gen = torch.Generator().manual_seed(hop)
            x = torch.randn(num_src, feat, generator=gen)
            g = torch.randn(indptr.shape[0] - 1, feat, generator=gen)
            for kind in ("sum", "mean", "gcn"):
                times = timed_round_robin(methods(indptr, indices, num_src, x, g, kind),
                                          args.repeats)
                ours = times.pop("graphpipe.cpu")
                best = min(times.values())
                row = [f"{hop} ({fanout})", str(indptr.shape[0] - 1), str(num_src),
                       str(indices.shape[0]), str(feat), kind, f"{ours * 1e3:.1f} ms"]
                row += [f"{t * 1e3:.1f} ms" for t in times.values()]
                row.append(f"{best / ours:.2f}x")
                print("| " + " | ".join(row) + " |", flush=True)


def bench_quantize(args) -> None:
    from graphpipe.ops.features.quantize import dequantize, quantize
    rows, feat = (200_000, 256) if not args.quick else (50_000, 256)
    x = torch.randn(rows, feat)
    gbytes = x.numel() * 4 / 1e9
    print(f"\nquantize / dequantize, x = ({rows}, {feat}) float32 = {gbytes * 1e3:.0f} MB; "
          "GB/s of float32 input (quantize) or output (dequantize)")
    print("| bits | quantize ms | quantize GB/s | dequantize ms | dequantize GB/s | packed MB |")
    print("|---|---|---|---|---|---|")
    for bits in (8, 4, 2, 1):
        gen = torch.Generator().manual_seed(0)
        tq = timed(lambda b=bits, g=gen: quantize(x, b, generator=g), args.repeats)
        q = quantize(x, bits, generator=gen)
        td = timed(lambda q=q: dequantize(q), args.repeats)
        packed = q.packed.numel() / 1e6
        print(f"| {bits} | {tq * 1e3:.1f} | {gbytes / tq:.2f} | {td * 1e3:.1f} | "
              f"{gbytes / td:.2f} | {packed:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--quick", action="store_true", help="skip F=256 on the last hop")
    parser.add_argument("--skip-big", action="store_true", help="skip F=256 on the last hop")
    parser.add_argument("--only", choices=("aggregate", "quantize"))
    parser.add_argument("--hops", type=int, nargs="*", help="only these hops (1, 2, 3)")
    args = parser.parse_args()
    if args.only != "quantize":
        bench_aggregate(args)
    if args.only != "aggregate":
        bench_quantize(args)


if __name__ == "__main__":
    main()
