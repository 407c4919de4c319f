"""Issue 19: run an example port as a script (``examples/pyg_products_sage_graphpipe.py`` by
default) on the products-like store ``benchmarks/dropin_pyg.py`` generates, and time its
epochs from the lines it prints (no change to the script but its schedule: ``--epochs``
epochs of one run, evaluated after the last).

Epoch ``e``'s time is from the line of epoch ``e-1`` to its own line (epoch 1: from the
start of the process, so it includes imports, opening the store and warm-up); ``test`` is
from the last epoch's line to the ``Train:`` line (layer-wise inference and evaluation).

    .venv/bin/python benchmarks/dropin_pyg_script.py [--nodes 50000] [--epochs 2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def schedule(source: str, epochs: int) -> str:
    """One run of ``epochs`` epochs, ``test()`` after the last one."""
    for pattern, repl in ((r"for run in range\(1, \d+\):", "for run in range(1, 2):"),
                          (r"for epoch in range\(1, \d+\):", f"for epoch in range(1, {epochs + 1}):"),
                          (r"if epoch > \d+:", f"if epoch > {epochs - 1}:")):
        source, count = re.subn(pattern, repl, source)
        assert count == 1, f"the example's schedule changed ({pattern})"
    return source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", default="pyg_products_sage_graphpipe.py")
    parser.add_argument("--nodes", type=int, default=50_000)
    parser.add_argument("--avg-degree", type=float, default=10)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    from dropin_pyg import make_store

    store = make_store(args.nodes, args.avg_degree)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "data").mkdir()
        (Path(tmp) / "data" / "products").symlink_to(store.path.resolve())
        (Path(tmp) / "examples").mkdir()
        script = Path(tmp) / "examples" / args.script
        script.write_text(schedule((ROOT / "examples" / args.script).read_text(), args.epochs))
        env = {**os.environ, "OUTDATED_IGNORE": "1"}  # ogb's version check needs the network
        start = last = time.perf_counter()
        proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, env=env)
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.perf_counter()
            if line.startswith(("Epoch", "Train:")):
                label = "test" if line.startswith("Train:") else line.split(",")[0].lower()
                print(f"{label:9s} {now - last:7.2f} s | {line.rstrip()}", flush=True)
                last = now
        print(f"total {time.perf_counter() - start:.2f} s, exit {proc.wait()}")


if __name__ == "__main__":
    main()
