"""Node text: the rules a raw string goes through (:mod:`.rules`) and tokenization with
Hugging Face ``tokenizers`` into ragged token IDs (:mod:`.tokenize`).

Pure functions of strings and arrays, like ``graphpipe.ops``: no files of a store, no
models. The store's text layout is :mod:`graphpipe.store.text`; writing text into a
store is :mod:`graphpipe.ingest.text_store`.
"""

from graphpipe.text.rules import TextRules, TextStats, clean_texts
from graphpipe.text.tokenize import (
    SPECIAL_TOKENS,
    TOKENIZER_KINDS,
    encode_ragged,
    load_tokenizer,
    special_ids,
    train_tokenizer,
)

__all__ = ["SPECIAL_TOKENS", "TOKENIZER_KINDS", "TextRules", "TextStats", "clean_texts",
           "encode_ragged", "load_tokenizer", "special_ids", "train_tokenizer"]
