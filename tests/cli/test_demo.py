"""``graphpipe demo`` (``make demo``) is a command of the CLI, with the options the Makefile passes."""

from __future__ import annotations

from click.testing import CliRunner
from graphpipe.cli.main import cli


def test_demo_is_a_command_taking_dir() -> None:
    listed = CliRunner().invoke(cli, ["--help"])
    assert listed.exit_code == 0 and "demo" in listed.output
    shown = CliRunner().invoke(cli, ["demo", "--help"])
    assert shown.exit_code == 0, shown.output
    for option in ("--dir", "--nodes", "--epochs", "--batch-size"):
        assert option in shown.output
