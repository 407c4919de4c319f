"""The text path (issue 26) on a real GPU: ``graphpipe train --model sage|lm|unitg --device
cuda`` (the GNN on the raw features, the LM alone, both in one job) on the 4K-node
``graphpipe generate tag`` store, as a user runs it (each a ``graphpipe`` process),
beside the same commands with ``--device cpu`` when ``--cpu`` is given.

    python benchmarks/gpu_text_check.py --dir bench-data/tag            # on a machine with CUDA
    python benchmarks/gpu_text_check.py --dir bench-data/tag --cpu      # the CPU rows too

Prints one row per run: model, device, exit code, ``test acc``, wall seconds; ``ok`` when
every run exited 0 and printed its ``test acc`` line.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

RUNS = {"sage": ["--epochs", "20"], "lm": ["--epochs", "3"],
        "unitg": ["--epochs", "100", "--lm-epochs", "3"]}


def _graphpipe(*args: str) -> tuple[int, str, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "graphpipe.cli.main", *args],
                          check=False, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - start


def _store(work: Path, nodes: int) -> Path:
    raw, store = work / "raw", work / "store"
    if not store.exists():
        for args in (("generate", "tag", str(raw), "--nodes", str(nodes)),
                     ("ingest", str(raw), str(store), "--text", str(raw / "titleabs.tsv"), "-q")):
            code, out, _ = _graphpipe(*args)
            if code:
                sys.exit(f"{args[0]} failed ({code}):\n{out[-2000:]}")
    return store


def _test_acc(out: str) -> str:
    lines = [line for line in out.splitlines() if line.startswith("test acc")]
    return lines[-1].split()[-1] if lines else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, required=True)
    parser.add_argument("--nodes", type=int, default=4000)
    parser.add_argument("--cpu", action="store_true", help="also run each model on the CPU")
    opts = parser.parse_args()
    store = _store(opts.dir, opts.nodes)
    devices = ["cuda", "cpu"] if opts.cpu else ["cuda"]
    failed = 0
    for model, args in RUNS.items():
        for device in devices:
            code, out, wall = _graphpipe("train", str(store), "--model", model, *args,
                                         "--device", device, "-q")
            acc = _test_acc(out)
            failed += code != 0 or acc == "-"
            print(f"{model:6s} {device:5s} rc {code}  test acc {acc}  wall {wall:.1f} s", flush=True)
            if code:
                print(out[-3000:], flush=True)
    print("ok" if not failed else f"FAIL: {failed} run(s)")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
