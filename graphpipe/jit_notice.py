"""A one-line notice when graphpipe's Numba kernels compile (first use after an install).

graphpipe's kernels are compiled by Numba on first use and cached on disk
(``cache=True``: ``__pycache__`` beside the sources, or ``NUMBA_CACHE_DIR``), so the
first ``graphpipe ingest`` after an install takes seconds more than the next ones
(12.7 s against 0.8 s for a small store). :func:`announce_compilation` makes that visible:
the first time one of graphpipe's cached kernels compiles (Numba's ``numba:compile``
event fires on a real compilation only, never on a load from the cache), it writes one
line to ``stream``. The command line and the demo call it; a library user may too.
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["NOTICE", "announce_compilation"]

NOTICE = ("graphpipe: compiling its Numba kernels on first use (seconds to a minute, "
          "once: they are cached for later runs)...")

_state = {"listener": None}


def _is_cached_graphpipe_kernel(dispatcher: object) -> bool:
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    cache = getattr(dispatcher, "_cache", None)
    return module.startswith("graphpipe.") and type(cache).__name__ != "NullCache"


def announce_compilation(stream: TextIO | None = None) -> None:
    """Write :data:`NOTICE` (one line) to ``stream`` (default: ``sys.stderr``) the first
    time one of graphpipe's disk-cached Numba kernels compiles in this process; nothing
    when every kernel comes from the cache. Idempotent.

    >>> import io, numba
    >>> out = io.StringIO()
    >>> announce_compilation(out)
    >>> announce_compilation(out)       # once only
    >>> @numba.njit                     # not graphpipe's, not cached: no notice
    ... def twice(x):
    ...     return 2 * x
    >>> twice(21), out.getvalue()
    (42, '')
    """
    if _state["listener"] is not None:
        return
    from numba.core import event

    class _Notice(event.Listener):
        done = False

        def on_start(self, ev: event.Event) -> None:
            if self.done or not _is_cached_graphpipe_kernel(ev.data.get("dispatcher")):
                return
            self.done = True
            out = stream if stream is not None else sys.stderr
            print(NOTICE, file=out, flush=True)

        def on_end(self, ev: event.Event) -> None:
            pass

    _state["listener"] = _Notice()
    event.register("numba:compile", _state["listener"])
