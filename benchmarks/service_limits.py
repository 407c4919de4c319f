"""Cost and tightness of the service's request bound (graphpipe.service.limits).

Graph: R-MAT (``--scale``, edge factor 16), CSC by destination. Per batch of
``--batch`` random seeds and fanouts ``--fanouts`` (default 1024, [15, 10, 5]):
the time of :func:`sample_bytes_bound` against the time of ``sample_neighbors`` on the
same batch (the bound runs before every sampled batch on the server), and the bound
over the bytes sampling actually returned (how loose it is). Also the one-off
:class:`GraphShape` (largest in-degree) at server start.

    .venv/bin/python benchmarks/service_limits.py [--scale 21] [--batches 200] [--fanouts 15,10,5]

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from graphpipe.ops.sampling import sample_neighbors
from graphpipe.service.limits import GraphShape, effective_fanouts, sample_bytes_bound
from graphpipe.synthetic import rmat_graph


def csc_of(scale: int) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr int64 (N+1,), indices int32 (E,))`` of an R-MAT graph, by destination."""
    g = rmat_graph(scale, 16, feature_dim=1, seed=0)
    order = np.argsort(g.dst, kind="stable")
    indptr = np.zeros(g.num_nodes + 1, np.int64)
    np.cumsum(np.bincount(g.dst, minlength=g.num_nodes), out=indptr[1:])
    return indptr, g.src[order].astype(np.int32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=21)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--fanouts", default="15,10,5")
    parser.add_argument("--replace", action="store_true")
    args = parser.parse_args()
    fanouts = [int(f) for f in args.fanouts.split(",")]
    indptr, indices = csc_of(args.scale)
    t0 = time.perf_counter()
    shape = GraphShape(indptr)
    shape_s = time.perf_counter() - t0
    kernel = effective_fanouts(fanouts, args.replace, shape.max_degree)
    rng = np.random.default_rng(0)
    bound_s = sample_s = 0.0
    ratios = []
    sample_neighbors(indptr, indices, np.arange(4), kernel)  # compile / load the kernels
    for i in range(args.batches):
        seeds = rng.choice(shape.num_nodes, args.batch, replace=False).astype(np.int64)
        t0 = time.perf_counter()
        bound = sample_bytes_bound(shape, seeds, kernel, args.replace)
        t1 = time.perf_counter()
        out = sample_neighbors(indptr, indices, seeds, kernel, replace=args.replace, seed=i)
        t2 = time.perf_counter()
        bound_s, sample_s = bound_s + t1 - t0, sample_s + t2 - t1
        returned = out.n_id.nbytes + sum(b.indptr.nbytes + b.indices.nbytes + b.edge_ids.nbytes
                                         for b in out.blocks)
        ratios.append(bound / returned)
    print(json.dumps({"scale": args.scale, "nodes": shape.num_nodes, "edges": shape.num_edges,
                      "max_in_degree": shape.max_degree, "batch": args.batch, "fanouts": fanouts,
                      "replace": args.replace, "graph_shape_ms": 1e3 * shape_s,
                      "bound_us_per_batch": 1e6 * bound_s / args.batches,
                      "sample_us_per_batch": 1e6 * sample_s / args.batches,
                      "bound_over_sample_time": bound_s / sample_s,
                      "bound_over_returned_bytes": {"median": float(np.median(ratios)),
                                                    "max": float(np.max(ratios))}}))


if __name__ == "__main__":
    main()
