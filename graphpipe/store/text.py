"""Node text in a store: the raw strings and their ragged token IDs.

Layout (``manifest["text"]`` describes it; see ``docs/store-format.md``):

- ``tables/text.parquet``: one row per node, **row i = node i**, one Arrow
  ``large_string`` column per text field (``title``, ``abstract``, ``text``, ...), null
  where a node has no text in that field;
- ``text/<field>/offsets`` int64 ``(N + 1,)`` and ``text/<field>/ids`` int32 ``(T,)``:
  the token IDs of node ``v`` are ``ids[offsets[v]:offsets[v + 1]]`` (no special
  tokens; a node without text has none);
- ``text/tokenizer``: uint8, the UTF-8 bytes of the ``tokenizer.json`` that made the
  IDs (trained on the store's text, or the user's), so the IDs can be read back;
- ``manifest["text"]``: fields, per-field counts (with/without text, empty, invalid
  UTF-8, truncated, tokens per node), the tokenizer (kind, vocabulary size, special
  token IDs, ``max_tokens``) and where the text came from.

Writers (:class:`TextTableWriter`, :class:`RaggedWriter`) append in bounded memory:
Parquet row groups, token IDs through a temporary file into one raw chunk at close.
Readers take an open :class:`~graphpipe.store.GraphStore`.

>>> import tempfile
>>> tmp = tempfile.TemporaryDirectory()
>>> w = RaggedWriter(tmp.name, "title", num_rows=3)
>>> w.append(np.array([2, 0]), np.array([7, 8], dtype=np.int32))
>>> w.append(np.array([1]), np.array([9], dtype=np.int32))
>>> w.close()
>>> from graphpipe.store.arrays import read_array
>>> read_array(tmp.name, token_keys("title")["offsets"]).tolist()
[0, 2, 2, 3]
>>> tmp.cleanup()
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphpipe.store import arrays as _arrays
from graphpipe.store.errors import CorruptStoreError, StoreError
from graphpipe.store.generation import confirm

__all__ = ["TEXT_TABLE", "TOKENIZER_KEY", "RaggedWriter", "TextTableWriter", "check_field_name",
           "has_text", "read_texts", "read_tokenizer_json", "text_fields", "text_summary", "token_arrays",
           "token_keys", "write_tokenizer_json"]

TEXT_TABLE = "tables/text.parquet"
"""The raw strings, one row per node, one ``large_string`` column per field."""
TOKENIZER_KEY = "text/tokenizer"
"""uint8: the ``tokenizer.json`` bytes of the stored token IDs."""
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")
_COPY_BLOCK = 16 << 20


def check_field_name(name: str) -> str:
    """``name`` if it can be a text field (a path component: letters, digits, ``_.-``)."""
    if not isinstance(name, str) or not _FIELD.match(name):
        raise ValueError(f"text field name {name!r}: use letters, digits, '_', '.', '-' "
                         "(first a letter or '_'), at most 64 characters")
    return name


def token_keys(field: str) -> dict[str, str]:
    """Array keys of a field's token IDs: ``{"offsets": ..., "ids": ...}``."""
    check_field_name(field)
    return {"offsets": f"text/{field}/offsets", "ids": f"text/{field}/ids"}


class TextTableWriter:
    """Appends rows of text fields to ``tables/text.parquet`` under ``root`` (row
    groups as they come: memory is one batch)."""

    def __init__(self, root: str | os.PathLike, fields: list[str]):
        self.fields = [check_field_name(f) for f in fields]
        self.path = Path(root) / TEXT_TABLE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.schema = pa.schema([(f, pa.large_string()) for f in self.fields])
        self._writer = pq.ParquetWriter(self.path, self.schema, compression="zstd")
        self.rows = 0

    def append(self, columns: dict[str, list[str | None]]) -> None:
        """Rows ``self.rows ..`` of every field (lists of equal length)."""
        arrays = [pa.array(columns[f], type=pa.large_string()) for f in self.fields]
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.rows += len(arrays[0]) if arrays else 0

    def close(self) -> None:
        self._writer.close()


class RaggedWriter:
    """Appends ragged token IDs of a field, node by node, into ``text/<field>/offsets``
    and ``text/<field>/ids`` under ``root``. IDs go to a temporary file while rows come
    in (memory: one batch and the ``(N + 1,)`` offsets); :meth:`close` checks that
    ``num_rows`` rows came and moves the IDs into the array's one raw chunk."""

    def __init__(self, root: str | os.PathLike, field: str, num_rows: int):
        self.root, self.keys, self.num_rows = Path(root), token_keys(field), int(num_rows)
        self.offsets = np.zeros(self.num_rows + 1, dtype=np.int64)
        self._spill = self.root / f".{field}.ids.tmp"
        self._spill.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self._spill, "wb")  # noqa: SIM115 - closed in close()/abort()
        self.rows = 0

    def append(self, lengths: np.ndarray, ids: np.ndarray) -> None:
        """The next ``len(lengths)`` rows: their token counts and their IDs, concatenated."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if self.rows + lengths.size > self.num_rows:
            raise StoreError(f"{self.keys['ids']}: more than {self.num_rows} rows")
        if int(lengths.sum()) != ids.size:
            raise StoreError(f"{self.keys['ids']}: lengths sum to {int(lengths.sum())}, "
                             f"{ids.size} IDs given")
        start = self.offsets[self.rows]
        self.offsets[self.rows + 1:self.rows + 1 + lengths.size] = start + np.cumsum(lengths)
        self.rows += lengths.size
        self._fh.write(np.ascontiguousarray(ids, dtype="<i4").tobytes())

    def close(self) -> None:
        self._fh.close()
        if self.rows != self.num_rows:
            self.abort()
            raise StoreError(f"{self.keys['ids']}: {self.rows} rows written, expected {self.num_rows}")
        total = int(self.offsets[-1])
        out = _arrays.create_raw_array(self.root, self.keys["ids"], (total,), np.int32)
        with open(self._spill, "rb") as fh:
            for start in range(0, total, _COPY_BLOCK):
                block = np.frombuffer(fh.read(4 * min(_COPY_BLOCK, total - start)), dtype="<i4")
                out[start:start + block.size] = block
        if hasattr(out, "flush"):
            out.flush()
        del out
        self._spill.unlink()
        offsets = _arrays.create_raw_array(self.root, self.keys["offsets"], self.offsets.shape,
                                           np.int64)
        offsets[...] = self.offsets
        del offsets

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()
        self._spill.unlink(missing_ok=True)
        for key in self.keys.values():
            shutil.rmtree(self.root / key, ignore_errors=True)


def write_tokenizer_json(root: str | os.PathLike, text: str) -> None:
    """Store a ``tokenizer.json``'s text as :data:`TOKENIZER_KEY`."""
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)
    out = _arrays.create_raw_array(root, TOKENIZER_KEY, data.shape, np.uint8)
    if data.size:
        out[...] = data
    del out


# ------------------------------------------------------------------------------ readers
def has_text(store: Any) -> bool:
    """Whether ``store`` (a GraphStore) holds node text."""
    return bool(store.manifest.get("text"))


def text_fields(store: Any) -> list[str]:
    """The text fields of ``store``, in stored order (empty without text)."""
    entry = store.manifest.get("text") or {}
    return list(entry.get("fields", []))


def _require(store: Any, field: str | None) -> str:
    fields = text_fields(store)
    if not fields:
        raise StoreError(f"{store.path}: the store has no node text (ingest with --text or "
                         "--text-column)")
    if field is None:
        return fields[0]
    if field not in fields:
        raise StoreError(f"{store.path}: no text field {field!r} (fields: {', '.join(fields)})")
    return field


def read_texts(store: Any, field: str | None = None, ids: np.ndarray | None = None
               ) -> list[str | None]:
    """Raw strings of ``field`` (default: the first) for node ``ids`` (default: all)."""
    field = _require(store, field)
    column = pq.read_table(Path(store.path) / TEXT_TABLE, columns=[field]).column(field)
    confirm(store.path)  # read from the store this reader opened (generation.py)
    if column.length() != store.num_nodes:
        raise CorruptStoreError(f"{store.path}: {TEXT_TABLE} has {column.length()} rows, "
                                f"the store {store.num_nodes} nodes")
    if ids is not None:
        column = column.take(pa.array(np.asarray(ids, dtype=np.int64)))
    return column.to_pylist()


def token_arrays(store: Any, field: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets int64 (N + 1,), ids int32 (T,))`` of ``field`` (memory maps), checked:
    offsets non-decreasing from 0 to ``T``."""
    field = _require(store, field)
    keys = token_keys(field)
    offsets, ids = store.array(keys["offsets"]), store.array(keys["ids"])
    n = store.num_nodes
    if offsets.shape != (n + 1,) or offsets[0] != 0 or offsets[-1] != ids.shape[0] \
            or (n and bool(np.any(offsets[1:] < offsets[:-1]))):
        raise CorruptStoreError(f"{store.path}: {keys['offsets']} is not offsets of {n} nodes "
                                f"into {ids.shape[0]} token IDs")
    return offsets, ids


def read_tokenizer_json(store: Any) -> str:
    """The stored ``tokenizer.json`` text."""
    _require(store, None)
    data = np.asarray(store.array(TOKENIZER_KEY))
    try:
        text = data.tobytes().decode("utf-8")
        json.loads(text)
    except (UnicodeDecodeError, ValueError):
        raise CorruptStoreError(f"{store.path}: {TOKENIZER_KEY} is not a tokenizer.json") from None
    return text


def text_summary(manifest: dict[str, Any]) -> dict[str, Any] | None:
    """What `graphpipe info` shows of a store's text (None without text): nodes with and
    without text, the tokenizer, and per field its counts and tokens per node."""
    entry = manifest.get("text")
    if not entry:
        return None
    tok = entry.get("tokenizer", {})
    return {
        "nodes_with_text": entry.get("nodes_with_text", 0),
        "nodes_without_text": entry.get("nodes_without_text", 0),
        "tokenizer": f"{tok.get('kind')} ({tok.get('vocab_size')} tokens, max "
                     f"{tok.get('max_tokens')} per node)",
        "source": entry.get("source"),
        "fields": {name: entry.get("per_field", {}).get(name, {})
                   for name in entry.get("fields", [])},
    }
