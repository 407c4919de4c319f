"""Micro benchmark of the Numba CSV parser (graphpipe.ingest.csvparse), before and after the
memory-safety rework (issue 14), with pyarrow.csv as the reference.

Times ``parse_block`` on 8 MiB blocks of an OGB-like edge list (``src,dst`` int64) and of a
feature table (100 floats per row, ``%.6f``), for the parser in this tree and, when
``--baseline REV`` is given, the ``csvparse.py`` of that git revision (loaded from
``git show REV:graphpipe/ingest/csvparse.py``); pyarrow's ``read_csv`` on the same bytes for
scale. Best of ``--repeat`` runs, MB/s of CSV text. Run it on a quiet machine.

    .venv/bin/python benchmarks/csvparse.py [--baseline main] [--mb 256] [--repeat 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pcsv

from graphpipe.ingest import csvparse

BLOCK = 8 << 20


def edge_text(megabytes: int) -> bytes:
    rng = np.random.default_rng(0)
    rows = megabytes * (1 << 20) // 16
    pairs = rng.integers(0, 100_000_000, size=(rows, 2))
    return "\n".join(f"{a},{b}" for a, b in pairs).encode() + b"\n"


def feature_text(megabytes: int) -> bytes:
    rng = np.random.default_rng(1)
    rows = max(1, megabytes * (1 << 20) // 1000)
    values = rng.standard_normal((rows, 100))
    buf = io.StringIO()
    np.savetxt(buf, values, fmt="%.6f", delimiter=",")
    return buf.getvalue().encode()


def blocks_of(text: bytes) -> list[bytes]:
    out, start = [], 0
    while start < len(text):
        cut = text.rfind(b"\n", start, start + BLOCK) + 1 or len(text)
        out.append(text[start:cut])
        start = cut
    return out


def load_baseline(rev: str):
    source = subprocess.run(["git", "show", f"{rev}:graphpipe/ingest/csvparse.py"], check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"csvparse_{rev.replace('/', '_')}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run(parser, blocks: list[bytes], ncols: int, dtype, repeat: int) -> float:
    parser.parse_block(blocks[0][:4096].rsplit(b"\n", 1)[0] + b"\n", ncols, dtype)  # compile / load
    return best_of(lambda: [parser.parse_block(b, ncols, dtype) for b in blocks], repeat)


def pyarrow_time(text: bytes, ncols: int, kind, repeat: int) -> float:
    names = [f"c{i}" for i in range(ncols)]
    opts = (pcsv.ReadOptions(column_names=names),
            pcsv.ConvertOptions(column_types={n: kind for n in names}))
    return best_of(lambda: pcsv.read_csv(io.BytesIO(text), read_options=opts[0], convert_options=opts[1]),
                   repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=None, help="git revision whose csvparse.py to compare")
    ap.add_argument("--mb", type=int, default=256, help="MB of CSV text per table")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    results = {}
    for name, text, ncols, dtype, kind in (
            ("edges int64", edge_text(args.mb), 2, np.int64, pa.int64()),
            ("features float32", feature_text(args.mb), 100, np.float32, pa.float64())):
        blocks = blocks_of(text)
        mb = len(text) / 1e6
        row = {"MB": round(mb, 1), "this tree MB/s": round(mb / run(csvparse, blocks, ncols, dtype, args.repeat))}
        if args.baseline:
            base = load_baseline(args.baseline)
            row[f"{args.baseline} MB/s"] = round(mb / run(base, blocks, ncols, dtype, args.repeat))
        row["pyarrow MB/s"] = round(mb / pyarrow_time(text, ncols, kind, args.repeat))
        results[name] = row
        print(name, row, flush=True)
    json.dump(results, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
