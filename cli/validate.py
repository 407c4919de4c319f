"""`graphpipe validate STORE`: checksums and invariants; exit 0 or a list of what is wrong."""

from __future__ import annotations

import sys

import click
from graphpipe.cli._common import EXIT_BAD_INPUT, friendly_errors


@click.command("validate")
@click.argument("store", type=click.Path(path_type=str))
@click.option("--no-checksums", is_flag=True, help="Skip re-hashing the arrays and tables.")
@friendly_errors
def command(store: str, no_checksums: bool) -> None:
    """Check STORE: checksums, topology invariants, row counts and splits (exit 0 when
    valid, 2 with one `invalid:` line per finding otherwise)."""
    from graphpipe.store.validate import validate

    problems = validate(store, checksums=not no_checksums)
    if problems:
        for problem in problems:
            click.echo(f"invalid: {problem}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    click.echo(f"{store}: valid")
