"""Shared CLI plumbing: one-line errors with a non-zero exit, human sizes."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from graphpipe import interrupt
from graphpipe.store.errors import StoreError

EXIT_INTERNAL = 1
"""Exit code of an internal error (a bug): the message asks for a re-run with ``--debug``."""
EXIT_BAD_INPUT = 2
"""Exit code of bad input: a dataset, store, checkpoint, argument or path the command refuses."""
EXPECTED_ERRORS = (StoreError, ValueError, KeyError, OSError)
"""What bad input raises: one line and :data:`EXIT_BAD_INPUT` (``OSError`` covers missing,
unreadable and full paths); anything else is a bug."""


def debug_enabled() -> bool:
    """``graphpipe --debug`` (or ``GRAPHPIPE_DEBUG=1``): show tracebacks instead of one line."""
    return os.environ.get("GRAPHPIPE_DEBUG", "") not in ("", "0")


def fail(message: str, code: int = EXIT_BAD_INPUT) -> None:
    """Print ``error: message`` on stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0])
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def friendly_errors(fn: Callable[..., Any] | None = None, *,
                    code: int = EXIT_BAD_INPUT) -> Callable[..., Any]:
    """Turn the library's errors into one-line CLI errors (``@friendly_errors`` or
    ``@friendly_errors(code=...)``): bad input (:data:`EXPECTED_ERRORS`) exits with the
    exception's own ``exit_code`` or ``code``; any other exception is a bug, reported in one
    line with :data:`EXIT_INTERNAL`. With ``--debug`` every error shows its traceback."""
    if fn is None:
        return functools.partial(friendly_errors, code=code)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            fail("interrupted; nothing was written", code=130)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:
            if interrupt.requested():  # Ctrl-C turned into another error (inside Numba, say)
                fail("interrupted; nothing was written", code=130)
            if debug_enabled():
                raise
            if isinstance(exc, EXPECTED_ERRORS):
                fail(_message(exc), code=getattr(exc, "exit_code", code))
            fail(f"internal error ({type(exc).__name__}: {_message(exc)}); "  # a bug: one line
                 "re-run with --debug for the traceback", code=EXIT_INTERNAL)

    return wrapper


@contextlib.contextmanager
def rank_failures_reported() -> Iterator[None]:
    """Around :func:`graphpipe.train.distributed.launch` (or what calls it): a rank that
    failed, was killed or got stuck ends the command with its one line (unless the rank
    printed its own) and its exit code (:class:`graphpipe.train.ranks.RankFailure`)."""
    from graphpipe.train.ranks import RankFailure

    try:
        yield
    except RankFailure as exc:
        if exc.printed:
            sys.exit(exc.exit_code)
        fail(str(exc), code=exc.exit_code)


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
