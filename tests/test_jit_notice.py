"""The first `graphpipe ingest` after an install compiles the Numba kernels and says so in one
stderr line; the next run loads them from the cache and says nothing."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from graphpipe.jit_notice import NOTICE


def _ingest(src, dest, cache_dir) -> subprocess.CompletedProcess:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir)}  # a cold cache of our own
    return subprocess.run([sys.executable, "-m", "graphpipe.cli.main", "ingest", str(src), str(dest),
                           "--quiet"], env=env, capture_output=True, text=True, timeout=900,
                          check=False)


@pytest.mark.slow
def test_a_cold_cache_is_announced_once_and_a_warm_one_not_at_all(tmp_path):
    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
             x=np.eye(3, dtype=np.float32), y=np.array([0, 1, 0]), train_idx=np.arange(3))
    cold = _ingest(tmp_path / "g.npz", tmp_path / "s1", tmp_path / "cache")
    assert cold.returncode == 0, cold.stderr
    assert cold.stderr.count(NOTICE) == 1, cold.stderr
    warm = _ingest(tmp_path / "g.npz", tmp_path / "s2", tmp_path / "cache")
    assert warm.returncode == 0, warm.stderr
    assert NOTICE not in warm.stderr, warm.stderr
