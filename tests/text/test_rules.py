"""The text rules: invalid UTF-8 replaced and counted, empty = no text, huge cut at a
character boundary, other types refused."""

from __future__ import annotations

import pytest

from graphpipe.text.rules import TextRules, TextStats, clean_texts


def test_rules_and_counts() -> None:
    stats = TextStats()
    out = clean_texts([b"caf\xc3\xa9", b"bad \xff\xfe end", "", " \t\n", None, "fine"],
                      TextRules(), stats, first_row=10)
    assert out == ["café", "bad \ufffd\ufffd end", None, None, None, "fine"]
    d = stats.as_dict()
    assert (d["rows"], d["with_text"], d["without_text"], d["missing"], d["empty"]) == (6, 3, 3, 1, 2)
    assert d["invalid_utf8"] == 1 and d["first_invalid_row"] == 11


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 5, 7])
def test_huge_text_is_cut_on_a_character_boundary(limit: int) -> None:
    text = "aé€😀" * 3                       # 1-, 2-, 3- and 4-byte characters
    stats = TextStats()
    [out] = clean_texts([text], TextRules(max_bytes=limit), stats, first_row=0)
    encoded = out.encode("utf-8")
    assert len(encoded) <= limit and text.startswith(out)
    assert len(text[:len(out) + 1].encode("utf-8")) > limit   # the longest such prefix
    assert stats.truncated == 1 and stats.first_truncated_row == 0


def test_other_types_are_refused_with_the_row() -> None:
    with pytest.raises(ValueError, match="row 7: text must be a string"):
        clean_texts(["ok", 3], TextRules(), TextStats(), first_row=6)
    with pytest.raises(ValueError, match="max_bytes"):
        TextRules(max_bytes=0)
