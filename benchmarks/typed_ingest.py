"""Typed ingest benchmark: graphpipe against OGB's heterogeneous reader, same run.

    .venv/bin/python benchmarks/typed_ingest.py [--papers 100000] [--feature-dim 128]
                                                [--repeat 3] [--write]

An ogbn-mag-like folder in OGB's heterogeneous raw layout (``graphpipe generate mag``:
paper, author, institution, field_of_study; four relations; paper features, years,
labels, split ``time``) read by:

- ``ogb``: ``NodePropPredDataset('ogbn-mag', meta_dict=...)`` (``read_csv_heterograph_raw``
  + labels + its ``processed/`` cache written; the cache removed before every run);
- ``graphpipe``: ``ingest(folder, dest)``, a typed store (one CSC per relation, features,
  labels, years and splits, checksummed and committed atomically).

Each run is a fresh interpreter (imports untimed, ``_measure.py``); rounds alternate the
two; the median run of each is reported with its peak RSS (``VmHWM``), and the ratios
(ogb / graphpipe) are printed. ``--write`` appends the table to
``benchmarks/results/typed_ingest.md``.

``--cap-rows R --cap 320M`` adds a MAG240M-layout run: a float16 ``node_feat.npy`` of
``R x --cap-dim`` rows (written a block at a time) ingested by ``graphpipe ingest`` inside
``shared/tools/memlimit.sh --keep-caches CAP`` (a memory cgroup: the process's memory and
the page cache it fills, e.g. the store it writes; caches are kept so other jobs on the
machine are not disturbed); the cgroup's peak and the wall time are printed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import machine_note, mb, measure, median_of

ROOT = Path(__file__).resolve().parent.parent


def prepare(workdir: Path, args: argparse.Namespace) -> tuple[Path, int, int]:
    """The generated folder (cached by its parameters); ``(folder, classes, edges)``."""
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    name = f"mag_p{args.papers}_a{args.authors}_f{args.feature_dim}"
    folder = workdir / name
    data = mag_dataset(args.papers, args.authors, args.institutions, args.fields,
                       args.num_classes, args.feature_dim, seed=0)
    if not (folder / "raw" / "num-node-dict.csv.gz").is_file():
        if folder.exists():
            shutil.rmtree(folder)
        write_ogb_mag(folder, data)
    return folder, data.num_classes, data.num_edges


def run_ogb(folder: Path, num_classes: int) -> dict:
    processed = folder / "processed"
    shutil.rmtree(processed, ignore_errors=True)
    processed.mkdir()
    setup = ("import contextlib, io\n"
             "from ogb.nodeproppred import NodePropPredDataset\n"
             "from graphpipe.synthetic.mag import mag_meta_dict\n"
             f"meta = mag_meta_dict({str(folder)!r}, {num_classes})")
    work = ("with contextlib.redirect_stdout(io.StringIO()):\n"
            "    d = NodePropPredDataset('ogbn-mag', meta_dict=meta)\n"
            "result = int(sum(e.shape[1] for e in d.graph['edge_index_dict'].values()))")
    out = measure(setup, work)
    shutil.rmtree(processed, ignore_errors=True)
    processed.mkdir()
    return out


def run_graphpipe(folder: Path, dest: Path) -> dict:
    setup = "from graphpipe.ingest import IngestOptions, ingest"
    work = (f"s = ingest({str(folder)!r}, {str(dest)!r}, IngestOptions(overwrite=True)); "
            "result = int(s.num_edges)")
    return measure(setup, work)


def _memlimit() -> Path | None:
    for base in (ROOT / "shared", ROOT.parent / "shared", ROOT.parent.parent / "shared"):
        if (base / "tools" / "memlimit.sh").is_file():
            return base / "tools" / "memlimit.sh"
    return None


def run_capped_mag240m(workdir: Path, rows: int, dim: int, cap: str) -> list[str]:
    """A MAG240M folder whose feature file is larger than ``cap``, ingested under it."""
    import subprocess
    import time

    import numpy as np
    import torch

    from graphpipe.synthetic.mag240m import write_feature_npy

    tool = _memlimit()
    if tool is None:
        return ["(memlimit.sh not found: capped MAG240M run skipped)"]
    base = workdir / f"lsc_{rows}x{dim}" / "mag240m_kddcup2021"
    feat = base / "processed" / "paper" / "node_feat.npy"
    if not feat.is_file():
        feat.parent.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        write_feature_npy(feat, rows, dim, 1 << 15,
                          lambda start, count: rng.standard_normal((count, dim)).astype(np.float16))
        rel = base / "processed" / "author___writes___paper"
        rel.mkdir(parents=True, exist_ok=True)
        edges = np.stack([rng.integers(0, rows, rows), rng.integers(0, rows, rows)])
        np.save(rel / "edge_index.npy", edges)
        torch.save({"paper": rows, "author": rows}, base / "meta.pt")
    dest = workdir / "lsc_store"
    started = time.perf_counter()
    code = ("from graphpipe.ingest import IngestOptions, ingest\n"
            f"ingest({str(base)!r}, {str(dest)!r}, IngestOptions(overwrite=True))\n"
            "print([line for line in open('/proc/self/status') if line.startswith('VmHWM')][0])")
    run = subprocess.run([str(tool), "--keep-caches", cap, sys.executable, "-c", code],
                         capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    peak = next((line for line in run.stderr.splitlines() if line.startswith("memlimit:")), run.stderr[-300:])
    size = feat.stat().st_size
    hwm = " ".join(run.stdout.split()[-3:]) if "VmHWM" in run.stdout else "n/a"
    return [(f"MAG240M layout, node_feat.npy {rows:,} x {dim} float16 = {size / 1e6:,.0f} MB, "
             f"{rows:,} edges, `graphpipe ingest` under `memlimit.sh --keep-caches {cap}`: "
             f"rc {run.returncode}, {seconds:.1f} s wall, {peak} (the cgroup: process + the page "
             f"cache of the store it writes); the process's own peak RSS {hwm}")]


def table(ogb: dict, ours: dict) -> list[str]:
    lines = ["| reader | work time | whole process | peak RSS | baseline RSS (imports) |",
             "| --- | --- | --- | --- | --- |"]
    for name, r in (("ogb NodePropPredDataset (hetero)", ogb), ("graphpipe ingest (typed store)", ours)):
        lines.append(f"| {name} | {r['seconds']:.2f} s | {r['total_seconds']:.2f} s | "
                     f"{mb(r['peak_rss'])} | {mb(r['baseline_rss'])} |")
    lines.append(f"| ratio ogb / graphpipe | **{ogb['seconds'] / ours['seconds']:.2f}×** | "
                 f"**{ogb['total_seconds'] / ours['total_seconds']:.2f}×** | "
                 f"**{ogb['peak_rss'] / ours['peak_rss']:.2f}×** | |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--papers", type=int, default=100000)
    parser.add_argument("--authors", type=int, default=150000)
    parser.add_argument("--institutions", type=int, default=2000)
    parser.add_argument("--fields", type=int, default=10000)
    parser.add_argument("--num-classes", type=int, default=40)
    parser.add_argument("--feature-dim", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", default=str(ROOT / "bench-data" / "typed_ingest"))
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--cap-rows", type=int, default=0, help="MAG240M capped run: feature rows")
    parser.add_argument("--cap-dim", type=int, default=256)
    parser.add_argument("--cap", default="320M")
    parser.add_argument("--skip-ogb", action="store_true", help="only the capped MAG240M run")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    note = machine_note()
    lines = []
    if args.cap_rows:
        lines += [f"### MAG240M layout under a memory cap; {note}", "",
                  *run_capped_mag240m(workdir, args.cap_rows, args.cap_dim, args.cap), ""]
        print("\n".join(lines))
    if args.skip_ogb:
        _write(lines, args.write)
        return
    folder, num_classes, num_edges = prepare(workdir, args)
    ogb_runs, our_runs = [], []
    for i in range(args.repeat):
        ogb_runs.append(run_ogb(folder, num_classes))
        our_runs.append(run_graphpipe(folder, workdir / "store"))
        assert ogb_runs[-1]["result"] == our_runs[-1]["result"] == num_edges
        print(f"round {i + 1}: ogb {ogb_runs[-1]['seconds']:.2f} s {mb(ogb_runs[-1]['peak_rss'])}, "
              f"graphpipe {our_runs[-1]['seconds']:.2f} s {mb(our_runs[-1]['peak_rss'])}", flush=True)
    title = (f"ogbn-mag-like, {args.papers:,} papers, {args.authors:,} authors, "
             f"{args.institutions:,} institutions, {args.fields:,} fields, {num_edges:,} edges "
             f"in 4 relations, {args.feature_dim} paper features; median of {args.repeat} "
             f"alternating rounds; {note}")
    table_lines = [f"### {title}", "", *table(median_of(ogb_runs), median_of(our_runs)), ""]
    print("\n".join(table_lines))
    _write(lines + table_lines, args.write)


def _write(lines: list[str], write: bool) -> None:
    if write and lines:
        out = ROOT / "benchmarks" / "results" / "typed_ingest.md"
        header = "" if out.exists() else (
            "# Typed ingest: graphpipe vs ogb's heterogeneous reader\n\n"
            "Command: `.venv/bin/python benchmarks/typed_ingest.py --write` (defaults unless "
            "stated in the heading).\n\n")
        with open(out, "a") as fh:
            fh.write(header + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
