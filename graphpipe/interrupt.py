"""Ctrl-C that is never lost: a SIGINT handler that remembers the interrupt.

Python turns SIGINT into ``KeyboardInterrupt`` at the next bytecode the main thread runs.
Raised there inside a finaliser (``__del__``, a weakref callback: "Exception ignored in
..."), inside a Numba dispatcher (a ``SystemError``) or under a ``suppress(BaseException)``,
it is lost and the work goes on to the end. The ``graphpipe`` command calls
:func:`install`: its handler records the interrupt, then raises ``KeyboardInterrupt`` as
Python's does. Long jobs call :func:`check` where they report progress, and every commit
of a store or dataset folder (:func:`graphpipe.store.atomic.commit_directory`) calls it
before publishing anything, so an interrupt seen once stops the job, whatever swallowed
the exception. Without :func:`install` (a library user's process) nothing changes.

>>> requested()
False
>>> check()  # no interrupt seen: returns
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType

_seen = threading.Event()


def install() -> None:
    """Make SIGINT remembered (:func:`requested`) as well as raised; from the main thread."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _handler)


def _handler(signum: int, frame: FrameType | None) -> None:
    _seen.set()
    raise KeyboardInterrupt


def requested() -> bool:
    """Whether SIGINT arrived since :func:`install`."""
    return _seen.is_set()


def check() -> None:
    """Raise ``KeyboardInterrupt`` if SIGINT arrived since :func:`install`."""
    if _seen.is_set():
        raise KeyboardInterrupt


def end_process(code: int) -> None:
    """Flush stdout and stderr, then end this process with ``code`` at once, without
    interpreter finalization. For a process whose work is done (or given up) while other
    threads may still run: a Zarr write an interrupt cut short (its event loop then prints
    "Task was destroyed" and "cannot schedule new futures" after the error line), or gloo's
    workers after ``destroy_process_group`` (torn down during finalization they abort the
    process now and then: SIGABRT, "terminate called without an active exception")."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
