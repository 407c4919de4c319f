"""Long-sequence attention benchmark (CPU): one forward + backward of a single attention
layer (hidden 64, 8 heads of 8, q/k/v and output projections) over one sequence holding
a whole graph, for growing sequence lengths S.

Pattern (TorchGT's topology-induced pattern): the graph's edges (a community graph,
average degree ~10, symmetric), a self-loop per node and a global token at position 0
attending to and attended by every node; node ``v`` sits at position ``v + 1``.

Contenders, each in a fresh process (peak RSS per process):

- ``graphpipe``: :func:`graphpipe.ops.attention.sparse_attention` (Numba CPU path);
- ``gather_scatter``: the same attention with plain torch ``index_select`` / ``index_add``
  in TorchGT's public form (clamp 5, exp, scatter-add, ``+1e-6``) — what TorchGT's code does;
- ``dense``: ``scaled_dot_product_attention`` with the boolean S×S mask (GP-Raw).

Timing: ``--rounds`` rounds, each running every contender once in turn (interleaved, so
a change in machine load hits all of them alike), each process doing one warm-up step
and ``--repeats`` timed steps; the table gives the best step over all rounds, the
median, and the 1-minute load average when the size started. A contender is not run at
a length where its peak RSS, extrapolated from its previous length (dense ∝ S², sparse
ones ∝ nnz; conservative: the whole process's peak is scaled), would exceed
``--budget-gb`` (the machine is shared; an out-of-memory kill would hit other jobs); the
table says so. Then, at ``--reorder-size`` nodes: graphpipe's step with and without
METIS cluster reordering (``--parts``), and the cluster-sparse kernel (threshold
5·β_G, d_b 16) on each reordered pattern, interleaved the same way.

Default invocation (the whole table; about 10-15 minutes on an idle 2-core machine,
first run longer: it generates and caches the graphs and METIS partitions)::

    .venv/bin/python benchmarks/transformer.py

Options: ``--sizes 4096,16384,65536,262144,1048576`` (nodes), ``--repeats 3``, ``--warmup 0``
(untimed steps per process on top of the first),
``--rounds 2``, ``--budget-gb 10``, ``--reorder-size 262144`` (0 skips),
``--parts 8,64,512``, ``--methods graphpipe,gather_scatter,dense``,
``--omp-wait-policy passive`` (sets ``OMP_WAIT_POLICY`` in every contender's process;
by default the environment is left alone: torch's and Numba's OpenMP pools then spin
after their parallel regions, which costs every contender on a busy machine).

Not part of the test run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CACHE = Path(os.environ.get("GRAPHPIPE_BENCH_CACHE",
                           os.path.join(tempfile.gettempdir(), "graphpipe-bench-transformer")))
HIDDEN, HEADS = 64, 8


# --------------------------------------------------------------------------- inputs


def graph_csc(num_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric community graph (avg degree 10) as CSC, cached on disk."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"community_{num_nodes}.npz"
    if path.exists():
        data = np.load(path)
        return data["indptr"], data["indices"]
    from graphpipe.synthetic import community_graph

    g = community_graph(num_nodes, max(2, num_nodes // 16384), avg_degree=10, feature_dim=0,
                        seed=0)
    order = np.lexsort((g.src, g.dst))
    indptr = np.zeros(num_nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(g.dst, minlength=num_nodes), out=indptr[1:])
    indices = g.src[order].astype(np.int64)
    np.savez(path, indptr=indptr, indices=indices)
    return indptr, indices


def sequence_pattern(indptr: np.ndarray, indices: np.ndarray, inverse: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """CSR over the S+1 positions: token 0 attends to all; node at position p attends to
    the token, itself and its neighbours. ``inverse[v]`` = position of node v - 1
    (identity when None)."""
    n = indptr.shape[0] - 1
    pos = (np.arange(n, dtype=np.int64) if inverse is None else inverse.astype(np.int64)) + 1
    deg = np.diff(indptr)
    node_at = np.empty(n, dtype=np.int64)
    node_at[pos - 1] = np.arange(n)
    row_deg = np.concatenate([[n + 1], deg[node_at] + 2])
    ptr = np.zeros(n + 2, dtype=np.int64)
    np.cumsum(row_deg, out=ptr[1:])
    idx = np.empty(ptr[-1], dtype=np.int64)
    idx[:n + 1] = np.arange(n + 1)
    _fill_rows(ptr, idx, indptr, indices, node_at, pos)
    return ptr, idx


def _fill_rows(ptr, idx, indptr, indices, node_at, pos):
    import numba

    @numba.njit(cache=False)
    def fill(ptr, idx, indptr, indices, node_at, pos):
        for p in range(1, ptr.shape[0] - 1):
            v = node_at[p - 1]
            out = ptr[p]
            idx[out] = 0
            idx[out + 1] = p
            out += 2
            for e in range(indptr[v], indptr[v + 1]):
                idx[out] = pos[indices[e]]
                out += 1

    fill(ptr, idx, indptr, indices, node_at, pos)


def pattern_file(num_nodes: int, parts: int = 0) -> Path:
    """Write (once) the sequence pattern, METIS-reordered when ``parts`` > 0."""
    path = CACHE / f"pattern_{num_nodes}_k{parts}.npz"
    if path.exists():
        return path
    indptr, indices = graph_csc(num_nodes)
    inverse = None
    extra = {}
    if parts:
        from graphpipe.ops.partition import cluster_offsets, cluster_permutation, metis_partition

        t0 = time.perf_counter()
        res = metis_partition(indptr, indices, parts, seed=0)
        _, inverse = cluster_permutation(res.parts, parts)
        extra = {"offsets": np.concatenate([[0], cluster_offsets(res.parts, parts) + 1]),
                     "metis_seconds": time.perf_counter() - t0, "edge_cut": res.edge_cut}
    ptr, idx = sequence_pattern(indptr, indices, inverse)
    np.savez(path, indptr=ptr, indices=idx, **extra)
    return path


# --------------------------------------------------------------------------- the measured job


def prepare(method: str, path: str, threshold_mult: float = 5.0):
    """Build the layer, inputs and attention call; one warm-up step."""
    import torch

    torch.manual_seed(0)
    data = np.load(path)
    indptr = torch.from_numpy(data["indptr"])
    indices = torch.from_numpy(data["indices"])
    s = indptr.shape[0] - 1
    lin_qkv = torch.nn.Linear(HIDDEN, 3 * HIDDEN)
    lin_out = torch.nn.Linear(HIDDEN, HIDDEN)
    x = torch.randn(s, HIDDEN)
    state = {"s": s, "nnz": int(indices.shape[0])}
    if method == "graphpipe":
        from graphpipe.ops.attention import sparse_attention

        def attn(q, k, v):
            return sparse_attention(q, k, v, indptr, indices, backend="cpu")
    elif method == "gather_scatter":
        from graphpipe.ops.attention import gather_scatter_attention

        def attn(q, k, v):
            return gather_scatter_attention(q, k, v, indptr, indices, compat="torchgt")
    elif method == "dense":
        rows = torch.repeat_interleave(torch.arange(s), indptr[1:] - indptr[:-1])
        mask = torch.zeros(s, s, dtype=torch.bool)
        mask[rows, indices] = True

        def attn(q, k, v):
            out = torch.nn.functional.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), attn_mask=mask)
            return out.transpose(0, 1)
    elif method == "cluster_sparse":
        from graphpipe.ops.attention.cluster_sparse import (
            cluster_sparse_attention,
            cluster_sparse_pattern,
        )

        t0 = time.perf_counter()
        beta_g = indices.shape[0] / s / s
        csp = cluster_sparse_pattern(data["indptr"], data["indices"], data["offsets"],
                                     threshold=threshold_mult * beta_g, block_size=16)
        state.update(transform_seconds=time.perf_counter() - t0, blocks=csp.num_blocks,
                     nnz_mask=csp.nnz, transferred=int(csp.transferred.sum()))

        def attn(q, k, v):
            return cluster_sparse_attention(q, k, v, csp, backend="cpu")
    else:
        raise ValueError(f"unknown method {method!r}")

    def step():
        for p in (lin_qkv.weight, lin_qkv.bias, lin_out.weight, lin_out.bias):
            p.grad = None
        q, k, v = lin_qkv(x).view(s, 3, HEADS, HIDDEN // HEADS).unbind(1)
        y = lin_out(attn(q, k, v).reshape(s, HIDDEN))
        y.square().mean().backward()

    step()
    state["step"] = step
    return state


def run_steps(state, repeats: int, warmup: int = 0) -> dict:
    for _ in range(warmup):  # untimed, on top of prepare()'s one warm-up step
        state["step"]()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        state["step"]()
        times.append(time.perf_counter() - t0)
    return {k: v for k, v in state.items() if k != "step"} | {"times": times}


def measure_job(method: str, path: Path, repeats: int, env: dict | None = None,
                warmup: int = 0) -> dict:
    sys.path.insert(0, str(Path(__file__).parent))
    from _measure import measure

    here = str(Path(__file__).parent)
    setup = (f"import sys; sys.path.insert(0, {here!r}); from transformer import prepare, "
             f"run_steps; state = prepare({method!r}, {str(path)!r})")
    work = f"result = run_steps(state, {repeats}, {warmup})"
    return measure(setup, work, timeout=3600, env=env)


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def interleaved(jobs: list[tuple[str, str, Path]], rounds: int, repeats: int, env: dict | None,
                warmup: int = 0) -> dict[str, dict]:
    """Run ``(key, method, path)`` jobs ``rounds`` times in turn; per key: all step times,
    the largest peak RSS and the last result (``error`` if a run failed)."""
    out: dict[str, dict] = {}
    for _ in range(rounds):
        for key, method, path in jobs:
            slot = out.setdefault(key, {"times": [], "peak_rss": 0.0})
            if "error" in slot:
                continue
            try:
                r = measure_job(method, path, repeats, env, warmup)
            except RuntimeError as exc:
                slot["error"] = str(exc).strip().splitlines()[-1][:120]
                continue
            slot["times"] += r["result"]["times"]
            slot["peak_rss"] = max(slot["peak_rss"], r["peak_rss"])
            slot["result"] = r["result"]
    return out


def _best_median(times: list[float]) -> tuple[float, float]:
    ordered = sorted(times)
    return ordered[0], ordered[len(ordered) // 2]


# --------------------------------------------------------------------------- main


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,16384,65536,262144,1048576")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=0,
                    help="extra untimed steps per process after the first warm-up step")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--budget-gb", type=float, default=10.0)
    ap.add_argument("--reorder-size", type=int, default=262144)
    ap.add_argument("--parts", default="8,64,512")
    ap.add_argument("--methods", default="graphpipe,gather_scatter,dense")
    ap.add_argument("--omp-wait-policy", choices=["default", "passive", "active"],
                    default="default")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).parent))
    from _measure import machine_note

    env = None if args.omp_wait_policy == "default" else {
        "OMP_WAIT_POLICY": args.omp_wait_policy.upper()}
    print(f"# machine: {machine_note()}; loadavg {loadavg()}; OMP_WAIT_POLICY "
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset') if env is None else env['OMP_WAIT_POLICY']}"
          f"; {args.rounds} rounds x {args.repeats} steps after {1 + args.warmup} warm-up")
    budget = args.budget_gb * 1e9
    sizes = [int(s) for s in args.sizes.split(",") if s]
    methods = [m for m in args.methods.split(",") if m]
    last: dict[str, tuple[int, int, float]] = {}    # method -> (S, nnz, peak RSS bytes)
    rows = []
    print("\n| nodes S | seq (S+1) | nnz | method | step s best | median | peak RSS GB | "
          "load (1/5/15 min) | note |")
    print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | --- | --- |")
    for n in sizes:
        path = pattern_file(n)
        with np.load(path) as d:
            nnz = int(d["indices"].shape[0])
        load = loadavg()
        jobs, skipped = [], {}
        for method in methods:
            prev = last.get(method)
            if prev is not None:
                ps, pnnz, pbytes = prev
                factor = ((n + 1) / (ps + 1)) ** 2 if method == "dense" else nnz / pnnz
                predicted = pbytes * factor
                if predicted > budget:
                    skipped[method] = (f"not run: predicted peak {predicted / 1e9:.1f} GB "
                                       f"(x{factor:.1f} of {pbytes / 1e9:.2f} GB at S={ps}) > "
                                       f"budget {args.budget_gb:g} GB")
                    last[method] = (n, nnz, predicted)
                    continue
            jobs.append((method, method, path))
        res = interleaved(jobs, args.rounds, args.repeats, env, args.warmup)
        best = {m: _best_median(r["times"])[0] for m, r in res.items() if r["times"]}
        for method in methods:
            if method in skipped:
                print(f"| {n} | {n + 1} | {nnz} | {method} | - | - | - | {load} | "
                      f"{skipped[method]} |", flush=True)
                continue
            r = res[method]
            if not r["times"]:
                print(f"| {n} | {n + 1} | {nnz} | {method} | - | - | - | {load} | "
                      f"failed: {r.get('error')} |", flush=True)
                continue
            t, med = _best_median(r["times"])
            last[method] = (n, nnz, r["peak_rss"])
            note = ""
            if method != "graphpipe" and "graphpipe" in best:
                note = f"graphpipe {t / best['graphpipe']:.1f}x faster"
            if "error" in r:
                note += f" (a later run failed: {r['error']})"
            print(f"| {n} | {n + 1} | {nnz} | {method} | {t:.3f} | {med:.3f} | "
                  f"{r['peak_rss'] / 1e9:.2f} | {load} | {note} |", flush=True)
            rows.append({"S": n, "method": method, "best": t, "median": med,
                         "peak_rss": r["peak_rss"], "load": load})
    n = args.reorder_size
    if n:
        print(f"\n## METIS reordering at S = {n} nodes (graphpipe sparse kernel; cluster-sparse "
              f"with threshold 5·β_G, d_b = 16); loadavg {loadavg()}\n")
        parts = [int(p) for p in args.parts.split(",") if p]
        info = {}
        for k in parts:
            with np.load(pattern_file(n, k)) as d:
                info[k] = (float(d["metis_seconds"]), int(d["edge_cut"]))
        jobs = [("original", "graphpipe", pattern_file(n))]
        for k in parts:
            jobs += [(f"k={k}", "graphpipe", pattern_file(n, k)),
                     (f"k={k} cs", "cluster_sparse", pattern_file(n, k))]
        res = interleaved(jobs, args.rounds, args.repeats, env, args.warmup)
        print("| order | METIS s | edge cut | step s best | median | peak RSS GB | note |")
        print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
        base = _best_median(res["original"]["times"])[0] if res["original"]["times"] else None
        for key, method, _path in jobs:
            r = res[key]
            if not r["times"]:
                print(f"| {key} | | | - | - | - | failed: {r.get('error')} |", flush=True)
                continue
            t, med = _best_median(r["times"])
            if key == "original":
                label, metis, note = "original (random w.r.t. communities)", "| - | -", ""
            else:
                k = int(key.split()[0][2:])
                rel = f"{base / t:.2f}x vs original" if base else ""
                if method == "graphpipe":
                    label, metis, note = f"METIS k={k}", f"| {info[k][0]:.1f} | {info[k][1]}", rel
                else:
                    x = r["result"]
                    label, metis = f"METIS k={k}, cluster-sparse", "| |"
                    note = (f"{rel}; {x['transferred']} cluster blocks → {x['blocks']} "
                            f"sub-blocks; mask nnz {x['nnz_mask']} vs {x['nnz']}; transform "
                            f"{x['transform_seconds']:.1f} s")
            print(f"| {label} {metis} | {t:.3f} | {med:.3f} | {r['peak_rss'] / 1e9:.2f} | "
                  f"{note} |", flush=True)
    print(f"\n# done: {machine_note()}; loadavg {loadavg()}")
    (CACHE / "last_run.json").write_text(json.dumps(rows, default=str))


if __name__ == "__main__":
    main()
