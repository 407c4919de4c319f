"""Progress bars for long steps (rich), silenced when asked or when stderr is not a terminal."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import Any


class Progress(AbstractContextManager):
    """A set of progress bars on stderr.

    ``Progress(enabled=None)`` shows bars only when stderr is a terminal;
    ``enabled=False`` never shows them. Use :meth:`callback` to get a
    ``(stage, done, total)`` function for library code that reports progress.
    """

    def __init__(self, enabled: bool | None = None, *, transient: bool = False):
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = bool(enabled)
        self._tasks: dict[str, Any] = {}
        self._rich = None
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self._rich = RichProgress(
                TextColumn("[bold]{task.description:<14}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(),
                console=Console(stderr=True), transient=transient,
            )

    def __enter__(self) -> Progress:  # noqa: PYI034 - Python 3.10 has no typing.Self
        if self._rich is not None:
            self._rich.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._rich is not None:
            self._rich.stop()

    def update(self, stage: str, done: int, total: int | None) -> None:
        """Set bar ``stage`` to ``done`` of ``total`` (creating it on first use)."""
        if self._rich is None:
            return
        task = self._tasks.get(stage)
        if task is None:
            task = self._tasks[stage] = self._rich.add_task(stage, total=total)
        self._rich.update(task, completed=done, total=total)

    def callback(self):
        """A ``(stage, done, total)`` callable bound to these bars."""
        return self.update
