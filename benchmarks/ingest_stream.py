"""Streamed ingest of the papers100M-bin layout under a memory cap (issue 16, item 1).

For each size (``--nodes`` times each of ``--fractions``; default 8.4M nodes and half of
it, 5 R-MAT edges per node, 128-dim float32 features = 4.3 GB at 8.4M):

1. ``graphpipe generate papers100m-bin`` writes the folder (under ``memlimit.sh
   --gen-cap``: the generator's own peak is reported too);
2. ``graphpipe ingest FOLDER STORE`` runs under ``memlimit.sh CAP`` (default 1.5G; the
   cap counts the page cache and the clean cache is dropped first): wall time, the
   cgroup's peak, the process's maximum resident set (``/usr/bin/time``), rc;
3. when ingest succeeded, the store is checked against the source: every node's
   in-degree (the ``edge_index`` destination row streamed from the npz member, block by
   block) and ``--sample`` random feature rows (the ``node_feat`` member streamed once),
   bit-exact;
4. from the two sizes, time and resident peak are projected to ogbn-papers100M (111,059,956
   nodes, 1,615,685,872 edges) linearly in the input bytes ``16 E + 4 dim N``
   (formula printed).

``--python`` picks the interpreter whose graphpipe runs the ingest (another checkout's
venv: the 'before' row). Folders are kept in ``--work`` and reused when present.

Tiny proof run (not a measurement)::

    .venv/bin/python benchmarks/ingest_stream.py --nodes 40000 --work is-tiny
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

# ../shared/tools/memlimit.sh beside the repository (GRAPHPIPE_MEMLIMIT to use another)
MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[2] / "shared" / "tools" / "memlimit.sh")
PAPERS100M_NODES, PAPERS100M_EDGES = 111_059_956, 1_615_685_872
CLI = "import sys; from graphpipe.cli.main import main; sys.exit(main())"


def capped(cap: str, cmd: list[str], cwd: Path) -> dict:
    """Run ``cmd`` under memlimit.sh ``cap`` in ``cwd`` (not the repository: ``python -c``
    would import the graphpipe beside it, not the interpreter's): wall seconds, rc, the
    memlimit line, stderr tail."""
    start = time.perf_counter()
    proc = subprocess.run([str(MEMLIMIT), cap, *cmd], check=False, capture_output=True, text=True,
                          cwd=cwd)
    wall = time.perf_counter() - start
    line = next((ln for ln in proc.stderr.splitlines() if ln.startswith("memlimit:")), "")
    fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
    rss = [ln for ln in proc.stderr.splitlines() if ln.startswith("maxrss_kb=")]
    tail = [ln for ln in proc.stderr.splitlines()
            if ln and not ln.startswith(("memlimit:", "maxrss_kb="))][-3:]
    return {"wall_s": round(wall, 1), "rc": proc.returncode, "memlimit": line,
            "peak": fields.get("peak", "?"), "peak_bytes": _bytes(fields.get("peak", "0")),
            "max_rss_bytes": int(rss[-1].split("=")[1]) * 1024 if rss else 0,
            "stderr_tail": tail}


def _bytes(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.strip()
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(float(text or 0))


def npy_header(f) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of the ``.npy`` stream ``f``, left at the first data byte."""
    version = np.lib.format.read_magic(f)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(f)
    if fortran:
        raise ValueError("Fortran-order member")
    return shape, dtype


def member_blocks(npz: Path, name: str, rows_per_block: int):
    """``(first_row, block)`` of member ``name`` of ``npz`` read as a stream: the npy header,
    then ``rows_per_block`` rows at a time (never the whole member)."""
    with zipfile.ZipFile(npz) as zf, zf.open(f"{name}.npy") as f:
        shape, dtype = npy_header(f)
        row_values = int(np.prod(shape[1:], dtype=np.int64))
        row = 0
        while row < shape[0]:
            count = min(rows_per_block, shape[0] - row)
            data = f.read(count * row_values * dtype.itemsize)
            yield row, np.frombuffer(data, dtype=dtype).reshape((count, *shape[1:]))
            row += count


def check_store(folder: Path, store_path: Path, sample: int, seed: int) -> dict:
    """In-degrees of every node and ``sample`` random feature rows, store vs source."""
    from graphpipe.store import GraphStore

    store = GraphStore.open(store_path, in_memory=False)
    npz = folder / "raw" / "data.npz"
    n = store.num_nodes
    degree = np.zeros(n, dtype=np.int64)
    # edge_index is (2, E): the destination row is the second half of the member
    edges = store.num_edges
    per_block = 1 << 22
    for start, block in member_blocks_flat(npz, "edge_index", per_block):
        stop = start + len(block)
        if stop > edges:
            dst = block[max(edges, start) - start:]
            degree += np.bincount(dst, minlength=n)
    degrees_equal = bool(np.array_equal(degree, store.in_degrees))
    rng = np.random.default_rng(seed)
    ids = np.sort(rng.choice(n, size=min(sample, n), replace=False))
    source_rows = np.empty((len(ids), store.feature_dim), dtype=np.float32)
    for first, block in member_blocks(npz, "node_feat", 1 << 14):
        lo, hi = np.searchsorted(ids, [first, first + len(block)])
        source_rows[lo:hi] = block[ids[lo:hi] - first]
    stored = store.features(ids)
    features_equal = bool(stored.dtype == source_rows.dtype and
                          np.array_equal(stored.view(np.uint32), source_rows.view(np.uint32)))
    return {"in_degrees_equal": degrees_equal, "feature_rows_checked": len(ids),
            "features_bit_exact": features_equal}


def member_blocks_flat(npz: Path, name: str, values_per_block: int):
    """``(first_value, values)`` of a member read flat, ``values_per_block`` at a time."""
    with zipfile.ZipFile(npz) as zf, zf.open(f"{name}.npy") as f:
        shape, dtype = npy_header(f)
        total = int(np.prod(shape, dtype=np.int64))
        done = 0
        while done < total:
            count = min(values_per_block, total - done)
            yield done, np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype)
            done += count


def input_bytes(nodes: int, edges: int, dim: int) -> int:
    return 16 * edges + 4 * dim * nodes


def project(rows: list[dict], key: str, dim: int) -> tuple[float, str]:
    """Linear in input bytes through the two measured sizes, evaluated at papers100M."""
    (a, b) = rows[0], rows[1]
    xa, xb = a["input_bytes"], b["input_bytes"]
    ya, yb = a[key], b[key]
    slope = (yb - ya) / (xb - xa)
    x = input_bytes(PAPERS100M_NODES, PAPERS100M_EDGES, dim)
    value = ya + slope * (x - xa)
    formula = (f"{key}(papers100M) = {ya:.4g} + ({yb:.4g} - {ya:.4g}) / ({xb:.4g} - {xa:.4g})"
               f" x ({x:.4g} - {xa:.4g}) = {value:.4g}   [x = 16 E + 4 dim N bytes]")
    return value, formula


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=8_400_000)
    p.add_argument("--fractions", default="0.5,1", help="sizes as fractions of --nodes")
    p.add_argument("--edges-per-node", type=int, default=5)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--cap", default="1.5G", help="memlimit.sh cap of the ingest")
    p.add_argument("--gen-cap", default="4G", help="memlimit.sh cap of the generator")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter whose graphpipe ingests (another checkout's venv)")
    p.add_argument("--ingest-args", default="", help="extra arguments for graphpipe ingest")
    p.add_argument("--timeout", type=int, default=600,
                   help="seconds an ingest may run (then rc 124: too slow, not failed)")
    p.add_argument("--sample", type=int, default=4096, help="feature rows checked")
    p.add_argument("--work", default=None, help="folder for datasets and stores (kept)")
    p.add_argument("--json", default=None, help="write the rows here too")
    args = p.parse_args()
    if not MEMLIMIT.is_file():
        sys.exit(f"memlimit.sh not found at {MEMLIMIT} (set GRAPHPIPE_MEMLIMIT)")
    work = Path(args.work or tempfile.mkdtemp(prefix="ingest_stream-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"cap {args.cap}; ingest by {args.python}; timeout {args.timeout} s; work {work}")
    print(f"{'nodes':>10} {'edges':>11} {'input':>8} | {'gen s':>6} {'gen peak':>8} | "
          f"{'ingest s':>8} {'peak':>6} {'maxRSS':>7} {'rc':>4} | check")
    for fraction in (float(f) for f in args.fractions.split(",")):
        nodes = int(args.nodes * fraction)
        folder = work / f"papers-{nodes}"
        gen = {"wall_s": 0.0, "peak": "reused", "rc": 0}
        if not (folder / "raw" / "data.npz").is_file():
            gen = capped(args.gen_cap, [sys.executable, "-c", CLI, "generate", "papers100m-bin",
                                        str(folder), "--nodes", str(nodes), "--edges-per-node",
                                        str(args.edges_per_node), "--dim", str(args.dim), "-q"],
                         work)
            if gen["rc"] != 0:
                sys.exit(f"generate failed: {gen}")
        store = work / f"store-{nodes}"
        ing = capped(args.cap, ["/usr/bin/time", "-f", "maxrss_kb=%M",
                                "timeout", str(args.timeout), args.python, "-c", CLI, "ingest",
                                str(folder), str(store), "--overwrite", "-q",
                                *args.ingest_args.split()], work)
        check = check_store(folder, store, args.sample, seed=nodes) if ing["rc"] == 0 else {}
        edges = nodes * args.edges_per_node
        row = {"nodes": nodes, "edges": edges, "input_bytes": input_bytes(nodes, edges, args.dim),
               "generate": gen, "ingest": ing, "check": check,
               "wall_s": ing["wall_s"], "peak_bytes": ing["peak_bytes"],
               "max_rss_bytes": ing["max_rss_bytes"]}
        rows.append(row)
        print(f"{nodes:>10} {edges:>11} {row['input_bytes'] / 2**30:7.2f}G | "
              f"{gen['wall_s']:6.1f} {gen['peak']:>8} | {ing['wall_s']:8.1f} {ing['peak']:>6} "
              f"{ing['max_rss_bytes'] / 2**20:6.0f}M {ing['rc']:>4} | {json.dumps(check) if check else ing['stderr_tail']}")
        print(f"    {ing['memlimit']}")
    ok = [r for r in rows if r["ingest"]["rc"] == 0]
    if len(ok) >= 2:
        for key in ("wall_s", "max_rss_bytes"):
            _value, formula = project(ok[:2], key, args.dim)
            print("projection:", formula)
        print("memlimit's peak counts the page cache the ingest writes (it fills the cgroup up "
              "to the cap and is reclaimed there); maxRSS is the process's own resident peak")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
