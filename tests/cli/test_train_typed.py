"""`graphpipe train TYPED_STORE --nproc 2` and the same command under torchrun: two gloo
ranks on loopback train the target type and end with the one-process lines (rank 0
prints once); the checkpoint resumes under torchrun with one rank; options typed data
parallel does not take are refused in the parent, one line, exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

COMMON = ["--hidden", "8", "--fanouts", "3,2", "--batch-size", "32"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("train_typed")
    data = mag_dataset(papers=200, authors=200, institutions=8, fields=16, num_classes=3,
                       feature_dim=4, seed=3)
    ingest(write_ogb_mag(root / "src", data), root / "store")
    return root / "store"


def _run(args: list, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, *(launcher or []), "-m", "graphpipe.cli.main", "train", *map(str, args)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600, env=ENV)


def test_nproc_two_then_torchrun_resume_with_one(store: Path, tmp_path: Path) -> None:
    ckpt, log = tmp_path / "ck.pt", tmp_path / "log.jsonl"
    first = _run([store, "--nproc", "2", "--epochs", "1", "--checkpoint", ckpt, "--metrics-log", log,
                  *COMMON])
    assert first.returncode == 0, first.stderr[-2000:]
    lines = first.stdout.strip().splitlines()
    assert re.fullmatch(r"test acc \d\.\d{4}", lines[-1]), first.stdout
    assert "data parallel: 2 ranks (gloo), 64 seeds per step" in first.stdout
    assert sum(line.startswith("epoch") for line in lines) == 1          # rank 0 prints, once
    record = json.loads(log.read_text())
    assert [r["rank"] for r in record["ranks"]] == [0, 1]
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "1"]
    second = _run([store, "--epochs", "2", "--resume", ckpt, *COMMON], launcher=torchrun)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "data parallel: 1 ranks (gloo)" in second.stdout
    assert re.search(r"^epoch\s+1 ", second.stdout, re.MULTILINE)
    assert not re.search(r"^epoch\s+0 ", second.stdout, re.MULTILINE)
    assert re.fullmatch(r"test acc \d\.\d{4}", second.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("args, message", [
    (["--nproc", "2", "--shard-parts"], "--shard-parts: not used by typed data parallel"),
    (["--nproc", "2", "--model", "sage"], "--model must be one of rgcn, hetero-sage, rgat, mlp"),
    (["--nproc", "2", "--target-type", "author"], "type 'author' has no labels"),
    (["--nproc", "2", "--model", "rgat", "--resume", "{tmp}/missing.pt"], "does not exist"),
])
def test_bad_input_refused_before_spawning(store: Path, tmp_path: Path, args: list[str],
                                           message: str) -> None:
    args = [a.format(tmp=tmp_path) for a in args]
    result = CliRunner().invoke(cli, ["train", str(store), *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output
