"""Tokenization: trained vocabularies, a user's tokenizer.json, ragged IDs against the
tokenizer's own per-text encoding."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.text.tokenize import (
    SPECIAL_TOKENS,
    encode_ragged,
    load_tokenizer,
    special_ids,
    train_tokenizer,
)

TEXTS = ["Graph neural networks learn on graphs.", "Language models read text!",
         "text-attributed graphs: nodes carry text", "a b c d e f g"] * 20


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_ragged_ids_equal_per_text_encoding(kind: str) -> None:
    tok = train_tokenizer(iter(TEXTS), kind=kind, vocab_size=120)
    assert [tok.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    texts = [TEXTS[0], None, "", TEXTS[2], "unseenword zzz"]
    lengths, ids = encode_ragged(tok, texts, max_tokens=5)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    for i, text in enumerate(texts):
        expect = tok.encode(text, add_special_tokens=False).ids[:5] if text else []
        assert ids[offsets[i]:offsets[i + 1]].tolist() == expect
    assert lengths[1] == lengths[2] == 0 and ids.dtype == np.int32


@pytest.mark.parametrize("kind", ["wordpiece", "bpe"])
def test_training_is_deterministic(kind: str) -> None:
    runs = {train_tokenizer(TEXTS, kind=kind, vocab_size=size).to_str()
            for size in (60, 60, 60, 60, 60) for _ in range(2)}
    assert len(runs) == 1


def test_wordpiece_keeps_characters_then_frequent_words() -> None:
    texts = ["aaa bbb aaa", "aaa ccc", "d e f g h"]
    tok = train_tokenizer(texts, vocab_size=5 + 16 + 1)   # specials, 8 characters x 2, 1 word
    vocab = tok.get_vocab()
    assert {"a", "##a", "b", "##b", "c", "##c", "aaa"} <= set(vocab) and "bbb" not in vocab
    assert tok.encode("bbb", add_special_tokens=False).tokens == ["b", "##b", "##b"]


def test_user_tokenizer_file(tmp_path) -> None:
    tok = train_tokenizer(TEXTS, vocab_size=100)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    loaded = load_tokenizer(path)
    assert loaded.encode(TEXTS[1]).ids == tok.encode(TEXTS[1]).ids
    assert load_tokenizer(tok.to_str()).get_vocab_size() == tok.get_vocab_size()
    assert special_ids(loaded)["cls"] == 2
    (tmp_path / "bad.json").write_text('{"not": "a tokenizer"}')
    with pytest.raises(ValueError, match="bad.json: not a Hugging Face tokenizer.json"):
        load_tokenizer(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="not found"):
        load_tokenizer(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="max_tokens"):
        encode_ragged(tok, ["x"], max_tokens=0)
