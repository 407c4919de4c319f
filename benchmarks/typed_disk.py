"""Typed graphs beyond RAM (issue 25): a MAG240M-layout folder whose paper features are
3x or more the memory cap, ingested, read and trained on under ``memlimit.sh`` caps.

    .venv/bin/python benchmarks/typed_disk.py --work DIR [--papers 4200000] [--dim 768]
        [--stages generate,ingest,loader,train] [--batches 60] [--train-steps 20]

Stages (each capped one in a fresh process under ``shared/tools/memlimit.sh CAP``, which
drops the page cache first and prints the cgroup's peak):

* ``generate``: ``graphpipe.synthetic.mag240m`` (``mag240m_dataset`` topology,
  ``write_mag240m(..., feature_dim=D)``: float16 paper rows written a block at a time)
  under ``DIR/src``; uncapped, not timed;
* ``ingest``: ``graphpipe ingest DIR/src DIR/store --add-reverse-edges`` under
  ``--ingest-cap`` (1.5G), with the process's own peak RSS (``/usr/bin/time``);
* ``derive``: ``graphpipe derive --mean-features`` for authors (from their papers) and
  institutions (from their authors), the OGB-LSC MAG240M baseline's features of the
  featureless types, under ``--train-cap``;
* ``loader``: the paper rows of ``--batches`` typed batches (seeds: train papers,
  batch ``--batch``, fanouts ``--fanouts`` over every relation), sampled once; then, each
  under ``--loader-cap`` (1G): ``mmap_random`` (``np.load`` of the store's paper feature
  chunk as a memory map, ``madvise(MADV_RANDOM)``, ``torch.index_select`` of the same paper
  rows), ``gp_tier`` (the typed disk tier of ``paper``: hot set by in-degree + CLOCK +
  O_DIRECT reads, same rows) and ``gp_loader`` (``NeighborLoader(store, features="disk")``
  batches, its own sampling included, rows of every type it gathers); rows/s, bytes read,
  checksums compared; the device's random 512 B / 4 KiB O_DIRECT read rates beside them
  (``disk_features.probe_device``);
* ``train``: ``graphpipe train DIR/store --model rgcn`` and ``--model rgat``
  (``--max-steps --train-steps``, ``--eval none``) under ``--train-cap`` (2G); the
  printed memory plan and the cgroup peak.

Delete ``DIR`` afterwards (it holds the features twice: the folder and the store).
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from disk_features import MEMLIMIT, probe_device, read_bytes

ROOT = HERE.parent


def generate(work: Path, papers: int, dim: int) -> Path:
    """The MAG240M-layout folder ``work/src`` (kept when present)."""
    from graphpipe.synthetic.mag240m import DIR_NAME, mag240m_dataset, write_mag240m

    base = work / "src" / DIR_NAME
    if (base / "RELEASE_v1.txt").is_file():
        return base
    t0 = time.perf_counter()
    data = mag240m_dataset(papers=papers, authors=papers // 2, institutions=max(10, papers // 1000),
                           num_classes=20, feature_dim=1, authors_per_paper=2.0, cites_per_paper=3.0,
                           fields_per_paper=1.0)
    out = write_mag240m(work / "src", data, feature_dim=dim)
    edges = sum(len(s) for s, _ in data.edges.values())
    print(f"generated {out}: {data.num_nodes_dict}, {edges:,} edges, paper features {papers:,} x {dim} "
          f"float16 = {papers * dim * 2 / 1e9:.2f} GB in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def capped(cap: str, cmd: list[str], keep_caches: bool = False) -> tuple[int, str, str, float]:
    """``(rc, stdout, memlimit line, seconds)`` of ``cmd`` under ``memlimit.sh cap``."""
    full = [str(MEMLIMIT)] + (["--keep-caches"] if keep_caches else []) + [cap] + cmd
    t0 = time.perf_counter()
    proc = subprocess.run(full, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    line = " ".join(ln for ln in proc.stderr.splitlines() if ln.startswith(("memlimit:", "max RSS")))
    line = line or proc.stderr[-400:]
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    return proc.returncode, proc.stdout, line, seconds


def graphpipe_cmd(*args: str) -> list[str]:
    """The ``graphpipe`` command (this interpreter's graphpipe)."""
    return [sys.executable, "-c", "import sys; from graphpipe.cli.main import main; sys.exit(main())", *args]


def run_ingest(work: Path, src: Path, cap: str) -> None:
    """``graphpipe ingest --add-reverse-edges`` (the reverse relations built out of core, so
    training needs none built in memory), the process's own peak RSS beside the cgroup's."""
    rc, out, line, seconds = capped(cap, ["/usr/bin/time", "-f", "max RSS %M KB", *graphpipe_cmd(
        "ingest", str(src), str(work / "store"), "--overwrite", "--add-reverse-edges")])
    print(f"ingest: rc {rc}, {seconds:.0f} s wall, {line}", flush=True)
    print("\n".join(out.strip().splitlines()[-3:]), flush=True)


def run_derive(work: Path, cap: str) -> None:
    """The OGB-LSC baseline's features of the featureless types (``graphpipe derive
    --mean-features``: authors from their papers, institutions from their authors)."""
    for ntype, via in (("author", "author___writes___paper"),
                       ("institution", "author___affiliated_with___institution")):
        rc, _out, line, seconds = capped(cap, ["/usr/bin/time", "-f", "max RSS %M KB", *graphpipe_cmd(
            "derive", str(work / "store"), "--mean-features", ntype, "--via", via, "--overwrite")])
        print(f"derive --mean-features {ntype}: rc {rc}, {seconds:.0f} s wall, {line}", flush=True)


# -- loader stage ---------------------------------------------------------------------------------
def sample_ids(work: Path, fanouts: list[int], batch: int, batches: int) -> None:
    """The paper ``n_id`` of each typed batch: ``work/ids.npz`` (ids, offsets)."""
    from graphpipe.loaders import NeighborLoader

    if (work / "ids.npz").exists():
        return
    loader = NeighborLoader(work / "store", fanouts, input_nodes=("paper", "train"), batch_size=batch,
                            shuffle=True, seed=0, features=False, prefetch=0)
    got = []
    for i, b in enumerate(loader):
        got.append(b.n_id_dict["paper"].numpy().copy())
        if i + 1 == batches:
            break
    offsets = np.cumsum([0] + [len(g) for g in got]).astype(np.int64)
    np.savez(work / "ids.npz", ids=np.concatenate(got), offsets=offsets)


def _paper_chunk(store_path: Path) -> tuple[Path, int]:
    from graphpipe.store.arrays import raw_chunk_files

    paths, _rows, shape, _dtype = raw_chunk_files(store_path, "typed/paper/feat")
    assert len(paths) == 1, "one chunk file expected"
    return paths[0], int(shape[1])


def run_method(method: str, work: Path, fanouts: list[int], batch: int, batches: int) -> dict:
    """One method in this (capped) process."""
    import warnings

    import torch

    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    from graphpipe.store import GraphStore

    t_open = time.perf_counter()
    if method == "gp_loader":
        from graphpipe.loaders import NeighborLoader

        loader = NeighborLoader(work / "store", fanouts, input_nodes=("paper", "train"), batch_size=batch,
                                shuffle=True, seed=1, features="disk")
        open_s = time.perf_counter() - t_open
        before, total, nbytes = read_bytes(), 0, 0
        t0 = time.perf_counter()
        for i, b in enumerate(loader):
            for x in b.x_dict.values():
                total += x.shape[0]
                nbytes += x.numel() * x.element_size()
            if i + 1 == batches:
                break
        seconds = time.perf_counter() - t0
        counts = loader.stats
        return {"method": method, "rows": total, "seconds": seconds, "rows_per_s": total / seconds,
                "open_s": open_s, "read_bytes": read_bytes() - before, "row_bytes": nbytes,
                "counts": str(counts), "checksum": None}
    f = np.load(work / "ids.npz")
    ids, off = f["ids"], f["offsets"]
    todo = [ids[off[i]:off[i + 1]] for i in range(len(off) - 1)]
    if method == "mmap_random":
        path, dim = _paper_chunk(work / "store")
        arr = np.memmap(path, dtype=np.float16, mode="r").reshape(-1, dim)
        arr._mmap.madvise(mmap.MADV_RANDOM)
        x = torch.from_numpy(arr)
        gather = lambda i: x.index_select(0, torch.from_numpy(i)).numpy()
    else:  # gp_tier: the loader's tier for papers, alone, on the same IDs
        from graphpipe.loaders.graph_data import resolve_graph_data
        from graphpipe.loaders.typed_tier import typed_feature_sources

        data = resolve_graph_data(GraphStore.open(work / "store"))
        gather = typed_feature_sources(data, "disk")["paper"].gather
    open_s = time.perf_counter() - t_open
    gather(np.arange(8, dtype=np.int64))  # warm-up: threads, compiled kernels
    before, total, checks = read_bytes(), 0, []
    t0 = time.perf_counter()
    for ids_b in todo:
        rows = gather(ids_b)
        total += rows.shape[0]
        checks.append(float(rows[:, 0].astype(np.float64).sum()))
    seconds = time.perf_counter() - t0
    return {"method": method, "rows": total, "seconds": seconds, "rows_per_s": total / seconds,
            "open_s": open_s, "read_bytes": read_bytes() - before,
            "row_bytes": total * rows.shape[1] * rows.itemsize, "checksum": checks}


def run_loader_stage(work: Path, args: argparse.Namespace) -> None:
    sample_ids(work, args.fanout_list, args.batch, args.batches)
    results = []
    for method in ("mmap_random", "gp_tier", "gp_loader"):
        cmd = [sys.executable, __file__, "--child", method, "--work", str(work), "--fanouts", args.fanouts,
               "--batch", str(args.batch), "--batches", str(args.batches)]
        rc, out, line, _s = capped(args.loader_cap, cmd)
        r = json.loads(out.strip().splitlines()[-1]) if rc == 0 else {"method": method, "error": f"rc {rc}"}
        r["memlimit"] = line
        results.append(r)
    base = next((r for r in results if r["method"] == "mmap_random" and "error" not in r), None)
    ref = base["checksum"] if base else None
    print(f"{'method':12} {'rows/s':>10} {'read MB':>9} {'ampl':>6} {'vs mr':>6} {'open s':>7}  same rows")
    for r in results:
        if "error" in r:
            print(f"{r['method']:12} {r['error']}  {r['memlimit']}")
            continue
        same = "-" if r["checksum"] is None or ref is None else ("yes" if r["checksum"] == ref else "NO")
        vs = r["rows_per_s"] / base["rows_per_s"] if base else float("nan")
        print(f"{r['method']:12} {r['rows_per_s']:10,.0f} {r['read_bytes'] / 1e6:9.1f} "
              f"{r['read_bytes'] / max(1, r['row_bytes']):6.2f} {vs:6.2f} {r['open_s']:7.1f}  {same}  "
              f"{r['memlimit']}" + (f"\n             {r['counts']}" if "counts" in r else ""))
    path, _dim = _paper_chunk(work / "store")
    for block in (512, 4096):
        rate = probe_device(path, block, 32, args.probe_seconds)
        print(f"device: random {block} B O_DIRECT reads at QD 32: {rate:,.0f}/s ({rate * block / 1e6:.0f} MB/s)")


def run_train_stage(work: Path, args: argparse.Namespace) -> None:
    for model in args.models.split(","):
        cmd = graphpipe_cmd("train", str(work / "store"), "--model", model, "--epochs", "1",
                            "--max-steps", str(args.train_steps), "--eval", "none",
                            "--batch-size", str(args.batch))
        rc, out, line, seconds = capped(args.train_cap, cmd)
        print(f"train --model {model}: rc {rc}, {seconds:.0f} s wall, {line}")
        print("\n".join("    " + ln for ln in out.strip().splitlines()[:4]), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--papers", type=int, default=4_200_000)
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--stages", default="generate,ingest,loader,train",
                   help="also 'derive' (the mean features; slow under a cap, see results/typed_disk.md)")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--batches", type=int, default=60)
    p.add_argument("--ingest-cap", default="1536M")
    p.add_argument("--loader-cap", default="1G")
    p.add_argument("--train-cap", default="2G")
    p.add_argument("--train-steps", type=int, default=20)
    p.add_argument("--models", default="rgcn,rgat")
    p.add_argument("--probe-seconds", type=float, default=5.0)
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.fanout_list = [int(v) for v in args.fanouts.split(",")]
    if args.child:
        print(json.dumps(run_method(args.child, args.work, args.fanout_list, args.batch, args.batches)))
        return
    args.work.mkdir(parents=True, exist_ok=True)
    stages = args.stages.split(",")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores", flush=True)
    src = generate(args.work, args.papers, args.dim) if "generate" in stages else args.work / "src"
    if "ingest" in stages:
        run_ingest(args.work, src, args.ingest_cap)
    if "derive" in stages:
        run_derive(args.work, args.train_cap)
    if "loader" in stages:
        run_loader_stage(args.work, args)
    if "train" in stages:
        run_train_stage(args.work, args)


if __name__ == "__main__":
    main()
