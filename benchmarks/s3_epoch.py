"""A loader epoch over a store on object storage: cold cache vs warm cache vs the local store.

An S3-compatible server (moto's ``moto_server``, a subprocess on loopback) holds a store
ingested with ``graphpipe ingest SRC s3://...``. Per round, in this order:

* ``local``:  ``graphpipe.store.open(local path)`` + one ``NeighborLoader`` epoch;
* ``cold``:   ``graphpipe.store.open("s3://...", cache_dir=<empty>)`` + the same epoch (every
  object the epoch needs is fetched once: GETs and bytes counted by the store);
* ``cached``: the same URL and cache directory again (the manifest is the only GET);
* ``cold, 32 MiB ranged parts``: ``cold`` with objects above 32 MiB (here the two 64 MiB
  feature chunks) in ranged GETs of ``remote.PART_BYTES``, as objects above
  ``remote.RANGED_BYTES`` (256 MiB) always are: what the parts cost against whole GETs.

Rounds alternate; best and median per mode, ratios against ``local``. moto is a Python
server: the cold figure is bounded by its speed on this machine, not by a network; read
the GET count and bytes for what real S3 would serve.

    .venv/bin/python benchmarks/s3_epoch.py --nodes 200000 --dim 128 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_moto(port: int) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("moto_server")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "moto.server"]
    proc = subprocess.Popen([*cmd, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("moto_server did not start")


def make_source(folder: Path, nodes: int, dim: int) -> Path:
    from graphpipe.synthetic import community_graph

    g = community_graph(nodes, 16, feature_dim=dim, avg_degree=10, seed=0)
    path = folder / "graph.npz"
    np.savez(path, edge_index=np.stack([g.src, g.dst]), x=g.features.astype(np.float32), y=g.labels,
             train_idx=g.splits["train"])
    return path


def epoch(path: str, cache_dir: str | None, batch: int) -> tuple[float, int, int]:
    """Seconds for open + one epoch; GETs and bytes (0 for a local store)."""
    from graphpipe.loaders import NeighborLoader
    from graphpipe.store import open_store

    started = time.perf_counter()
    store = open_store(path, cache_dir=cache_dir)
    for _ in NeighborLoader(store, [10, 5], "train", batch_size=batch, shuffle=True, seed=0):
        pass
    seconds = time.perf_counter() - started
    stats = getattr(store, "requests", None)
    return seconds, (stats.gets if stats else 0), (stats.get_bytes if stats else 0)


def ranged(url: str, cache_dir: str, batch: int) -> tuple[float, int, int]:
    """A cold epoch with every chunk above 32 MiB in ranged parts (what large objects, above
    ``remote.RANGED_BYTES``, get), to show what the parts cost against whole GETs."""
    from graphpipe.store import remote

    saved, remote.RANGED_BYTES = remote.RANGED_BYTES, 32 << 20
    try:
        return epoch(url, cache_dir, batch)
    finally:
        remote.RANGED_BYTES = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    port = _free_port()
    moto = start_moto(port)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_DEFAULT_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/bench", method="PUT")).close()
    tmp = Path(tempfile.mkdtemp(prefix="s3-epoch-"))
    os.environ["GRAPHPIPE_CACHE_DIR"] = str(tmp / "default-cache")
    try:
        from graphpipe.ingest import ingest
        from graphpipe.store.object_store import RemotePrefix

        src = make_source(tmp, args.nodes, args.dim)
        local, url = str(tmp / "local"), "s3://bench/graphs/g"
        ingest(src, local)
        started = time.perf_counter()
        ingest(src, url)
        upload = time.perf_counter() - started
        listing = RemotePrefix(url).list()
        print(f"store: {args.nodes:,} nodes x {args.dim} float32, {len(listing)} objects, "
              f"{sum(listing.values()) / 2**20:.1f} MiB; ingest to s3:// {upload:.2f} s; "
              f"batch {args.batch}, fanouts [10, 5], moto_server on loopback")
        epoch(local, None, args.batch)          # warm-up: Numba compilation, page cache
        runs: dict[str, list[tuple[float, int, int]]] = {"local": [], "cold": [], "cached": [],
                                                          "cold, 32 MiB ranged parts": []}
        for r in range(args.rounds):
            cache = tmp / f"cache{r}"
            runs["local"].append(epoch(local, None, args.batch))
            runs["cold"].append(epoch(url, str(cache), args.batch))
            runs["cached"].append(epoch(url, str(cache), args.batch))
            shutil.rmtree(cache)
            runs["cold, 32 MiB ranged parts"].append(ranged(url, str(cache), args.batch))
            shutil.rmtree(cache)
        report(runs)
    finally:
        moto.kill()
        moto.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def report(runs: dict[str, list[tuple[float, int, int]]]) -> None:
    base = min(s for s, _, _ in runs["local"])
    print("| mode | best s (open + epoch) | median s | vs local (best) | GETs | MiB fetched |")
    print("| --- | --- | --- | --- | --- | --- |")
    for mode, rows in runs.items():
        secs = [s for s, _, _ in rows]
        print(f"| {mode} | {min(secs):.3f} | {statistics.median(secs):.3f} | {min(secs) / base:.2f}x | "
              f"{rows[0][1]} | {rows[0][2] / 2**20:.1f} |")


if __name__ == "__main__":
    main()
