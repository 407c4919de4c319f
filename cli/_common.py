"""Shared CLI plumbing: one-line errors with a non-zero exit, human sizes."""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

import click

from graphpipe.store.errors import StoreError

EXIT_BAD_INPUT = 1
EXIT_INVALID_INPUT = 2
"""Exit code of commands that read untrusted input (``ingest``): bad input, refused destination."""


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print ``error: message`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def friendly_errors(fn: Callable[..., Any] | None = None, *,
                    code: int = EXIT_BAD_INPUT) -> Callable[..., Any]:
    """Turn the library's errors (bad input, bad store, bad arguments) into one-line CLI errors
    exiting with ``code`` (``@friendly_errors`` or ``@friendly_errors(code=2)``)."""
    if fn is None:
        return functools.partial(friendly_errors, code=code)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (StoreError, ValueError, KeyError, FileNotFoundError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            fail(str(message), code=getattr(exc, "exit_code", code))
        except KeyboardInterrupt:
            fail("interrupted; nothing was written", code=130)

    return wrapper


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
