"""LM inputs from a store's ragged token IDs: ``[CLS] field1 [SEP] field2 [SEP] ...``
per node, cut to ``max_len`` positions, padded per batch.

Every field gets an equal share of the positions left after the special tokens
(``(max_len - 1 - F) // F`` each, where ``F`` is the number of fields; a field using less
passes the rest to the fields after it), so a long abstract never pushes the title out.

>>> import numpy as np
>>> title = (np.array([0, 2, 2, 3]), np.array([7, 8, 9], dtype=np.int32))
>>> inputs = TokenInputs([title], {"pad": 0, "cls": 2, "sep": 3}, max_len=4)
>>> ids, mask = inputs.batch(np.array([0, 1, 2]))
>>> ids.tolist(), mask.tolist()
([[2, 7, 8, 3], [2, 3, 0, 0], [2, 9, 3, 0]], [[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]])
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["TokenInputs"]


class TokenInputs:
    """Builds ``(input_ids, attention_mask)`` int64 ``(B, T)`` for node IDs from one
    ``(offsets, ids)`` pair per text field (``T <= max_len``)."""

    def __init__(self, fields: list[tuple[np.ndarray, np.ndarray]], special: dict[str, Any],
                 max_len: int):
        if not fields:
            raise ValueError("at least one text field is needed")
        self.fields = fields
        self.pad = int(special.get("pad") or 0)
        self.cls, self.sep = special.get("cls"), special.get("sep")
        overhead = (self.cls is not None) + (self.sep is not None) * len(fields)
        if max_len < overhead + 1:
            raise ValueError(f"'max_len' must be at least {overhead + 1} (got {max_len})")
        self.max_len, self.budget = int(max_len), int(max_len) - overhead
        self.num_nodes = int(fields[0][0].shape[0] - 1)

    @classmethod
    def from_store(cls, store: Any, max_len: int, fields: list[str] | None = None) -> TokenInputs:
        """The inputs of ``store``'s text (all its fields, or ``fields``)."""
        from graphpipe.store.text import text_fields, token_arrays

        names = fields or text_fields(store)
        special = store.manifest["text"]["tokenizer"]["special"]
        return cls([token_arrays(store, f) for f in names], special, max_len)

    def sequence(self, node: int) -> list[int]:
        """Token IDs of ``node``'s input (special tokens included, unpadded)."""
        out = [] if self.cls is None else [int(self.cls)]
        left, fields_left = self.budget, len(self.fields)
        for offsets, ids in self.fields:
            share = left // fields_left
            piece = ids[offsets[node]:min(offsets[node + 1], offsets[node] + share)]
            out.extend(piece.tolist())
            left -= len(piece)
            fields_left -= 1
            if self.sep is not None:
                out.append(int(self.sep))
        return out

    def batch(self, nodes: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """``(input_ids, attention_mask)`` of ``nodes``, padded to the longest."""
        seqs = [self.sequence(int(v)) for v in nodes]
        width = max(1, max((len(s) for s in seqs), default=1))
        ids = np.full((len(seqs), width), self.pad, dtype=np.int64)
        mask = np.zeros((len(seqs), width), dtype=np.int64)
        for i, s in enumerate(seqs):
            ids[i, :len(s)] = s
            mask[i, :len(s)] = 1
        return torch.from_numpy(ids), torch.from_numpy(mask)
