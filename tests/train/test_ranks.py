"""Ranks under faults (graphpipe/train/ranks.py): a rank killed or stuck in a data-,
sequence- or partition-parallel run ends the whole run with one line naming it, a
non-zero exit and no process left behind; a run whose launcher is killed resumes from its
last checkpoint to the result of an uninterrupted run; ranks that opened different stores
refuse to start. Real ranks (gloo on loopback, the ``graphpipe`` command), killed with
real signals; every wait is bounded.

The launcher's blame rules are tested first on plain processes (no torch, fork), so each
order of exits is made to happen, not hoped for."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.train.ranks import EXIT_PEER_LOST, RankFailure, supervise

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
GNN = ["--hidden", "8", "--layers", "2", "--fanouts", "3,2", "--batch-size", "128"]
MODES = {
    "data": ["--nproc", "2", *GNN],
    "sequence": ["--model", "gt", "--seq-parallel", "2", "--seq-len", "64", "--hidden", "8",
                 "--layers", "1", "--heads", "2"],
    "partition": ["--partition-parallel", "2", "--hidden", "8", "--layers", "2"],
}
WAIT_S = 300.0  # the bound on any wait here (a loaded machine starts ranks slowly)


# ----------------------------------------------------------------------------- blame rules
def _exit(code: int, go=None) -> None:
    if go is not None:
        go.wait(WAIT_S)
    os._exit(code)


def _hang(go) -> None:
    go.set()
    signal.pause()


def _procs(*targets) -> list:
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=t, args=a) for t, a in targets]
    for p in procs:
        p.start()
    return procs


def test_a_rank_that_exits_with_a_code_is_blamed_over_the_one_that_lost_it() -> None:
    """The rank that lost its peer exits first; the one that caused it is still named."""
    go = multiprocessing.get_context("fork").Event()
    procs = _procs((_exit, (EXIT_PEER_LOST,)), (_exit, (2, go)))
    procs[0].join(WAIT_S)
    go.set()
    with pytest.raises(RankFailure) as caught:
        supervise(procs, timeout_s=WAIT_S)
    assert (caught.value.rank, caught.value.exit_code, caught.value.printed) == (1, 2, True)


def test_a_stuck_rank_is_named_and_ended() -> None:
    go = multiprocessing.get_context("fork").Event()
    procs = _procs((_hang, (go,)), (_exit, (EXIT_PEER_LOST, go)))
    with pytest.raises(RankFailure, match=r"^rank 0 did not answer for 0.5 s \(stuck\)"):
        supervise(procs, timeout_s=0.5)
    assert [p.is_alive() for p in procs] == [False, False]


def test_a_killed_rank_is_named() -> None:
    go = multiprocessing.get_context("fork").Event()
    procs = _procs((_hang, (go,)), (_hang, (multiprocessing.get_context("fork").Event(),)))
    go.wait(WAIT_S)
    os.kill(procs[0].pid, signal.SIGKILL)
    with pytest.raises(RankFailure, match=r"^rank 0 was killed by SIGKILL; the run was ended$"):
        supervise(procs, timeout_s=WAIT_S)
    assert not procs[1].is_alive()


# ----------------------------------------------------------------------------- real ranks
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ranks")
    write_ogb_raw(root / "raw", community_graph(300, 3, avg_degree=6, feature_dim=8, seed=4))
    ingest(root / "raw", root / "store")
    return root / "store"


def _train(args: list, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphpipe.cli.main", "train", *map(str, args)],
                            env={**ENV, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _children(parent: int) -> dict[int, str]:
    """``{pid: comm}`` of the live processes whose parent is ``parent``."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            if int(rest[1]) == parent and rest[0] != "Z":
                found[int(entry)] = comm
    return found


def _wait_for(condition, what: str):
    """Poll ``condition()`` until it is truthy (bounded by :data:`WAIT_S`)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _rank_pid(launcher: subprocess.Popen, rank: int) -> int:
    """The pid of the launcher's rank ``rank`` once it runs (named ``gp-rank<rank>``)."""
    def find():
        if launcher.poll() is not None:
            raise AssertionError(f"the run ended early: {launcher.communicate()}")
        return next((p for p, c in _children(launcher.pid).items() if c == f"gp-rank{rank}"), None)
    return _wait_for(find, f"rank {rank} to start")


def _gone(pids) -> bool:
    return not any(Path(f"/proc/{p}").exists() and
                   Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[0] != "Z"
                   for p in pids)


def _one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.strip().splitlines()
             if line.strip() and not line.startswith("graphpipe: compiling")]  # jit_notice
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_killed_rank_ends_the_run_in_one_line(store: Path, mode: str) -> None:
    run = _train([store, "--epochs", "1000", *MODES[mode]])
    victim = _rank_pid(run, 1)
    ranks = [p for p, c in _children(run.pid).items() if c.startswith("gp-rank")]
    os.kill(victim, signal.SIGKILL)
    _out, err = run.communicate(timeout=WAIT_S)
    assert run.returncode == 1
    assert _one_error_line(err) == "error: rank 1 was killed by SIGKILL; the run was ended"
    assert _gone(ranks)


def test_a_stuck_rank_ends_the_run_within_the_rank_timeout(store: Path) -> None:
    run = _train([store, "--epochs", "1000", *MODES["data"]], env={"GRAPHPIPE_RANK_TIMEOUT": "2"})
    stuck = _rank_pid(run, 1)
    os.kill(stuck, signal.SIGSTOP)  # before it joined: rank 0 waits for it at the rendezvous
    _out, err = run.communicate(timeout=WAIT_S)
    assert run.returncode == 1
    assert _one_error_line(err).startswith("error: rank 1 did not answer for 2 s (stuck); "
                                           "the run was ended (GRAPHPIPE_RANK_TIMEOUT")
    assert _gone([stuck])


def _test_acc(stdout: str) -> str:
    last = stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"test acc \d\.\d{4}", last), stdout
    return last


def _losses(log: Path) -> dict[int, float]:
    return {r["epoch"]: r["loss"] for r in map(json.loads, log.read_text().splitlines())}


def test_resume_after_the_launcher_was_killed_equals_an_uninterrupted_run(
        store: Path, tmp_path: Path) -> None:
    """SIGKILL to the launcher alone: its ranks die with it (no orphans); ``--resume`` of
    the last checkpoint ends where the uninterrupted run ends, epoch for epoch."""
    args = [store, "--epochs", "12", "--quiet", *MODES["data"]]
    ckpt = tmp_path / "ck.pt"
    whole = _train([*args, "--metrics-log", tmp_path / "whole.jsonl"])  # the two runs overlap
    killed = _train([*args, "--checkpoint", ckpt])
    _wait_for(ckpt.exists, "the first checkpoint")
    ranks = [p for p, c in _children(killed.pid).items() if c.startswith("gp-rank")]
    killed.kill()
    killed.communicate(timeout=WAIT_S)
    _wait_for(lambda: _gone(ranks), "the ranks to die with their launcher")
    out, err = whole.communicate(timeout=WAIT_S)
    assert whole.returncode == 0, err
    resumed = _train([*args, "--resume", ckpt, "--metrics-log", tmp_path / "resumed.jsonl"])
    out2, err2 = resumed.communicate(timeout=WAIT_S)
    assert resumed.returncode == 0, err2
    assert _test_acc(out2) == _test_acc(out)
    again = _losses(tmp_path / "resumed.jsonl")
    assert again and all(again[e] == _losses(tmp_path / "whole.jsonl")[e] for e in again)


def test_ranks_that_opened_different_stores_refuse_to_start(store: Path, tmp_path: Path) -> None:
    """Two ranks started as torchrun starts them, each on its own store: one line on rank
    0 naming rank 1, both exit non-zero."""
    import torch.distributed as dist

    other = tmp_path / "other"
    write_ogb_raw(tmp_path / "raw", community_graph(300, 3, avg_degree=6, feature_dim=8, seed=5))
    ingest(tmp_path / "raw", other)
    host = dist.TCPStore("127.0.0.1", 0, 2, True, wait_for_workers=False)
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(host.port), "WORLD_SIZE": "2",
           "LOCAL_WORLD_SIZE": "1", "TORCHELASTIC_USE_AGENT_STORE": "True",
           "GRAPHPIPE_RANK_TIMEOUT": str(WAIT_S)}
    runs = [_train([path, "--epochs", "1", *GNN], env={**env, "RANK": str(r), "LOCAL_RANK": "0"})
            for r, path in enumerate([store, other])]
    results = [run.communicate(timeout=WAIT_S) for run in runs]
    assert runs[0].returncode != 0 and runs[1].returncode != 0
    errors = [ln for _out, err in results for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, results
    assert errors[0].startswith("error: rank 1 refused to start: its store's manifest differs")
    del host
