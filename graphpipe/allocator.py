"""glibc malloc tuning for graphpipe's sampling processes: the loaders' in-process
sampler (homogeneous and typed), the service's server and its clients.

Sampling a batch allocates a few MB of fresh, exactly-sized arrays (the sampled blocks,
the Fused-Map table; on the service also gRPC's buffers and the decoded message). With
glibc's default dynamic thresholds those allocations are served by fresh pages and handed
back to the OS on every free (``mmap``/``munmap``, ``brk`` trimming), so each batch pays
for page faults on several MB: on the R-MAT benchmark (batch 1024, fanouts [15, 10, 5])
the in-process sampler takes 8.4 ms of CPU per batch with the default thresholds and
4.8 ms after :func:`tune_allocator`, which keeps freed memory in the heap for reuse.

Under a memory cap both thresholds are bounded by the room the cgroup leaves
(:func:`capped_trim_threshold`): a batch's feature rows (tens of MB) are then mapped and
handed back when freed, instead of growing the heaps of the loader's threads. glibc's
default would raise its thresholds to 32 MB after the first such free and keep up to
twice that per thread's heap: measured on the MAG240M-layout benchmark under 1 GB, the
typed loader's resident set grew by ~200 MB over its first batches and evicted the
memory-mapped CSC pages the row cache had left room for (3.1 GB read where 1.4 GB was
needed); with the bounded thresholds it stays flat and reads only the rows.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

__all__ = ["capped_trim_threshold", "release_free_memory", "tune_allocator"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_DONE: bool | None = None
_LOCK = threading.Lock()

#: environment variable: ``0`` turns :func:`tune_allocator` off for this process
ENV_SWITCH = "GRAPHPIPE_TUNE_MALLOC"


def tune_allocator(trim_threshold: int = 256 << 20, mmap_threshold: int = 32 << 20) -> bool:
    """Make glibc's malloc reuse freed memory instead of returning it to the OS at once:
    blocks below ``mmap_threshold`` bytes come from the heap (not a fresh ``mmap`` each),
    and free heap memory is trimmed only beyond ``trim_threshold`` bytes.

    Process-wide and applied once (later calls return the first result). The cost: up
    to ``trim_threshold`` bytes of freed memory per malloc arena stay mapped (counted in
    RSS) for reuse; under a memory cgroup limit both thresholds are at most 1/64 of the
    room the cgroup leaves (:func:`graphpipe.memory.cgroup_headroom`), so that a few
    threads' arenas cannot hold the run's memory (module docstring). A no-op returning False off glibc, when ``GRAPHPIPE_TUNE_MALLOC=0``,
    or when the process already sets ``MALLOC_TRIM_THRESHOLD_`` / ``MALLOC_MMAP_THRESHOLD_``.

    Returns:
        True when the thresholds are set (now or by an earlier call).
    """
    global _DONE
    with _LOCK:
        if _DONE is not None:
            return _DONE
        _DONE = False
        if (os.environ.get(ENV_SWITCH, "1").strip() == "0" or not sys.platform.startswith("linux")
                or "MALLOC_TRIM_THRESHOLD_" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ):
            return False
        try:
            mallopt = ctypes.CDLL(None).mallopt  # glibc; musl has no mallopt
        except (OSError, AttributeError):
            return False
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        trim_threshold = capped_trim_threshold(trim_threshold)
        mmap_threshold = capped_trim_threshold(mmap_threshold)
        _DONE = bool(mallopt(_M_MMAP_THRESHOLD, int(mmap_threshold))) and \
            bool(mallopt(_M_TRIM_THRESHOLD, int(trim_threshold)))
        return _DONE


def capped_trim_threshold(trim_threshold: int, headroom: int | None = None) -> int:
    """``trim_threshold`` (or the mmap threshold) bounded by 1/64 of the cgroup's room
    (``headroom``, default :func:`graphpipe.memory.cgroup_headroom`), at least 1 MiB;
    unchanged without a limit.

    >>> capped_trim_threshold(256 << 20, headroom=640 << 20) >> 20
    10
    >>> capped_trim_threshold(256 << 20, headroom=1 << 40) >> 20
    256
    """
    if headroom is None:
        from graphpipe.memory import cgroup_headroom

        headroom = cgroup_headroom()
    if headroom is None:
        return int(trim_threshold)
    return int(min(trim_threshold, max(1 << 20, headroom // 64)))


def release_free_memory() -> bool:
    """Hand the free memory of glibc's heaps back to the OS (``malloc_trim(0)``): what a
    process calls after a large, rare allocation (the service after a big request) so that
    :func:`tune_allocator`'s thresholds do not keep it mapped. Thread-safe; a few ms.

    Returns:
        True when memory was released; False when none was, or off glibc.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return bool(malloc_trim(0))
