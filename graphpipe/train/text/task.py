"""What the text trainers read of a store, once: labels, splits, raw features, the CSC,
in-degrees and the LM inputs (:class:`TextTask`), and the full graph as a batch the
project's :class:`~graphpipe.train.models.BlockModel` GNNs run on (:class:`FullGraph`).

>>> import numpy as np, torch
>>> from graphpipe.train.models import build_model
>>> g = FullGraph(np.array([0, 1, 2, 3]), np.array([2, 0, 1]), layers=2)
>>> model = build_model("sage", 4, 8, 3, 2, dropout=0.0)
>>> model(g.batch(torch.eye(3, 4))).shape
torch.Size([3, 3])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = ["FullGraph", "TextTask", "check_labelled", "split_accuracy"]


class FullGraph:
    """The whole graph as ``layers`` identical blocks (every node a destination and a
    source, every in-edge), so a BlockModel computes all nodes at once."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, layers: int,
                 device: str | torch.device = "cpu"):
        from graphpipe.loaders.minibatch import Block

        n = int(indptr.shape[0] - 1)
        ip = torch.from_numpy(np.array(indptr, dtype=np.int64))
        ix = torch.from_numpy(np.array(indices, dtype=np.int64))
        block = Block(ip, ix, n, n, torch.arange(ix.numel(), dtype=torch.int64)).to(device)
        self.blocks, self.num_nodes = [block] * layers, n

    def batch(self, x: torch.Tensor) -> Any:
        """An object with ``x`` and ``blocks`` (what ``BlockModel.forward`` reads)."""
        return _Batch(x, self.blocks)


@dataclass
class _Batch:
    x: torch.Tensor
    blocks: list


def check_labelled(store: Any) -> None:
    """``ValueError`` naming the store unless it has labels, a ``train`` split and features."""
    for what, ok in (("labels ('node/label')", store.has_labels),
                     ("a 'train' split", "train" in store.split_names),
                     ("node features ('node/feat')", store.has_features)):
        if not ok:
            raise ValueError(f"store {str(store.path)!r} has no {what}")


@dataclass
class TextTask:
    """A labelled text-attributed store, read into memory (small graphs; the LM reads
    token rows per batch)."""

    labels: np.ndarray
    splits: dict[str, np.ndarray]
    features: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    degrees: np.ndarray
    inputs: Any
    has_text: np.ndarray
    num_classes: int

    @classmethod
    def from_store(cls, store: Any, max_len: int) -> TextTask:
        """Read ``store`` (a GraphStore with labels, a train split, features and text)."""
        from graphpipe.store.text import has_text, text_fields, token_arrays
        from graphpipe.train.text.tokens import TokenInputs

        if not has_text(store):
            raise ValueError(f"store {str(store.path)!r} has no node text: ingest it with --text "
                             "or --text-column")
        check_labelled(store)
        labels = np.asarray(store.labels).reshape(-1).astype(np.int64)
        indptr, indices = (np.asarray(a) for a in store.topology())
        lengths = sum(np.diff(token_arrays(store, f)[0]) for f in text_fields(store))
        meta = store.manifest.get("labels") or {}
        return cls(labels=labels, splits={s: np.asarray(store.split(s)) for s in store.split_names},
                   features=np.asarray(store.features(), dtype=np.float32), indptr=indptr,
                   indices=indices, degrees=np.diff(indptr), inputs=TokenInputs.from_store(
                       store, max_len), has_text=lengths > 0,
                   num_classes=int(meta.get("num_classes") or labels.max() + 1))


def split_accuracy(logits: torch.Tensor, labels: np.ndarray, splits: dict[str, np.ndarray],
                   names: tuple[str, ...] = ("train", "valid", "test")) -> dict[str, float]:
    """``{split: accuracy}`` of full-graph ``logits`` (OGB's evaluator, as the Trainer)."""
    from graphpipe.train.trainer import accuracy

    pred = logits.argmax(-1).cpu().numpy()
    return {s: accuracy(labels[splits[s]], pred[splits[s]]) for s in names if s in splits}
