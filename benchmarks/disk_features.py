"""Feature rows from a store larger than the memory cap (issue 16, items 2-4).

Generates (or takes, ``--work`` holding one) an R-MAT store with ``--rows`` x ``--dim``
float32 features (default 8.4M x 128 = 4.3 GB) plus the same features as ``feat.npy``,
samples ``--batches`` batches (fanouts ``--fanouts``, batch ``--batch``) once, and for the
same batches' node IDs measures rows/s and bytes read from disk (``/proc/self/io``
``read_bytes``), each method in a subprocess under ``memlimit.sh CAP``:

* ``mmap``: ``torch.from_numpy(np.load(feat.npy, mmap_mode="r"))`` + ``index_select``
  (what PyG users and GraphBolt's ``TorchBasedFeature(in_memory=False)`` do);
* ``mmap_random``: the same after ``madvise(MADV_RANDOM)`` on the map;
* ``gp_disk``: graphpipe's disk tier (what the loader picks under the cap:
  :func:`graphpipe.loaders.feature_tier.feature_source`: O_DIRECT DiskRows behind a hot
  set by in-degree and CLOCK; the hot set's fill, one bulk scan, timed apart as ``fill s``);
* ``gp_miss``: the same DiskRows with no cache at all: the miss path alone;
* ``gp_loader``: ``NeighborLoader(store)`` with its defaults under the cap, reading
  ``batch.x`` (its own batches: same fanouts and batch size, not the same IDs), rows/s
  *including its sampling*, with the loader's per-epoch stats (hit rate, rows from disk);
* ``gp_loader_disktopo``: the same with the topology left on disk too
  (``GraphStore.open(in_memory=False)``: sampling reads memory-mapped CSC arrays);
* ``gb_mmap``: GraphBolt's ``TorchBasedFeature`` over the same memory map (what
  ``OnDiskDataset`` builds for ``in_memory: false``), read with its ``read(ids)`` (its C++
  ``index_select``), in the DGL peer environment (``$GRAPHPIPE_DGL_PYTHON``, else
  ``.venv-dgl/bin/python``; ``make peers`` builds it); skipped when absent;
* ``gp_ram``: graphpipe in RAM, uncapped (``GraphStore.open(in_memory=True)``).

Every method's rows are checked against the others' (a checksum per batch, over the batches
both did: a slow method stops after ``--max-seconds`` once it has done 20 batches).
Also the device's random 512 B and 4 KiB read rates at queue depth 32 and 64 (O_DIRECT,
aligned buffers, the disk tier's own Numba ``pread`` loop from threads; fio is not
installed here).

Tiny proof run (not a measurement)::

    .venv/bin/python benchmarks/disk_features.py --rows 20000 --batches 3 --keep-caches \\
        --work df-tiny --probe-seconds 1
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

# ../shared/tools/memlimit.sh beside the repository (GRAPHPIPE_MEMLIMIT to use another)
MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[2] / "shared" / "tools" / "memlimit.sh")
MIN_BATCHES = int(os.environ.get("GRAPHPIPE_BENCH_MIN_BATCHES", "20"))
"""Batches every method does before ``--max-seconds`` may stop it (the issue's 20; a slow
peer such as plain mmap under a cap takes ~12 minutes for 20, so a quick run may lower it)."""
"""A method stops after ``--max-seconds`` only once it has done this many batches."""
CAPPED = ("mmap", "mmap_random", "gb_mmap", "gp_disk", "gp_miss", "gp_loader", "gp_loader_disktopo")
PEER = ("gb_mmap",)  # run by the DGL environment's interpreter
METHODS = CAPPED + ("gp_ram",)


def read_bytes() -> int:
    """This process's bytes fetched from storage so far (``/proc/self/io``)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


# -- generation ----------------------------------------------------------------------------------
def generate(work: Path, rows: int, dim: int, seed: int = 0) -> None:
    """The store (``work/store``) and ``work/feat.npy`` with the same features."""
    from graphpipe.store import StoreWriter
    from graphpipe.synthetic.rmat import rmat_edges

    scale = max(1, int(np.ceil(np.log2(rows))))
    src, dst = rmat_edges(scale, 5, seed=seed)
    keep = (src < rows) & (dst < rows)
    src, dst = src[keep], dst[keep]
    order = np.argsort(dst, kind="stable")
    indices = src[order].astype(np.int32)
    indptr = np.zeros(rows + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=rows), out=indptr[1:])
    del src, dst, order
    npy = np.lib.format.open_memmap(work / "feat.npy", mode="w+", dtype=np.float32, shape=(rows, dim))
    rng = np.random.default_rng(seed)
    with StoreWriter(work / "store") as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        feat = w.create_array("node/feat", (rows, dim), np.float32)
        step = max(1, (64 << 20) // (dim * 4))
        for lo in range(0, rows, step):
            block = rng.standard_normal((min(step, rows - lo), dim), dtype=np.float32)
            feat[lo:lo + block.shape[0]] = block
            npy[lo:lo + block.shape[0]] = block
        w.write_splits({"train": np.arange(rows, dtype=np.int64)})
        w.manifest["num_nodes"], w.manifest["num_edges"] = rows, int(indices.shape[0])
        w.manifest["node_features"] = {"dim": dim, "dtype": "float32"}
        w.commit()
    npy.flush()
    del npy


def sample_ids(work: Path, fanouts: list[int], batch: int, batches: int, seed: int = 0) -> None:
    """The ``n_id`` of each batch, sampled once: ``work/ids.npz`` (ids, offsets)."""
    from graphpipe.loaders import NeighborLoader

    key = np.array([*fanouts, -1, batch, batches, seed, 2], dtype=np.int64)  # 2: frontier="new"
    if (work / "ids.npz").exists():
        with np.load(work / "ids.npz") as f:
            if "key" in f and np.array_equal(f["key"], key):
                return  # sampled before with the same settings
    loader = NeighborLoader(work / "store", fanouts, batch_size=batch, features=False, seed=seed, prefetch=0,
                            input_nodes="train", shuffle=True)
    got = []
    for i, b in enumerate(loader):
        got.append(b.n_id.numpy().copy())
        if i + 1 == batches:
            break
    offsets = np.cumsum([0] + [len(g) for g in got]).astype(np.int64)
    np.savez(work / "ids.npz", ids=np.concatenate(got), offsets=offsets, key=key)


# -- one method, in its own process ------------------------------------------------------------
def _batches(work: Path) -> list[np.ndarray]:
    f = np.load(work / "ids.npz")
    ids, off = f["ids"], f["offsets"]
    return [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)]


def _gather_fn(method: str, work: Path):
    import torch

    if method in ("mmap", "mmap_random"):
        arr = np.load(work / "feat.npy", mmap_mode="r")
        if method == "mmap_random":
            arr._mmap.madvise(mmap.MADV_RANDOM)
        x = torch.from_numpy(arr)  # read-only map: torch warns, reads only
        return lambda ids: x.index_select(0, torch.from_numpy(ids)).numpy(), None
    if method == "gb_mmap":
        import dgl.graphbolt as gb

        feature = gb.TorchBasedFeature(torch.from_numpy(np.load(work / "feat.npy", mmap_mode="r")))
        return lambda ids: feature.read(torch.from_numpy(ids)).numpy(), None
    from graphpipe.store import GraphStore

    if method == "gp_ram":
        store = GraphStore.open(work / "store", in_memory=True)
        return store.features, None
    from graphpipe.loaders.feature_tier import feature_source
    from graphpipe.loaders.graph_data import resolve_graph_data
    from graphpipe.loaders.rows import DiskRows

    store = GraphStore.open(work / "store")
    rows = DiskRows.from_store(store) if method == "gp_miss" else feature_source(resolve_graph_data(store), "disk")
    return rows.gather, rows


def run_method(method: str, work: Path, fanouts: list[int], batch: int, batches: int,
               max_seconds: float) -> dict:
    """rows/s, bytes read and a checksum of the rows for ``method`` (this process)."""
    import warnings

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    if method.startswith("gp_loader"):
        return run_loader(work, fanouts, batch, batches, topology_on_disk=method == "gp_loader_disktopo")
    t_fill = time.perf_counter()
    gather, source = _gather_fn(method, work)
    fill_s = time.perf_counter() - t_fill
    todo = _batches(work)
    gather(np.arange(8, dtype=np.int64))  # warm-up (threads, compiled kernels): 8 rows, not timed
    if source is not None:
        from graphpipe.loaders.rows.tiers import tier_counters

        disk0 = tier_counters(source).disk_rows
    before, total, checks = read_bytes(), 0, []
    t0 = time.perf_counter()
    for i, ids in enumerate(todo):
        rows = gather(ids)
        total += rows.shape[0]
        checks.append(float(rows[:, 0].astype(np.float64).sum()))
        if i + 1 >= MIN_BATCHES and time.perf_counter() - t0 > max_seconds:
            break  # a slow method (plain mmap): rows/s from the batches done
    seconds = time.perf_counter() - t0
    return {"method": method, "rows": total, "seconds": seconds, "rows_per_s": total / seconds,
            "read_bytes": read_bytes() - before, "row_bytes": total * rows.shape[1] * rows.itemsize,
            "checksum": checks, "batches": len(checks), "fill_s": fill_s,
            **({"rows_disk": tier_counters(source).disk_rows - disk0} if source is not None else {})}


def run_loader(work: Path, fanouts: list[int], batch: int, batches: int, topology_on_disk: bool) -> dict:
    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import GraphStore

    t_fill = time.perf_counter()
    source = GraphStore.open(work / "store", in_memory=False) if topology_on_disk else work / "store"
    loader = NeighborLoader(source, fanouts, batch_size=batch, seed=0, input_nodes="train", shuffle=True)
    fill_s = time.perf_counter() - t_fill
    before, total = read_bytes(), 0
    t0 = time.perf_counter()
    for i, b in enumerate(loader):
        total += int(b.x.shape[0])
        if i + 1 == batches:
            break
    seconds = time.perf_counter() - t0
    s = loader.stats
    return {"method": "gp_loader_disktopo" if topology_on_disk else "gp_loader", "fill_s": fill_s,
            "tier": type(loader.rows).__name__, "rows": total,
            "seconds": seconds, "rows_per_s": total / seconds, "read_bytes": read_bytes() - before,
            "row_bytes": total * loader.rows.dim * 4, "hit_rate": s.hit_rate, "rows_disk": s.rows_disk,
            "rows_cache_hits": s.rows_cache_hits, "disk_read_s": s.disk_read_s, "checksum": None}


# -- the device's own random-read rate -----------------------------------------------------------
def probe_device(path: Path, block: int, depth: int, seconds: float) -> float:
    """Random aligned ``block``-byte O_DIRECT reads/s of ``path`` from ``depth`` threads,
    each running the disk tier's Numba ``pread`` loop (256 reads per call, no GIL)."""
    from graphpipe.loaders.rows.read_plan import run_reads

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
    size = os.fstat(fd).st_size
    counts = [0] * depth
    stop = time.perf_counter() + seconds
    k = 256
    fds, files, sizes = np.array([fd]), np.zeros(k, dtype=np.int64), np.array([size])
    lengths, at = np.full(k, block, dtype=np.int64), np.arange(k, dtype=np.int64) * block

    def work(i: int) -> None:
        buf = np.frombuffer(mmap.mmap(-1, k * block), dtype=np.uint8)  # page aligned
        rng = np.random.default_rng(i)
        n = 0
        while time.perf_counter() < stop:
            offs = rng.integers(0, size // block, k) * block
            if run_reads(fds, files, offs, lengths, at, sizes, buf, 0, k) >= 0:
                raise OSError(f"{path}: O_DIRECT read failed")
            n += k
        counts[i] = n

    work(0)  # compile
    stop = time.perf_counter() + seconds
    threads = [threading.Thread(target=work, args=(i,)) for i in range(depth)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    os.close(fd)
    return sum(counts) / (time.perf_counter() - t0)


# -- driver ------------------------------------------------------------------------------------
def dgl_python() -> Path | None:
    """The DGL peer environment's interpreter, if there is one."""
    path = Path(os.environ.get("GRAPHPIPE_DGL_PYTHON") or
                Path(__file__).resolve().parents[1] / ".venv-dgl" / "bin" / "python")
    return path if path.is_file() else None


def child(method: str, args: argparse.Namespace, capped: bool) -> dict:
    python = dgl_python() if method in PEER else Path(sys.executable)
    if python is None:
        return {"method": method, "error": "skipped: no DGL environment (make peers)"}
    cmd = [str(python), __file__, "--child", method, "--work", str(args.work),
           "--fanouts", args.fanouts, "--batch", str(args.batch), "--batches", str(args.batches),
           "--max-seconds", str(args.max_seconds)]
    if capped:
        cmd = [str(MEMLIMIT)] + (["--keep-caches"] if args.keep_caches else []) + [args.cap] + cmd
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["?"]
        return {"method": method, "error": f"rc={proc.returncode}: {tail[0]}"}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["memlimit"] = next((ln for ln in proc.stderr.splitlines() if ln.startswith("memlimit:")), "")
    return out


def report(results: list[dict], probe: dict[int, float]) -> None:
    ram = next((r for r in results if r["method"] == "gp_ram" and "error" not in r), None)
    base = next((r for r in results if r["method"] == "mmap" and "error" not in r), None)
    ref = max((r["checksum"] for r in results if r.get("checksum") is not None), key=len, default=None)
    mr = next((r for r in results if r["method"] == "mmap_random" and "error" not in r), None)
    print(f"{'method':19} {'rows/s':>10} {'read MB':>9} {'ampl':>6} {'vs mmap':>8} {'vs mr':>7} {'vs RAM':>7} "
          f"{'fill s':>7}  same rows")
    for r in results:
        if "error" in r:
            print(f"{r['method']:19} {r['error']}")
            continue
        ampl = r["read_bytes"] / max(1, r["row_bytes"])
        if r.get("checksum") is None:
            same = "-"
        else:  # the batches both did
            k = min(len(r["checksum"]), len(ref))
            same = ("yes" if r["checksum"][:k] == ref[:k] else "NO") + (
                f" ({k} batches)" if k < len(ref) or k < len(r["checksum"]) else "")
        vs_mmap = r["rows_per_s"] / base["rows_per_s"] if base else float("nan")
        vs_ram = r["rows_per_s"] / ram["rows_per_s"] if ram else float("nan")
        vs_mr = r["rows_per_s"] / mr["rows_per_s"] if mr else float("nan")
        extra = f"  hit {r['hit_rate']:.1%} tier {r['tier']}" if "hit_rate" in r else ""
        if "rows_disk" in r:
            ampl = r["read_bytes"] / max(1, r["rows_disk"] * r["row_bytes"] // max(1, r["rows"]))
        fill = f"{r['fill_s']:7.1f}" if "fill_s" in r else f"{'-':>7}"
        print(f"{r['method']:19} {r['rows_per_s']:10,.0f} {r['read_bytes'] / 1e6:9.1f} {ampl:6.2f} "
              f"{vs_mmap:8.2f} {vs_mr:7.2f} {vs_ram:7.3f} {fill}  {same}{extra}  {r.get('memlimit', '')}")
    for (block, depth), rate in probe.items():
        print(f"device: random {block} B O_DIRECT reads at QD {depth}: {rate:,.0f}/s "
              f"({rate * block / 1e6:.0f} MB/s)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "graphpipe-disk-features")
    p.add_argument("--rows", type=int, default=8_400_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--fanouts", default="10,10")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--batches", type=int, default=200, help="at least 20; 200 so the cache matters")
    p.add_argument("--cap", default="1G")
    p.add_argument("--max-seconds", type=float, default=120.0,
                   help=f"a method stops after this long (once {MIN_BATCHES} batches are done)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--keep-caches", action="store_true", help="pass --keep-caches to memlimit.sh")
    p.add_argument("--probe-seconds", type=float, default=5.0)
    p.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    args = p.parse_args()
    fanouts = [int(v) for v in args.fanouts.split(",")]
    if args.child:
        print(json.dumps(run_method(args.child, args.work, fanouts, args.batch, args.batches,
                                    args.max_seconds)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    if not (args.work / "store" / "manifest.json").exists():
        print(f"generating {args.rows:,} x {args.dim} features in {args.work} ...", flush=True)
        generate(args.work, args.rows, args.dim)
    sample_ids(args.work, fanouts, args.batch, args.batches)
    results = [child(m, args, m in CAPPED) for m in args.methods.split(",")]
    probe = {(b, d): probe_device(args.work / "feat.npy", b, d, args.probe_seconds)
             for b in (512, 4096) for d in (32, 64)}
    report(results, probe)


if __name__ == "__main__":
    main()
