"""`graphpipe train TYPED_STORE --task link --relation SRC___REL___DST`: a random link split
of the relation, one line per epoch and last `test mrr` (or `test hits@K` with
--link-metric), checkpoint + resume; with --nproc 2 two gloo ranks on loopback print the
one-process lines once and the checkpoint resumes under torchrun with one rank; bad
input (no or unknown relation, an MLP encoder, an option of another mode, a bad metric)
refused in one line, exit 2."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

COMMON = ["--task", "link", "--hidden", "8", "--fanouts", "3,2", "--batch-size", "128"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("typed_link")
    data = mag_dataset(papers=200, authors=200, institutions=8, fields=16, num_classes=3,
                       feature_dim=4, seed=3)
    ingest(write_ogb_mag(root / "src", data), root / "store")
    return root / "store"


def _train(*args) -> object:
    return CliRunner().invoke(cli, ["train", *map(str, args)])


def test_trains_checkpoints_and_resumes(store: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ck.pt"
    first = _train(store, *COMMON, "--relation", "author___writes___paper", "--epochs", "1",
                   "--checkpoint", ckpt)
    assert first.exit_code == 0, first.output
    lines = first.output.strip().splitlines()
    assert "link prediction on author___writes___paper (random split" in lines[0]
    assert "mrr against 100 negatives per held-out edge" in lines[0]
    assert re.fullmatch(r"test mrr \d\.\d{4}", lines[-1]), first.output
    assert re.search(r"^epoch\s+0 .*test mrr \d\.\d{4}  test hits@1/3/10 [\d.]+/[\d.]+/[\d.]+ ",
                     first.output, re.MULTILINE), first.output
    second = _train(store, *COMMON, "--relation", "author___writes___paper", "--epochs", "2",
                    "--resume", ckpt)
    assert second.exit_code == 0, second.output
    assert re.search(r"^epoch\s+1 ", second.output, re.MULTILINE)
    assert not re.search(r"^epoch\s+0 ", second.output, re.MULTILINE)
    other = _train(store, *COMMON, "--relation", "paper___cites___paper", "--epochs", "2",
                   "--resume", ckpt)
    assert other.exit_code == 2 and "relation" in other.output, other.output
    hits = _train(store, *COMMON, "--relation", "author___writes___paper", "--epochs", "2",
                  "--resume", ckpt, "--link-metric", "hits@50")
    assert hits.exit_code == 2 and "metric='mrr'" in hits.output, hits.output


def test_hits_at_k_with_shared_negatives(store: Path) -> None:
    result = _train(store, *COMMON, "--relation", "author___writes___paper", "--epochs", "1",
                    "--link-metric", "Hits@20", "--max-steps", "2")
    assert result.exit_code == 0, result.output
    assert "hits@20 against shared negatives" in result.output
    assert re.fullmatch(r"test hits@20 \d\.\d{4}", result.output.strip().splitlines()[-1])


def test_nproc_two_then_torchrun_resume_with_one(store: Path, tmp_path: Path,
                                                  nproc_then_torchrun_resume) -> None:
    common = [*COMMON, "--relation", "author___writes___paper", "--max-steps", "3"]
    out = nproc_then_torchrun_resume(store, tmp_path, [], common, ENV, metric="mrr")
    assert "data parallel: 2 ranks (gloo), 256 positive edges per step" in out


@pytest.mark.parametrize("args, message", [
    ([], "needs --relation SRC___REL___DST (relations: "),
    (["--relation", "paper___writes___author"], "--relation must be one of"),
    (["--relation", "author___writes___paper", "--model", "mlp"], "needs --model rgcn / hetero-sage"),
    (["--relation", "author___writes___paper", "--link-metric", "auc"],
     "--link-metric: the link metric must be 'mrr' or 'hits@K'"),
    (["--relation", "author___writes___paper", "--link-metric", "hits@50", "--link-negatives", "9"],
     "--link-negatives: negatives per held-out edge are drawn for --link-metric mrr"),
    (["--relation", "author___writes___paper", "--nproc", "2", "--target-type", "paper"],
     "--target-type: not used by typed link data parallel"),
    (["--relation", "paper___writes___author", "--nproc", "2"], "--relation must be one of"),
    (["--relation", "author___writes___paper", "--target-type", "paper"],
     "--target-type: not used by typed link prediction"),
])
def test_bad_input_refused_in_one_line(store: Path, args: list[str], message: str) -> None:
    result = _train(store, *COMMON, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], result.output


def test_relation_on_a_homogeneous_store_is_refused(tmp_path: Path) -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "g.npz", src=rng.integers(0, 20, 60), dst=rng.integers(0, 20, 60),
             x=rng.standard_normal((20, 3)).astype(np.float32), y=rng.integers(0, 2, 20),
             train_idx=np.arange(10), valid_idx=np.arange(10, 15), test_idx=np.arange(15, 20))
    ingest(tmp_path / "g.npz", tmp_path / "g")
    result = _train(tmp_path / "g", "--task", "link", "--relation", "a___b___c")
    assert result.exit_code == 2
    assert ("--relation: not used by link prediction (an option of typed link prediction, "
            "typed link data parallel)") in result.output
