"""SequenceTrainer and `graphpipe train --model graphormer|gt`: an end-to-end CLI run prints
`test acc`, the interleaved schedule runs exactly switch_freq dense iterations per epoch,
a dense step over the memory budget falls back to sparse with a notice, the Auto Tuner
drives the loader's threshold, checkpoint resume is exact, and bad options fail clearly."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.train import CheckpointError, SequenceTrainer, Trainer, build_model

DIM, CLASSES = 12, 4
HP = {"seq_len": 64, "parts": 4, "block": 4, "lr": 0.003}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ttrain")
    write_ogb_raw(root / "raw", community_graph(500, CLASSES, avg_degree=8, feature_dim=DIM, seed=2))
    ingest(root / "raw", root / "store")
    return root / "store"


def _model(name: str = "graphormer", seed: int = 0):
    torch.manual_seed(seed)
    return build_model(name, DIM, 32, CLASSES, 2, heads=4)


def _trainer(store: Path, model=None, **kw) -> SequenceTrainer:
    options = {**HP, "epochs": 2, "quiet": True, **kw}
    return SequenceTrainer(model if model is not None else _model(), store, **options)


def _cli(args: list[str]):
    from graphpipe.cli.main import cli

    return CliRunner().invoke(cli, ["train", *args], catch_exceptions=False)


def test_cli_end_to_end(store: Path, tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    result = _cli([str(store), "--model", "graphormer", "--seq-len", "64", "--attention",
                   "interleaved", "--switch-freq", "2", "--epochs", "2", "--hidden", "32",
                   "--layers", "2", "--heads", "4", "--parts", "4", "--block", "4", "--lr", "0.003",
                   "--metrics-log", str(log), "--checkpoint", str(tmp_path / "c.pt")])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert re.fullmatch(r"test acc \d\.\d{4}", lines[-1])
    assert "model graphormer" in lines[0] and "sequences/epoch" in lines[0]
    assert sum(line.startswith("epoch") for line in lines) == 2
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["attention"]["dense"] for r in records] == [2, 2]
    assert float(lines[-1].split()[-1]) > 0.4          # 4 classes: chance is 0.25


def test_cli_gt_cluster_sparse_quiet(store: Path) -> None:
    result = _cli([str(store), "--model", "gt", "--seq-len", "64", "--attention", "cluster-sparse",
                   "--threshold", "5", "--epochs", "1", "--hidden", "16", "--layers", "1",
                   "--heads", "2", "--parts", "4", "--block", "4", "--quiet"])
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r"test acc \d\.\d{4}\n", result.output)


@pytest.mark.parametrize("args,message", [
    (["--model", "sage", "--seq-len", "64"], ("--seq-len: not used by node classification "
                                              "(an option of graph transformer, sequence parallel)")),
    (["--model", "gt", "--fanouts", "5,5"], "--fanouts: not used by graph transformer"),
    (["--model", "gt", "--global-token"], "GT has no global token"),
    (["--model", "graphormer", "--seq-len", "1"], "'seq_len' must be an integer >= 2"),
    (["--model", "graphormer", "--threshold", "2"], "--attention cluster-sparse only"),
    (["--model", "graphormer", "--attention", "cluster-sparse", "--threshold", "x"],
     "'--threshold' must be 'auto' or a number"),
    (["--model", "graphormer", "--eval", "full"], "'--eval' must be 'sequences' or 'none'"),
    (["--model", "graphormer", "--hidden", "30"], "'hidden' must be a multiple of heads"),
])
def test_cli_errors(store: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(__import__("graphpipe.cli.main", fromlist=["cli"]).cli,
                                ["train", str(store), *args, "--epochs", "1"])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_cli_bad_attention_choice(store: Path) -> None:
    result = CliRunner().invoke(__import__("graphpipe.cli.main", fromlist=["cli"]).cli,
                                ["train", str(store), "--model", "gt", "--attention", "flash"])
    assert result.exit_code == 2 and "--attention" in result.output


def test_interleaved_runs_switch_freq_dense_iterations(store: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="graphpipe.train.sequence_trainer")
    trainer = _trainer(store, attention="interleaved", switch_freq=3, epochs=2, evaluation="none")
    result = trainer.fit()
    n = len(trainer.loader)
    assert n >= 4
    for record in result.history:
        a = record["attention"]
        assert a["dense"] == 3 and a["sparse"] == n - 3 and len(a["trace"]) == n
    logged = [r.getMessage() for r in caplog.records if "attention (" in r.getMessage()]
    assert len(logged) == 2 * n
    assert sum("dense attention (scheduled" in m for m in logged) == 6


def test_dense_over_budget_falls_back_with_notice(store: Path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="graphpipe.train.sequence_trainer")
    trainer = _trainer(store, attention="dense", dense_budget=1, epochs=1)
    result = trainer.fit()
    a = result.history[0]["attention"]
    assert a["fallback"] == len(trainer.loader) and a["dense"] == 0
    assert any(r.levelno == logging.WARNING and "over the" in r.getMessage() for r in caplog.records)
    fits = _trainer(store, attention="dense", epochs=1).fit()
    assert fits.history[0]["attention"]["dense"] == len(trainer.loader)


def test_auto_tuner_drives_the_loader(store: Path) -> None:
    trainer = _trainer(store, attention="cluster-sparse", epochs=2, evaluation="none")
    trainer.fit()
    assert len(trainer.tuner.history) == 2
    assert trainer.loader.threshold is trainer.tuner
    batch_items = trainer.loader.epoch_batches(0)[0]
    trainer.tuner.index = 0                               # threshold 0: nothing transferred
    assert trainer.loader.make_batch(batch_items).cluster_sparse.num_blocks == 0
    trainer.tuner.index = 6                               # threshold 1: every eligible cluster
    assert trainer.loader.make_batch(batch_items).cluster_sparse.num_blocks > 0


@pytest.mark.parametrize("attention", ["interleaved", "cluster-sparse"])
def test_resume_is_exact(store: Path, tmp_path: Path, attention: str) -> None:
    straight = _trainer(store, _model(seed=3), attention=attention, epochs=3, switch_freq=2)
    full = straight.fit()
    ckpt = tmp_path / "run.pt"
    first = _trainer(store, _model(seed=3), attention=attention, epochs=1, switch_freq=2,
                     checkpoint=ckpt)
    first.fit()
    resumed = _trainer(store, _model(seed=9), attention=attention, epochs=3, switch_freq=2,
                       checkpoint=ckpt)
    result = resumed.fit(resume=ckpt)
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    assert result.test_acc == full.test_acc and result.epochs_completed == 3
    assert [r["loss"] for r in result.history] == [r["loss"] for r in full.history]
    if attention == "cluster-sparse":   # rates divide by wall-clock epoch times: compare the rest
        assert resumed.tuner.smoothed == straight.tuner.smoothed
        assert resumed.tuner.index == straight.tuner.index
        assert len(resumed.tuner.history) == len(straight.tuner.history) == 3


def test_resume_refuses_other_settings(store: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "run.pt"
    _trainer(store, epochs=1, checkpoint=ckpt, evaluation="none").fit()
    with pytest.raises(CheckpointError, match="seq_len=64"):
        _trainer(store, seq_len=32, epochs=2).check_resume(ckpt)
    with pytest.raises(CheckpointError, match="was written for model"):
        _trainer(store, _model("gt"), global_token=False, epochs=2).check_resume(ckpt)


def test_bad_trainer_arguments(store: Path) -> None:
    with pytest.raises(ValueError, match="'attention' must be one of"):
        _trainer(store, attention="flash")
    with pytest.raises(ValueError, match="'threshold'"):
        _trainer(store, attention="cluster-sparse", threshold=-1)
    with pytest.raises(ValueError, match="graph transformer"):
        SequenceTrainer(build_model("sage", DIM, 8, CLASSES, 2), store)
    with pytest.raises(ValueError, match="SequenceTrainer"):
        Trainer(_model(), store, fanouts=[5, 5])
    with pytest.raises(ValueError, match="out_dim"):
        SequenceTrainer(build_model("gt", DIM, 16, CLASSES + 1, 1, heads=2), store, seq_len=64)


def test_graph_level_store(tmp_path: Path) -> None:
    from graphpipe.synthetic.graph_level import (
        community_count_graphs,
        write_graph_level_store,
    )

    store = tmp_path / "graphs"
    write_graph_level_store(community_count_graphs(60, min_nodes=9, max_nodes=24, num_classes=3,
                                                   feature_dim=DIM, seed=0), store)
    torch.manual_seed(0)
    model = build_model("graphormer", DIM, 32, 3, 2, heads=4, level="graph")
    trainer = SequenceTrainer(model, store, seq_len=None, batch_size=8, attention="interleaved",
                              switch_freq=1, epochs=2, lr=0.003, parts=2, quiet=True)
    result = trainer.fit()
    assert trainer.graph_level and len(trainer.loader) == 5          # 36 training graphs
    assert [r["attention"]["dense"] for r in result.history] == [1, 1]
    assert 0.0 <= result.test_acc <= 1.0
    with pytest.raises(ValueError, match="level='node'"):
        SequenceTrainer(build_model("graphormer", DIM, 32, 3, 2, heads=4), store, seq_len=None)
    result = _cli([str(store), "--model", "gt", "--batch-size", "8", "--epochs", "1", "--hidden",
                   "16", "--layers", "1", "--heads", "2", "--parts", "2", "--attention", "dense"])
    assert result.exit_code == 0, result.output
    assert "(graph-level)" in result.output and result.output.strip().splitlines()[-1].startswith("test acc")
