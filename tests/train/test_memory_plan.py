"""The training run's memory plan (:mod:`graphpipe.train.memory_plan`): what it picks for
a given amount of usable memory, that the trainer's loaders follow it (one shared disk
tier with the planned cache, bit-exact rows), and the real thing: ``graphpipe train``
under ``memlimit.sh`` with a cap below what full-neighbour inference alone needs
completes (skipped where memlimit.sh cannot make a cgroup)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from graphpipe.loaders.feature_tier import ROW_OVERHEAD
from graphpipe.loaders.rows import CachedRows, DegreeCachedRows, DiskRows
from graphpipe.store import GraphStore, StoreWriter
from graphpipe.train import Trainer, build_model
from graphpipe.train.memory_plan import STEP_RESERVE, plan_training

MEMLIMIT = Path(os.environ.get("GRAPHPIPE_MEMLIMIT") or
                Path(__file__).resolve().parents[3] / "shared" / "tools" / "memlimit.sh")
MB = 1 << 20


def _write_store(path: Path, n: int, dim: int, degree: int = 4, train: int = 2000) -> np.ndarray:
    rng = np.random.default_rng(0)
    indptr = np.arange(0, (n + 1) * degree, degree, dtype=np.int64)
    indices = rng.integers(0, n, n * degree).astype(np.int32)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    labels = x[:, :4].argmax(1).astype(np.int64)
    perm = rng.permutation(n)
    with StoreWriter(path) as w:
        w.write_array("csc/indptr", indptr)
        w.write_array("csc/indices", indices)
        w.write_array("node/feat", x, chunk_rows=4096)
        w.write_array("node/label", labels)
        w.write_splits({"train": np.sort(perm[:train]), "valid": np.sort(perm[train:train + 500]),
                        "test": np.sort(perm[train + 500:train + 1000])})
        w.manifest["num_nodes"], w.manifest["num_edges"] = n, len(indices)
        w.manifest["node_features"] = {"dim": dim, "dtype": "float32"}
        w.manifest["labels"] = {"shape": [n], "dtype": "int64",
                                "task_type": "multiclass classification", "num_classes": 4}
        w.commit()
    return x


def test_plan_follows_the_usable_memory(tmp_path: Path) -> None:
    n, dim = 20_000, 32
    _write_store(tmp_path / "s", n, dim)
    store = GraphStore.open(tmp_path / "s")
    model = build_model("sage", dim, 64, 4, 2)
    roomy = plan_training(store, model, usable=16 << 30, limit=None)
    assert (roomy.tier, roomy.evaluation, roomy.prefetch, roomy.cache_rows) == ("memory", "full", 2, 0)
    assert "node/feat" in roomy.in_memory and roomy.loader_options()["features"] is True
    assert roomy.full_inference_bytes == 2 * 4 * n * 64
    # the features (2.6 MB) do not fit, full inference (10 MB) does not either
    tight = plan_training(store, model, usable=STEP_RESERVE + 4 * MB, limit=1 << 30,
                          batch_size=256, eval_batch_size=4096)
    assert (tight.tier, tight.evaluation, tight.prefetch, tight.eval_batch_size) == ("disk", "sampled", 1, 256)
    assert tight.in_memory == frozenset() and tight.loader_options() == {"prefetch": 1, "features": "disk"}
    mapped = 8 * (n + 1) + 4 * 4 * n  # indptr + indices stay memory-mapped
    assert tight.cache_rows == int((0.5 * (4 * MB - mapped) - 4 * n) // (dim * 4 + ROW_OVERHEAD)) > 0
    assert tight.describe() == ("features: disk tier, cache 2 MB; prefetch 1; evaluation: sampled "
                                "(full inference needs 10 MB), batch 256; usable 452 MB "
                                "(cgroup limit 1.0 GB)")
    nothing = plan_training(store, model, usable=0, limit=None)
    assert (nothing.tier, nothing.cache_rows, nothing.evaluation) == ("disk", 0, "sampled")
    assert plan_training(store, model, evaluation="none", usable=0).evaluation == "none"
    with pytest.raises(ValueError, match="'evaluation'"):
        plan_training(store, model, evaluation="fast")


def test_trainer_follows_the_plan(tmp_path: Path) -> None:
    """The plan applied: the train and evaluation loaders read one shared disk tier with
    the planned CLOCK cache, and the batches' rows are the stored rows."""
    n, dim = 6000, 16
    x = _write_store(tmp_path / "s", n, dim, train=600)
    store = GraphStore.open(tmp_path / "s")
    model = build_model("sage", dim, 32, 4, 2)
    plan = plan_training(store, model, usable=STEP_RESERVE + MB, limit=None, batch_size=100)
    assert plan.tier == "disk" and plan.evaluation == "sampled" and plan.cache_rows > 0
    store = GraphStore.open(tmp_path / "s", in_memory=plan.in_memory)
    plan.apply(store)
    trainer = Trainer(model, store, fanouts=[3, 3], batch_size=100, epochs=1, quiet=True,
                      evaluation=plan.evaluation, eval_batch_size=plan.eval_batch_size,
                      loader_options=plan.loader_options())
    rows = trainer.loader.rows
    # the disk tier: a hot set by in-degree in front of CLOCK in front of DiskRows
    assert isinstance(rows, DegreeCachedRows) and isinstance(rows.backing, CachedRows)
    assert isinstance(rows.backing.source, DiskRows)
    assert len(rows) + rows.backing.capacity == plan.cache_rows and trainer.loader.prefetch == 1
    assert trainer._sampled_loader("valid").rows is rows
    for batch in trainer.loader:
        assert np.array_equal(batch.x.numpy().view(np.uint32), x[batch.n_id.numpy()].view(np.uint32))
    result = trainer.fit()
    assert result.epochs_completed == 1 and 0.0 <= result.test_acc <= 1.0


@pytest.mark.skipif(not MEMLIMIT.is_file(), reason="memlimit.sh not on this machine")
def test_graphpipe_train_completes_under_a_cap(tmp_path: Path) -> None:
    """200K nodes, hidden 256: full-neighbour inference alone needs 2 x 200K x 256 x 4 =
    410 MB on top of the process's fixed costs (torch, Numba, the first step), so the old
    default (full evaluation) is killed under a 500 MB cap (measured before this change:
    peak 500M, rc 137); the planned run (sampled evaluation) completes (peak ~410 MB)."""
    _write_store(tmp_path / "s", 200_000, 16, degree=3, train=1000)
    cmd = [str(MEMLIMIT), "--keep-caches", "500M", sys.executable, "-m", "graphpipe.cli.main", "train",
           str(tmp_path / "s"), "--model", "sage", "--layers", "2", "--fanouts", "5,5",
           "--batch-size", "500", "--epochs", "1"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    if proc.returncode == 3:
        pytest.skip(f"memlimit.sh cannot make a memory cgroup here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    plan = next(line for line in lines if line.startswith("features:"))
    assert "evaluation: sampled (full inference needs 391 MB)" in plan
    assert "(cgroup limit 500 MB)" in plan
    assert lines[-1].startswith("test acc ")


# ----------------------------------------------------------------------------- refusals
def _cap_just_above_this_process(monkeypatch, room: int) -> None:
    """GRAPHPIPE_MEMORY_LIMIT: this process's resident set plus ``room`` bytes."""
    import psutil

    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", str(psutil.Process().memory_info().rss + room))


def test_full_evaluation_asked_for_is_part_of_the_need() -> None:
    from types import SimpleNamespace

    from graphpipe.memory import NotEnoughMemory
    from graphpipe.train.memory_plan import STEP_MINIMUM

    store = SimpleNamespace(num_nodes=100_000, in_memory_arrays=["node/feat"], path=".")
    model = SimpleNamespace(hidden=256, out_dim=10, uses_graph=True)
    full = 2 * 4 * 100_000 * 256
    assert plan_training(store, model, evaluation="auto", usable=600 * MB).needed == STEP_MINIMUM
    plan = plan_training(store, model, evaluation="full", usable=300 * MB)
    assert plan.needed == STEP_MINIMUM + full
    with pytest.raises(NotEnoughMemory, match=r"^graphpipe train needs about 395 MB of memory"):
        plan.require()


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("refuse") / "s"
    _write_store(path, 3000, 8, train=1000)
    return path


@pytest.fixture(scope="module")
def typed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from graphpipe.ingest import ingest
    from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

    root = tmp_path_factory.mktemp("refuse_typed")
    data = mag_dataset(papers=60, authors=70, institutions=5, fields=6, num_classes=3,
                       feature_dim=4, seed=1)
    ingest(write_ogb_mag(root / "src", data), root / "store")
    return root / "store"


@pytest.mark.parametrize("mode, args", [
    ("node classification", []), ("typed", []), ("link prediction", ["--task", "link"]),
    ("graph transformer", ["--model", "gt"]), ("text models", ["--model", "lm"]),
    ("partition parallel", ["--partition-parallel", "2"]),
])
def test_train_refuses_up_front_under_a_limit(small_store: Path, typed_store: Path, monkeypatch,
                                              mode: str, args: list[str]) -> None:
    """Every mode of `graphpipe train`, 100 MB above what this process holds
    (GRAPHPIPE_MEMORY_LIMIT): one line naming the need and the limit, exit 2."""
    from click.testing import CliRunner
    from graphpipe.cli.main import cli

    store = typed_store if mode == "typed" else small_store
    _cap_just_above_this_process(monkeypatch, 100 * MB)
    result = CliRunner().invoke(cli, ["train", str(store), "--epochs", "1", *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: graphpipe train"), result.output
    assert "needs about 200 MB of memory more than it holds now" in lines[0]
    assert "from GRAPHPIPE_MEMORY_LIMIT); raise the limit" in lines[0]


@pytest.mark.skipif(not MEMLIMIT.is_file(), reason="memlimit.sh not on this machine")
def test_train_refuses_under_a_cgroup_cap_instead_of_being_killed(small_store: Path) -> None:
    """--eval full with hidden 65536: full inference needs 2 x 3000 x 65536 x 4 B = 1.5 GB;
    under a 700 MB cap the run used to train its epoch and be OOM-killed in evaluation
    (rc 137); now it refuses before training, in one line."""
    cmd = [str(MEMLIMIT), "--keep-caches", "700M", sys.executable, "-m", "graphpipe.cli.main",
           "train", str(small_store), "--eval", "full", "--hidden", "65536", "--layers", "2",
           "--fanouts", "2,2", "--epochs", "1", "--quiet"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    if proc.returncode == 3:
        pytest.skip(f"memlimit.sh cannot make a memory cgroup here: {proc.stderr.strip()}")
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith(("memlimit:", "graphpipe: "))]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: graphpipe train needs about 1.7 GB"), \
        proc.stderr
    assert "(memory limit 700 MB)" in lines[0]
