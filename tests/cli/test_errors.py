"""Every command: bad input is one line and exit 2, a bug is one line and exit 1, and
``--debug`` / ``GRAPHPIPE_DEBUG=1`` shows the traceback instead (issue 14)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli


def _one_error_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(("error: ", "invalid: ")), output
    assert "Traceback" not in output
    return lines[0]


@pytest.mark.parametrize("args", [
    ["info", "{missing}"],
    ["validate", "{missing}"],
    ["train", "{missing}", "--epochs", "1"],
    ["serve", "{missing}", "--port", "0"],
    ["ingest", "{missing}", "{tmp}/out"],
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    args = [a.format(missing=tmp_path / "no-such-store", tmp=tmp_path) for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "no-such-store" in _one_error_line(result.output)


@pytest.mark.parametrize("device, says", [("tpu9", "--device 'tpu9'"), ("cuda", "CUDA is not available")])
def test_train_refuses_a_device_this_torch_cannot_use(tmp_path: Path, device: str, says: str) -> None:
    if device == "cuda" and __import__("torch").cuda.is_available():
        pytest.skip("a GPU is visible: --device cuda is usable here")
    result = CliRunner().invoke(cli, ["train", str(tmp_path), "--device", device])
    assert result.exit_code == 2, result.output
    assert says in _one_error_line(result.output)


def test_derive_commands_refuse_a_non_store(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    for command in (["centrality"], ["partition", "--parts", "2"]):
        result = CliRunner().invoke(cli, [*command, str(tmp_path / "plain")])
        assert result.exit_code == 2, result.output
        _one_error_line(result.output)


def _run(args: list[str], **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "GRAPHPIPE_DEBUG"} | env
    return subprocess.run([sys.executable, "-m", "graphpipe.cli.main", *args], check=False, env=environment,
                          capture_output=True, text=True, timeout=120)


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    plain = _run(["info", str(tmp_path / "nothing")])
    assert plain.returncode == 2 and "Traceback" not in plain.stderr
    _one_error_line(plain.stderr)
    for debug in (_run(["--debug", "info", str(tmp_path / "nothing")]),
                  _run(["info", str(tmp_path / "nothing")], GRAPHPIPE_DEBUG="1")):
        assert debug.returncode != 0 and "Traceback (most recent call last)" in debug.stderr


def test_an_internal_error_is_one_line_exit_1(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import graphpipe.store

    def broken(*args, **kwargs):  # a bug inside the library, not bad input
        raise RuntimeError("something the code did not expect")

    monkeypatch.delenv("GRAPHPIPE_DEBUG", raising=False)
    monkeypatch.setattr(graphpipe.store.GraphStore, "open", staticmethod(broken))
    result = CliRunner().invoke(cli, ["info", str(tmp_path)])
    assert result.exit_code == 1, result.output
    line = _one_error_line(result.output)
    assert "internal error" in line and "--debug" in line and "RuntimeError" in line
