"""`graphpipe generate --help` names every generator."""

from __future__ import annotations

from click.testing import CliRunner
from graphpipe.cli.main import cli


def test_help_names_all_six_generators() -> None:
    result = CliRunner().invoke(cli, ["generate", "--help"])
    assert result.exit_code == 0
    description = result.output.split("Options:")[0]
    for name in ("rmat", "community", "papers100m-bin", "link", "mag", "mag240m"):
        assert name in description, name
