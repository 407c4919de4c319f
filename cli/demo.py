"""`graphpipe demo` (`make demo`): the main job end to end on a dataset the demo generates itself.

    graphpipe demo [--dir demo-data] [--nodes 20000] [--epochs 3]

Steps, each the `graphpipe` command a user would type (echoed before it runs):
generate a community graph in OGB's raw layout → ingest it into a store → info
→ validate → a pass of the NeighborLoader (sampling + Match-Reorder feature
gather) → train a GraphSAGE model for a few epochs (checkpoint and JSON-lines metrics
under ``--dir``) and print the test accuracy.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import time
from pathlib import Path

import click


def _run(args: list[str]) -> None:
    """Run one `graphpipe` command in this process, echoing it; stop the demo if it fails."""
    from graphpipe.cli.main import main

    print(f"\n$ graphpipe {shlex.join(args)}", flush=True)
    code = main(args)
    if code:
        sys.exit(code)


def _loader_pass(store_path: Path, batch_size: int) -> None:
    """One epoch of the NeighborLoader with a progress bar, then its statistics."""
    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import GraphStore

    print(f"\n>>> NeighborLoader({store_path}, fanouts=[15, 10, 5], batch_size={batch_size}, "
          f"match_reorder=True)", flush=True)
    loader = NeighborLoader(GraphStore.open(store_path, in_memory="auto"), [15, 10, 5], batch_size=batch_size,
                            input_nodes="train", shuffle=True, seed=0, match_reorder=True,
                            progress=True, frontier="all")
    started = time.perf_counter()
    for _batch in loader:
        pass
    stats = loader.stats.as_dict()
    print(f"{stats['batches']} batches in {time.perf_counter() - started:.2f} s: "
          f"{stats['sampled_edges']:,} sampled edges, {stats['rows_needed']:,} feature rows needed, "
          f"{stats['rows_gathered']:,} gathered from the store, {stats['rows_reused']:,} reused from the "
          f"previous batch (match degree {stats['match_degree_mean']:.2f})")


@click.command("demo")
@click.option("--dir", "folder", default="demo-data", show_default=True,
              help="Where the dataset and store go.")
@click.option("--nodes", type=int, default=20000, show_default=True)
@click.option("--classes", type=int, default=10, show_default=True)
@click.option("--feature-dim", type=int, default=64, show_default=True)
@click.option("--epochs", type=int, default=3, show_default=True)
@click.option("--batch-size", type=int, default=512, show_default=True)
def command(folder: str, nodes: int, classes: int, feature_dim: int, epochs: int,
            batch_size: int) -> None:
    """The main job end to end on a generated community graph: generate, ingest, info,
    validate, one NeighborLoader pass, train GraphSAGE (each step echoed as the command a
    user would type)."""
    root = Path(folder)
    raw, store = root / "community-raw", root / "community-store"
    if not (raw / "raw" / "edge.csv.gz").is_file():
        _run(["generate", "community", str(raw), "--nodes", str(nodes), "--classes", str(classes),
              "--feature-dim", str(feature_dim), "--avg-degree", "10", "--seed", "0", "--overwrite"])
    _run(["ingest", str(raw), str(store), "--overwrite"])
    _run(["info", str(store)])
    _run(["validate", str(store)])
    _loader_pass(store, batch_size)
    _run(["train", str(store), "--model", "sage", "--hidden", "128", "--layers", "2", "--fanouts", "10,5",
          "--batch-size", str(batch_size), "--epochs", str(epochs),
          "--checkpoint", str(root / "sage.ckpt"), "--metrics-log", str(root / "sage-metrics.jsonl")])
    print("\ndemo finished: generate → ingest → info → validate → load → train", flush=True)
    print(_next_steps(store), flush=True)


def _next_steps(store: Path) -> str:
    """How to type the demo's commands yourself: the `graphpipe` command and the package live
    in this interpreter's environment (``.venv`` for `make demo`), which may not be active.
    """
    bin_dir = Path(sys.executable).parent
    if shutil.which("graphpipe") == str(bin_dir / "graphpipe"):
        return f"next: graphpipe info {store}   (graphpipe --help lists the commands)"
    relative = os.path.relpath(bin_dir)
    bin_dir = Path(relative) if not relative.startswith("..") else bin_dir
    return (f"next: source {bin_dir}/activate   (then: graphpipe info {store}, python -c "
            f"'import graphpipe'), or call {bin_dir}/graphpipe directly")
