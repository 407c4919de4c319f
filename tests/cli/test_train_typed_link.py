"""`graphpipe train TYPED_STORE --task link --relation SRC___REL___DST`: a random link split
of the relation, one line per epoch and last `test hits@50`, checkpoint + resume; bad
input (no or unknown relation, an MLP encoder, an option of another mode) refused in
one line, exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.ingest import ingest
from graphpipe.synthetic.mag import mag_dataset, write_ogb_mag

COMMON = ["--task", "link", "--hidden", "8", "--fanouts", "3,2", "--batch-size", "128"]


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
    assert re.fullmatch(r"test hits@50 \d\.\d{4}", lines[-1]), first.output
    second = _train(store, *COMMON, "--relation", "author___writes___paper", "--epochs", "2",
                    "--resume", ckpt)
    assert second.exit_code == 0, second.output
    assert re.search(r"^epoch\s+1 ", second.output, re.MULTILINE)
    assert not re.search(r"^epoch\s+0 ", second.output, re.MULTILINE)
    other = _train(store, *COMMON, "--relation", "paper___cites___paper", "--epochs", "2",
                   "--resume", ckpt)
    assert other.exit_code == 2 and "relation" in other.output, other.output


@pytest.mark.parametrize("args, message", [
    ([], "needs --relation SRC___REL___DST (relations: "),
    (["--relation", "paper___writes___author"], "--relation must be one of"),
    (["--relation", "author___writes___paper", "--model", "mlp"], "needs --model rgcn / hetero-sage"),
    (["--relation", "author___writes___paper", "--nproc", "2"],
     "--nproc: not used by typed link prediction"),
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
    assert "--relation: not used by link prediction (an option of typed link prediction)" in result.output
