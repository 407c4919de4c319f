"""Building the text trainers from a store and one :class:`TextConfig`
(``graphpipe train STORE --model lm|unitg|tape|glem``).

>>> TextConfig().lm_hidden, TextConfig().grouping, TextConfig().exit_order
(128, 'quartile', 'descending')

A UniTG run on a tiny text-attributed graph (a PyG ``Data`` with a list of texts):

>>> import tempfile, numpy as np, torch
>>> from torch_geometric.data import Data
>>> from graphpipe.interop.pyg_text import write_pyg_text_store
>>> from graphpipe.synthetic.tag import tag_graph
>>> g, titles, _ = tag_graph(60, 2, seed=0)
>>> data = Data(x=torch.from_numpy(g.features), y=torch.from_numpy(g.labels),
...             edge_index=torch.from_numpy(np.stack([g.src, g.dst])))
>>> for name, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
...     data[name] = torch.zeros(60, dtype=torch.bool)
...     data[name][torch.from_numpy(g.splits[split])] = True
>>> data.text = titles
>>> tmp = tempfile.TemporaryDirectory()
>>> store = write_pyg_text_store(data, tmp.name + "/s", vocab_size=120)
>>> config = TextConfig(lm_hidden=16, lm_layers=2, max_len=12, emb_dim=8, gnn_hidden=16,
...                     epochs=4, lm_epochs=1)
>>> result = build_unitg(TextTask.from_store(store, config.max_len), config, quiet=True).fit()
>>> len(result.history), 0.0 <= result.test_acc <= 1.0
(4, True)
>>> tmp.cleanup()
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from graphpipe.train.text.collaborator import GnnInputs
from graphpipe.train.text.gnn import GnnTrainer
from graphpipe.train.text.lazy_tuner import EarlyExitLM, node_groups
from graphpipe.train.text.lm import LMEncoder, build_lm
from graphpipe.train.text.lm_trainer import LMTrainer
from graphpipe.train.text.task import FullGraph, TextTask
from graphpipe.train.text.unitg import UniTGTrainer

__all__ = ["TEXT_MODELS", "TextConfig", "build_gnn", "build_lm_model", "build_lm_trainer",
           "build_unitg"]

TEXT_MODELS = ("lm", "unitg", "tape", "glem")


@dataclass
class TextConfig:
    """Every setting of a text run (LM, GNN, Lazy Tuner, Collaborator, baselines)."""

    lm_kind: str = "bert"
    lm_path: str | None = None
    lm_hidden: int = 128
    lm_layers: int = 4
    lm_heads: int = 2
    max_len: int = 64
    lm_epochs: int = 3
    lm_lr: float = 5e-4
    lm_batch_size: int = 32
    emb_dim: int = 64
    gnn: str = "sage"
    gnn_hidden: int = 128
    gnn_layers: int = 2
    gnn_lr: float = 0.01
    dropout: float = 0.3
    epochs: int = 100
    grouping: str = "quartile"
    groups: int = 4
    exit_order: str = "descending"
    lm_share: float = 0.6
    sync_patience: int = 20
    glem_rounds: int = 1
    gnn_pseudo_weight: float = 0.05
    lm_pseudo_weight: float = 0.8
    seed: int = 0
    device: str = "cpu"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_lm_model(task: TextTask, config: TextConfig, groups: int) -> EarlyExitLM:
    """The LM with ``groups`` exits (1: plain fine-tuning)."""
    vocab = int(max(int(a[1].max()) if a[1].size else 0 for a in task.inputs.fields)) + 1
    vocab = max(vocab, 8)
    lm = build_lm(config.lm_kind, vocab_size=vocab, hidden=config.lm_hidden,
                  layers=config.lm_layers, heads=config.lm_heads, max_len=config.max_len,
                  path=config.lm_path)
    return EarlyExitLM(LMEncoder(lm), config.emb_dim, task.num_classes,
                       groups=groups).to(config.device)


def build_lm_trainer(task: TextTask, config: TextConfig, *, groups: np.ndarray | None = None,
                     num_groups: int = 1, epochs: int | None = None,
                     pseudo: tuple[np.ndarray, np.ndarray] | None = None,
                     **kwargs: Any) -> LMTrainer:
    torch.manual_seed(config.seed)
    model = build_lm_model(task, config, num_groups)
    return LMTrainer(model, task.inputs, task.labels, task.splits, task.has_text, groups=groups,
                     batch_size=config.lm_batch_size, order=config.exit_order,
                     epochs=config.lm_epochs if epochs is None else epochs, lr=config.lm_lr,
                     seed=config.seed, pseudo=pseudo, pseudo_weight=config.lm_pseudo_weight,
                     **kwargs)


def build_gnn(task: TextTask, config: TextConfig, x: torch.Tensor, *, epochs: int | None = None,
              pseudo: tuple[np.ndarray, np.ndarray] | None = None, **kwargs: Any) -> GnnTrainer:
    from graphpipe.train.models import build_model

    torch.manual_seed(config.seed + 1)
    model = build_model(config.gnn, x.shape[1], config.gnn_hidden, task.num_classes,
                        config.gnn_layers, dropout=config.dropout).to(config.device)
    graph = FullGraph(task.indptr, task.indices, config.gnn_layers, config.device)
    return GnnTrainer(model, graph, x, task.labels, task.splits,
                      epochs=config.epochs if epochs is None else epochs, lr=config.gnn_lr,
                      seed=config.seed, pseudo=pseudo, pseudo_weight=config.lm_pseudo_weight,
                     **kwargs)


def build_unitg(task: TextTask, config: TextConfig, **kwargs: Any) -> UniTGTrainer:
    """The UniTG trainer: a 4-exit LM over centrality groups and a GNN on
    :class:`GnnInputs` (raw features projected to ``emb_dim`` until synced)."""
    groups = node_groups(task.degrees, config.grouping, config.groups)
    lm = build_lm_trainer(task, config, groups=groups, num_groups=config.groups, quiet=True)
    inputs = GnnInputs(task.features, config.emb_dim, seed=config.seed, device=config.device)
    gnn = build_gnn(task, config, inputs.x, quiet=True)
    return UniTGTrainer(lm, gnn, inputs, task.has_text, lm_epochs=config.lm_epochs,
                        lm_share=config.lm_share, sync_patience=config.sync_patience, **kwargs)
