"""`graphpipe train --model graphormer|gt --seq-parallel P` (cli/train_seqpar.py): spawned
ranks (interleaved attention: sparse and dense steps) and torchrun-started ranks
(cluster-sparse) both train and end with the `test acc` line; the metrics log carries the
all-to-all volume; bad combinations fail in one line with exit 2 before
any rank starts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.train.sequence_parallel import free_port
from tests.conftest import communicate_all

ARGS = ["--seq-len", "96", "--epochs", "2", "--hidden", "16", "--layers", "2", "--heads", "4",
        "--parts", "4", "--block", "4", "--lr", "0.01"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("seqpar_cli")
    write_ogb_raw(root / "raw", community_graph(500, 4, avg_degree=8, feature_dim=12, seed=2))
    ingest(root / "raw", root / "store")
    return root / "store"


def _graphpipe(args: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "graphpipe.cli.main", "train", *args],
                            env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_spawned_ranks(store: Path, tmp_path: Path) -> None:
    log = tmp_path / "m.jsonl"
    proc = _graphpipe([str(store), "--model", "graphormer", "--seq-parallel", "2",
                       "--attention", "interleaved", "--switch-freq", "1",
                       "--metrics-log", str(log), *ARGS])
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    lines = out.strip().splitlines()
    assert "sequence-parallel over 2 rank(s)" in lines[0]
    assert sum(line.startswith("epoch") for line in lines) == 2
    assert re.fullmatch(r"test acc \d\.\d{4}", lines[-1])
    assert float(lines[-1].split()[-1]) > 0.4           # 4 classes: chance is 0.25
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["attention"]["dense"] for r in records] == [1, 1]     # dense steps, split too
    comm = records[-1]["comm"]
    assert comm["world"] == 2 and comm["forward_bytes"] == comm["backward_bytes"] > 0
    assert comm["all_to_alls"] == 2 * 2 * 2 * records[-1]["steps"]  # 2 layers, 2 per layer, fwd+bwd


def test_torchrun_environment(store: Path) -> None:
    """Two processes started as torchrun starts them (RANK, WORLD_SIZE, MASTER_*): each is
    one rank; rank 0 alone prints `test acc`."""
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    args = [str(store), "--model", "gt", "--seq-parallel", "2", "--attention", "cluster-sparse",
            "--threshold", "5", "--quiet", *ARGS]
    procs = [_graphpipe(args, {**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(2)]
    outs = communicate_all(procs)
    assert [p.returncode for p in procs] == [0, 0], [e for _o, e in outs]
    assert re.fullmatch(r"test acc \d\.\d{4}\n", outs[0][0])
    assert outs[1][0] == ""


def _cli(args: list[str]):
    from graphpipe.cli.main import cli

    return CliRunner().invoke(cli, ["train", *args])


@pytest.mark.parametrize(("extra", "message"), [
    (["--heads", "3", "--hidden", "12"], "--heads to be a multiple of 2"),
    (["--device", "meta"], "runs on the CPU over gloo"),
    (["--batch-size", "4"], "--batch-size does not apply"),
    (["--threshold", "3"], "'--threshold' applies to --attention cluster-sparse only"),
])
def test_bad_options_exit_2(store: Path, extra: list[str], message: str) -> None:
    result = _cli([str(store), "--model", "gt", "--seq-parallel", "2", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_graph_level_store_exit_2(tmp_path: Path) -> None:
    from graphpipe.synthetic.graph_level import community_count_graphs, write_graph_level_store

    write_graph_level_store(community_count_graphs(20, min_nodes=9, max_nodes=12, num_classes=3,
                                                   feature_dim=4, seed=0), tmp_path / "g")
    result = _cli([str(tmp_path / "g"), "--model", "gt", "--seq-parallel", "2"])
    assert result.exit_code == 2 and "graph-level" in result.output


def test_resume_of_a_foreign_file_exit_2(store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "not_a_checkpoint.pt"
    bad.write_text("hello")
    result = _cli([str(store), "--model", "gt", "--seq-parallel", "2", "--resume", str(bad)])
    assert result.exit_code == 2 and result.output.startswith("error: checkpoint")
