"""GLEM's loss with pseudo-labels (``compute_loss`` of the GLEM code): ``α · mean CE on
pseudo-labels + (1 - α) · mean CE on gold labels``, for the GNN and the LM trainers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from graphpipe.train.models import build_model
from graphpipe.train.text.gnn import GnnTrainer
from graphpipe.train.text.task import FullGraph


@pytest.mark.parametrize("alpha", [0.05, 0.5, 0.8])
def test_gnn_loss_is_glem_mix(alpha: float) -> None:
    g = FullGraph(np.array([0, 1, 2, 3, 4, 5]), np.array([1, 0, 3, 2, 0]), layers=1)
    torch.manual_seed(0)
    model = build_model("sage", 3, 4, 2, 1, dropout=0.0)
    x = torch.randn(5, 3)
    labels = np.array([0, 1, 0, 1, 1])
    splits = {"train": np.array([0, 1]), "valid": np.array([2]), "test": np.array([3, 4])}
    pseudo = (np.array([2, 3, 4]), np.array([1, 1, 0]))
    trainer = GnnTrainer(model, g, x, labels, splits, epochs=1, pseudo=pseudo,
                         pseudo_weight=alpha, quiet=True)
    with torch.no_grad():
        out = model(g.batch(x))
    gold = F.cross_entropy(out[[0, 1]], torch.tensor([0, 1]))
    pl = F.cross_entropy(out[[2, 3, 4]], torch.tensor([1, 1, 0]))
    loss, n, _ = trainer.step(None, 0, 0)
    assert n == 5 and loss == pytest.approx(float(alpha * pl + (1 - alpha) * gold), rel=1e-5)
