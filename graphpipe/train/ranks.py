"""Local ranks under watch: how a multi-process run (data-, sequence-, partition-parallel,
started by :func:`graphpipe.train.distributed.launch`) ends when one rank dies or hangs,
and how ranks that would train different things refuse to start.

The contract, as torchrun's elastic agent keeps it (a failed worker ends the group):

- **a rank killed** (SIGKILL, the OOM killer): the launcher sees its exit at once, ends
  the other ranks (SIGKILL: they hold nothing that needs saving; checkpoints are written
  by an atomic rename) and raises :class:`RankFailure`, whose message is the one line
  ``rank 1 was killed by SIGKILL; the run was ended``.
- **a rank stuck** (a hung filesystem, a stopped process): the others wait in a collective
  at most :func:`rank_timeout_s` seconds (the process group's timeout, ``GRAPHPIPE_RANK_TIMEOUT``,
  default 1800 s as torch's), then end quietly with :data:`EXIT_PEER_LOST`; the
  launcher waits a short grace for the rank that caused it, and a rank still running then
  is named: ``rank 1 did not answer for 1800 s (stuck) ...``.
- **a rank that only lost a peer** (its collective failed because another rank went away)
  prints nothing and exits :data:`EXIT_PEER_LOST`: the launcher names the rank that caused it.
- **no orphans**: every spawned rank asks the kernel to kill it when the launcher dies
  (``PR_SET_PDEATHSIG``), so a launcher killed by SIGKILL takes its ranks with it. Ranks
  are named ``gp-rank<i>`` (``ps -o comm``).
- **same run everywhere**: :func:`check_same_run` all-gathers a digest of the store's
  manifest and one of the options at start; a rank that differs from rank 0 is named on
  rank 0 in one line (a ``ValueError``, exit 2), the others end quietly (:data:`EXIT_PEER_LOST`).

None of this costs a training step anything: the launcher sleeps on the ranks' exit
pipes, the fingerprint is one all-gather at start.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing.connection
import os
import signal
import sys
import time
from typing import Any

__all__ = ["EXIT_PEER_LOST", "RANK_TIMEOUT_ENV", "RankFailure", "check_same_run",
           "collective_failed", "rank_timeout_s", "supervise", "watch_parent"]

RANK_TIMEOUT_ENV = "GRAPHPIPE_RANK_TIMEOUT"
"""Seconds a rank waits for the others in one collective (and the rendezvous) before it
gives up; unset: :data:`DEFAULT_RANK_TIMEOUT_S`."""
DEFAULT_RANK_TIMEOUT_S = 1800.0
"""torch's default process-group timeout (a rank evaluating while the others wait in a
broadcast must not be taken for a stuck one)."""
EXIT_PEER_LOST = 75
"""Exit code of a rank whose collective failed because another rank went away or stopped
answering (``EX_TEMPFAIL``): it prints nothing, the launcher names the rank that caused it."""
GRACE_S = 5.0
"""After a rank lost its peer, how long the launcher waits for the rank that caused it to
exit (at most the rank timeout)."""
_PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe",
              "Timed out", "timed out", "Connect timeout", "Socket Timeout", "Connection refused")


class RankFailure(RuntimeError):
    """A local rank ended the run. ``str(exc)`` is the one line to print; ``rank`` the rank
    to blame; ``exit_code`` the code to exit with; ``printed``: the rank printed its own
    error already (then print nothing more)."""

    def __init__(self, message: str, rank: int, exit_code: int, printed: bool = False):
        super().__init__(message)
        self.rank, self.exit_code, self.printed = rank, exit_code, printed


def rank_timeout_s() -> float:
    """The collective timeout in seconds: ``GRAPHPIPE_RANK_TIMEOUT`` or 1800.

    >>> rank_timeout_s() > 0
    True
    """
    text = os.environ.get(RANK_TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_RANK_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"{RANK_TIMEOUT_ENV} must be a positive number of seconds (got {text!r})")
    return value


def collective_failed(exc: BaseException) -> bool:
    """Whether ``exc`` says a collective (or the rendezvous) failed because a peer went away
    or did not answer in time: torch's ``DistError`` family, or gloo's messages.

    >>> collective_failed(RuntimeError("[gloo] Connection closed by peer [127.0.0.1]:4242"))
    True
    >>> collective_failed(ValueError("bad option"))
    False
    """
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in _PEER_GONE)


def watch_parent(rank: int, parent: int) -> None:
    """In a spawned rank: die with the launcher (``PR_SET_PDEATHSIG``, Linux), and name
    the process ``gp-rank<rank>``. Exits at once when the launcher is already gone."""
    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL))                       # PR_SET_PDEATHSIG
        libc.prctl(15, f"gp-rank{rank}".encode()[:15])           # PR_SET_NAME
    if os.getppid() != parent:
        os._exit(EXIT_PEER_LOST)


def supervise(processes: list[Any], timeout_s: float | None = None) -> None:
    """Wait for ``processes`` (``multiprocessing.Process``, index = rank). Returns when all
    exited 0; else ends the rest and raises :class:`RankFailure` naming the rank to blame
    (see the module docstring). ``timeout_s``: the ranks' collective timeout (for the message)."""
    timeout_s = rank_timeout_s() if timeout_s is None else timeout_s
    pending = {p.sentinel: i for i, p in enumerate(processes)}
    failed: list[int] = []
    while pending and not failed:
        failed += _reap(processes, pending, None)
    if not failed:
        return
    deadline = time.monotonic() + min(GRACE_S, timeout_s)
    while pending and not any(processes[i].exitcode != EXIT_PEER_LOST for i in failed):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        failed += _reap(processes, pending, left)
    running = sorted(pending.values())
    for p in processes:
        if p.is_alive():
            p.kill()
    for p in processes:
        p.join()
    raise _blame(processes, failed, running, timeout_s)


def _reap(processes: list[Any], pending: dict[Any, int], timeout: float | None) -> list[int]:
    """Ranks that exited within ``timeout`` (removed from ``pending``): those that failed."""
    failed = []
    for sentinel in multiprocessing.connection.wait(list(pending), timeout=timeout):
        index = pending.pop(sentinel)
        processes[index].join()
        if processes[index].exitcode != 0:
            failed.append(index)
    return failed


def _blame(processes: list[Any], failed: list[int], running: list[int],
           timeout_s: float) -> RankFailure:
    causes = [i for i in failed if processes[i].exitcode != EXIT_PEER_LOST]
    if causes:
        rank, code = causes[0], processes[causes[0]].exitcode
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
            return RankFailure(f"rank {rank} was killed by {name}; the run was ended", rank, 1)
        return RankFailure(f"rank {rank} exited with code {code}", rank, code, printed=True)
    if running:
        who = f"rank {running[0]}" if len(running) == 1 else \
            "ranks " + ", ".join(map(str, running))
        return RankFailure(f"{who} did not answer for {timeout_s:g} s (stuck); the run was ended "
                           f"({RANK_TIMEOUT_ENV} sets how long ranks wait)", running[0], 1)
    return RankFailure(f"rank {failed[0]} lost its peers; the run was ended", failed[0], 1)


# ----------------------------------------------------------------------------- same run
PER_RANK_KEYS = frozenset({"store", "checkpoint", "resume", "metrics_log", "quiet", "nproc",
                           "probe", "out_dir"})
"""Option keys left out of the comparison (at any depth): paths may differ per machine,
only rank 0 writes and prints."""


def _comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _comparable(v) for k, v in value.items() if k not in PER_RANK_KEYS}
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    return value


def digest(value: Any) -> bytes:
    """16 bytes of SHA-256 over ``value`` as canonical JSON (keys sorted, paths as text).

    >>> digest({"b": 1, "a": [2]}) == digest({"a": [2], "b": 1})
    True
    """
    text = json.dumps(_comparable(value), sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).digest()[:16]


def check_same_run(manifest: dict[str, Any], options: dict[str, Any], group: Any = None) -> None:
    """Refuse to train when the ranks of ``group`` (default: the world) opened different
    stores or options: every rank all-gathers ``digest(manifest) + digest(options)``
    (32 bytes; no pickle). On a difference rank 0 raises ``ValueError`` naming the first
    rank that differs from it and what differs; the other ranks raise
    ``SystemExit(EXIT_PEER_LOST)`` (rank 0 reports). Leave out of ``options`` what may differ per rank (paths, quiet).

    >>> import torch.distributed as dist
    >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    >>> check_same_run({"format": "graphpipe"}, {"lr": 0.01})
    >>> dist.destroy_process_group()
    """
    import torch
    import torch.distributed as dist

    own = torch.frombuffer(bytearray(digest(manifest) + digest(options)), dtype=torch.uint8)
    world = dist.get_world_size(group)
    rows = [torch.empty_like(own) for _ in range(world)]
    dist.all_gather(rows, own, group=group)
    differ = [r for r in range(world) if not torch.equal(rows[r], rows[0])]
    if not differ:
        return
    if dist.get_rank(group) != 0:
        raise SystemExit(EXIT_PEER_LOST)
    rank = differ[0]
    what = "store" if not torch.equal(rows[rank][:16], rows[0][:16]) else "options"
    theirs, ours = rows[rank][:16] if what == "store" else rows[rank][16:], \
        rows[0][:16] if what == "store" else rows[0][16:]
    detail = ("its store's manifest differs from rank 0's" if what == "store" else
              "its training options differ from rank 0's")
    raise ValueError(f"rank {rank} refused to start: {detail} ({bytes(theirs).hex()[:12]} vs "
                     f"{bytes(ours).hex()[:12]}); every rank must open the same store with the "
                     "same options")
