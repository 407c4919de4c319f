"""Writing node text into a store directory: raw strings, a tokenizer, ragged token IDs.

:func:`write_text` takes a :class:`TextSource` (fields, and row batches in node order
covering nodes ``0..N-1``) and writes, under ``root`` (a :class:`StoreWriter`'s
temporary tree or a :class:`StoreEditor`'s pending directory, so the commit is atomic):

1. the raw strings after the text rules (:mod:`graphpipe.text.rules`), batch by batch,
   into ``tables/text.parquet``;
2. a tokenizer: the user's ``tokenizer.json``, or WordPiece/BPE trained on that table,
   read back a row group at a time (never the whole text in memory);
3. per field, the ragged token IDs (at most ``max_tokens`` per node), tokenized a row
   group at a time, into ``text/<field>/offsets`` and ``text/<field>/ids``.

It returns the ``manifest["text"]`` entry. Memory is bounded by one batch plus the
``(N + 1,)`` offsets per field (and the tokenizer's word counts while training).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from graphpipe.store.text import (
    TEXT_TABLE,
    RaggedWriter,
    TextTableWriter,
    check_field_name,
    write_tokenizer_json,
)
from graphpipe.text.rules import TextRules, TextStats, clean_texts
from graphpipe.text.tokenize import encode_ragged, load_tokenizer, special_ids, train_tokenizer

__all__ = ["DEFAULT_MAX_TOKENS", "TextSource", "TokenizerOptions", "write_text"]

DEFAULT_MAX_TOKENS = 256
"""Tokens kept per node and field (TAPE/GLEM cut arxiv at 512 for DeBERTa-base; a small
LM on the CPU wants less)."""
_READ_ROWS = 8192


@dataclass
class TextSource:
    """Node text to store.

    Attributes:
        fields: field names (columns of ``tables/text.parquet``).
        batches: callable returning an iterator of ``(first_row, {field: values})`` in
            node order, together covering rows ``0..N-1`` (values: ``str``, ``bytes``
            or ``None``).
        origin: where the text came from (manifest and messages).
        extra: counts only the reader knows (rows that matched no node, ...).
    """

    fields: list[str]
    batches: Callable[[], Iterator[tuple[int, dict[str, list[Any]]]]]
    origin: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenizerOptions:
    """How the stored token IDs are made: ``path`` (a user's ``tokenizer.json``) or a
    vocabulary of ``kind`` and ``vocab_size`` trained on the store's text; at most
    ``max_tokens`` tokens per node and field."""

    path: str | None = None
    kind: str = "wordpiece"
    vocab_size: int = 8000
    max_tokens: int = DEFAULT_MAX_TOKENS


def write_text(root: str | os.PathLike, num_nodes: int, source: TextSource, *,
               tokenizer: TokenizerOptions | None = None, rules: TextRules | None = None
               ) -> dict[str, Any]:
    """Write ``source`` under ``root`` (module docstring); the ``manifest["text"]`` entry."""
    tokenizer = tokenizer or TokenizerOptions()
    rules = rules or TextRules()
    fields = [check_field_name(f) for f in source.fields]
    if not fields or len(set(fields)) != len(fields):
        raise ValueError(f"{source.origin}: text fields must be distinct and at least one "
                         f"(got {fields})")
    stats = _write_table(root, num_nodes, source, fields, rules)
    tok = (load_tokenizer(tokenizer.path) if tokenizer.path else
           train_tokenizer(_stored_texts(root, fields), kind=tokenizer.kind,
                           vocab_size=tokenizer.vocab_size))
    write_tokenizer_json(root, tok.to_str())
    tokens = {f: _write_tokens(root, f, num_nodes, tok, tokenizer.max_tokens) for f in fields}
    with_any = _nodes_with_text(root, fields)
    return {
        "fields": fields, "table": TEXT_TABLE, "source": source.origin,
        "nodes_with_text": with_any, "nodes_without_text": int(num_nodes) - with_any,
        "per_field": {f: {**stats[f].as_dict(), "tokens": tokens[f]} for f in fields},
        "tokenizer": {"kind": "user" if tokenizer.path else tokenizer.kind,
                      "path": tokenizer.path, "vocab_size": int(tok.get_vocab_size()),
                      "max_tokens": tokenizer.max_tokens, "special": special_ids(tok)},
        "rules": {"max_bytes": rules.max_bytes, "invalid_utf8": "replaced (U+FFFD)",
                  "empty": "no text", "huge": "cut at max_bytes"},
        **source.extra,
    }


def _write_table(root: str | os.PathLike, num_nodes: int, source: TextSource,
                 fields: list[str], rules: TextRules) -> dict[str, TextStats]:
    stats = {f: TextStats() for f in fields}
    writer = TextTableWriter(root, fields)
    try:
        for first_row, columns in source.batches():
            if first_row != writer.rows:
                raise ValueError(f"{source.origin}: rows out of order at node {first_row}")
            missing = [f for f in fields if f not in columns]
            if missing:
                raise ValueError(f"{source.origin}: batch at node {first_row} lacks {missing}")
            lengths = {len(columns[f]) for f in fields}
            if len(lengths) != 1 or writer.rows + lengths.pop() > num_nodes:
                raise ValueError(f"{source.origin}: more text rows than the {num_nodes} nodes")
            writer.append({f: clean_texts(list(columns[f]), rules, stats[f], first_row=first_row)
                           for f in fields})
    finally:
        writer.close()
    if writer.rows != num_nodes:
        raise ValueError(f"{source.origin}: text for {writer.rows} rows, the graph has "
                         f"{num_nodes} nodes")
    return stats


def _stored_texts(root: str | os.PathLike, fields: list[str]) -> Iterator[str]:
    pf = pq.ParquetFile(Path(root) / TEXT_TABLE)
    for batch in pf.iter_batches(batch_size=_READ_ROWS, columns=fields):
        for column in batch.columns:
            yield from (t for t in column.to_pylist() if t)


def _write_tokens(root: str | os.PathLike, fld: str, num_nodes: int, tok: Any,
                  max_tokens: int) -> dict[str, Any]:
    writer = RaggedWriter(root, fld, num_nodes)
    cut = 0
    try:
        pf = pq.ParquetFile(Path(root) / TEXT_TABLE)
        for batch in pf.iter_batches(batch_size=_READ_ROWS, columns=[fld]):
            texts = batch.column(0).to_pylist()
            lengths, ids = encode_ragged(tok, texts, max_tokens=max_tokens)
            cut += int((lengths == max_tokens).sum())
            writer.append(lengths, ids)
        writer.close()
    except BaseException:
        writer.abort()
        raise
    counts = np.diff(writer.offsets)
    present = counts[counts > 0]
    summary: dict[str, Any] = {"total": int(counts.sum()), "at_max_tokens": cut}
    if present.size:
        summary.update(mean=round(float(present.mean()), 2), p50=float(np.median(present)),
                       p90=float(np.quantile(present, 0.9)), max=int(present.max()))
    return summary


def _nodes_with_text(root: str | os.PathLike, fields: list[str]) -> int:
    pf = pq.ParquetFile(Path(root) / TEXT_TABLE)
    total = 0
    for batch in pf.iter_batches(batch_size=_READ_ROWS, columns=fields):
        valid = np.zeros(batch.num_rows, dtype=bool)
        for column in batch.columns:
            valid |= np.asarray(column.is_valid())
        total += int(valid.sum())
    return total
