"""Ingest benchmark: graphpipe against OGB's reader and GraphBolt's preprocessing, same run.

    .venv/bin/python benchmarks/ingest.py [--scale 18] [--edge-factor 16] [--feature-dim 100]
                                          [--repeat 3] [--ooc-scales 20,21] [--ooc-limit 256MB]

1. OGB raw folder (R-MAT, 2**scale nodes × feature_dim features): ``ogb``'s
   ``NodePropPredDataset`` (processed cache removed before every run) against
   ``graphpipe ingest``: seconds and peak RSS, each in a fresh process.
2. The same graph as a headerless CSV edge list plus a ``.npy`` feature matrix:
   GraphBolt ``OnDiskDataset(...).load()`` (run with ``.venv-dgl``, see
   benchmarks/README.md) against ``graphpipe ingest edges.csv --node-features feat.npy``.
3. Out of core: an edge list larger than ``--memory-limit``, ingested within it.

Each contender runs in its own interpreter (imports untimed); times are the
median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import machine_note, mb, measure, median_of

ROOT = Path(__file__).resolve().parent.parent
DGL_PYTHON = ROOT / ".venv-dgl" / "bin" / "python"


def prepare_ogb(workdir: Path, scale: int, edge_factor: int, feature_dim: int) -> Path:
    from graphpipe.synthetic import rmat_graph, write_ogb_raw

    folder = workdir / f"rmat{scale}_ef{edge_factor}_f{feature_dim}"
    if not (folder / "raw" / "edge.csv.gz").is_file():
        graph = rmat_graph(scale, edge_factor, feature_dim=feature_dim, seed=0)
        if folder.exists():
            shutil.rmtree(folder)
        write_ogb_raw(folder, graph)
    return folder


def prepare_csv_npy(workdir: Path, scale: int, edge_factor: int, feature_dim: int) -> Path:
    from graphpipe.synthetic import rmat_graph, write_edge_list

    folder = workdir / f"csv_rmat{scale}_ef{edge_factor}_f{feature_dim}"
    if (folder / "metadata.yaml").is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    graph = rmat_graph(scale, edge_factor, feature_dim=feature_dim, seed=0)
    write_edge_list(folder / "edges.csv", graph.src, graph.dst, header=False)
    np.save(folder / "feat.npy", graph.features)
    np.save(folder / "train.npy", graph.splits["train"])
    (folder / "metadata.yaml").write_text(
        "dataset_name: rmat\n"
        "graph:\n"
        f"  nodes:\n    - num: {graph.num_nodes}\n"
        "  edges:\n    - format: csv\n      path: edges.csv\n"
        "feature_data:\n"
        "  - domain: node\n    name: feat\n    format: numpy\n    in_memory: true\n    path: feat.npy\n"
        "tasks:\n  - name: node_classification\n    num_classes: 10\n"
        "    train_set:\n      - data:\n          - name: seeds\n            format: numpy\n"
        "            path: train.npy\n"
    )
    return folder


GRAPHPIPE_SETUP = "from graphpipe.ingest import IngestOptions, ingest; from graphpipe.ingest.formats import open_source; from graphpipe.ingest.pipeline import attach_npy_features"


def run_ogb_reader(folder: Path) -> dict:
    processed = folder / "processed"
    if processed.exists():
        shutil.rmtree(processed)
    processed.mkdir()
    setup = ("from ogb.nodeproppred import NodePropPredDataset\n"
             "from graphpipe.synthetic import ogb_meta_dict\n"
             f"meta = ogb_meta_dict({str(folder)!r})")
    work = f"d = NodePropPredDataset(name={folder.name!r}, meta_dict=meta); result = int(d.graph['edge_index'].shape[1])"
    out = measure(setup, work)
    shutil.rmtree(processed)
    processed.mkdir()
    return out


def run_graphpipe_ogb(folder: Path, dest: Path) -> dict:
    work = (f"s = ingest({str(folder)!r}, {str(dest)!r}, IngestOptions(overwrite=True)); "
            "result = int(s.num_edges)")
    return measure(GRAPHPIPE_SETUP, work)


def run_graphpipe_csv(folder: Path, dest: Path, memory_limit: str | None = None) -> dict:
    work = (f"src = open_source({str(folder / 'edges.csv')!r}, header=False)\n"
            f"attach_npy_features(src, {str(folder / 'feat.npy')!r})\n"
            f"s = ingest(src, {str(dest)!r}, IngestOptions(overwrite=True, memory_limit={memory_limit!r}))\n"
            "result = {'edges': int(s.num_edges), 'out_of_core': s.manifest['build']['out_of_core']}")
    return measure(GRAPHPIPE_SETUP, work)


def run_graphbolt(folder: Path) -> dict | None:
    if not DGL_PYTHON.exists():
        return None
    preprocessed = folder / "preprocessed"
    if preprocessed.exists():
        shutil.rmtree(preprocessed)
    started = time.perf_counter()
    proc = subprocess.run([str(DGL_PYTHON), str(ROOT / "benchmarks" / "peers" / "graphbolt_ingest.py"),
                           str(folder)], check=False, capture_output=True, text=True, timeout=1800)
    total = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return {**json.loads(proc.stdout.strip().splitlines()[-1]), "total_seconds": total}


def row(name: str, r: dict, ref: dict | None = None) -> str:
    ratio = f"{ref['seconds'] / r['seconds']:.2f}×" if ref else "1.00×"
    total = r.get("total_seconds")
    total_ratio = (f"{ref['total_seconds'] / total:.2f}×" if ref and total and ref.get("total_seconds")
                   else ("1.00×" if total else "n/a"))
    mem = f"{ref['peak_rss'] / r['peak_rss']:.2f}×" if ref else "1.00×"
    return (f"| {name} | {r['seconds']:.2f} s | {ratio} | {total:.2f} s | {total_ratio} | "
            f"{mb(r['peak_rss'])} | {mem} |" if total else
            f"| {name} | {r['seconds']:.2f} s | {ratio} | n/a | n/a | {mb(r['peak_rss'])} | {mem} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=int, default=18)
    parser.add_argument("--edge-factor", type=int, default=16)
    parser.add_argument("--feature-dim", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--ooc-scales", default="20,21", help="R-MAT scales of the out-of-core runs")
    parser.add_argument("--ooc-limit", default="256MB")
    parser.add_argument("--workdir", default=str(ROOT / "bench-data" / "ingest"))
    parser.add_argument("--skip", default="", help="comma list of parts to skip: ogb,csv,ooc")
    args = parser.parse_args()
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    skip = set(filter(None, args.skip.split(",")))
    header = ("| contender | work time | speed-up | whole process | speed-up | peak RSS | memory ratio |\n"
              "|---|---|---|---|---|---|---|")
    print(f"# ingest benchmark ({machine_note()})")

    if "ogb" not in skip:
        folder = prepare_ogb(workdir, args.scale, args.edge_factor, args.feature_dim)
        ogb_runs, gp_runs = [], []
        for _ in range(args.repeat):
            ogb_runs.append(run_ogb_reader(folder))
            gp_runs.append(run_graphpipe_ogb(folder, workdir / "store_ogb"))
        ogb, gp = median_of(ogb_runs), median_of(gp_runs)
        print(f"\n## 1. OGB raw folder: {2 ** args.scale:,} nodes, {ogb['result']:,} edges, "
              f"{args.feature_dim} features (median of {args.repeat})\n")
        print(header)
        print(row("ogb NodePropPredDataset", ogb))
        print(row("graphpipe ingest", gp, ogb))
        print(f"\nall runs (s): ogb {[round(r['seconds'], 2) for r in ogb_runs]}, "
              f"graphpipe {[round(r['seconds'], 2) for r in gp_runs]}")

    if "csv" not in skip:
        folder = prepare_csv_npy(workdir, args.scale, args.edge_factor, args.feature_dim)
        gb_runs, gp_runs = [], []
        for _ in range(args.repeat):
            result = run_graphbolt(folder)
            if result is not None:
                gb_runs.append(result)
            gp_runs.append(run_graphpipe_csv(folder, workdir / "store_csv"))
        gp = median_of(gp_runs)
        print(f"\n## 2. CSV edge list + .npy features (median of {args.repeat})\n")
        print(header)
        if gb_runs:
            gbr = median_of(gb_runs)
            print(row("GraphBolt OnDiskDataset preprocess", gbr))
            print(row("graphpipe ingest", gp, gbr))
            print(f"\nall runs (s): graphbolt {[round(r['seconds'], 2) for r in gb_runs]}, "
                  f"graphpipe {[round(r['seconds'], 2) for r in gp_runs]}")
        else:
            print(row("graphpipe ingest", gp))
            print("\n(GraphBolt not measured: .venv-dgl missing; `make peers` creates it)")

    if "ooc" not in skip:
        from graphpipe.ingest.options import parse_size

        limit = parse_size(args.ooc_limit)
        print(f"\n## 3. Out of core: edge lists larger than --memory-limit {args.ooc_limit} "
              f"({mb(limit)}); the same fixed overhead at every size shows the bound holds\n")
        print("| edges | CSV size | as int64 pairs | time | peak RSS | RSS after imports | "
              "peak − limit | out-of-core path |\n|---|---|---|---|---|---|---|---|")
        for scale in sorted(int(v) for v in args.ooc_scales.split(",")):
            folder = prepare_csv_npy(workdir, scale, args.edge_factor, args.feature_dim)
            csv_bytes = (folder / "edges.csv").stat().st_size
            num_edges = args.edge_factor * 2 ** scale
            r = run_graphpipe_csv(folder, workdir / "store_ooc", memory_limit=args.ooc_limit)
            print(f"| {num_edges:,} | {mb(csv_bytes)} | {mb(num_edges * 16)} | {r['seconds']:.2f} s | "
                  f"{mb(r['peak_rss'])} | {mb(r['baseline_rss'])} | {mb(r['peak_rss'] - limit)} | "
                  f"{r['result']['out_of_core']} |")

if __name__ == "__main__":
    main()
