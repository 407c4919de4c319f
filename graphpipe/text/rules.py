"""What happens to one node's raw text before it is stored (the documented rules).

Each value of a text field is one of: a ``str``, ``bytes`` (UTF-8 expected) or ``None``
(no text). :func:`clean_texts` applies, in this order:

1. **invalid UTF-8** (``bytes`` that do not decode): decoded with ``errors="replace"``
   (each bad byte sequence becomes U+FFFD) and counted in ``invalid_utf8``; the text
   is kept. A real dump with a few bad bytes should not lose those nodes, and the count
   (with the first row) says where to look.
2. **empty**: a text that is empty or only whitespace is *no text* (stored as null),
   counted in ``empty``.
3. **huge**: a text longer than ``max_bytes`` UTF-8 bytes (default 1 MiB) is cut to
   the longest prefix of at most ``max_bytes`` bytes that ends on a character boundary,
   counted in ``truncated``. Tokenization cuts again at ``max_tokens``; the byte cap
   bounds the memory one row can take.

Anything else (a number, a list) is a ``ValueError`` naming the row.

>>> rules = TextRules(max_bytes=5)
>>> stats = TextStats()
>>> clean_texts(["héllo world", b"ok\\xff", "  ", None], rules, stats, first_row=0)
['héll', 'ok�', None, None]
>>> stats.as_dict()["truncated"], stats.invalid_utf8, stats.empty, stats.missing
(1, 1, 1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["DEFAULT_MAX_BYTES", "TextRules", "TextStats", "clean_texts"]

DEFAULT_MAX_BYTES = 1 << 20
"""Longest text kept per node and field (UTF-8 bytes); longer texts are cut."""


@dataclass(frozen=True)
class TextRules:
    """Parameters of the rules (module docstring)."""

    max_bytes: int = DEFAULT_MAX_BYTES

    def __post_init__(self) -> None:
        if isinstance(self.max_bytes, bool) or not isinstance(self.max_bytes, int) \
                or self.max_bytes < 1:
            raise ValueError(f"'max_bytes' must be a positive integer (got {self.max_bytes!r})")


@dataclass
class TextStats:
    """Counts of one text field over the rows seen so far."""

    rows: int = 0
    with_text: int = 0
    missing: int = 0
    empty: int = 0
    invalid_utf8: int = 0
    truncated: int = 0
    first_invalid_row: int | None = None
    first_truncated_row: int | None = None
    chars: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready counts (the manifest's per-field entry)."""
        out = {"rows": self.rows, "with_text": self.with_text, "without_text":
               self.rows - self.with_text, "missing": self.missing, "empty": self.empty,
               "invalid_utf8": self.invalid_utf8, "truncated": self.truncated,
               "text_chars": self.chars}
        if self.first_invalid_row is not None:
            out["first_invalid_row"] = self.first_invalid_row
        if self.first_truncated_row is not None:
            out["first_truncated_row"] = self.first_truncated_row
        return {**out, **self.extra}


def _decode(value: Any, row: int, stats: TextStats) -> str | None:
    if value is None:
        stats.missing += 1
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            stats.invalid_utf8 += 1
            if stats.first_invalid_row is None:
                stats.first_invalid_row = row
            return raw.decode("utf-8", errors="replace")
    if isinstance(value, str):
        return value
    raise ValueError(f"row {row}: text must be a string, bytes or None "
                     f"(got {type(value).__name__})")


def _cut(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` of at most ``max_bytes`` UTF-8 bytes."""
    return text.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore")


def clean_texts(values: list[Any], rules: TextRules, stats: TextStats, *,
                first_row: int) -> list[str | None]:
    """Apply the rules to ``values`` (rows ``first_row ..``); updates ``stats`` and
    returns the texts to store (``None`` = no text)."""
    out: list[str | None] = []
    for i, value in enumerate(values):
        row = first_row + i
        text = _decode(value, row, stats)
        stats.rows += 1
        if text is None:
            out.append(None)
            continue
        if not text.strip():
            stats.empty += 1
            out.append(None)
            continue
        if len(text) > rules.max_bytes // 4 and len(text.encode("utf-8")) > rules.max_bytes:
            text = _cut(text, rules.max_bytes)
            stats.truncated += 1
            if stats.first_truncated_row is None:
                stats.first_truncated_row = row
        stats.with_text += 1
        stats.chars += len(text)
        out.append(text)
    return out
