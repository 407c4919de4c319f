"""TypedLinkTrainer on a generated ogbn-mag-like graph: it learns (valid MRR against 100
negatives per edge, and Hits@50 against shared ones, well above the untrained model's),
and one epoch + resume + one epoch gives the weights of two straight epochs; the
checkpoint of another relation is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.train.checkpoint import CheckpointError
from graphpipe.train.trainer import typed_model_dims, typed_training_data
from graphpipe.train.typed_link import TypedLinkPredictor, TypedLinkTrainer

WRITES = ("author", "writes", "paper")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("typed_link")
    data = mag_dataset(papers=600, authors=700, institutions=20, fields=40, num_classes=4,
                       feature_dim=8, seed=1)
    return ingest(write_ogb_mag(root / "src", data), root / "store")


def _trainer(store, relation=WRITES, **kw) -> TypedLinkTrainer:
    graph = typed_training_data(store)
    torch.manual_seed(0)
    model = TypedLinkPredictor("rgcn", typed_model_dims(graph), graph.num_nodes_dict,
                               graph.edge_types, relation, hidden=16)
    options = {"fanouts": [5, 5], "batch_size": 256, "lr": 0.01, "quiet": True, "seed": 2, **kw}
    return TypedLinkTrainer(model, store, **options)


@pytest.mark.parametrize("metric", ["mrr", "hits@50"])
def test_it_learns(store, metric: str) -> None:
    trainer = _trainer(store, epochs=4, metric=metric)
    before = trainer.evaluate()["valid"]
    result = trainer.fit()
    assert trainer.metric == metric and result.history[-1]["metric"] == metric
    if metric == "mrr":  # an untrained model ranks as chance does: about H(101) / 101
        assert before < 0.08 and result.best_valid_acc > 1.5 * before, (before, result.best_valid_acc)
    else:
        assert result.best_valid_acc > before + 0.15, (before, result.best_valid_acc)


def test_resume_is_exact_and_checked(store, tmp_path: Path) -> None:
    straight = _trainer(store, epochs=2, evaluation="none")
    straight.fit()
    first = _trainer(store, epochs=1, evaluation="none", checkpoint=tmp_path / "ck.pt")
    first.fit()
    resumed = _trainer(store, epochs=2, evaluation="none")
    resumed.fit(resume=tmp_path / "ck.pt")
    for (name, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), name
    other = _trainer(store, relation=("paper", "cites", "paper"), epochs=2, evaluation="none")
    with pytest.raises(CheckpointError):
        other.fit(resume=tmp_path / "ck.pt")
