"""Sampling service throughput and latency on loopback, against the in-process sampler.

Graph: R-MAT scale 21, edge factor 16, 100-dim features (the store of
benchmarks/loader.py, built once under $TMPDIR/graphpipe_bench). Batches of 1024
seeds from the train split, fanouts [15, 10, 5]. A ``graphpipe serve`` subprocess
(2 sampling threads, logging one line per call) serves it on 127.0.0.1; each client
is a separate process that sends one batch per call for ``--seconds`` seconds.

Measured in the same run:

- 1 client vs the in-process sampler, one batch per call (``sample_neighbors``, 1
  thread) and a window of 8 batches per call (``LocalSampler``, 2 threads; the
  service samples a window's batches in parallel too), best of ``--rounds``
  interleaved rounds. The client either calls ``Client.sample_batches`` once per
  window (what ``RemoteSampler.sample_from_nodes`` does) or iterates
  ``Client.sample_stream`` (``RemoteSampler.sample_stream``: 2 windows in flight).
  The in-process sampler runs in its own process too, with the default allocator and
  with ``tune_allocator()`` (what the service's server and clients apply). Each client
  mode runs twice: through a shared-memory arena (the default on loopback) and over
  Flight only;
- ``NeighborLoader`` over ``RemoteSampler`` against the local ``NeighborLoader``
  (feature rows gathered in the loader's process), interleaved rounds;
- 1, 2, 4 and 8 concurrent clients, both call sizes: batches/s, p50/p99 latency;
- a soak: 4 clients for ``--soak`` seconds, errors counted, server RSS sampled every
  second (psutil).

    .venv/bin/python benchmarks/service.py [--seconds 8] [--rounds 3] [--soak 60] [--write]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

FANOUTS = [15, 10, 5]
BATCH = 1024
WINDOW = 8


def seed_batches(store, count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    train = store.split("train")
    return [rng.choice(train, BATCH, replace=False) for _ in range(count)]


def percentiles(lat_s: list[float]) -> dict:
    arr = np.asarray(lat_s) * 1e3
    return {"p50_ms": float(np.percentile(arr, 50)), "p99_ms": float(np.percentile(arr, 99))}


# -- client worker (a separate process) -----------------------------------------------------------
def worker(url: str, store_path: str, worker_id: int, seconds: float, per_call: int, mode: str = "call") -> dict:
    """Warm up, print ``ready``, wait for a line on stdin, then sample windows of
    ``per_call`` batches for ``seconds``; the JSON result goes to stdout.

    ``mode`` ``call``: one ``Client.sample_batches`` call per window, back to back
    (``RemoteSampler.sample_from_nodes``); latency per call. ``stream``: iterate
    ``Client.sample_stream`` (2 windows in flight); latency from sending a window's
    request to receiving its results. Batches come through a shared-memory arena (the
    client's default on loopback); with the suffix ``-flight`` over Flight only
    (``Client(url, shared_memory=False)``).
    """
    from collections import deque

    from graphpipe.service import Client
    from graphpipe.store import GraphStore

    batches = seed_batches(GraphStore.open(store_path), 64, 1000 + worker_id)
    latencies, errors, first_error, done = [], 0, None, 0

    def window(i: int) -> tuple[list[np.ndarray], list[int]]:
        start = (i * per_call) % (len(batches) - per_call + 1)
        return batches[start:start + per_call], list(range(i * per_call, (i + 1) * per_call))

    mode, _, transport = mode.partition("-")
    with Client(url, shared_memory=False if transport == "flight" else None) as client:
        client.sample(batches[0], FANOUTS, seed=0)  # connect, warm up (and attach the arena)
        if transport != "flight" and client.arena() is None:
            raise RuntimeError("the client got no shared-memory arena")
        print("ready", flush=True)
        sys.stdin.readline()
        cpu_start = time.process_time()
        t_start = time.perf_counter()
        t_end = t_start + seconds
        if mode == "stream":
            sent: deque[float] = deque()

            def windows():
                i = 0
                while time.perf_counter() < t_end:
                    sent.append(time.perf_counter())  # pulled right before its request is sent
                    yield window(i)
                    i += 1

            try:
                for results in client.sample_stream(windows(), FANOUTS, depth=2):
                    latencies.append(time.perf_counter() - sent.popleft())
                    done += len(results)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                errors += 1
                first_error = f"{type(exc).__name__}: {exc}"
        else:
            i = 0
            while time.perf_counter() < t_end:
                t0 = time.perf_counter()
                try:
                    client.sample_batches(*window(i), FANOUTS)
                    done += per_call
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    errors += 1
                    first_error = first_error or f"{type(exc).__name__}: {exc}"
                latencies.append(time.perf_counter() - t0)
                i += 1
    return {"latencies": latencies, "batches": done, "elapsed": time.perf_counter() - t_start,
            "cpu_s": time.process_time() - cpu_start, "errors": errors, "first_error": first_error}


def run_clients(url: str, store_path: str, count: int, seconds: float, per_call: int, server,
                on_tick=None, mode: str = "call") -> dict:
    """``count`` client processes started together (after each has warmed up); ``server``
    is the server's psutil.Process (its CPU time is counted)."""
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", url, store_path, str(w), str(seconds),
                               str(per_call), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for w in range(count)]
    for p in procs:
        if p.stdout.readline().strip() != "ready":
            raise RuntimeError("client failed to start")
    server_cpu = sum(server.cpu_times()[:2])
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    if on_tick is not None:
        t0 = time.perf_counter()
        while any(p.poll() is None for p in procs) and time.perf_counter() - t0 < seconds + 60:
            on_tick(time.perf_counter() - t0)
            time.sleep(1.0)
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 120)
        if p.returncode != 0:
            raise RuntimeError(f"client exited with {p.returncode}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    server_cpu = sum(server.cpu_times()[:2]) - server_cpu
    latencies = [x for r in results for x in r["latencies"]]
    batches = sum(r["batches"] for r in results)
    elapsed = max(r["elapsed"] for r in results)  # the last call ends after `seconds`
    return {"clients": count, "per_call": per_call, "mode": mode, "calls": len(latencies), "batches": batches,
            "seconds": elapsed, "batches_per_s": batches / elapsed, **percentiles(latencies),
            "cpu_ms_per_batch": 1e3 * (server_cpu + sum(r["cpu_s"] for r in results)) / max(1, batches),
            "server_cpu_ms_per_batch": 1e3 * server_cpu / max(1, batches),
            "errors": sum(r["errors"] for r in results),
            "first_error": next((r["first_error"] for r in results if r["first_error"]), None)}


# -- in-process baselines ---------------------------------------------------------------------------
def in_process(store, batches: list[np.ndarray], seconds: float, per_call: int) -> dict:
    """The in-process sampler called like a client calls the service: one batch per call
    (``sample_neighbors``, 1 thread) or a window per call (``LocalSampler``, 2 threads)."""
    from graphpipe.loaders import LocalSampler
    from graphpipe.ops.sampling import sample_neighbors

    indptr, indices = np.asarray(store.indptr), np.asarray(store.indices)
    sampler = LocalSampler(indptr, indices, FANOUTS, num_threads=2)

    def call(start: int, first_key: int) -> None:
        if per_call == 1:
            sample_neighbors(indptr, indices, batches[start], FANOUTS, seed=first_key)
        else:
            sampler.sample_from_nodes(batches[start:start + per_call],
                                      list(range(first_key, first_key + per_call)))

    call(0, 0)  # warm-up
    call(per_call, per_call)
    latencies, i = [], 0
    cpu_start = time.process_time()
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        start = (i * per_call) % (len(batches) - per_call + 1)
        t0 = time.perf_counter()
        call(start, i * per_call)
        latencies.append(time.perf_counter() - t0)
        i += 1
    return {"clients": 0, "per_call": per_call, "calls": i, "batches": i * per_call,
            "seconds": sum(latencies), "batches_per_s": i * per_call / sum(latencies), **percentiles(latencies),
            "cpu_ms_per_batch": 1e3 * (time.process_time() - cpu_start) / (i * per_call), "errors": 0}


def in_process_subprocess(store_path: str, seconds: float, per_call: int, tuned: bool) -> dict:
    """:func:`in_process` in a fresh process (``tuned``: after ``tune_allocator()``)."""
    env = dict(os.environ)
    if not tuned:  # LocalSampler tunes malloc by default: switch it off for the reference row
        env["GRAPHPIPE_TUNE_MALLOC"] = "0"
    out = subprocess.run([sys.executable, __file__, "--in-process", store_path, str(seconds), str(per_call),
                          "1" if tuned else "0"], check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- NeighborLoader over the service vs the local loader ----------------------------------------------
def loader_run(store_path: str, seconds: float, url: str | None) -> dict:
    """Iterate ``NeighborLoader(store, [15, 10, 5], 1024, window=8)`` over the train split
    (epoch after epoch) for ``seconds``: sampling by ``RemoteSampler(url)`` (windows
    streamed, 2 in flight; feature rows gathered from the store in this process) or, with
    ``url`` None, by the local sampler (2 threads, one window sampled ahead). Batches/s
    and this process's CPU time per batch."""
    from graphpipe.loaders import NeighborLoader
    from graphpipe.service import RemoteSampler
    from graphpipe.store import GraphStore

    store = GraphStore.open(store_path)
    sampler = RemoteSampler(url) if url else None
    loader = NeighborLoader(store, FANOUTS, batch_size=BATCH, input_nodes="train", window=WINDOW, shuffle=True, seed=0,
                            sampler=sampler)
    epoch_iter = iter(loader)
    for _ in range(2 * WINDOW):  # warm up: compile, fault the store's pages in
        next(epoch_iter)
    batches, checksum = 0, 0.0
    cpu_start = time.process_time()
    t_start = time.perf_counter()
    while time.perf_counter() - t_start < seconds:
        try:
            batch = next(epoch_iter)
        except StopIteration:
            epoch_iter = iter(loader)
            continue
        checksum += float(batch.x[0, 0])  # the batch is complete
        batches += 1
    elapsed = time.perf_counter() - t_start
    cpu = time.process_time() - cpu_start
    epoch_iter.close()
    return {"batches": batches, "seconds": elapsed, "batches_per_s": batches / elapsed,
            "cpu_ms_per_batch": 1e3 * cpu / max(1, batches), "checksum": checksum}


def loader_subprocess(store_path: str, seconds: float, url: str | None, server=None) -> dict:
    """:func:`loader_run` in a fresh process; with ``server`` (psutil.Process) its CPU too."""
    server_cpu = sum(server.cpu_times()[:2]) if server is not None else 0.0
    out = subprocess.run([sys.executable, __file__, "--loader", store_path, str(seconds), url or "-"],
                         check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if server is not None:  # includes the client's warm-up: an upper bound
        result["server_cpu_ms_per_batch"] = 1e3 * (sum(server.cpu_times()[:2]) - server_cpu) / max(1, result["batches"])
    return result


# -- server -----------------------------------------------------------------------------------------
def start_server(store_path: str, log_path: Path) -> tuple[subprocess.Popen, str]:
    log = open(log_path, "w")  # noqa: SIM115 - held by the child
    proc = subprocess.Popen([sys.executable, "-m", "graphpipe.cli.serve", store_path, "--port", "0",
                             "--threads", "2"], stdout=subprocess.PIPE, stderr=log, text=True)
    log.close()
    line = proc.stdout.readline()
    if not line.startswith("serving "):
        proc.kill()
        raise RuntimeError(f"server failed: {log_path.read_text()[-2000:]}")
    return proc, line.split(" on ", 1)[1].strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the 1-client comparisons")
    parser.add_argument("--soak", type=float, default=60.0)
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--render", metavar="JSON", help="only write the markdown of a saved raw report")
    args = parser.parse_args()
    if args.render:
        write_markdown(json.loads(Path(args.render).read_text()), args)
        return

    import psutil
    from loader import bench_store

    store, _ = bench_store()
    store_path = str(store.path)
    load_before = os.getloadavg()
    report: dict = {"graph": {"nodes": store.num_nodes, "edges": store.num_edges, "scale": 21},
                    "batch_size": BATCH, "fanouts": FANOUTS, "window": WINDOW}
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / "graphpipe_bench" / "service_server.log"
    proc, url = start_server(store_path, log_path)
    server = psutil.Process(proc.pid)
    try:
        # 1 client vs in-process: interleaved rounds, best of each (the machine is shared)
        report["one_client"] = {}
        for per_call in (1, WINDOW):
            runs: dict[str, list[dict]] = {"in_process": [], "service": [], "service_stream": [],
                                           "service_flight": [], "service_stream_flight": [],
                                           "in_process_tuned": []}
            loads = []
            for _ in range(args.rounds):
                loads.append(round(os.getloadavg()[0], 2))
                runs["in_process"].append(in_process_subprocess(store_path, args.seconds, per_call, False))
                for key, mode in (("service", "call"), ("service_stream", "stream"),
                                  ("service_flight", "call-flight"), ("service_stream_flight", "stream-flight")):
                    runs[key].append(run_clients(url, store_path, 1, args.seconds, per_call, server, mode=mode))
                runs["in_process_tuned"].append(in_process_subprocess(store_path, args.seconds, per_call, True))
                print(f"per call {per_call}:", {k: (round(v[-1]["batches_per_s"], 1),
                                                    round(v[-1]["cpu_ms_per_batch"], 2)) for k, v in runs.items()},
                      flush=True)
            report["one_client"][per_call] = {
                key: {**max(r, key=lambda run: run["batches_per_s"]),
                      "all_batches_per_s": [round(run["batches_per_s"], 1) for run in r],
                      "all_cpu_ms_per_batch": [round(run["cpu_ms_per_batch"], 2) for run in r]}
                for key, r in runs.items()}
            report["one_client"][per_call]["load_average_by_round"] = loads
        # the loader a trainer runs: NeighborLoader over RemoteSampler vs over the local sampler
        loader_runs: dict[str, list[dict]] = {"local": [], "remote": []}
        for _ in range(args.rounds):
            loader_runs["local"].append(loader_subprocess(store_path, args.seconds, None))
            loader_runs["remote"].append(loader_subprocess(store_path, args.seconds, url, server))
            print("loader:", {k: round(v[-1]["batches_per_s"], 1) for k, v in loader_runs.items()}, flush=True)
        report["loader"] = {key: {**max(r, key=lambda run: run["batches_per_s"]),
                                  "all_batches_per_s": [round(run["batches_per_s"], 1) for run in r]}
                            for key, r in loader_runs.items()}
        report["clients"] = []
        for per_call in (1, WINDOW):
            for count in (2, 4, 8):
                res = run_clients(url, store_path, count, args.seconds, per_call, server)
                report["clients"].append(res)
                print(f"{count} clients x {per_call}/call:",
                      {k: v for k, v in res.items() if k != "first_error"}, flush=True)

        rss: list[tuple[float, int]] = []
        lock = threading.Lock()

        def tick(t: float) -> None:
            if t <= args.soak:
                with lock:
                    rss.append((t, server.memory_info().rss))

        soak = run_clients(url, store_path, 4, args.soak, WINDOW, server, on_tick=tick)
        first = [r for t, r in rss if t < 10.0]
        report["soak"] = {**soak, "rss_first_10s_max_mib": max(first) / 2**20,
                          "rss_end_mib": rss[-1][1] / 2**20, "rss_max_mib": max(r for _, r in rss) / 2**20,
                          "rss_mib_by_second": [round(r / 2**20) for _, r in rss]}
        print("soak:", {k: v for k, v in report["soak"].items() if k != "first_error"}, flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        report["server_exit_code"] = proc.wait(timeout=120)
    report["load_average_before_after"] = [round(load_before[0], 2), round(os.getloadavg()[0], 2)]
    print(json.dumps(report, indent=1))
    if args.write:
        write_markdown(report, args)


def write_markdown(report: dict, args: argparse.Namespace) -> None:
    soak = report["soak"]

    def row(name: str, res: dict) -> str:
        return (f"| {name} | {res['per_call']} | {res['batches_per_s']:.1f} | {res['p50_ms']:.1f} | "
                f"{res['p99_ms']:.1f} | {res['cpu_ms_per_batch']:.1f} | {res['errors']} |")

    lines = [
        "# Sampling service (Arrow Flight, loopback)",
        "",
        (f"Command: `.venv/bin/python benchmarks/service.py --seconds {args.seconds:g} --rounds {args.rounds} "
         f"--soak {args.soak:g} --write`"),
        "",
        (f"Machine: {platform.machine()}, {os.cpu_count()} cores (load average "
         f"{report['load_average_before_after'][0]} before, {report['load_average_before_after'][1]} after, "
         "the benchmark's own clients included); "
         f"server and clients on the same 2 cores. Python {platform.python_version()}."),
        "",
        (f"Graph: R-MAT scale 21 ({report['graph']['nodes']:,} nodes, {report['graph']['edges']:,} edges; "
         "the store of benchmarks/loader.py). Batches of 1024 seeds from the train split, fanouts "
         "[15, 10, 5], a fresh random key per batch. Server: `graphpipe serve --threads 2` (one info log "
         "line per call; it calls `tune_allocator()`). Each client is its own process sampling windows of "
         f"1 batch or {WINDOW} batches (what `RemoteSampler` sends for a loader window) for "
         f"{args.seconds:g} s, decoded into writable int64 SampleOutputs. Clients on loopback receive "
         "the sampled batches through a shared-memory arena by default (the server writes each batch "
         "once into a tmpfs file both processes map; Flight carries its offset); the Flight-only rows "
         "turn that off. `sample_batches` = one "
         "`Client.sample_batches` call per window back to back (`RemoteSampler.sample_from_nodes`), "
         "latency per call; `sample_stream` = iterating `Client.sample_stream` "
         "(`RemoteSampler.sample_stream`, 2 windows in flight on one client), latency from sending "
         "a window to receiving it. The concurrent-client and soak rows use `sample_batches` with shared memory. "
         "In-process: the same windows through `sample_neighbors` (1 batch, 1 thread) or "
         "`LocalSampler.sample_from_nodes` (window, 2 threads) in a process of its own, after "
         "`tune_allocator()` (what `LocalSampler`, hence every NeighborLoader, applies by default: "
         "the baseline of the target) and with glibc's default allocator "
         "(`GRAPHPIPE_TUNE_MALLOC=0`, for reference). Only sampled subgraphs travel (no feature "
         "rows). CPU ms per batch: "
         "process CPU time (user + system, all threads) of the server and the clients, or of the "
         "in-process sampler, over the batches: a figure less sensitive to the other jobs on the machine."),
        "",
        "## 1 client vs the in-process sampler",
        "",
        f"Best of {args.rounds} interleaved rounds (every round in the raw data).",
        "",
        "| mode | batches per call | batches/s | p50 ms per call | p99 ms per call | CPU ms per batch | errors |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = {"in_process_tuned": "in-process (tuned malloc: the default)",
             "service": "service, 1 client, sample_batches, shared memory (the default on loopback)",
             "service_stream": "service, 1 client, sample_stream, shared memory",
             "service_flight": "service, 1 client, sample_batches, Flight only (shared_memory=False)",
             "service_stream_flight": "service, 1 client, sample_stream, Flight only",
             "in_process": "in-process, default glibc malloc (GRAPHPIPE_TUNE_MALLOC=0)"}
    for per_call, pair in report["one_client"].items():
        lines += [row(names[key], pair[key]) for key in names if key in pair]
    lines.append("")
    for per_call, pair in report["one_client"].items():
        for key in ("service", "service_stream", "service_flight", "service_stream_flight"):
            if key not in pair:
                continue
            base = pair["in_process_tuned"] if "in_process_tuned" in pair else pair["in_process"]
            ratio = pair[key]["batches_per_s"] / base["batches_per_s"]
            cpu = base["cpu_ms_per_batch"] / pair[key]["cpu_ms_per_batch"]
            paired = [f"{100 * b / a:.0f}%" for a, b in zip(base["all_batches_per_s"],
                                                            pair[key]["all_batches_per_s"])]
            if "load_average_by_round" in pair:
                paired = [f"{p} (load {load})" for p, load in zip(paired, pair["load_average_by_round"])]
            untuned = ""
            if "in_process_tuned" in pair:
                untuned = (f"; {100 * pair[key]['batches_per_s'] / pair['in_process']['batches_per_s']:.0f}% "
                           "of the in-process sampler with glibc's default allocator")
            lines.append(f"- {per_call} batch(es) per window, {names[key]}: {100 * ratio:.0f}% of in-process "
                         f"batches/s, best against best (target >= 80%); round by round (measured "
                         f"back to back): {', '.join(paired)}{untuned}; {100 * cpu:.0f}% of its batches per "
                         f"CPU-second (client + server CPU; server alone "
                         f"{pair[key]['server_cpu_ms_per_batch']:.1f} ms per batch).")
    if "loader" in report:
        local, remote = report["loader"]["local"], report["loader"]["remote"]
        paired = [f"{100 * b / a:.0f}%" for a, b in zip(local["all_batches_per_s"], remote["all_batches_per_s"])]
        lines += [
            "",
            "## NeighborLoader over the service vs the local NeighborLoader",
            "",
            ("What a trainer sees: `NeighborLoader(store, [15, 10, 5], 1024, input_nodes=\"train\", "
             "window=8)` iterated for "
             f"{args.seconds:g} s in a process of its own (no model: the loader alone), sampling with "
             "`RemoteSampler(url)` (windows streamed through `sample_stream`, 2 in flight, over the "
             "shared-memory arena; the 100-dim feature rows gathered from the store in the loader's "
             "process) or with the local sampler (2 threads, one window sampled ahead). Best of "
             f"{args.rounds} interleaved rounds."),
            "",
            "| sampler | batches/s | loader CPU ms per batch | server CPU ms per batch | all rounds, batches/s |",
            "| --- | --- | --- | --- | --- |",
            (f"| local (`LocalSampler`) | {local['batches_per_s']:.1f} | {local['cpu_ms_per_batch']:.1f} | - | "
             f"{local['all_batches_per_s']} |"),
            (f"| `RemoteSampler` | {remote['batches_per_s']:.1f} | {remote['cpu_ms_per_batch']:.1f} | "
             f"{remote['server_cpu_ms_per_batch']:.1f} | {remote['all_batches_per_s']} |"),
            "",
            (f"- Over the service: {100 * remote['batches_per_s'] / local['batches_per_s']:.0f}% of the local "
             f"loader's batches/s, best against best; round by round (back to back): {', '.join(paired)}."),
        ]
    lines += [
        "",
        "## Concurrent clients",
        "",
        "| clients | batches per call | batches/s | p50 ms per call | p99 ms per call | CPU ms per batch | errors |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for per_call, pair in report["one_client"].items():
        lines.append(row("1", pair["service"]))
        lines += [row(str(r["clients"]), r) for r in report["clients"] if str(r["per_call"]) == str(per_call)]
    lines += [
        "",
        "## Soak",
        "",
        (f"4 clients, {WINDOW} batches per call, {args.soak:g} s: {soak['batches']:,} batches "
         f"({soak['batches_per_s']:.1f}/s), {soak['errors']} errors, p50 {soak['p50_ms']:.1f} ms, p99 "
         f"{soak['p99_ms']:.1f} ms per call. Server RSS (psutil, once a second): max over the first 10 s "
         f"{soak['rss_first_10s_max_mib']:.0f} MiB, at the end {soak['rss_end_mib']:.0f} MiB, max "
         f"{soak['rss_max_mib']:.0f} MiB (memory-mapped store pages count in RSS as they are touched). "
         f"Server exit code after SIGTERM: {report['server_exit_code']}."),
        "",
        "Raw:",
        "",
        "```",
        json.dumps(report, indent=1),
        "```",
        "",
    ]
    out = ROOT / "benchmarks" / "results" / "service.md"
    out.write_text("\n".join(lines))
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        url, store_path, wid, seconds, per_call, mode = sys.argv[2:8]
        result = worker(url, store_path, int(wid), float(seconds), int(per_call), mode)
        print(json.dumps(result))
    elif len(sys.argv) > 1 and sys.argv[1] == "--loader":
        store_path, seconds, url = sys.argv[2:5]
        print(json.dumps(loader_run(store_path, float(seconds), None if url == "-" else url)))
    elif len(sys.argv) > 1 and sys.argv[1] == "--in-process":
        from graphpipe.store import GraphStore

        store_path, seconds, per_call, tuned = sys.argv[2:6]
        if tuned == "1":
            from graphpipe.allocator import tune_allocator

            tune_allocator()
        opened = GraphStore.open(store_path)
        print(json.dumps(in_process(opened, seed_batches(opened, 64, 0), float(seconds), int(per_call))))
    else:
        main()
