"""Unlabelled nodes (label -1, OGB's NaN) in a store's splits: the Trainer leaves them out of
the loss, the training seeds and every accuracy (issue 14.6: NaN labels are unlabelled)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_npz
from graphpipe.train import Trainer, accuracy, build_model

NUM_NODES, NUM_CLASSES, DIM = 600, 4, 16


def _store(tmp_path: Path, unlabelled_fraction: float, *, all_train: bool = False):
    graph = community_graph(NUM_NODES, NUM_CLASSES, avg_degree=8, feature_dim=DIM, seed=1)
    labels = graph.labels.astype(np.int64).copy()
    rng = np.random.default_rng(0)
    hidden = rng.random(NUM_NODES) < unlabelled_fraction
    if all_train:
        hidden[graph.splits["train"]] = True
    labels[hidden] = -1
    arrays = {"edge_index": graph.edge_index, "x": graph.features, "y": labels,
              **{f"{k}_idx": v for k, v in graph.splits.items()}, "num_nodes": NUM_NODES}
    write_npz(tmp_path / "g.npz", arrays)
    return ingest(tmp_path / "g.npz", tmp_path / "store"), labels, hidden


def _trainer(store, **kw) -> Trainer:
    torch.manual_seed(0)
    model = build_model("sage", DIM, 32, NUM_CLASSES, 2)
    return Trainer(model, store, fanouts=[5, 5], batch_size=64, epochs=2, quiet=True, **kw)


@pytest.mark.parametrize("evaluation", ["full", "sampled"])
def test_unlabelled_nodes_are_left_out(tmp_path: Path, evaluation: str) -> None:
    store, labels, hidden = _store(tmp_path, 0.3)
    assert (np.asarray(store.labels).reshape(-1) == -1).sum() == hidden.sum() > 0
    trainer = _trainer(store, evaluation=evaluation)
    result = trainer.fit()
    assert all(np.isfinite(r["loss"]) for r in result.history)
    for batch in trainer.loader:  # the training seeds are labelled nodes only
        assert (batch.y[: batch.batch_size] >= 0).all()
    pred = trainer.predict()
    scores = trainer.evaluate()
    for split in ("train", "valid", "test"):
        ids = np.asarray(store.split(split), dtype=np.int64)
        assert (labels[ids] == -1).any(), "the split should hold unlabelled nodes"
        ids = ids[labels[ids] >= 0]
        assert scores[split] == pytest.approx(accuracy(labels[ids], pred[ids].numpy()))


def test_a_train_split_without_labels_is_refused(tmp_path: Path) -> None:
    store, _, _ = _store(tmp_path, 0.0, all_train=True)
    with pytest.raises(ValueError, match="'train' has no labelled node"):
        _trainer(store)
