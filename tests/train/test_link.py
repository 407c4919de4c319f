"""Link prediction: common neighbours against sets, the metrics against their definitions
(through OGB's Evaluator), the training loop on a generated OGB link folder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.store.link import LinkSplit
from graphpipe.synthetic.link import link_dataset, write_ogb_link
from graphpipe.train import link as link_module
from graphpipe.train.checkpoint import CheckpointError
from graphpipe.train.link import (
    DotDecoder,
    LinkPredictor,
    LinkTrainer,
    MLPDecoder,
    common_neighbours,
    evaluate_link,
    evaluate_splits,
    link_eval_keys,
    link_metric,
    pair_scorer,
    ranking_metrics,
)


def _csc(n: int, e: int, seed: int) -> tuple[np.ndarray, np.ndarray, list[set[int]]]:
    rng = np.random.default_rng(seed)
    pairs = {(int(u), int(v)) for u, v in rng.integers(0, n, (e, 2)) if u != v}
    pairs |= {(v, u) for u, v in pairs}
    neigh = [set() for _ in range(n)]
    for u, v in pairs:
        neigh[v].add(u)
    indptr = np.zeros(n + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(s) for s in neigh])
    indices = np.concatenate([sorted(s) for s in neigh]).astype(np.int64)
    return indptr, indices, neigh


def test_common_neighbours_against_sets() -> None:
    indptr, indices, neigh = _csc(80, 400, 1)
    rng = np.random.default_rng(2)
    src, dst = rng.integers(0, 80, 500), rng.integers(0, 80, 500)
    want = [len(neigh[u] & neigh[v]) for u, v in zip(src, dst)]
    assert common_neighbours(indptr, indices, src, dst).tolist() == want
    with pytest.raises(ValueError, match="node IDs"):
        common_neighbours(indptr, indices, np.array([80]), np.array([0]))


def test_hits_and_mrr_by_their_definitions() -> None:
    rng = np.random.default_rng(3)
    pos_score, neg_score = rng.random(40), rng.random(300)
    split = LinkSplit(np.arange(40), np.arange(40), neg_src=np.arange(300), neg_dst=np.arange(300))

    def score(s, d):  # scores looked up by pair: positives are (i, i) with i < 40
        return torch.from_numpy(pos_score[s] if len(s) == 40 else neg_score[s])

    for k in (1, 20, 50):
        kth = np.sort(neg_score)[-k]
        assert evaluate_link(score, split, f"hits@{k}") == pytest.approx(np.mean(pos_score > kth))
    negatives = rng.random((40, 7))
    per_edge = LinkSplit(np.arange(40), np.arange(40), neg_dst2d=np.arange(280).reshape(40, 7))
    assert link_metric(per_edge) == "mrr" and link_metric(split, "hits@20") == "hits@20"
    with pytest.raises(ValueError, match="per-edge negatives"):
        link_metric(per_edge, "hits@20")
    with pytest.raises(ValueError, match="shared negatives"):
        link_metric(split, "mrr")

    def score2(s, d):
        return torch.from_numpy(pos_score[s] if len(s) == 40 else negatives.reshape(-1)[d])

    rank = 1 + (negatives >= pos_score[:, None]).sum(1)  # OGB counts ties against the positive
    assert evaluate_link(score2, per_edge, "mrr") == pytest.approx(np.mean(1.0 / rank), rel=1e-6)


def test_ranking_metrics_by_hand_and_by_ogb() -> None:
    pos = torch.tensor([0.9, 0.2, 0.5])
    neg = torch.tensor([[0.1, 0.5, 0.3], [0.3, 0.4, 0.2], [0.5, 0.6, 0.7]])
    # ranks 1, 3.5, 3.5: a tie counts half (OGB's mean of the optimistic and pessimistic rank)
    got = ranking_metrics(pos, neg)
    want = {"mrr": (1 + 2 / 3.5) / 3, "hits@1": 1 / 3, "hits@3": 1 / 3, "hits@10": 1.0}
    assert got == pytest.approx(want, rel=1e-6)


def test_mrr_scores_in_chunks(monkeypatch) -> None:
    rng = np.random.default_rng(4)
    h = torch.from_numpy(rng.standard_normal((30, 4)).astype(np.float32))
    split = LinkSplit(rng.integers(0, 30, 25), rng.integers(0, 30, 25),
                      neg_dst2d=rng.integers(0, 30, (25, 7)))
    whole = evaluate_link(pair_scorer(DotDecoder(), h), split, "mrr")
    calls: list[int] = []
    score = pair_scorer(DotDecoder(), h)

    def counted(s, d):
        calls.append(len(s))
        return score(s, d)

    monkeypatch.setattr(link_module, "SCORE_CHUNK", 20)  # two rows of 7 negatives per call
    assert evaluate_link(counted, split, "mrr") == pytest.approx(whole, rel=1e-7)
    assert calls[0] == 25 and calls[1:] == [14] * 12 + [7]
    pos = (h[split.src] * h[split.dst]).sum(1)
    neg = (h[split.src][:, None, :] * h[split.neg_dst2d]).sum(-1)
    # a negative equal to the positive's pair ties with it: half a place (OGB's rule)
    rank = 1 + (neg > pos[:, None]).sum(1) + 0.5 * (neg == pos[:, None]).sum(1)
    assert whole == pytest.approx(float((1.0 / rank).mean()), rel=1e-6)
    figures = evaluate_splits({"valid": score, "test": score}, {"valid": split, "test": split}, "mrr")
    assert set(figures) == set(link_eval_keys("mrr")) and figures["test"] == whole
    for k in (1, 3, 10):
        assert figures[f"valid_hits@{k}"] == pytest.approx(float((rank <= k).float().mean()))


def test_decoders() -> None:
    a, b = torch.randn(5, 8), torch.randn(5, 8)
    assert torch.allclose(DotDecoder()(a, b), (a * b).sum(1))
    assert MLPDecoder(8, 16)(a, b).shape == (5,)
    with pytest.raises(ValueError, match="decoder"):
        LinkPredictor("sage", 4, 8, decoder="cosine")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("linktrain")
    folder = write_ogb_link(root / "f", link_dataset(600, feature_dim=8, pool=30, seed=2), num_neg=400)
    return ingest(folder, root / "s")


def _trainer(store, epochs=3, decoder="dot", hidden=16, fanouts=(5, 5), **kwargs) -> LinkTrainer:
    torch.manual_seed(0)
    model = LinkPredictor("sage", store.feature_dim, hidden, len(fanouts), decoder=decoder)
    return LinkTrainer(model, store, fanouts=list(fanouts), epochs=epochs, batch_size=128,
                       quiet=True, **kwargs)


def test_training_learns(store) -> None:
    trainer = _trainer(store)
    result = trainer.fit()
    records = result.history
    assert trainer.metric == "hits@50" and [r["epoch"] for r in records] == [0, 1, 2]
    assert records[-1]["loss"] < records[0]["loss"]
    assert 0 <= result.best_epoch < 3 and result.test_acc == records[result.best_epoch]["test_acc"]
    assert set(trainer.heuristic()) == {"valid", "test"}
    again = _trainer(store).fit()
    assert [r["loss"] for r in again.history] == [r["loss"] for r in records]  # seeded: the same run
    assert [r["test_acc"] for r in again.history] == [r["test_acc"] for r in records]


def test_checkpoint_resume_and_early_stopping(store, tmp_path) -> None:
    """2 epochs + resume + 1 epoch gives the weights of 3 straight epochs; the metrics log
    holds every epoch; a checkpoint of other settings is refused; patience stops."""
    straight = _trainer(store)
    straight.fit()
    ckpt, log = tmp_path / "link.ckpt", tmp_path / "link.jsonl"
    _trainer(store, epochs=2, checkpoint=ckpt, metrics_log=log).fit()
    resumed = _trainer(store, checkpoint=ckpt, metrics_log=log)
    result = resumed.fit(resume=ckpt)
    assert result.epochs_completed == 3 and len(result.history) == 3
    for key, value in straight.model.state_dict().items():
        assert torch.equal(value, resumed.model.state_dict()[key]), key
    assert len(log.read_text().splitlines()) == 3
    with pytest.raises(CheckpointError, match="batch_size"):
        LinkTrainer(LinkPredictor("sage", store.feature_dim, 16, 2, decoder="dot"), store,
                    fanouts=[5, 5], batch_size=64).fit(resume=ckpt)
    stopped = _trainer(store, epochs=30, patience=1).fit()
    assert stopped.stopped_early and stopped.epochs_completed < 30


def test_store_without_link_splits(tmp_path) -> None:
    npz = tmp_path / "g.npz"
    np.savez(npz, edge_index=np.array([[0, 1], [1, 0]]), x=np.eye(2, dtype=np.float32))
    with pytest.raises(ValueError, match="no link split"):
        LinkTrainer(LinkPredictor("sage", 2, 8), ingest(npz, tmp_path / "s"), epochs=1)


def test_citation2_layout_is_mrr(tmp_path) -> None:
    folder = write_ogb_link(tmp_path / "f", link_dataset(300, feature_dim=8, pool=30, seed=4),
                            style="citation2", neg_per_source=20)
    trainer = _trainer(ingest(folder, tmp_path / "s"), epochs=1, decoder="mlp", hidden=8,
                       fanouts=(4, 4))
    result = trainer.fit()
    assert trainer.metric == "mrr" and 0 < result.test_acc <= 1
    assert 0 <= trainer.heuristic()["test"] <= 1
