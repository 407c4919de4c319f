"""TypedTrainer and ``graphpipe train`` on a typed store (generated ogbn-mag-like graph)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.loaders import GraphData
from graphpipe.loaders.graph_data import add_reverse_relations
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag
from graphpipe.train import build_model
from graphpipe.train.checkpoint import CheckpointError
from graphpipe.train.hetero_models import build_hetero_model
from graphpipe.train.trainer import TypedTrainer, typed_model_dims, typed_training_data


@pytest.fixture(scope="module")
def mag_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mag")
    data = mag_dataset(papers=600, authors=700, institutions=30, fields=60, num_classes=4,
                       feature_dim=8, feature_signal=0.05, seed=1)
    ingest(write_ogb_mag(root / "src", data), root / "store")
    return root / "store"


def _rgcn(data, hidden=16):
    torch.manual_seed(0)
    return build_hetero_model("rgcn", typed_model_dims(data), data.num_nodes_dict, hidden, 4, 2,
                              data.edge_types, "paper", dropout=0.0)


def test_reverse_relations_transpose_every_cross_type_relation(mag_store):
    data = typed_training_data(mag_store)
    plain = typed_training_data(mag_store, reverse=False)
    for s, r, d in plain.edge_types:
        fwd = plain.typed_csc((s, r, d))
        src = np.asarray(fwd[1], np.int64)
        dst = np.repeat(np.arange(len(fwd[0]) - 1), np.diff(fwd[0]))
        if s == d:
            got = data.typed_csc((s, r, d))
            gsrc = np.asarray(got[1], np.int64)
            gdst = np.repeat(np.arange(len(got[0]) - 1), np.diff(got[0]))
            want = np.unique(np.concatenate([dst * 10**6 + src, src * 10**6 + dst]))
            assert np.array_equal(np.sort(gdst * 10**6 + gsrc), want)
            continue
        rev = data.typed_csc((d, "rev_" + r, s))
        rsrc = np.asarray(rev[1], np.int64)
        rdst = np.repeat(np.arange(len(rev[0]) - 1), np.diff(rev[0]))
        assert np.array_equal(np.sort(rsrc * 10**6 + rdst), np.sort(dst * 10**6 + src))


def test_rgcn_trains_and_beats_the_mlp(mag_store):
    data = typed_training_data(mag_store)
    rgcn = TypedTrainer(_rgcn(data), data, fanouts=[5, 5], batch_size=128, epochs=4, lr=0.02,
                        quiet=True).fit()
    torch.manual_seed(0)
    mlp = build_model("mlp", 8, 16, 4, 2, dropout=0.0)
    base = TypedTrainer(mlp, data, fanouts=[5, 5], batch_size=128, epochs=4, lr=0.02,
                        quiet=True).fit()
    assert [r["steps"] for r in rgcn.history] == [4] * 4  # 480 train papers / 128
    assert rgcn.test_acc > base.test_acc + 0.2, (rgcn.test_acc, base.test_acc)


def test_resume_continues_and_refuses_another_setting(mag_store, tmp_path):
    data = typed_training_data(mag_store)
    ckpt = tmp_path / "ck.pt"
    TypedTrainer(_rgcn(data), data, fanouts=[3, 3], batch_size=200, epochs=1, quiet=True,
                 checkpoint=ckpt).fit()
    result = TypedTrainer(_rgcn(data), data, fanouts=[3, 3], batch_size=200, epochs=2,
                          quiet=True).fit(resume=ckpt)
    assert result.epochs_completed == 2 and len(result.history) == 2
    with pytest.raises(CheckpointError, match="batch_size"):
        TypedTrainer(_rgcn(data), data, fanouts=[3, 3], batch_size=100, epochs=2,
                     quiet=True).check_resume(ckpt)


def test_cli_trains_rgcn_and_names_the_metric(mag_store):
    result = CliRunner().invoke(cli, ["train", str(mag_store), "--epochs", "1", "--fanouts", "3,3",
                                      "--hidden", "8", "--batch-size", "256"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert "7 relations" in lines[0] and "target paper" in lines[0]
    assert lines[1].startswith("features: paper in memory (") and "prefetch 2" in lines[1]
    assert lines[-1].startswith("test acc ")


def test_disk_tier_plan_trains_as_the_memory_tier(mag_store):
    """A memory plan that leaves no room for the paper features puts them on the disk tier
    (planned per type, built once for the store); training reads them there and every
    epoch's loss and the final weights equal a run with the rows in memory."""
    from graphpipe.loaders.rows.tiers import tier_counters
    from graphpipe.train.memory_plan import STEP_RESERVE, plan_typed_training

    data = typed_training_data(mag_store)
    plan = plan_typed_training(data, batch_size=128, usable=STEP_RESERVE + (64 << 10), limit=None)
    assert plan.tiers == {"paper": "disk"} and plan.prefetch == 1 and plan.eval_batch_size == 128
    assert plan.describe().startswith("features: paper disk tier (")
    assert plan.embeddings == "memory" and plan.embedding_bytes == 0
    tight = plan_typed_training(data, batch_size=128, usable=STEP_RESERVE + (64 << 10), limit=None,
                                embed_dim=16)
    roomy = plan_typed_training(data, batch_size=128, usable=8 << 30, limit=None, embed_dim=16)
    featureless = sum(n for t, n in data.num_nodes_dict.items() if t != "paper")
    assert tight.embedding_bytes == roomy.embedding_bytes == 16 * 16 * featureless
    assert (tight.embeddings, roomy.embeddings) == ("disk", "memory")
    assert "embeddings on disk (" in tight.describe()
    plan.apply(data)
    runs = []
    for options in (plan.loader_options(), {"features": "memory"}):
        trainer = TypedTrainer(_rgcn(data), data, fanouts=[4, 4], batch_size=128, epochs=2, lr=0.02,
                               quiet=True, loader_options=options)
        result = trainer.fit()
        runs.append(([r["loss"] for r in result.history], trainer.model.state_dict()))
        if "prefetch" in options:   # the planned run
            assert trainer.loader.feature_tier == {"paper": "disk"}
            assert tier_counters(trainer.loader.rows["paper"]).disk_rows > 0
    assert runs[0][0] == runs[1][0]
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])


def test_cli_typed_feature_bits(mag_store):
    result = CliRunner().invoke(cli, ["train", str(mag_store), "--epochs", "1", "--fanouts", "3,3",
                                      "--hidden", "8", "--batch-size", "256", "--feature-bits", "8", "--embedding-dim", "4",
                                      "--eval", "none"])
    assert result.exit_code == 0, result.output


def test_cli_rgat_beats_the_mlp(mag_store):
    def acc(*args):
        result = CliRunner().invoke(cli, ["train", str(mag_store), "--epochs", "4", "--quiet",
                                          "--fanouts", "5,5", "--hidden", "16", "--lr", "0.02",
                                          "--batch-size", "128", "--dropout", "0", *args])
        assert result.exit_code == 0, result.output
        return float(result.output.strip().splitlines()[-1].split()[-1])

    rgat, mlp = acc("--model", "rgat", "--heads", "2"), acc("--model", "mlp")
    assert rgat > mlp + 0.2, (rgat, mlp)


@pytest.mark.parametrize("args, message", [
    (["--model", "gat"], "--model must be one of rgcn, hetero-sage, rgat, mlp"),
    (["--model", "rgat", "--heads", "3"], "--hidden must be a multiple of --heads=3"),
    (["--heads", "2"], "--heads: not used by typed node classification with --model rgcn"),
    (["--target-type", "venue"], "--target-type must be one of"),
    (["--target-type", "author"], "type 'author' has no labels"),
])
def test_cli_refuses_with_one_line(mag_store, args, message):
    result = CliRunner().invoke(cli, ["train", str(mag_store), "--epochs", "1", *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_target_type_on_a_homogeneous_store_is_refused(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 20, 60), dst=rng.integers(0, 20, 60),
             x=rng.standard_normal((20, 3)).astype(np.float32), y=rng.integers(0, 2, 20),
             train_idx=np.arange(10), valid_idx=np.arange(10, 15), test_idx=np.arange(15, 20))
    ingest(tmp_path / "g.npz", tmp_path / "g")
    result = CliRunner().invoke(cli, ["train", str(tmp_path / "g"), "--target-type", "paper"])
    assert result.exit_code == 2
    assert "--target-type: not used by node classification (an option of typed" in result.output


def test_pyg_heterodata_trains_through_the_same_trainer():
    pyg = pytest.importorskip("torch_geometric.data")
    g = torch.Generator().manual_seed(0)
    data = pyg.HeteroData()
    data["paper"].x = torch.randn(50, 4, generator=g)
    data["paper"].y = torch.randint(0, 2, (50,), generator=g)
    data["paper"].train_mask = torch.arange(50) < 30
    data["paper"].val_mask = (torch.arange(50) >= 30) & (torch.arange(50) < 40)
    data["paper"].test_mask = torch.arange(50) >= 40
    data["author"].num_nodes = 20
    data["author", "writes", "paper"].edge_index = torch.stack(
        [torch.randint(0, 20, (100,), generator=g), torch.randint(0, 50, (100,), generator=g)])
    typed = add_reverse_relations(GraphData.from_pyg(data))
    torch.manual_seed(0)
    model = build_hetero_model("hetero-sage", typed_model_dims(typed), typed.num_nodes_dict, 8, 2,
                               2, typed.edge_types, "paper")
    result = TypedTrainer(model, typed, fanouts=[4, 4], batch_size=16, epochs=1, quiet=True).fit()
    assert 0.0 <= result.test_acc <= 1.0


def test_reverse_edges_report_their_forward_edges_ids():
    rng = np.random.default_rng(3)
    src, dst = rng.integers(0, 30, 200), rng.integers(0, 50, 200)
    data = GraphData.from_dicts({"author": 30, "paper": 50},
                                      {("author", "writes", "paper"): (src, dst)})
    both = add_reverse_relations(data)
    indptr, indices = both.typed_csc(("paper", "rev_writes", "author"))
    rev_dst = np.repeat(np.arange(30), np.diff(indptr))  # authors
    ids = both.edge_order[("paper", "rev_writes", "author")]
    assert np.array_equal(src[ids], rev_dst) and np.array_equal(dst[ids], np.asarray(indices))
    assert np.array_equal(np.sort(ids), np.arange(200))


def test_store_with_its_reverses_is_trained_as_stored(tmp_path):
    """Ingested with --add-reverse-edges, a typed store holds every reverse: training reads
    its relations as stored (memory maps of the store's arrays, nothing built in memory),
    and the trainer runs on them."""
    from graphpipe.ingest import IngestOptions
    from graphpipe.store import GraphStore

    data = mag_dataset(papers=200, authors=150, institutions=10, fields=20, num_classes=3,
                       feature_dim=4, seed=2)
    ingest(write_ogb_mag(tmp_path / "src", data), tmp_path / "s", IngestOptions(add_reverse_edges=True))
    store = GraphStore.open(tmp_path / "s")
    typed = typed_training_data(store)
    assert typed.edge_types == store.edge_types and len(store.edge_types) == 8
    for et in store.edge_types:
        assert np.shares_memory(typed.typed_csc(et)[1], store.typed_csc(et)[1])
    result = TypedTrainer(_rgcn(typed), typed, fanouts=[3, 3], batch_size=64, epochs=1, quiet=True).fit()
    assert result.epochs_completed == 1
