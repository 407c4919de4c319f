"""The GPU paths on a real GPU (every test proves them under NUMBA_ENABLE_CUDASIM /
TRITON_INTERPRET; this runs them on the device, through the public API, and times them).

    python benchmarks/gpu_check.py            # on a machine with CUDA

Checks, each printed as ``ok``/``FAIL`` with its figures:

1. sampling: ``sample_neighbors(..., backend="cuda")`` on device arrays equals the CPU
   sampler up to local relabelling (the same-numbers contract), R-MAT-like graph;
2. aggregation: ``aggregate(..., backend="triton")`` (sum, mean, gcn) forward and backward on
   CUDA tensors against the CPU kernel, float32;
3. sparse attention: ``sparse_attention(..., backend="triton")`` forward and backward on
   CUDA tensors against the CPU kernel;
4. the loader: ``NeighborLoader(device="cuda", sampler_backend="cuda")`` batches equal the CPU
   loader's (same node sets, ``x == X[n_id]`` bit for bit), float32 and float16 features;
5. the typed loader: ``NeighborLoader(typed_graph, device="cuda", sampler_backend="cuda")``
   batches equal the CPU typed loader's (``n_id`` per type, ``x[t] == X_t[n_id[t]]`` bit for
   bit, float32 papers and float16 authors).
"""

from __future__ import annotations

import time
import traceback

import numpy as np
import torch

from graphpipe.ops.aggregate import aggregate
from graphpipe.ops.attention import sparse_attention
from graphpipe.ops.sampling.api import canonical_local_ids, sample_neighbors


def _graph(n: int, degree: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    deg = np.minimum(rng.zipf(1.8, n), 50 * degree).astype(np.int64)
    deg = np.maximum(1, deg * degree // max(1, int(deg.mean())))
    indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
    indices = rng.integers(0, n, int(indptr[-1])).astype(np.int64)
    return indptr, indices


def _timed(fn, repeat: int = 5) -> tuple[object, float]:
    out = fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    torch.cuda.synchronize()
    return out, (time.perf_counter() - start) / repeat


def check_sampling() -> str:
    indptr, indices = _graph(1_000_000, 15)
    seeds = np.random.default_rng(1).choice(indptr.shape[0] - 1, 4096, replace=False).astype(np.int64)
    fanouts = [15, 10, 5]
    cpu, t_cpu = _timed(lambda: sample_neighbors(indptr, indices, seeds, fanouts, seed=7, backend="cpu"))
    dev = [torch.from_numpy(a).cuda() for a in (indptr, indices, seeds)]
    gpu, t_gpu = _timed(lambda: sample_neighbors(*dev, fanouts, seed=7, backend="cuda"))
    a, b = canonical_local_ids(cpu), canonical_local_ids(gpu)
    same = np.array_equal(np.asarray(a.n_id), np.asarray(torch.as_tensor(b.n_id).cpu()))
    for x, y in zip(a.blocks, b.blocks):
        for name in ("indptr", "indices"):
            same &= np.array_equal(np.asarray(getattr(x, name)), np.asarray(torch.as_tensor(getattr(y, name)).cpu()))
    assert same, "the CUDA sample differs from the CPU sample"
    return (f"{len(a.n_id):,} nodes, same as CPU; batch of 4096 seeds [15,10,5] on 1M nodes: "
            f"cpu {t_cpu * 1e3:.1f} ms, cuda {t_gpu * 1e3:.1f} ms")


def check_aggregate() -> str:
    indptr, indices = _graph(200_000, 12, seed=2)
    n = indptr.shape[0] - 1
    ip, ix = torch.from_numpy(indptr), torch.from_numpy(indices)
    x = torch.randn(n, 128)
    notes = []
    for kw in ({"reduce": "sum"}, {"reduce": "mean"}, {"norm": "gcn"}):
        xc = x.clone().requires_grad_()
        want = aggregate(ip, ix, xc, num_dst=n, backend="cpu", **kw)
        want.square().sum().backward()
        xg = x.cuda().requires_grad_()
        got, t_gpu = _timed(lambda xg=xg, kw=kw: aggregate(ip.cuda(), ix.cuda(), xg, num_dst=n,
                                                           backend="triton", **kw))
        got.square().sum().backward()
        err = (got.detach().cpu() - want.detach()).abs().max().item()
        gerr = (xg.grad.cpu() - xc.grad).abs().max().item()
        assert err < 1e-3 and gerr < 1e-2, (kw, err, gerr)
        _, t_cpu = _timed(lambda kw=kw: aggregate(ip, ix, x, num_dst=n, backend="cpu", **kw), repeat=2)
        notes.append(f"{kw}: max err {err:.1e}, grad {gerr:.1e}, cpu {t_cpu * 1e3:.0f} ms, "
                     f"triton {t_gpu * 1e3:.2f} ms")
    return "; ".join(notes)


def check_attention() -> str:
    indptr, indices = _graph(32_768, 32, seed=3)
    n = indptr.shape[0] - 1
    ip, ix = torch.from_numpy(indptr), torch.from_numpy(indices)
    q, k, v = (torch.randn(n, 8, 32) for _ in range(3))
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    want = sparse_attention(qc, kc, vc, ip, ix, backend="cpu")
    want.sum().backward()
    qg, kg, vg = (t.cuda().requires_grad_() for t in (q, k, v))
    got = sparse_attention(qg, kg, vg, ip.cuda(), ix.cuda(), backend="triton")
    got.sum().backward()
    err = (got.detach().cpu() - want.detach()).abs().max().item()
    gerr = max((a.grad.cpu() - b.grad).abs().max().item() for a, b in ((qg, qc), (kg, kc), (vg, vc)))
    assert err < 1e-3 and gerr < 1e-2, (err, gerr)
    _, t_gpu = _timed(lambda: sparse_attention(q.cuda(), k.cuda(), v.cuda(), ip.cuda(), ix.cuda(),
                                               backend="triton"))
    return f"{int(indptr[-1]):,} entries: max err {err:.1e}, grad {gerr:.1e}, triton fwd {t_gpu * 1e3:.2f} ms"


def check_loader(dtype: str) -> str:
    import tempfile

    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import StoreWriter

    indptr, indices = _graph(100_000, 10, seed=4)
    n = indptr.shape[0] - 1
    x = np.random.default_rng(5).standard_normal((n, 64)).astype(dtype)
    with tempfile.TemporaryDirectory() as tmp:
        with StoreWriter(f"{tmp}/s") as w:
            w.write_array("csc/indptr", indptr)
            w.write_array("csc/indices", indices.astype(np.int32))
            w.write_array("node/feat", x)
            w.write_splits({"train": np.arange(0, n, 3, dtype=np.int64)})
            w.manifest["num_nodes"], w.manifest["num_edges"] = n, int(indptr[-1])
            w.manifest["node_features"] = {"dim": 64, "dtype": dtype}
            w.commit()
        kw = {"fanouts": [10, 5], "batch_size": 1024, "input_nodes": "train", "shuffle": True, "seed": 3}
        cpu = list(NeighborLoader(f"{tmp}/s", **kw, device="cpu", sampler_backend="cpu"))
        start = time.perf_counter()
        gpu = list(NeighborLoader(f"{tmp}/s", **kw, device="cuda", sampler_backend="cuda"))
        t_gpu = time.perf_counter() - start
    bits = np.uint16 if dtype == "float16" else np.uint32

    def key(batch) -> tuple:   # a batch by its seeds (Reorder, on by default on a GPU, permutes batches)
        return tuple(sorted(batch.n_id[:batch.batch_size].cpu().tolist()))

    by_seeds = {key(a): a for a in cpu}
    assert len(gpu) == len(cpu) and set(map(key, gpu)) == set(by_seeds)
    for b in gpu:
        a = by_seeds[key(b)]
        assert b.x.is_cuda and torch.equal(torch.sort(a.n_id).values, torch.sort(b.n_id.cpu()).values)
        assert np.array_equal(b.x.cpu().numpy().view(bits), x[b.n_id.cpu().numpy()].view(bits))
    return f"{len(gpu)} batches equal to the CPU loader's ({dtype}), cuda epoch {t_gpu:.2f} s"


def _typed_graph():
    from graphpipe.loaders import GraphData

    rng = np.random.default_rng(6)
    papers, authors = 50_000, 30_000
    writes = (rng.integers(0, authors, 200_000), rng.integers(0, papers, 200_000))
    edges = {("author", "writes", "paper"): writes,
             ("paper", "rev_writes", "author"): (writes[1], writes[0]),
             ("paper", "cites", "paper"): (rng.integers(0, papers, 300_000),
                                           rng.integers(0, papers, 300_000))}
    x = {"paper": rng.standard_normal((papers, 64), dtype=np.float32),
         "author": rng.standard_normal((authors, 32), dtype=np.float32).astype(np.float16)}
    data = GraphData.from_dicts({"paper": papers, "author": authors}, edges, x=x,
                                y={"paper": rng.integers(0, 8, papers)},
                                splits={"paper": {"train": np.arange(0, papers, 3)}})
    return data, x


def check_typed_loader() -> str:
    from graphpipe.loaders import NeighborLoader

    data, x = _typed_graph()
    kw = {"num_neighbors": [10, 5], "input_nodes": ("paper", "train"), "batch_size": 1024,
          "shuffle": True, "seed": 3}
    cpu = list(NeighborLoader(data, **kw, device="cpu", sampler_backend="cpu"))
    start = time.perf_counter()
    gpu = list(NeighborLoader(data, **kw, device="cuda", sampler_backend="cuda"))
    t_gpu = time.perf_counter() - start
    bits = {"paper": np.uint32, "author": np.uint16}

    def key(batch) -> tuple:   # a batch by its seeds (a reorder may permute batches)
        return tuple(sorted(batch.n_id_dict["paper"][:batch["paper"].batch_size].cpu().tolist()))

    by_seeds = {key(a): a for a in cpu}
    assert len(gpu) == len(cpu) and set(map(key, gpu)) == set(by_seeds)
    for b in gpu:
        a = by_seeds[key(b)]
        for t in ("paper", "author"):
            got, want = b.n_id_dict[t].cpu(), a.n_id_dict[t]
            assert torch.equal(torch.sort(got).values, torch.sort(want).values), t
            assert b.x_dict[t].is_cuda
            assert np.array_equal(b.x_dict[t].cpu().numpy().view(bits[t]),
                                  x[t][got.numpy()].view(bits[t])), t
    return f"{len(gpu)} typed batches equal to the CPU loader's, cuda epoch {t_gpu:.2f} s"


def main() -> None:
    print(torch.cuda.get_device_name(0), "torch", torch.__version__)
    checks = [("sampling", check_sampling), ("aggregate", check_aggregate),
              ("attention", check_attention), ("loader float32", lambda: check_loader("float32")),
              ("loader float16", lambda: check_loader("float16")),
              ("typed loader", check_typed_loader)]
    failed = 0
    for name, fn in checks:
        try:
            print(f"ok   {name}: {fn()}", flush=True)
        except Exception:  # noqa: BLE001 - every check reports on its own
            failed += 1
            print(f"FAIL {name}:\n{traceback.format_exc()[-2500:]}", flush=True)
    print(f"{len(checks) - failed} passed, {failed} failed")


if __name__ == "__main__":
    main()
