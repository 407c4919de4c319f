"""GraphBolt's ``DataLoader``: iterates a datapipe, its stages run ``prefetch`` batches
ahead in a background thread (graphpipe's sampler and feature reads release the GIL), so
sampling and reading overlap the training step."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import Any

__all__ = ["DataLoader"]

_END = object()


class _Failure:
    def __init__(self, exc: BaseException):
        self.exc = exc


def _produce(items: Iterable[Any], out: queue.Queue, stop: threading.Event) -> None:
    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        for item in items:
            if not put(item):
                return
        put(_END)
    except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
        put(_Failure(exc))


class DataLoader:
    """``DataLoader(datapipe, num_workers=0, ...)``: the batches of ``datapipe``.

    Args:
        datapipe: the last stage of a GraphBolt datapipe.
        num_workers, persistent_workers, overlap_feature_fetch, overlap_graph_fetch,
            max_uva_threads: GraphBolt's; no effect (the stages run in one background thread).
        prefetch: graphpipe's: batches prepared ahead (0: in the caller's thread).

    >>> from graphpipe.graphbolt import ItemSampler, ItemSet
    >>> loader = DataLoader(ItemSampler(ItemSet(5, names="seed_nodes"), 2))
    >>> len(loader)
    3
    >>> [b.seed_nodes.tolist() for b in loader]
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, datapipe: Iterable[Any], num_workers: int = 0, persistent_workers: bool = True,
                 overlap_feature_fetch: bool = True, overlap_graph_fetch: bool = False,
                 max_uva_threads: int | None = None, *, prefetch: int = 2):
        if isinstance(prefetch, bool) or not isinstance(prefetch, int) or prefetch < 0:
            raise ValueError(f"'prefetch' must be a non-negative integer (got {prefetch!r})")
        self.datapipe, self.prefetch = datapipe, prefetch

    def __len__(self) -> int:
        return len(self.datapipe)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.prefetch == 0:
            yield from self.datapipe
            return
        out: queue.Queue = queue.Queue(maxsize=self.prefetch)
        stop = threading.Event()
        worker = threading.Thread(target=_produce, args=(iter(self.datapipe), out, stop),
                                  name="graphpipe-graphbolt-prefetch", daemon=True)
        worker.start()
        try:
            while True:
                item = out.get()
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    raise item.exc
                yield item
        finally:
            stop.set()
            worker.join()
