"""GraphStore's label helpers for PyTorch / OGB users: num_classes, labels_for_evaluator
(checked with OGB's own Evaluator) and split arrays torch can wrap without a warning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from graphpipe.ingest import ingest
from graphpipe.store import GraphStore


def _store(tmp_path, y, **extra) -> GraphStore:
    n = len(y)
    npz = tmp_path / "g.npz"
    np.savez(npz, edge_index=np.stack([np.arange(n), (np.arange(n) + 1) % n]), y=y, **extra)
    return ingest(npz, tmp_path / "s")


def test_num_classes_multiclass_regression_and_unlabelled(tmp_path):
    store = _store(tmp_path, np.array([0, 4, 1, 1, 2]))
    assert store.num_classes == 5
    assert GraphStore.open(tmp_path / "s").num_classes == 5
    (tmp_path / "r").mkdir()
    assert _store(tmp_path / "r", np.array([0.5, 1.5, 2.25])).num_classes is None
    (tmp_path / "u").mkdir()  # OGB's NaN = unlabelled: classes from the labelled nodes
    assert _store(tmp_path / "u", np.array([np.nan, 3.0, np.nan, 0.0])).num_classes == 4


def test_labels_for_evaluator_is_what_ogb_evaluator_takes(tmp_path):
    from ogb.nodeproppred import Evaluator

    rng = np.random.default_rng(0)
    y = rng.integers(0, 6, 200)
    test = np.sort(rng.choice(200, 50, replace=False))
    store = _store(tmp_path, y, test_idx=test)
    y_true = store.labels_for_evaluator(store.split("test"))
    assert y_true.shape == (50, 1) and y_true.dtype == np.int64 and y_true.flags.writeable
    y_pred = rng.integers(0, 6, (50, 1))
    acc = Evaluator("ogbn-arxiv").eval({"y_true": y_true, "y_pred": y_pred})["acc"]
    assert acc == pytest.approx(float(np.mean(y[test] == y_pred[:, 0])))
    assert store.labels_for_evaluator().shape == (200, 1)


def test_split_arrays_wrap_in_torch_without_a_warning(tmp_path):
    torch = pytest.importorskip("torch")
    store = _store(tmp_path, np.arange(6) % 2, train_idx=np.array([0, 3, 5]))
    for opened in (store, GraphStore.open(tmp_path / "s"), GraphStore.open(tmp_path / "s",
                                                                           in_memory=False)):
        ids = opened.split("train")
        assert ids.flags.writeable
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert torch.from_numpy(ids).tolist() == [0, 3, 5]
