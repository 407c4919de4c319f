"""Several sampling services as one data plane: :class:`ReplicaSet`.

Replicas are services over the same store (``graphpipe serve STORE`` on several
hosts). Since a batch's sample is a pure function of (graph, seeds, fanouts,
replace, key), any replica answers any batch with the same bytes, which gives
both behaviours here:

* **Spreading.** Batches go round robin by batch over the live replicas (batch
  ``i`` of the sampler's life to replica ``i mod n`` while all live); each
  replica gets its batches of a window in one call, the replicas are called in
  parallel, and the answers are put back in batch order.
* **Failover.** When a call fails because its replica is gone (``ConnectionError``:
  unreachable, reset, shut down; ``TimeoutError``; or a stream the server ended
  early, ``RuntimeError``), the replica is marked dead and *those same batches*
  (same seeds, same keys) are asked of the other live replicas: every batch is
  answered exactly once, none lost or repeated, and the epoch is the one a single
  server gives. A dead replica is tried again after ``revive_after`` seconds.
  Errors of the request itself (``ValueError``, ``KeyError``, ``PermissionError``)
  would fail on every replica and are raised at once. When no replica is left,
  ``ConnectionError`` names them.

Each replica is called from one worker thread of its own (its :class:`Client` is
used by one thread at a time); ``sample_stream`` keeps ``depth`` windows in flight.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

log = logging.getLogger("graphpipe.service")

FAILOVER_ERRORS = (ConnectionError, TimeoutError, RuntimeError)
"""Errors that mean "this replica cannot answer now": its batches go to another one."""


class ReplicaSet:
    """Spread sample requests over ``clients`` (one :class:`graphpipe.service.Client` per
    replica) and fail over to the others when one dies; see the module docstring.

    Attributes:
        failovers: batches re-requested from another replica after a failure.
        calls: per replica, the sample calls it answered.

    Two services over one store; the second is shut down between two requests, and its
    batches go to the first with the same seeds and keys, so the samples are the same:

    >>> import os, tempfile
    >>> import numpy as np
    >>> from graphpipe.ingest import ingest
    >>> from graphpipe.service import RemoteSampler, SamplingServer
    >>> tmp = tempfile.TemporaryDirectory()
    >>> npz = os.path.join(tmp.name, "g.npz")
    >>> np.savez(npz, src=np.array([1, 2, 3, 0, 0]), dst=np.array([0, 0, 1, 2, 3]))
    >>> store = ingest(npz, os.path.join(tmp.name, "g"))
    >>> servers = [SamplingServer(store, "grpc://127.0.0.1:0", threads=1) for _ in range(2)]
    >>> sampler = RemoteSampler([f"grpc://127.0.0.1:{s.port}" for s in servers], fanouts=[2],
    ...                         shared_memory=False)
    >>> seeds, keys = [np.array([0]), np.array([1]), np.array([2]), np.array([3])], [5, 6, 7, 8]
    >>> sampler.replicas.assign(4)                    # batch i to replica i mod 2
    [0, 1, 0, 1]
    >>> before = [o.n_id.tolist() for o in sampler.sample_from_nodes(seeds, keys)]
    >>> sampler.replicas.calls
    [1, 1]
    >>> servers[1].close()                            # replica 1 goes away
    >>> after = [o.n_id.tolist() for o in sampler.sample_from_nodes(seeds, keys)]
    >>> after == before, sampler.replicas.failovers, sampler.replicas.live()
    (True, 2, [0])
    >>> sampler.close(); servers[0].close(); tmp.cleanup()
    """

    def __init__(self, clients: Sequence[Any], *, revive_after: float = 30.0):
        if len(clients) < 1:
            raise ValueError("a ReplicaSet needs at least one client")
        self.clients = list(clients)
        self.revive_after = float(revive_after)
        self.failovers = 0
        self.calls = [0] * len(self.clients)
        self._dead: dict[int, float] = {}
        self._cursor = 0
        self._lock = threading.Lock()
        self._workers = [ThreadPoolExecutor(1, thread_name_prefix=f"graphpipe-replica-{i}")
                         for i in range(len(self.clients))]

    @property
    def urls(self) -> list[str]:
        return [c.url for c in self.clients]

    def live(self) -> list[int]:
        """Replicas to call now: those not marked dead, or dead longer than ``revive_after``."""
        now = time.monotonic()
        with self._lock:
            return [i for i in range(len(self.clients))
                    if i not in self._dead or now - self._dead[i] >= self.revive_after]

    def assign(self, count: int) -> list[int]:
        """The replica of each of ``count`` next batches: round robin over the live ones."""
        live = self.live()
        if not live:
            raise ConnectionError(f"no replica is reachable (all of {self.urls} failed)")
        with self._lock:
            start, self._cursor = self._cursor, self._cursor + count
        return [live[(start + j) % len(live)] for j in range(count)]

    def sample_batches(self, seed_batches: Sequence[np.ndarray], keys: Sequence[int],
                       fanouts: Sequence[int], *, replace: bool = False,
                       owners: Sequence[int] | None = None, **kwargs: Any) -> list[Any]:
        """:meth:`Client.sample_batches` of the window, its batches spread over the replicas
        (``owners``: each batch's replica, default :meth:`assign`); results in batch order."""
        n = len(seed_batches)
        results: list[Any] = [None] * n
        todo = list(range(n))
        owners = list(owners) if owners is not None else self.assign(n)
        last_error: BaseException | None = None
        for _round in range(2 * len(self.clients) + 1):
            if not todo:
                return results
            calls = self._submit(todo, owners, seed_batches, keys, fanouts, replace, kwargs)
            wait(list(calls))
            todo = []
            for future, (replica, positions) in calls.items():
                error = future.exception()
                if error is None:
                    for pos, res in zip(positions, future.result()):
                        results[pos] = res
                    continue
                if not isinstance(error, FAILOVER_ERRORS):
                    raise error
                last_error = error
                self._mark_dead(replica, error, len(positions))
                todo += positions
            if todo:
                todo.sort()
                owners = [0] * n
                for pos, replica in zip(todo, self._assign_or_fail(len(todo), last_error)):
                    owners[pos] = replica
        if todo:
            raise ConnectionError(f"batches still unanswered after every replica of {self.urls} was "
                                  f"tried (last: {type(last_error).__name__}: {last_error})")
        return results

    def sample_stream(self, windows: Iterable[tuple[Sequence[np.ndarray], Sequence[int]]],
                      fanouts: Sequence[int], *, replace: bool = False, depth: int = 2,
                      **kwargs: Any) -> Iterator[list[Any]]:
        """:meth:`sample_batches` of each ``(seed_batches, keys)`` of ``windows`` in order,
        with up to ``depth`` windows in flight; closing the generator drops the rest."""
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"'depth' must be a positive integer (got {depth!r})")
        source = iter(windows)
        pending: deque[Future] = deque()
        pool = ThreadPoolExecutor(depth, thread_name_prefix="graphpipe-replica-window")

        def send_next() -> None:
            window = next(source, None)
            if window is not None:
                seeds, keys = window
                pending.append(pool.submit(self.sample_batches, seeds, keys, fanouts, replace=replace,
                                           owners=self.assign(len(seeds)), **kwargs))
        try:
            for _ in range(depth):
                send_next()
            while pending:
                results = pending.popleft().result()
                send_next()
                yield results
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        """Stop the worker threads and close every client."""
        for worker in self._workers:
            worker.shutdown(wait=True)
        for client in self.clients:
            client.close()

    def _submit(self, positions: list[int], owners: Sequence[int], seed_batches: Sequence[np.ndarray],
                keys: Sequence[int], fanouts: Sequence[int], replace: bool,
                kwargs: dict[str, Any]) -> dict[Future, tuple[int, list[int]]]:
        """One call per replica for its batches among ``positions``."""
        by_replica: dict[int, list[int]] = {}
        for pos in positions:
            by_replica.setdefault(owners[pos], []).append(pos)
        calls = {}
        for replica, mine in by_replica.items():
            future = self._workers[replica].submit(
                self._call, replica, [seed_batches[p] for p in mine], [keys[p] for p in mine],
                fanouts, replace, kwargs)
            calls[future] = (replica, mine)
        return calls

    def _call(self, replica: int, seeds: list[np.ndarray], keys: list[int], fanouts: Sequence[int],
              replace: bool, kwargs: dict[str, Any]) -> list[Any]:
        results = self.clients[replica].sample_batches(seeds, keys, fanouts, replace=replace, **kwargs)
        with self._lock:
            self.calls[replica] += 1
            self._dead.pop(replica, None)
        return results

    def _mark_dead(self, replica: int, error: BaseException, batches: int) -> None:
        with self._lock:
            self._dead[replica] = time.monotonic()
            self.failovers += batches
        log.warning("replica %s failed (%s: %s); its %d batch(es) go to another replica",
                    self.clients[replica].url, type(error).__name__, str(error)[:200], batches)

    def _assign_or_fail(self, count: int, error: BaseException | None) -> list[int]:
        try:
            return self.assign(count)
        except ConnectionError:
            raise ConnectionError(f"no replica is reachable (all of {self.urls} failed; last: "
                                  f"{type(error).__name__}: {error})") from None
