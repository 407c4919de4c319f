"""OpenMP's wait policy, which must be set before an OpenMP runtime starts.

The loaders' Numba kernels run in background threads while torch computes; with
OpenMP's default spin-waiting the two thread pools starve each other (a training step
on 2 cores was 8x slower). ``import graphpipe`` therefore sets ``OMP_WAIT_POLICY=PASSIVE``
unless the environment sets it. libgomp reads the variable once, when it is loaded (by
``import torch``), and has no call to change it later, so when torch was imported first
the setting comes too late; graphpipe cannot repair that, and says so once, with the
remedy, when a loader with background threads starts (:func:`warn_if_too_late`):
import graphpipe before torch, or set ``OMP_WAIT_POLICY=PASSIVE`` in the environment.
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["OpenMPWaitPolicyWarning", "openmp_runtime_loaded", "set_wait_policy",
           "warn_if_too_late"]


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


def warn_if_too_late() -> bool:
    """Warn once (:class:`OpenMPWaitPolicyWarning`) when :func:`set_wait_policy` came after
    an OpenMP runtime had started; returns whether it did."""
    if not _state["too_late"]:
        return False
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn(
            "torch (an OpenMP runtime) was imported before graphpipe, so OMP_WAIT_POLICY=PASSIVE "
            "came too late: torch's threads spin-wait and slow the loader's background threads "
            "(up to 8x per training step on few cores). Import graphpipe before torch, or set "
            "OMP_WAIT_POLICY=PASSIVE in the environment.", OpenMPWaitPolicyWarning, stacklevel=3)
    return True
