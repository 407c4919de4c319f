"""OMP_WAIT_POLICY: effective when graphpipe is imported before torch (libgomp's own
report, OMP_DISPLAY_ENV=VERBOSE, shows a zero spin count), and a one-time warning with
the remedy when torch came first (the setting can no longer take effect) on a busy
machine, where spinning was measured to cost (benchmarks/import_order.py); none on a quiet
one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings

import pytest

pytest.importorskip("torch")

WARN_PROBE = """
import warnings, {first}, {second}
from graphpipe import omp
omp.machine_is_busy = lambda: {busy}  # the load average, fixed for the test
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    omp.warn_if_too_late(); omp.warn_if_too_late()
print("WARNINGS", sum(issubclass(w.category, omp.OpenMPWaitPolicyWarning) for w in caught))
import torch
torch.ones(64, 64) @ torch.ones(64, 64)
"""


def _run(first: str, second: str, policy: str | None = None, busy: bool = True) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    if policy is not None:
        env["OMP_WAIT_POLICY"] = policy
    proc = subprocess.run([sys.executable, "-c", WARN_PROBE.format(first=first, second=second, busy=busy)],
                          capture_output=True, text=True, env=env, timeout=300, check=True)
    warned = int(re.search(r"WARNINGS (\d+)", proc.stdout).group(1))
    spin = re.search(r"GOMP_SPINCOUNT = '(\d+)'", proc.stderr)
    return warned, spin.group(1) if spin else "?"


def test_graphpipe_first_sets_a_passive_policy_that_takes_effect():
    warned, spin = _run("graphpipe", "torch")
    assert warned == 0
    assert spin in ("0", "?")  # libgomp: PASSIVE = no spinning ("?": torch without libgomp)


def test_torch_first_warns_once_because_the_policy_is_too_late():
    warned, spin = _run("torch", "graphpipe")
    if spin == "?":
        pytest.skip("this torch has no libgomp to report its settings")
    assert spin != "0"  # libgomp read the environment before graphpipe set it
    assert warned == 1


def test_torch_first_on_a_quiet_machine_is_not_warned_about():
    warned, spin = _run("torch", "graphpipe", busy=False)
    if spin == "?":
        pytest.skip("this torch has no libgomp to report its settings")
    assert spin != "0" and warned == 0  # too late, but measured harmless without contention


def test_a_policy_the_user_set_is_kept_and_not_warned_about():
    warned, spin = _run("torch", "graphpipe", policy="ACTIVE")
    assert warned == 0 and spin not in ("0",)


def test_a_loader_on_a_busy_machine_warns_once(monkeypatch, tmp_path):
    import numpy as np

    from graphpipe import omp
    from graphpipe.ingest import ingest
    from graphpipe.loaders import NeighborLoader

    np.savez(tmp_path / "g.npz", edge_index=np.array([[0, 1, 2], [1, 2, 0]]),
             x=np.eye(3, dtype=np.float32), y=np.array([0, 1, 0]), train_idx=np.arange(3))
    store = ingest(tmp_path / "g.npz", tmp_path / "s")
    monkeypatch.setitem(omp._state, "too_late", True)
    monkeypatch.setitem(omp._state, "warned", False)
    monkeypatch.setattr(omp, "machine_is_busy", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NeighborLoader(store, [2], batch_size=2, prefetch=2)  # quiet: no warning
    monkeypatch.setattr(omp, "machine_is_busy", lambda: True)
    with pytest.warns(omp.OpenMPWaitPolicyWarning, match="Import graphpipe before torch"):
        NeighborLoader(store, [2], batch_size=2, prefetch=0)  # with or without a thread
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NeighborLoader(store, [2], batch_size=2, prefetch=2)  # once only
