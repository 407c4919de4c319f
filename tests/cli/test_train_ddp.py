"""`graphpipe train --nproc N` and the same command under torchrun: real ranks over gloo on
loopback end with the usual `test acc` line (partition-aware seeds, checkpoint, resume
under torchrun with another rank count); bad input is refused in the parent, one line,
exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.derive import write_partition
from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw

COMMON = ["--hidden", "16", "--layers", "2", "--fanouts", "4,3", "--batch-size", "128"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train_ddp")
    write_ogb_raw(root / "raw", community_graph(1500, 4, avg_degree=8, feature_dim=8, seed=2))
    opened = ingest(root / "raw", root / "store")
    write_partition(opened, 2)
    return root / "store"


def _run(args: list[str], launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, *(launcher or []), "-m", "graphpipe.cli.main", "train", *map(str, args)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600, env=ENV)


def test_nproc_two_then_torchrun_resume_with_one(store: Path, tmp_path: Path,
                                                  nproc_then_torchrun_resume) -> None:
    out = nproc_then_torchrun_resume(store, tmp_path, ["--shard-parts"], COMMON, ENV)
    assert "data parallel: 2 ranks (gloo)" in out and "PartitionShard" in out


def _one_error_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    return lines[0]


@pytest.mark.parametrize("args, message", [
    (["--nproc", "2", "--model", "gt"], "graph transformer"),
    (["--nproc", "2", "--model", "nope"], "unknown model"),
    (["--nproc", "2", "--seq-len", "64"], "--seq-len: not used by data parallel"),
    (["--nproc", "2", "--layers", "2", "--fanouts", "3"], "one fanout per layer"),
    (["--shard-parts"], "--shard-parts: data parallel needs --nproc N"),
    (["--nproc", "3", "--shard-parts"], "no partition into >= 3 parts"),
    (["--nproc", "2", "--resume", "{tmp}/missing.pt"], "does not exist"),
])
def test_bad_input_refused_before_spawning(store: Path, tmp_path: Path, args: list[str],
                                           message: str) -> None:
    args = [a.format(tmp=tmp_path) for a in args]
    result = CliRunner().invoke(cli, ["train", str(store), *args])
    assert result.exit_code == 2, result.output
    assert message in _one_error_line(result.output)


def test_missing_store_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["train", str(tmp_path / "none"), "--nproc", "2"])
    assert result.exit_code == 2 and "none" in _one_error_line(result.output)


def test_a_rank_failing_mid_run_ends_all_with_its_error(store: Path, tmp_path: Path) -> None:
    """Rank 0 cannot open its metrics log (after the ranks joined): one error line, exit 2,
    and the other rank (left waiting on its peer) neither hangs nor adds a second line."""
    (tmp_path / "file").write_text("")
    result = _run([store, "--nproc", "2", "--epochs", "1", "--quiet",
                   "--metrics-log", tmp_path / "file" / "log.jsonl", *COMMON])
    assert result.returncode == 2, result.stderr[-2000:]
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "file" in lines[0], result.stderr
