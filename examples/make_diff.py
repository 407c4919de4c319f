"""Write ``<port>.diff`` beside every port of a ``<name>.orig.py`` in this folder
(``<name>.py``, ``<name>_<variant>.py``): the unified diff (3 lines of context) of the
port against the original, and print the changed-line counts. ``tests/examples/test_examples.py`` checks the files
are current.

    python examples/make_diff.py
"""

from __future__ import annotations

import difflib
from pathlib import Path

HERE = Path(__file__).resolve().parent


def unified(orig: Path, port: Path) -> str:
    """The unified diff of ``port`` against ``orig``, paths relative to the repository."""
    a, b = orig.read_text().splitlines(keepends=True), port.read_text().splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, f"examples/{orig.name}", f"examples/{port.name}"))


def counts(diff: str) -> tuple[int, int]:
    """``(removed, added)`` lines of a unified diff."""
    lines = [line for line in diff.splitlines() if line[:3] not in ("---", "+++")]
    return sum(line.startswith("-") for line in lines), sum(line.startswith("+") for line in lines)


def pairs() -> list[tuple[Path, Path, Path]]:
    """``(original, port, diff file)`` for every ``<stem>.orig.py`` here and each of its
    ports, ``<stem>.py`` and ``<stem>_<variant>.py``."""
    out = []
    for orig in sorted(HERE.glob("*.orig.py")):
        stem = orig.name[: -len(".orig.py")]
        for port in [HERE / f"{stem}.py", *sorted(HERE.glob(f"{stem}_*.py"))]:
            out.append((orig, port, port.with_suffix(".diff")))
    return out


if __name__ == "__main__":
    for orig, port, target in pairs():
        diff = unified(orig, port)
        target.write_text(diff)
        removed, added = counts(diff)
        print(f"{target.name}: -{removed} +{added}")
