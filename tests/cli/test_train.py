"""`graphpipe train` as a newcomer meets it: --fanouts alone sets the layer count (and
--layers alone the fanouts), a store without splits names the command that makes them,
Ctrl-C after a checkpoint says how to resume, --help tells the typed default and has -q,
an option the chosen mode does not use is one line naming both."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest


def _npz(path: Path, splits: bool) -> Path:
    rng = np.random.default_rng(0)
    n = 60
    y = rng.integers(0, 3, n)
    arrays = {"src": rng.integers(0, n, 300), "dst": rng.integers(0, n, 300),
              "x": (np.eye(3)[y] + rng.normal(0, 0.5, (n, 3))).astype(np.float32), "y": y}
    if splits:
        arrays.update(train_idx=np.arange(40), valid_idx=np.arange(40, 50),
                      test_idx=np.arange(50, 60))
    np.savez(path, **arrays)
    return path


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("train_cli")
    ingest(_npz(root / "g.npz", splits=True), root / "store")
    return str(root / "store")


def _train(*args: str):
    return CliRunner().invoke(cli, ["train", *map(str, args)])


def test_fanouts_alone_set_the_layers_and_layers_alone_the_fanouts(store: str) -> None:
    common = ["--hidden", "8", "--epochs", "1", "--batch-size", "16", "--eval", "sampled"]
    two = _train(store, "--fanouts", "10,10", *common)
    assert two.exit_code == 0, two.output
    assert "fanouts [10, 10]" in two.output
    one = _train(store, "--layers", "1", *common)
    assert one.exit_code == 0 and "fanouts [10]" in one.output, one.output
    both = _train(store, "--layers", "3", "--fanouts", "10,10", *common)
    assert both.exit_code == 2
    assert both.output == ("error: --fanouts 10,10 has 2 entries but --layers is 3: give one "
                           "fanout per layer (or leave out one of the two)\n")


def test_a_store_without_splits_names_the_split_command(tmp_path: Path) -> None:
    ingest(_npz(tmp_path / "g.npz", splits=False), tmp_path / "bare")
    bare = str(tmp_path / "bare")
    for extra in ([], ["--nproc", "2"], ["--partition-parallel", "2"]):
        result = _train(bare, "--epochs", "1", *extra)
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and f"`graphpipe split {bare} --random 0.8,0.1,0.1`" in lines[0]


def test_missing_eval_splits_name_the_split_command(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 30, 90), dst=rng.integers(0, 30, 90),
             x=rng.normal(size=(30, 2)).astype(np.float32), y=rng.integers(0, 2, 30),
             train_idx=np.arange(30))
    ingest(tmp_path / "g.npz", tmp_path / "s")
    result = _train(tmp_path / "s", "--epochs", "1", "--hidden", "4")
    assert result.exit_code == 2
    assert "graphpipe split" in result.output and "--eval none" in result.output


def test_ctrl_c_after_a_checkpoint_says_how_to_resume(store: str, tmp_path: Path) -> None:
    ckpt = tmp_path / "run.ckpt"
    cmd = [sys.executable, "-m", "graphpipe.cli.main", "train", store, "--epochs", "100000",
           "--hidden", "4", "--layers", "1", "--eval", "none", "-q", "--checkpoint", str(ckpt)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 300
        while not ckpt.is_file() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)
        assert ckpt.is_file(), proc.stderr.read() if proc.poll() is not None else "no checkpoint"
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(rf"error: interrupted; checkpoint {re.escape(str(ckpt))} holds the run "
                        rf"after \d+ epoch\(s\): rerun the same command with --resume "
                        rf"{re.escape(str(ckpt))} to continue it", lines[0]), lines[0]
    assert "nothing was written" not in err


def test_help_tells_the_typed_default_has_q_and_no_source_paths() -> None:
    result = CliRunner().invoke(cli, ["train", "--help"], terminal_width=200)
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    assert "-q, --quiet" in text
    model = text[text.index("--model TEXT"):text.index("--target-type")]
    assert model.endswith("[default: sage; rgcn for typed stores] "), model
    assert "cli/" not in text and ".py" not in text


def test_an_option_the_mode_does_not_use_is_one_line(store: str) -> None:
    result = _train(store, "--task", "link", "--halo-bits", "4")
    assert result.exit_code == 2
    assert result.output == ("error: --halo-bits: not used by link prediction (an option of "
                             "partition parallel)\n")
