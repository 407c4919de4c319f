"""`graphpipe train STORE --partition-parallel P --halo-bits B --staleness S`: two real gloo
ranks (spawned, and under torchrun), one line per epoch with the bytes exchanged, the final
`test acc` line; bad combinations exit 2 with one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("sylvie_cli")
    write_ogb_raw(root / "raw", community_graph(800, 4, avg_degree=8, feature_dim=16, seed=1))
    ingest(root / "raw", root / "store")
    return str(root / "store")


def test_train_partition_parallel(store: str) -> None:
    result = CliRunner().invoke(cli, ["train", store, "--partition-parallel", "2", "--model",
                                      "gcn", "--layers", "2", "--hidden", "32", "--epochs", "6",
                                      "--halo-bits", "auto", "--staleness", "1"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert "2 partitions, halo bits auto, staleness 1" in lines[0]
    epochs = [ln for ln in lines if ln.startswith("epoch")]
    assert len(epochs) == 6
    assert "staleness at most 1" in result.output
    acc = float(re.fullmatch(r"test acc (\d\.\d{4})", lines[-1]).group(1))
    assert acc > 0.5  # 4 homophilous classes: chance is 0.25


@pytest.mark.parametrize("args,message", [
    (["--partition-parallel", "2", "--model", "gat"], "sage or gcn"),
    (["--partition-parallel", "2", "--fanouts", "5,5"], "--fanouts: not used by partition parallel"),
    (["--staleness", "2"], "--staleness: not used by node classification (an option of partition"),
    (["--partition-parallel", "2", "--halo-bits", "3"], "halo-bits"),
])
def test_bad_options(store: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["train", store, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_missing_store(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["train", str(tmp_path / "nope"), "--partition-parallel", "2"])
    assert result.exit_code == 2 and "Traceback" not in result.output


@pytest.mark.slow
def test_under_torchrun(store: str) -> None:
    """The same command as two torchrun ranks (env://): rank 0 prints, one `test acc` line."""
    import subprocess
    import sys

    from graphpipe.train.partition_parallel.launch import free_port

    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(free_port()),
           "-m", "graphpipe.cli.main", "train", store, "--partition-parallel", "2",
           "--layers", "2", "--hidden", "16", "--epochs", "2", "--halo-bits", "8"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert sum(ln.startswith("test acc ") for ln in lines) == 1
    assert sum(ln.startswith("epoch") for ln in lines) == 2
    assert "2 partitions, halo bits 8" in done.stdout
