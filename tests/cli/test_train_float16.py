"""``graphpipe train`` on float16 features (issue 25): a store ingested with
``--feature-dtype float16`` and a MAG240M-layout folder (float16 as MAG240M ships them)
train with the homogeneous and the typed models; before, the gather kernel, compiled for
float32 only, ended every run with ``internal error (NotImplementedError: float16)``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import GraphStore


def _ok(args: list[str]) -> str:
    result = CliRunner().invoke(cli, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


def _test_acc(output: str) -> float:
    line = [x for x in output.splitlines() if x.startswith("test acc")][-1]
    return float(line.split()[-1])


def test_homogeneous_float16_store_trains(tmp_path: Path) -> None:
    _ok(["generate", "community", tmp_path / "raw", "--nodes", "3000", "--num-classes", "4"])
    _ok(["ingest", tmp_path / "raw", tmp_path / "s", "--feature-dtype", "float16"])
    assert np.asarray(GraphStore.open(tmp_path / "s").features([0])).dtype == np.float16
    out = _ok(["train", tmp_path / "s", "--epochs", "2", "--fanouts", "5,5", "--layers", "2"])
    assert _test_acc(out) > 0.5   # 4 classes: chance is 0.25


@pytest.mark.parametrize("model", ["rgcn", "mlp"])
def test_mag240m_layout_trains(tmp_path: Path, model: str) -> None:
    _ok(["generate", "mag240m", tmp_path / "raw", "--papers", "1500", "--authors", "2000",
         "--institutions", "50", "-q"])
    _ok(["ingest", tmp_path / "raw", tmp_path / "s"])
    out = _ok(["train", tmp_path / "s", "--model", model, "--epochs", "1", "--fanouts", "5,5", "--layers", "2"])
    assert 0.0 <= _test_acc(out) <= 1.0
