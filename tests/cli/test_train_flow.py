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


UNITG = ["--model", "unitg", "--layers", "2", "--hidden", "8", "--lm-hidden", "16",
         "--lm-layers", "2", "--max-len", "12", "--emb-dim", "8", "--lm-epochs", "1"]


def _unitg(store: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["train", store, *UNITG, *args])
    return result.exit_code, result.output


def _test_acc(output: str) -> str:
    return output.strip().splitlines()[-1]


def test_unitg_checkpoint_resumes_exactly_and_on_two_stages(tiny_text_store: str, tmp_path) -> None:
    """unitg --pipeline: 1 epoch + --resume for 1 more is the 2-epoch run (GNN, LM, AdamW and
    Adam states, the Collaborator's schedule, input rows, which nodes are encoded; the
    printed test acc); the 1-stage checkpoint resumes on 2 stages (2 gloo ranks)."""
    import torch

    straight, one, resumed = (str(tmp_path / f"{n}.pt") for n in ("straight", "one", "resumed"))
    code, out_straight = _unitg(tiny_text_store, "--pipeline", "1", "--epochs", "2",
                                "--checkpoint", straight)
    assert code == 0, out_straight
    code, out = _unitg(tiny_text_store, "--pipeline", "1", "--epochs", "1", "--checkpoint", one)
    assert code == 0, out
    code, out = _unitg(tiny_text_store, "--pipeline", "1", "--epochs", "2", "--resume", one,
                       "--checkpoint", resumed)
    assert code == 0, out
    assert f"resumed from {one} after 1 epoch(s)" in out and "epoch   0" not in out
    assert _test_acc(out) == _test_acc(out_straight)
    a, b = (torch.load(p, weights_only=True) for p in (straight, resumed))
    assert a["unitg"]["encoded"].any() and a["unitg"]["schedule"]["smoothed"] is not None
    for key in ("model_state", "optimizer_state", "unitg"):
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6, msg=key)

    code, out = _unitg(tiny_text_store, "--pipeline", "2", "--epochs", "2", "--resume", one,
                       "--checkpoint", resumed)
    assert code == 0, out
    assert "2 stage(s)" in out and f"resumed from {one} after 1 epoch(s)" in out
    c = torch.load(resumed, weights_only=True)
    assert c["epoch"] == 2 and c["unitg"]["lm_steps"] == a["unitg"]["lm_steps"]
    assert torch.equal(c["unitg"]["encoded"], a["unitg"]["encoded"])
    torch.testing.assert_close(c["model_state"], a["model_state"], rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def revgcn_checkpoint(store: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("flow_ckpt") / "revgcn.pt")
    result = CliRunner().invoke(cli, ["train", store, "--model", "revgcn", "--layers", "4",
                                      "--hidden", "16", "--epochs", "1", "--microbatches", "2",
                                      "--checkpoint", path])
    assert result.exit_code == 0 and f"checkpoint {path} (epoch 1)" in result.output
    return path


@pytest.mark.parametrize("args,message", [
    (["--hidden", "8"], "was trained with hidden=16; this run has hidden=8"),
    (["--microbatches", "3"], "was trained with microbatches=2; this run has microbatches=3"),
    (["--layers", "2"], "was trained with layers=4"),
])
def test_resume_refusals_before_ranks_start(store: str, revgcn_checkpoint: str, args, message,
                                            tmp_path) -> None:
    """Each refused with one line and exit 2, before the 2 ranks start (nothing written)."""
    result = CliRunner().invoke(cli, ["train", store, "--model", "revgcn", "--layers", "4",
                                      "--hidden", "16", "--pipeline", "2", "--resume",
                                      revgcn_checkpoint, "--checkpoint", str(tmp_path / "x.pt"),
                                      *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: checkpoint {revgcn_checkpoint!r}")
    assert message in lines[0]
    assert not (tmp_path / "x.pt").exists()


def test_bad_and_foreign_checkpoints(store: str, tiny_text_store: str, revgcn_checkpoint: str,
                                     tmp_path) -> None:
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"not a checkpoint")
    for path, message in ((garbage, "is corrupt or not a torch file"),
                          (tmp_path / "missing.pt", "does not exist")):
        result = CliRunner().invoke(cli, ["train", store, "--model", "revgcn", "--layers", "4",
                                          "--pipeline", "2", "--resume", str(path)])
        assert result.exit_code == 2 and message in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1
    code, out = _unitg(tiny_text_store, "--pipeline", "2", "--epochs", "2", "--resume",
                       revgcn_checkpoint)
    assert code == 2 and "written by a flow run; this is a flow-unitg run" in out, out
    node = str(tmp_path / "sage.pt")
    result = CliRunner().invoke(cli, ["train", store, "--model", "sage", "--epochs", "1",
                                      "--fanouts", "2", "--layers", "1", "--checkpoint", node])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(cli, ["train", store, "--model", "revgcn", "--pipeline", "2",
                                      "--resume", node])
    assert result.exit_code == 2 and "written by a non-pipeline run" in result.output
    assert len(result.output.strip().splitlines()) == 1
