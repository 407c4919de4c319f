"""graphpipe.ops._core.worksharing.run_ranges: every item exactly once, errors surface."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from graphpipe.ops._core.worksharing import run_ranges


@numba.njit(nogil=True)
def _count(hits, lo, hi):
    for i in range(lo, hi):
        hits[i] += 1


@numba.njit(nogil=True)
def _fail_at(limit, lo, hi):
    if hi > limit:
        raise ValueError("piece past the limit")


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("pieces", [None, 1, 5, 64])
def test_every_item_once(n: int, threads: int, pieces: int | None) -> None:
    hits = np.zeros(n, dtype=np.int64)
    run_ranges(_count, n, hits, threads=threads, pieces=pieces)
    assert (hits == 1).all()


def test_kernel_error_is_raised_in_the_caller() -> None:
    with pytest.raises(ValueError, match="piece past the limit"):
        run_ranges(_fail_at, 1000, 10, threads=2, pieces=8)
    hits = np.zeros(100, dtype=np.int64)  # the pool still works afterwards
    run_ranges(_count, 100, hits, threads=2)
    assert (hits == 1).all()


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_a_forked_child_gets_its_own_pool() -> None:
    """A child forked after the pool started (PyG's DataLoader workers) inherits no
    helper threads: run_ranges there must still finish (it hung before)."""
    import os
    import time

    hits = np.zeros(1000, dtype=np.int64)
    run_ranges(_count, 1000, hits, threads=3)   # the parent's pool is running
    pid = os.fork()
    if pid == 0:  # child: exit 0 only if every item was counted once
        code = 1
        try:
            child = np.zeros(1000, dtype=np.int64)
            run_ranges(_count, 1000, child, threads=3, pieces=64)
            code = 0 if (child == 1).all() else 1
        finally:
            os._exit(code)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    pytest.fail("run_ranges in a forked child did not finish within 60 s")
