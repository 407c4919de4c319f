"""glibc malloc tuning (graphpipe.allocator): applied once per process, by the loaders'
sampler and the service, and switched off by GRAPHPIPE_TUNE_MALLOC=0."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = """
import numpy as np
import graphpipe.allocator as allocator
from graphpipe.loaders import LocalSampler
assert allocator._DONE is None  # nothing tuned at import
LocalSampler(np.array([0, 1, 2]), np.array([1, 0]), [2], tune_malloc={tune})
print(allocator._DONE)
"""


def _probe(tune: bool, env_switch: str | None = None) -> subprocess.Popen:
    """A fresh interpreter that builds a LocalSampler and prints ``allocator._DONE``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("GRAPHPIPE_TUNE_MALLOC", None)
    if env_switch is not None:
        env["GRAPHPIPE_TUNE_MALLOC"] = env_switch
    return subprocess.Popen([sys.executable, "-c", _PROBE.format(tune=tune)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt is Linux-only")
def test_local_sampler_tunes_malloc_unless_told_not_to() -> None:
    # the three fresh processes start together (their imports overlap); each is its own process
    procs = [_probe(True), _probe(False), _probe(True, env_switch="0")]
    try:
        outs = [p.communicate(timeout=600) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _out, err in outs]
    assert [out.strip() for out, _err in outs] == [
        "True",   # tuned
        "None",   # never called
        "False",  # called, switched off
    ]


def test_tune_allocator_is_applied_once() -> None:
    from graphpipe.allocator import tune_allocator

    assert tune_allocator() in (True, False)
    assert tune_allocator() == tune_allocator()
