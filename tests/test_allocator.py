"""glibc malloc tuning (graphpipe.allocator): applied once per process, by the loaders'
sampler (homogeneous and typed) and the service, and switched off by GRAPHPIPE_TUNE_MALLOC=0;
under a memory cap its thresholds are bounded by the cgroup's room."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import communicate_all

_PROBE = """
import numpy as np
import graphpipe.allocator as allocator
from graphpipe.loaders import GraphData, LocalSampler, NeighborLoader
assert allocator._DONE is None  # nothing tuned at import
{build}
print(allocator._DONE)
"""
_LOCAL = "LocalSampler(np.array([0, 1, 2]), np.array([1, 0]), [2], tune_malloc={tune})"
_TYPED = """NeighborLoader(GraphData.from_dicts(dict(a=2, b=2), dict([(("a", "r", "b"), (np.arange(2), np.arange(2)))])),
               [1], input_nodes="b", batch_size=1)"""


def _probe(tune: bool, env_switch: str | None = None, build: str = _LOCAL) -> subprocess.Popen:
    """A fresh interpreter that builds a LocalSampler (or ``build``) and prints ``allocator._DONE``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("GRAPHPIPE_TUNE_MALLOC", None)
    if env_switch is not None:
        env["GRAPHPIPE_TUNE_MALLOC"] = env_switch
    return subprocess.Popen([sys.executable, "-c", _PROBE.format(build=build.format(tune=tune))], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_local_sampler_tunes_malloc_unless_told_not_to() -> None:
    # the four fresh processes start together (their imports overlap); each is its own process
    procs = [_probe(True), _probe(False), _probe(True, env_switch="0"), _probe(True, build=_TYPED)]
    outs = communicate_all(procs)
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err[-2000:] for _out, err in outs]
    assert [out.strip() for out, _err in outs] == [
        "True",   # tuned
        "None",   # never called
        "False",  # called, switched off
        "True",   # the typed loader samples in process: tuned as well
    ]


def test_tune_allocator_is_applied_once() -> None:
    from graphpipe.allocator import tune_allocator

    assert tune_allocator() in (True, False)
    assert tune_allocator() == tune_allocator()


def test_thresholds_are_bounded_by_the_cgroup_room() -> None:
    from graphpipe.allocator import capped_trim_threshold

    assert capped_trim_threshold(32 << 20, headroom=800 << 20) == 12_800 << 10   # 1 GB cap: 12.5 MiB
    assert capped_trim_threshold(32 << 20, headroom=32 << 20) == 1 << 20         # at least 1 MiB
    assert capped_trim_threshold(32 << 20, headroom=64 << 30) == 32 << 20        # roomy: unchanged
