"""OpenMP's wait policy, which must be set before an OpenMP runtime starts.

torch's OpenMP threads spin-wait between operations by default (libgomp: about 3 ms per
wait). On a machine with more runnable threads than cores that spinning takes the cores
the other threads need, torch's own included: on 2 cores at load 14-21, an epoch of a PyG
GraphSAGE script on graphpipe's loader took 28-48 s with the default policy and 0.5-2.4 s
with ``OMP_WAIT_POLICY=PASSIVE`` (``benchmarks/import_order.py``), and 29-40 s against
0.4-1.0 s without the loader's background threads: the whole step suffers (torch's
operations and Numba's parallel kernels share torch's OpenMP runtime). ``import graphpipe``
therefore sets ``OMP_WAIT_POLICY=PASSIVE`` unless the environment sets it. libgomp reads
the variable once, when it is loaded (by ``import torch``), and has no call to change it
later, so when torch was imported first the setting comes too late; graphpipe cannot
repair that, and says so once, with the remedy, when a loader starts on a busy machine
(:func:`warn_if_too_late`: the load average above the cores this process may use, where
it was measured; on a quiet machine the two orders ran alike).
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["OpenMPWaitPolicyWarning", "machine_is_busy", "openmp_runtime_loaded",
           "set_wait_policy", "warn_if_too_late"]


class OpenMPWaitPolicyWarning(RuntimeWarning):
    """OMP_WAIT_POLICY was set after an OpenMP runtime had read it."""


_state = {"too_late": False, "warned": False}


def openmp_runtime_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp, libiomp, libomp) is already mapped in this process
    (Linux: ``/proc/self/maps``; elsewhere: whether torch is imported).

    >>> isinstance(openmp_runtime_loaded(), bool)
    True
    """
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            text = maps.read()
    except OSError:
        return "torch" in sys.modules
    return any(name in text for name in ("libgomp", "libiomp", "libomp."))


def set_wait_policy() -> None:
    """Set ``OMP_WAIT_POLICY=PASSIVE`` unless the environment chose; note whether an
    OpenMP runtime had already started (then the setting has no effect)."""
    if "OMP_WAIT_POLICY" in os.environ:
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    _state["too_late"] = openmp_runtime_loaded()


def machine_is_busy() -> bool:
    """Whether more threads want to run than this process has cores: the 1-minute load
    average above the CPUs it may use (``sched_getaffinity``).

    >>> isinstance(machine_is_busy(), bool)
    True
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        return os.getloadavg()[0] > cores
    except OSError:
        return False


def warn_if_too_late() -> bool:
    """Warn once (:class:`OpenMPWaitPolicyWarning`) when :func:`set_wait_policy` came after
    an OpenMP runtime had started and the machine is busy (:func:`machine_is_busy`), where
    spinning was measured to cost; returns whether the policy came too late."""
    if not _state["too_late"]:
        return False
    if not _state["warned"] and machine_is_busy():
        _state["warned"] = True
        warnings.warn(
            "torch was imported before graphpipe, so its OpenMP threads spin-wait "
            "(OMP_WAIT_POLICY=PASSIVE came too late); on a busy machine that made training "
            "epochs up to 30x slower (benchmarks/import_order.py). Import graphpipe before "
            "torch, or set OMP_WAIT_POLICY=PASSIVE in the environment.",
            OpenMPWaitPolicyWarning, stacklevel=3)
    return True
