"""Tokenization with Hugging Face ``tokenizers`` (Rust): a vocabulary trained on the
store's own text, or a ``tokenizer.json`` the user gives; never a download.

- :func:`train_tokenizer` trains a WordPiece (BERT-style: lower-cased, split on
  whitespace and punctuation) or BPE vocabulary from an iterator of strings, streamed
  (``train_from_iterator``), with the special tokens :data:`SPECIAL_TOKENS`. The same
  texts always give the same vocabulary: ``tokenizers``' WordPiece trainer breaks ties
  between equally frequent merges in hash order (a different vocabulary run to run), so
  the WordPiece vocabulary is built here from its deterministic word counts (the
  ``WordLevel`` trainer: by count, then alphabetically): the special tokens, every
  character seen (alone and as a ``##`` continuation), then the most frequent words.
- :func:`load_tokenizer` reads a ``tokenizer.json`` file or its JSON text.
- :func:`encode_ragged` turns a batch of texts into **ragged token IDs**: ``lengths``
  int64 ``(n,)`` and ``ids`` int32 ``(sum(lengths),)``, each text cut to at most
  ``max_tokens`` tokens, *without* special tokens (the model adds ``[CLS]``/``[SEP]``
  when it builds its input). ``None`` (no text) has length 0.

>>> tok = train_tokenizer(["graph neural networks", "language models on graphs"] * 5,
...                       vocab_size=60)
>>> lengths, ids = encode_ragged(tok, ["graph models", None, "graph graph graph"], max_tokens=2)
>>> lengths.tolist(), ids.dtype.name, len(ids)
([2, 0, 2], 'int32', 4)
>>> special_ids(tok)["pad"], tok.id_to_token(int(ids[0]))
(0, 'graph')
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["SPECIAL_TOKENS", "TOKENIZER_KINDS", "encode_ragged", "load_tokenizer", "special_ids",
           "train_tokenizer"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
"""Special tokens of a trained vocabulary, IDs 0..4 in this order."""
TOKENIZER_KINDS = ("wordpiece", "bpe")
_ALIASES = {"pad": ("[PAD]", "<pad>"), "unk": ("[UNK]", "<unk>"), "cls": ("[CLS]", "<s>", "<cls>"),
            "sep": ("[SEP]", "</s>", "<sep>"), "mask": ("[MASK]", "<mask>")}


def train_tokenizer(texts: Iterable[str], *, kind: str = "wordpiece", vocab_size: int = 8000,
                    min_frequency: int = 2) -> Any:
    """A ``tokenizers.Tokenizer`` trained on ``texts`` (an iterator is streamed, never
    held whole). ``kind``: ``"wordpiece"`` or ``"bpe"``; ``min_frequency`` applies to BPE
    merges (a WordPiece vocabulary takes words by frequency rank)."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    if kind not in TOKENIZER_KINDS:
        raise ValueError(f"'kind' must be one of {', '.join(TOKENIZER_KINDS)} (got {kind!r})")
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 16:
        raise ValueError(f"'vocab_size' must be an integer >= 16 (got {vocab_size!r})")
    def bert_style(model: Any) -> Any:
        tok = Tokenizer(model)
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        return tok

    if kind == "bpe":
        tok = bert_style(models.BPE(unk_token="[UNK]"))
        tok.train_from_iterator((t for t in texts if t), trainer=trainers.BpeTrainer(
            vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=list(SPECIAL_TOKENS)))
        return tok
    words = bert_style(models.WordLevel(unk_token="[UNK]"))
    words.train_from_iterator((t for t in texts if t), trainer=trainers.WordLevelTrainer(
        vocab_size=1 << 30, min_frequency=1, special_tokens=list(SPECIAL_TOKENS)))
    vocab = _wordpiece_vocab(words.get_vocab(), vocab_size)
    return bert_style(models.WordPiece(vocab=vocab, unk_token="[UNK]"))


def _wordpiece_vocab(word_ids: dict[str, int], vocab_size: int) -> dict[str, int]:
    """Specials, characters (``c`` and ``##c``), then frequent words, to ``vocab_size``."""
    ranked = sorted((w for w in word_ids if w not in SPECIAL_TOKENS), key=word_ids.__getitem__)
    chars = sorted({c for w in ranked for c in w})
    pieces = list(SPECIAL_TOKENS) + chars + [f"##{c}" for c in chars]
    seen = set(pieces)
    for w in ranked:
        if len(pieces) >= vocab_size:
            break
        if w not in seen:
            pieces.append(w)
            seen.add(w)
    return {p: i for i, p in enumerate(pieces)}


def load_tokenizer(source: str | os.PathLike) -> Any:
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json`` path, or from its JSON text
    (a string starting with ``{``). A file that is not a tokenizer is a ``ValueError``
    naming it."""
    from tokenizers import Tokenizer

    text = str(source)
    try:
        if text.lstrip().startswith("{"):
            return Tokenizer.from_str(text)
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"{path}: tokenizer file not found")
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception type for bad JSON
        if isinstance(exc, ValueError) and "not found" in str(exc):
            raise
        where = "tokenizer JSON" if text.lstrip().startswith("{") else str(source)
        raise ValueError(f"{where}: not a Hugging Face tokenizer.json "
                         f"({str(exc).splitlines()[0][:200]})") from None


def special_ids(tok: Any) -> dict[str, int | None]:
    """IDs of the special tokens (``pad``, ``unk``, ``cls``, ``sep``, ``mask``) under
    their BERT or RoBERTa names; None where the vocabulary has none."""
    out: dict[str, int | None] = {}
    for role, names in _ALIASES.items():
        out[role] = next((tok.token_to_id(n) for n in names if tok.token_to_id(n) is not None),
                         None)
    return out


def encode_ragged(tok: Any, texts: list[str | None], *, max_tokens: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(lengths int64 (n,), ids int32 (sum,))`` of ``texts`` (module docstring)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"'max_tokens' must be a positive integer (got {max_tokens!r})")
    present = [i for i, t in enumerate(texts) if t]
    lengths = np.zeros(len(texts), dtype=np.int64)
    if not present:
        return lengths, np.zeros(0, dtype=np.int32)
    encodings = tok.encode_batch([texts[i] for i in present], add_special_tokens=False)
    parts = [np.asarray(e.ids[:max_tokens], dtype=np.int32) for e in encodings]
    lengths[present] = [p.size for p in parts]
    return lengths, np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
