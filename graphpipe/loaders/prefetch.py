"""Prefetch: a loader's producer run ahead in a background thread, and the
``torch.utils.data.DataLoader`` keyword arguments a PyG script passes to a loader.

:class:`Prefetcher` runs an iterator of prepared batches in a daemon thread that hands
them over a bounded queue (``depth`` items ahead). The consumer takes them with
:meth:`Prefetcher.get`, which returns :data:`END` once the producer is done and re-raises
in the consumer's thread whatever the producer raised. :meth:`Prefetcher.close` (also run
when the prefetcher is garbage collected) stops the thread, unblocks it if the queue is
full, closes the producer and joins it: abandoning an epoch halfway leaves no thread.

:func:`data_loader_kwargs` sorts DataLoader options: those that change nothing a batch
holds are ignored with one warning, those that would change the batches are refused
(``ValueError``), ``prefetch_factor`` and ``generator`` are honoured.
"""

from __future__ import annotations

import queue
import threading
import warnings
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

__all__ = ["END", "IGNORED_KWARGS", "REFUSED_KWARGS", "Prefetcher", "data_loader_kwargs", "draw_seed",
           "prefetched"]

END = object()
"""What :meth:`Prefetcher.get` returns once the producer is exhausted."""


class _Failure:
    """An exception raised by the producer, carried to the consumer's thread."""

    def __init__(self, exc: BaseException):
        self.exc = exc


def _put(out: queue.Queue, item: object, stop: threading.Event) -> None:
    """Put ``item`` on ``out``, giving up once ``stop`` is set (the consumer left)."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.05)
            return
        except queue.Full:
            continue


def _worker(producer: Iterator[Any], out: queue.Queue, stop: threading.Event) -> None:
    """Background thread: run the producer, hand its items over a bounded queue, then
    :data:`END` (or the producer's exception)."""
    try:
        for item in producer:
            _put(out, item, stop)
            if stop.is_set():
                break
        final: object = END
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer, re-raised there
        final = _Failure(exc)
    finally:
        close = getattr(producer, "close", None)
        if close is not None:
            close()
    _put(out, final, stop)


def _shutdown(stop: threading.Event, out: queue.Queue, thread: threading.Thread) -> None:
    stop.set()
    while True:  # unblock a producer waiting on a full queue
        try:
            out.get_nowait()
        except queue.Empty:
            break
    if thread is not threading.current_thread():
        thread.join()


class Prefetcher:
    """``producer`` run ``depth`` items ahead in a daemon thread named ``name``.

    >>> fetch = Prefetcher(iter(range(3)), depth=2)
    >>> [fetch.get() for _ in range(3)], fetch.get() is END
    ([0, 1, 2], True)
    >>> fetch.close()
    >>> def failing():
    ...     yield 1
    ...     raise KeyError("bad row")
    >>> fetch = Prefetcher(failing(), depth=1)
    >>> fetch.get()
    1
    >>> fetch.get()
    Traceback (most recent call last):
    KeyError: 'bad row'
    """

    def __init__(self, producer: Iterator[Any], depth: int, name: str = "graphpipe-prefetch"):
        if depth < 1:
            raise ValueError(f"'depth' must be >= 1 (got {depth})")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        stop = threading.Event()
        thread = threading.Thread(target=_worker, args=(producer, self._queue, stop), name=name, daemon=True)
        thread.start()
        self._finalizer = weakref.finalize(self, _shutdown, stop, self._queue, thread)

    def get(self) -> Any:
        """The next item, :data:`END` when the producer is done; re-raises its exception
        (and closes) when it failed."""
        item = self._queue.get()
        if isinstance(item, _Failure):
            self.close()
            raise item.exc
        return item

    def close(self) -> None:
        """Stop and join the thread (idempotent)."""
        self._finalizer()


def prefetched(producer: Iterator[Any], depth: int, name: str = "graphpipe-prefetch") -> Iterator[Any]:
    """``producer``'s items, run ``depth`` ahead in a :class:`Prefetcher`; closing (or
    abandoning) the returned generator stops and joins the thread.

    >>> list(prefetched(iter("abc"), depth=2))
    ['a', 'b', 'c']
    """
    fetch = Prefetcher(producer, depth, name)
    try:
        while (item := fetch.get()) is not END:
            yield item
    finally:
        fetch.close()


def draw_seed(generator: torch.Generator | None = None) -> int:
    """A seed from torch's generator (``generator=``, else the global one), so that
    ``torch.manual_seed(s)`` fixes an unseeded loader's runs, as PyG's."""
    return int(torch.randint(0, 1 << 62, (1,), generator=generator).item())


# -- DataLoader keyword arguments ------------------------------------------------------------------
IGNORED_KWARGS = {  # DataLoader / PyG options with no effect on what a batch holds: (no-op value)
    "num_workers": 0, "persistent_workers": False, "pin_memory": False, "timeout": 0,
    "worker_init_fn": None, "multiprocessing_context": None, "pin_memory_device": "",
    "in_order": True, "filter_per_worker": None, "is_sorted": False}
REFUSED_KWARGS = ("collate_fn", "batch_sampler", "transform", "transform_sampler_output",
                  "weight_attr", "neighbor_sampler", "custom_cls")


def data_loader_kwargs(kwargs: dict[str, Any], prefetch: int,
                       owner: str = "NeighborLoader") -> tuple[int, torch.Generator | None]:
    """``(prefetch, generator)`` from ``torch.utils.data.DataLoader`` keyword arguments.

    ``prefetch_factor`` sets ``prefetch`` (``prefetch_factor * max(1, num_workers)``
    batches ahead, DataLoader's count); ``generator`` is the torch generator unseeded
    loaders draw their seed from; the options in :data:`IGNORED_KWARGS` change nothing a
    batch holds (graphpipe runs its pipeline in threads) and are ignored with one
    warning naming them; options that would change batches are refused.

    >>> data_loader_kwargs({"prefetch_factor": 3, "num_workers": 0}, prefetch=2)
    (3, None)
    >>> data_loader_kwargs({"collate_fn": print}, prefetch=2)
    Traceback (most recent call last):
    ValueError: NeighborLoader does not support collate_fn (PyG options that change the batches)
    """
    unknown = sorted(set(kwargs) - set(IGNORED_KWARGS) - set(REFUSED_KWARGS)
                     - {"prefetch_factor", "generator"})
    if unknown:
        raise TypeError(f"{owner}() got unexpected keyword argument(s) {', '.join(unknown)}")
    refused = [k for k in REFUSED_KWARGS if kwargs.get(k) is not None]
    if refused:
        raise ValueError(f"{owner} does not support {', '.join(refused)} (PyG options that "
                         "change the batches)")
    if kwargs.get("prefetch_factor") is not None:
        factor = kwargs["prefetch_factor"]
        if isinstance(factor, bool) or not isinstance(factor, (int, np.integer)) or factor < 0:
            raise ValueError(f"'prefetch_factor' must be a non-negative integer (got {factor!r})")
        prefetch = int(factor) * max(1, int(kwargs.get("num_workers") or 0))
    generator = kwargs.get("generator")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"'generator' must be a torch.Generator (got {type(generator).__name__})")
    ignored = [k for k, noop in IGNORED_KWARGS.items() if k in kwargs and kwargs[k] != noop]
    if ignored:
        warnings.warn(f"{owner} ignores {', '.join(ignored)}: graphpipe samples and gathers "
                      "in its own threads (num_threads, prefetch) and pins memory itself for "
                      "device='cuda'", UserWarning, stacklevel=3)
    return prefetch, generator
