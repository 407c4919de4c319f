"""`graphpipe train TYPED_STORE --nproc 2` and the same command under torchrun: two gloo
ranks on loopback train the target type and end with the one-process lines (rank 0
prints once); the checkpoint resumes under torchrun with one rank; options typed data
parallel does not take are refused in the parent, one line, exit 2."""

from __future__ import annotations

import os
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


def test_nproc_two_then_torchrun_resume_with_one(store: Path, tmp_path: Path,
                                                  nproc_then_torchrun_resume) -> None:
    out = nproc_then_torchrun_resume(store, tmp_path, [], COMMON, ENV)
    assert "data parallel: 2 ranks (gloo), 64 seeds per step" in out


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
