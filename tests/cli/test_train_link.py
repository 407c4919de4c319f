"""`graphpipe train STORE --task link`: the last line names the metric; bad use is one line,
exit 2."""

from __future__ import annotations

import re

from click.testing import CliRunner
from graphpipe.cli.main import cli


def test_generate_ingest_train_link(tmp_path) -> None:
    runner = CliRunner()
    folder, store = tmp_path / "f", tmp_path / "s"
    assert runner.invoke(cli, ["generate", "link", str(folder), "--nodes", "300", "--pool", "30",
                               "--num-neg", "200", "-q"]).exit_code == 0
    assert runner.invoke(cli, ["ingest", str(folder), str(store)]).exit_code == 0
    result = runner.invoke(cli, ["train", str(store), "--task", "link", "--epochs", "1",
                                 "--hidden", "16", "--fanouts", "5,5", "--decoder", "dot"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert re.fullmatch(r"test hits@50 \d\.\d{4}", lines[-1]), lines[-1]
    assert any(line.startswith("common neighbours: valid hits@50") for line in lines)
    quiet = runner.invoke(cli, ["train", str(store), "--task", "link", "--epochs", "1", "--quiet",
                                "--hidden", "16", "--fanouts", "5,5", "--decoder", "dot"])
    assert quiet.output.strip() == lines[-1]  # same seed, same result
    hits20 = runner.invoke(cli, ["train", str(store), "--task", "link", "--epochs", "1", "--quiet",
                                 "--hidden", "16", "--fanouts", "5,5", "--link-metric", "hits@20"])
    assert hits20.exit_code == 0 and re.fullmatch(r"test hits@20 \d\.\d{4}", hits20.output.strip())
    for args, message in ((["--heads", "2"], "--heads: not used by link prediction"),
                          (["--link-metric", "mrr"], "MRR needs per-edge negatives"),
                          (["--link-negatives", "5"], "--link-negatives: not used by link prediction"),
                          (["--model", "gt"], "needs a GNN encoder"),
                          (["--layers", "2", "--fanouts", "5"], "one fanout per layer")):
        bad = runner.invoke(cli, ["train", str(store), "--task", "link", "--epochs", "1", *args])
        assert bad.exit_code == 2 and message in bad.output, bad.output
    node = runner.invoke(cli, ["train", str(store), "--decoder", "dot"])
    assert node.exit_code == 2
    assert ("--decoder: not used by node classification (an option of link prediction, typed link "
            "prediction, typed link data parallel)") in node.output
