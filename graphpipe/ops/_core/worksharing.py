"""Work sharing: run a GIL-releasing kernel over the ranges of ``0..n`` in the calling
thread and a few helper threads.

A Numba ``prange`` region hands each thread a fixed share and waits for the slowest
one: on a busy machine (the loader's sampling threads, the training step and other
processes all want the same cores) one descheduled thread stalls the whole copy. Here
``n`` is cut into ``pieces`` ranges that the calling thread and ``threads - 1`` helpers
claim one at a time from a shared counter; the calling thread keeps claiming until none
is left, so it waits at most for the pieces a helper already holds. With nothing else
running, the work spreads over all threads; with the cores busy, the caller does it alone.

The kernels must release the GIL (``@numba.njit(nogil=True)``) and write disjoint parts
of their outputs per range (so the result does not depend on which thread ran what).

:func:`threads_for` is the other half: a ``with`` block that runs small Numba
``parallel=True`` kernels on one thread (:data:`PARALLEL_MIN_WORK`).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numba

__all__ = ["PARALLEL_MIN_WORK", "run_ranges", "threads_for"]

_LOCK = threading.Lock()
_POOL: ThreadPoolExecutor | None = None
_POOL_WORKERS = 0


def _forget_pool_in_child() -> None:
    """After ``fork()``: the child inherits the pool object but none of its threads, so
    work handed to it would never run (PyG's DataLoader workers hung in
    ``run_ranges``); the child starts a pool of its own on first use."""
    global _LOCK, _POOL, _POOL_WORKERS
    _LOCK, _POOL, _POOL_WORKERS = threading.Lock(), None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared helper pool, grown to at least ``workers`` threads."""
    global _POOL, _POOL_WORKERS
    with _LOCK:
        if _POOL is None or _POOL_WORKERS < workers:
            # the old pool (if any) finishes its queued work and is left to the GC
            _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="graphpipe-share")
            _POOL_WORKERS = workers
        return _POOL


def run_ranges(kernel: Callable[..., Any], n: int, *args: Any, pieces: int | None = None,
               threads: int | None = None) -> None:
    """Call ``kernel(*args, lo, hi)`` for consecutive ranges covering ``0..n``.

    Args:
        kernel: a nogil function processing items ``lo..hi-1``.
        n: number of items (>= 0).
        *args: the kernel's leading arguments.
        pieces: ranges to cut ``0..n`` into (default ``4 × threads``).
        threads: threads taking part, the caller included (default
            ``numba.get_num_threads()``); 1 runs ``kernel(*args, 0, n)`` here.

    Exceptions raised by the kernel in any thread are re-raised here.
    """
    if threads is None:
        threads = numba.get_num_threads()
    threads = max(1, int(threads))
    if pieces is None:
        pieces = 4 * threads
    pieces = max(1, min(int(pieces), n))
    if threads == 1 or pieces == 1:
        kernel(*args, 0, n)
        return
    counter = itertools.count()  # next() is atomic under the GIL

    def work() -> None:
        while True:
            i = next(counter)
            if i >= pieces:
                return
            kernel(*args, i * n // pieces, (i + 1) * n // pieces)

    helpers = min(threads, pieces) - 1
    futures = [_pool(helpers).submit(work) for _ in range(helpers)]
    try:
        work()
    finally:
        for future in futures:
            future.result()


#: Below this many element operations (edges x columns) a kernel runs on one thread.
#: A parallel region costs ~10 us on an idle machine but milliseconds when the
#: machine is oversubscribed (a descheduled worker holds up the barrier), while
#: 2M multiply-adds take ~1 ms on one core.
PARALLEL_MIN_WORK = 1 << 21


@contextmanager
def threads_for(work: int) -> Iterator[None]:
    """Run the enclosed Numba kernels on one thread if ``work`` is small.

    ``numba.set_num_threads`` is per calling thread, so this is safe with other
    threads running kernels at the same time."""
    if work >= PARALLEL_MIN_WORK or numba.get_num_threads() == 1:
        yield
        return
    previous = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(previous)
