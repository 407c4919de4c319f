"""`graphpipe train STORE --model revgcn --pipeline P [--microbatches M]`: one stage in
process (the P-rank path is tests/train/flow/test_flow.py), the epoch lines, the final
`test acc` line; bad combinations exit 2 with one line."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = tmp_path_factory.mktemp("flow_cli")
    write_ogb_raw(root / "raw", community_graph(240, 3, avg_degree=6, feature_dim=8, seed=1))
    ingest(root / "raw", root / "store")
    return str(root / "store")


def test_train_revgcn_one_stage(store: str, tmp_path) -> None:
    log = tmp_path / "m.jsonl"
    result = CliRunner().invoke(cli, ["train", store, "--model", "revgcn", "--layers", "4",
                                      "--hidden", "16", "--epochs", "3", "--microbatches", "2",
                                      "--metrics-log", str(log)])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert "model revgcn 4x16, 1 stage(s)" in lines[0]
    assert len([ln for ln in lines if ln.startswith("epoch")]) == 3
    assert "1 stage(s), 2 microbatches" in result.output
    assert re.fullmatch(r"test acc \d\.\d{4}", lines[-1])
    records = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert [r["epoch"] for r in records] == [0, 1, 2] and records[0]["bubble"] < 0.05


@pytest.mark.parametrize("args,message", [
    (["--pipeline", "2", "--model", "gat"], "--pipeline trains --model revgcn"),
    (["--pipeline", "4", "--layers", "2"], "needs at least 4 --layers"),
    (["--pipeline", "2", "--fanouts", "5,5"], "--fanouts: not used by flow parallel"),
    (["--model", "revgcn", "--hidden", "15"], "must be even"),
    (["--microbatches", "2"], "--microbatches: not used by node classification"),
    (["--pipeline", "2", "--interleave"], "interleave: not used by flow parallel"),
    (["--model", "tape", "--pipeline", "2"], "--pipeline: not used by text models"),
])
def test_bad_options(store: str, args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli, ["train", store, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_unitg_one_stage_lm_in_line(tiny_text_store: str) -> None:
    result = CliRunner().invoke(cli, [
        "train", tiny_text_store, "--model", "unitg", "--pipeline", "1", "--layers", "2", "--hidden",
        "8", "--epochs", "4", "--lm-hidden", "16", "--lm-layers", "2", "--max-len", "12",
        "--emb-dim", "8", "--lm-epochs", "1"])
    assert result.exit_code == 0, result.output
    assert "GNN revgcn 2x8), 1 stage(s), LM in line" in result.output
    steps = re.search(r"LM: (\d+) of (\d+) steps", result.output)
    assert steps and steps.group(1) == steps.group(2) != "0"  # in line: every planned step
    assert re.fullmatch(r"test acc \d\.\d{4}", result.output.strip().splitlines()[-1])
