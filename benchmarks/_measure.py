"""Run one measured job in a fresh interpreter and report seconds and peak RSS as JSON.

Peak RSS is the child's ``VmHWM``. ``seconds`` is the timed work alone; ``total_seconds`` is the whole process from
spawn to exit (interpreter start, imports, one-time JIT/library initialisation
and the work), i.e. what a user running the command waits for.

Used by the benchmark scripts so every contender (graphpipe and each peer) is
measured the same way: imports first (their RSS is reported as ``baseline_rss``),
then the timed work; ``peak_rss`` is the process's maximum resident set size
(``ru_maxrss``) over its whole life.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

_CHILD = r'''
import json, sys, time

def peak_rss():
    # VmHWM: the high-water mark of this process's own address space. (ru_maxrss is not
    # used: on Linux it carries over the parent's resident size across fork + exec.)
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")

setup, work = sys.argv[1], sys.argv[2]
ns = {}
exec(setup, ns)
baseline = peak_rss()
t0 = time.perf_counter()
exec(work, ns)
seconds = time.perf_counter() - t0
peak = peak_rss()
print("@@MEASURE@@" + json.dumps({"seconds": seconds, "peak_rss": peak, "baseline_rss": baseline,
                                  "result": ns.get("result")}))
'''


def measure(setup: str, work: str, *, python: str = sys.executable, env: dict | None = None,
            timeout: float = 1800) -> dict[str, Any]:
    """Run ``setup`` (untimed: imports) then ``work`` (timed) in a new ``python`` process."""
    started = time.perf_counter()
    proc = subprocess.run([python, "-c", _CHILD, setup, work], check=False, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout)
    total = time.perf_counter() - started
    for line in proc.stdout.splitlines():
        if line.startswith("@@MEASURE@@"):
            return {**json.loads(line[len("@@MEASURE@@"):]), "total_seconds": total}
    raise RuntimeError(f"measured job failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run with the median time (its peak RSS goes with it)."""
    ordered = sorted(runs, key=lambda r: r["seconds"])
    return ordered[len(ordered) // 2]


def mb(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.0f} MB"


def machine_note() -> str:
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cores, load average {load:.2f} at start, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"


