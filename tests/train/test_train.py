"""Trainer and `graphpipe train`: graph models beat the MLP on a community graph, SAGE
matches PyG's SAGE trained the same way, layer-wise inference equals a full-graph pass,
exact resume, checkpoint errors, metrics log, early stopping, CLI errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from graphpipe.ingest import ingest
from graphpipe.store import GraphStore, StoreWriter
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.train import CheckpointError, Trainer, accuracy, build_model, save_checkpoint
from graphpipe.train.layers import LocalGraph

NUM_NODES, NUM_CLASSES, DIM = 3000, 8, 32
HP = {"hidden": 64, "layers": 2, "fanouts": [10, 5], "batch_size": 256, "lr": 0.005, "epochs": 3}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One torch and one Numba thread in this module: tiny batches on a shared 2-core machine
    run faster without OpenMP barriers between threads (restored afterwards)."""
    import numba

    torch_threads, numba_threads = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    yield
    torch.set_num_threads(torch_threads)
    numba.set_num_threads(numba_threads)


@pytest.fixture(scope="module")
def graph():
    return community_graph(NUM_NODES, NUM_CLASSES, avg_degree=10, feature_dim=DIM, seed=0)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, graph) -> GraphStore:
    root = tmp_path_factory.mktemp("train")
    write_ogb_raw(root / "raw", graph)
    return ingest(root / "raw", root / "store")


def _model(name: str, seed: int = 0, **kw):
    torch.manual_seed(seed)
    return build_model(name, DIM, HP["hidden"], NUM_CLASSES, HP["layers"], **kw)


def _trainer(model, store, **kw) -> Trainer:
    options = {"fanouts": HP["fanouts"], "batch_size": HP["batch_size"], "lr": HP["lr"],
               "epochs": HP["epochs"], "quiet": True, **kw}
    return Trainer(model, store, **options)


# ---------------------------------------------------------------------------------- accuracy oracles
def test_graph_models_beat_mlp(store: GraphStore) -> None:
    """Features alone give ~57% on this graph; neighbour aggregation ~92%+."""
    mlp = _trainer(_model("mlp"), store).fit().test_acc
    assert 0.3 < mlp < 0.75
    for name in ("sage", "gcn", "gin", "gat"):
        acc = _trainer(_model(name), store).fit().test_acc
        assert acc > mlp + 0.15, (name, acc, mlp)


def _pyg_sage_test_acc(graph, seed: int) -> float:
    """PyG NeighborLoader + a 2-layer PyG SAGEConv model, same hyper-parameters, full-graph
    inference (what layer-wise full-neighbour inference computes)."""
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader as PygLoader
    from torch_geometric.nn import SAGEConv

    class Sage(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([SAGEConv(DIM, HP["hidden"]),
                                              SAGEConv(HP["hidden"], NUM_CLASSES)])

        def forward(self, x, edge_index):
            x = torch.nn.functional.dropout(self.convs[0](x, edge_index).relu(), 0.5, self.training)
            return self.convs[1](x, edge_index)

    torch.manual_seed(seed)
    data = Data(x=torch.from_numpy(graph.features), y=torch.from_numpy(graph.labels),
                edge_index=torch.from_numpy(graph.edge_index), num_nodes=NUM_NODES)
    model = Sage()
    opt = torch.optim.Adam(model.parameters(), lr=HP["lr"])
    loader = PygLoader(data, num_neighbors=HP["fanouts"], batch_size=HP["batch_size"], shuffle=True,
                       input_nodes=torch.from_numpy(graph.splits["train"]))
    for _ in range(HP["epochs"]):
        model.train()
        for batch in loader:
            out = model(batch.x, batch.edge_index)[: batch.batch_size]
            loss = torch.nn.functional.cross_entropy(out, batch.y[: batch.batch_size])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(data.x, data.edge_index).argmax(1)
    test = torch.from_numpy(graph.splits["test"])
    return accuracy(data.y[test], pred[test])


@pytest.mark.requires_pyg_sampler
def test_sage_accuracy_matches_pyg(store: GraphStore, graph) -> None:
    """Mean test accuracy over two seeds within 2.5 points of PyG's (600 test nodes each;
    benchmarks/train.py has the larger comparison)."""
    ours = np.mean([_trainer(_model("sage", seed), store, seed=seed).fit().test_acc for seed in (0, 1)])
    pyg = np.mean([_pyg_sage_test_acc(graph, seed) for seed in (0, 1)])
    assert abs(ours - pyg) <= 0.025, (ours, pyg)


def test_layerwise_inference_equals_full_graph_pass(store: GraphStore) -> None:
    """Trainer.predict (layer-wise, batches of destinations with all their in-neighbours)
    equals the model applied once to the whole graph as one square block."""
    for name in ("sage", "gat"):
        model = _model(name).eval()
        trainer = _trainer(model, store, eval_batch_size=700)
        logits = trainer._full_logits()
        whole = LocalGraph(torch.from_numpy(np.array(store.indptr, dtype=np.int64)),
                           torch.from_numpy(np.array(store.indices, dtype=np.int64)),
                           store.num_nodes, store.num_nodes)
        h = torch.from_numpy(np.array(store.feat))
        with torch.no_grad():
            for layer in range(model.num_layers):
                h = model.apply_layer(layer, h, whole)
        torch.testing.assert_close(logits, h, atol=1e-5, rtol=1e-5)
        ids = store.split("test")
        assert trainer.evaluate()["test"] == pytest.approx(
            float((h.argmax(1)[ids] == torch.from_numpy(np.array(store.labels))[ids]).float().mean()))


def test_sampled_evaluation_runs(store: GraphStore) -> None:
    result = _trainer(_model("sage"), store, evaluation="sampled", epochs=1).fit()
    assert 0.5 < result.test_acc <= 1.0


def test_accuracy_is_ogb_acc() -> None:
    assert accuracy(torch.tensor([0, 1, 2, 3]), torch.tensor([0, 1, 0, 3])) == 0.75


# ---------------------------------------------------------------------------------- resume, checkpoints
def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("name", ["sage", "gat"])
def test_resume_continues_the_same_run_exactly(store: GraphStore, tmp_path: Path, name: str) -> None:
    kw = {"dropout": 0.5} if name == "sage" else {"dropout": 0.5, "attn_dropout": 0.3}
    straight = _model(name, **kw)
    _trainer(straight, store, epochs=2, max_steps=4, checkpoint=tmp_path / "a.pt").fit()

    first = _model(name, **kw)
    log = tmp_path / "m.jsonl"
    _trainer(first, store, epochs=1, max_steps=4, checkpoint=tmp_path / "b.pt", metrics_log=log).fit()
    after_one = _weights(first)
    resumed = _model(name, seed=123, **kw)  # different init: everything must come from the checkpoint
    torch.manual_seed(999)  # and the RNG too
    result = _trainer(resumed, store, epochs=2, max_steps=4, checkpoint=tmp_path / "b.pt",
                      metrics_log=log).fit(resume=tmp_path / "b.pt")
    assert result.epochs_completed == 2 and len(result.history) == 2
    final = _weights(resumed)
    for key, value in _weights(straight).items():
        assert torch.equal(value, final[key]), key
    assert any(not torch.equal(after_one[k], final[k]) for k in final)
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["epoch"] for r in lines] == [0, 1]
    for r in lines:
        assert {"loss", "train_acc", "valid_acc", "test_acc", "seconds", "loader", "steps"} <= set(r)
        assert r["steps"] == 4 and r["loader"]["batches"] == 4
    assert not list(tmp_path.glob(".*.tmp-*"))


def test_checkpoint_errors_leave_files_alone(store: GraphStore, tmp_path: Path) -> None:
    ckpt = tmp_path / "gcn.pt"
    log = tmp_path / "log.jsonl"
    _trainer(_model("gcn"), store, epochs=1, max_steps=1, checkpoint=ckpt, metrics_log=log).fit()
    ckpt_bytes, log_bytes = ckpt.read_bytes(), log.read_bytes()

    sage = _trainer(_model("sage"), store, epochs=2, max_steps=1, checkpoint=ckpt, metrics_log=log)
    with pytest.raises(CheckpointError, match="was written for model"):
        sage.fit(resume=ckpt)
    wider = _trainer(_model("gcn", ), store, epochs=2, max_steps=1, batch_size=128, checkpoint=ckpt)
    with pytest.raises(CheckpointError, match="batch_size=256"):
        wider.fit(resume=ckpt)
    corrupt = tmp_path / "corrupt.pt"
    corrupt.write_bytes(ckpt_bytes[: len(ckpt_bytes) // 2])
    gcn = _trainer(_model("gcn"), store, epochs=2, max_steps=1, checkpoint=ckpt, metrics_log=log)
    with pytest.raises(CheckpointError, match="corrupt"):
        gcn.fit(resume=corrupt)
    not_ours = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(3)}, not_ours)
    with pytest.raises(CheckpointError, match="not a graphpipe training checkpoint"):
        gcn.fit(resume=not_ours)
    with pytest.raises(CheckpointError, match="does not exist"):
        gcn.fit(resume=tmp_path / "missing.pt")
    assert ckpt.read_bytes() == ckpt_bytes and log.read_bytes() == log_bytes


def test_save_checkpoint_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"epoch": 1})
    before = path.read_bytes()
    with pytest.raises(Exception):  # noqa: B017 - whatever torch.save raises for an unpicklable value
        save_checkpoint(path, {"epoch": 2, "bad": lambda: None})
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.pt"]


def test_early_stopping(store: GraphStore) -> None:
    """With a learning rate too small to change a prediction, valid accuracy never improves
    after the first epoch: patience 1 stops after the second."""
    result = _trainer(_model("sage"), store, epochs=5, max_steps=1, lr=1e-12, patience=1).fit()
    assert result.stopped_early and len(result.history) == 2 and result.best_epoch == 0


def test_trainer_argument_errors(store: GraphStore, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one entry per layer: the model has 2 layers"):
        _trainer(_model("sage"), store, fanouts=[5, 5, 5])
    with pytest.raises(ValueError, match="unknown optimizer 'rmsprop'"):
        _trainer(_model("sage"), store, optimizer="rmsprop")
    with pytest.raises(ValueError, match="'checkpoint' must be a file path"):
        _trainer(_model("sage"), store, checkpoint=tmp_path)
    result = _trainer(_model("sage"), store, feature_bits=8, epochs=1).fit()
    assert result.test_acc > 0.5
    with pytest.raises(ValueError, match="'feature_bits' must be None, 8, 4, 2 or 1"):
        _trainer(_model("sage"), store, feature_bits=3)


# ---------------------------------------------------------------------------------- CLI
def _cli(args: list[str]):
    from graphpipe.cli.train import command

    return CliRunner().invoke(command, [str(a) for a in args])


def test_cli_trains_and_prints_test_acc(store: GraphStore, tmp_path: Path) -> None:
    ckpt, log = tmp_path / "c.pt", tmp_path / "m.jsonl"
    result = _cli([store.path, "--model", "sage", "--hidden", 32, "--layers", 2, "--fanouts", "5,5",
                   "--batch-size", 512, "--epochs", 2, "--max-steps", 2, "--checkpoint", ckpt,
                   "--metrics-log", log])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert re.fullmatch(r"test acc \d\.\d{4}", lines[-1])
    assert sum(line.startswith("epoch ") for line in lines) == 2
    assert "rows gathered" in result.output
    # only the batches trained on are reported, not the ones prefetched beyond --max-steps
    assert re.findall(r"batches (\d+)", result.output) == ["2", "2"]
    assert len(log.read_text().splitlines()) == 2 and ckpt.is_file()
    quiet = _cli([store.path, "--model", "mlp", "--hidden", 16, "--layers", 2, "--epochs", 1,
                  "--max-steps", 1, "--quiet"])
    assert quiet.exit_code == 0 and re.fullmatch(r"test acc \d\.\d{4}\n", quiet.output)


def _unlabelled_store(path: Path, with_labels: bool) -> Path:
    indptr = np.arange(0, 21, 2, dtype=np.int64)
    indices = np.arange(20, dtype=np.int64) % 10
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("csc/edge_id", np.arange(20, dtype=np.int64))
        w.write_array("node/feat", np.ones((10, 4), dtype=np.float32))
        if with_labels:
            w.write_array("node/label", np.zeros(10, dtype=np.int64))
            w.manifest["labels"] = {"shape": [10], "dtype": "int64", "task_type": "multiclass",
                                    "num_classes": 2}
            w.write_splits({"test": np.arange(10)})
        w.manifest["num_nodes"], w.manifest["num_edges"] = 10, 20
        w.manifest["node_features"] = {"dim": 4, "dtype": "float32"}
        w.commit()
    return path


@pytest.mark.parametrize("args,message", [
    (["--model", "transformer"], "unknown model 'transformer'; known models: gat, gcn, gin, graphormer, gt, mlp, sage"),
    (["--layers", "2", "--fanouts", "5,5,5"], "--fanouts 5,5,5 has 3 entries but --layers is 2: give one fanout per layer"),
    (["--fanouts", "a,b,c"], "'--fanouts' must be comma-separated integers"),
    (["--optimizer", "lbfgs"], "unknown optimizer 'lbfgs'"),
])
def test_cli_bad_arguments(store: GraphStore, args: list[str], message: str) -> None:
    result = _cli([store.path, *args])
    assert result.exit_code != 0
    assert result.output.strip() == f"error: {message}" or result.output.startswith(f"error: {message}")
    assert len(result.output.strip().splitlines()) == 1


def test_cli_bad_stores(tmp_path: Path) -> None:
    no_labels = _unlabelled_store(tmp_path / "nolabels", with_labels=False)
    no_train = _unlabelled_store(tmp_path / "notrain", with_labels=True)
    for path, message in ((no_labels, "has no labels"), (no_train, "has no 'train' split"),
                          (tmp_path / "nowhere", "")):
        result = _cli([path, "--epochs", 1])
        assert result.exit_code != 0
        assert result.output.startswith("error: ") and message in result.output
        assert len(result.output.strip().splitlines()) == 1


def test_cli_resume_from_corrupt_checkpoint(store: GraphStore, tmp_path: Path) -> None:
    ckpt = tmp_path / "c.pt"
    ckpt.write_bytes(b"not a checkpoint")
    result = _cli([store.path, "--layers", 2, "--fanouts", "5,5", "--epochs", 1, "--resume", ckpt,
                   "--checkpoint", ckpt])
    assert result.exit_code != 0 and result.output.startswith("error: checkpoint")
    assert ckpt.read_bytes() == b"not a checkpoint"
