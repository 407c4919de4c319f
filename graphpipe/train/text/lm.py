"""The language model: a Hugging Face encoder built from a config (random init, never a
download) or read from a local folder, run to a chosen depth and mean-pooled.

- :func:`build_lm` ``("bert" | "deberta", vocab_size, hidden, layers, heads, max_len)``:
  ``transformers``' ``BertModel`` / ``DebertaV2Model`` from ``BertConfig`` /
  ``DebertaV2Config``; or ``path=``: a local folder with ``config.json`` and
  ``model.safetensors`` (``from_pretrained(local_files_only=True, use_safetensors=True)``:
  a pickled ``pytorch_model.bin`` is never read).
- :class:`LMEncoder` runs the embeddings and the first ``depth`` encoder layers (the
  other layers are not run at all: the model's layer list is cut for the call), then
  mean-pools the hidden states over the real tokens: ``(B, hidden)``.

>>> import torch
>>> enc = LMEncoder(build_lm("bert", vocab_size=50, hidden=32, layers=4, heads=2, max_len=16))
>>> ids = torch.tensor([[2, 7, 8, 3], [2, 9, 3, 0]]); mask = (ids != 0).long()
>>> enc(ids, mask, depth=2).shape, enc.num_layers, enc.hidden
(torch.Size([2, 32]), 4, 32)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

__all__ = ["LM_KINDS", "LMEncoder", "build_lm", "check_lm_folder"]

LM_KINDS = ("bert", "deberta")


def build_lm(kind: str = "bert", *, vocab_size: int, hidden: int = 128, layers: int = 4,
             heads: int = 2, max_len: int = 128, path: str | os.PathLike | None = None) -> nn.Module:
    """A randomly initialised encoder of ``kind`` (or the model saved at ``path``)."""
    import transformers

    transformers.logging.set_verbosity_error()
    if path is not None:
        folder = check_lm_folder(path)
        return transformers.AutoModel.from_pretrained(str(folder), local_files_only=True,
                                                      use_safetensors=True)
    if kind not in LM_KINDS:
        raise ValueError(f"'kind' must be one of {', '.join(LM_KINDS)} (got {kind!r})")
    if hidden % heads:
        raise ValueError(f"'hidden' ({hidden}) must be a multiple of 'heads' ({heads})")
    common = {"vocab_size": int(vocab_size), "hidden_size": hidden, "num_hidden_layers": layers,
              "num_attention_heads": heads, "intermediate_size": 2 * hidden,
              "max_position_embeddings": max(int(max_len), 8), "pad_token_id": 0}
    if kind == "bert":
        return transformers.BertModel(transformers.BertConfig(**common), add_pooling_layer=False)
    config = transformers.DebertaV2Config(**common, relative_attention=True, position_buckets=32,
                                          pos_att_type=["p2c", "c2p"], max_relative_positions=-1)
    return transformers.DebertaV2Model(config)


def check_lm_folder(path: str | os.PathLike) -> Path:
    """``path`` if it holds ``config.json`` and ``model.safetensors``, else ``ValueError``."""
    folder = Path(path)
    if not (folder / "config.json").is_file() or not (folder / "model.safetensors").is_file():
        raise ValueError(f"{folder}: a local LM folder needs config.json and model.safetensors "
                         "(pickled .bin weights are not read)")
    return folder


class LMEncoder(nn.Module):
    """Mean-pooled hidden states of an encoder after its first ``depth`` layers."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.layers: nn.ModuleList = model.encoder.layer
        self.num_layers = len(self.layers)
        self.hidden = int(model.config.hidden_size)

    @contextlib.contextmanager
    def _cut(self, depth: int) -> Iterator[None]:
        if not 1 <= depth <= self.num_layers:
            raise ValueError(f"'depth' must be in [1, {self.num_layers}] (got {depth})")
        full = self.model.encoder.layer
        self.model.encoder.layer = nn.ModuleList(list(full)[:depth])
        try:
            yield
        finally:
            self.model.encoder.layer = full

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *,
                depth: int | None = None) -> torch.Tensor:
        """``(B, hidden)``: mean over real tokens of layer ``depth``'s output (default: all)."""
        with self._cut(depth or self.num_layers):
            out: Any = self.model(input_ids=input_ids, attention_mask=attention_mask)
        hidden = out.last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
