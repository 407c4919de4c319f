"""`graphpipe train --model lm|unitg|tape|glem` on a small text store: runs end to end,
ends with `test acc`, learns (above chance), resumes exactly, refuses what it cannot do."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from .conftest import TINY_LM


def _train(store: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["train", str(store), *TINY_LM, *args])
    return result.exit_code, result.output


@pytest.mark.parametrize(("model", "args"), [
    ("lm", ["--epochs", "6", "--lm-lr", "2e-3"]),
    ("unitg", ["--epochs", "30", "--lm-epochs", "4", "--lm-lr", "2e-3"]),
    ("tape", ["--epochs", "30", "--lm-epochs", "4", "--lm-lr", "2e-3"]),
    ("glem", ["--epochs", "30", "--lm-epochs", "4", "--lm-lr", "2e-3"]),
])
def test_models_run_and_end_with_test_acc(tag_store: Path, model: str, args: list[str]) -> None:
    code, out = _train(tag_store, "--model", model, *args)
    assert code == 0, out
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"test acc \d\.\d{4}", last), out
    assert float(last.split()[-1]) > 0.3     # 4 classes: chance is 0.25


def test_unitg_resume_gives_the_same_run(tag_store: Path, tmp_path: Path) -> None:
    import shutil

    from graphpipe.store import GraphStore
    from graphpipe.train.checkpoint import CheckpointError
    from graphpipe.train.text.build import TextConfig, build_unitg
    from graphpipe.train.text.task import TextTask

    config = TextConfig(lm_hidden=32, lm_layers=2, max_len=24, emb_dim=16, gnn_hidden=32,
                        lm_batch_size=32, epochs=8, lm_epochs=1, lm_share=0.5, sync_patience=2)
    task = TextTask.from_store(GraphStore.open(tag_store), config.max_len)
    ckpt = tmp_path / "c.pt"

    def keep_third(record: dict) -> None:
        if record["epoch"] == 2:
            shutil.copy(ckpt, tmp_path / "third.pt")

    straight = build_unitg(task, config, checkpoint=str(ckpt), quiet=True)
    straight.on_epoch = keep_third
    a = straight.fit()
    resumed = build_unitg(task, config, quiet=True)
    b = resumed.fit(resume=str(tmp_path / "third.pt"))
    assert [r["loss"] for r in a.history] == [r["loss"] for r in b.history]
    assert a.test_acc == b.test_acc
    for x, y in zip(straight.model.state_dict().values(), resumed.model.state_dict().values()):
        assert x.equal(y)
    other = build_unitg(task, TextConfig(**{**config.as_dict(), "epochs": 9}), quiet=True)
    with pytest.raises(CheckpointError, match="the sync schedule depend"):
        other.fit(resume=str(tmp_path / "third.pt"))


def test_refusals(tag_store: Path, tmp_path: Path) -> None:
    code, out = _train(tag_store, "--model", "tape", "--checkpoint", str(tmp_path / "c"))
    assert code == 2 and "not supported" in out
    code, out = _train(tag_store, "--model", "lm", "--lm-path", str(tmp_path))
    assert code == 2 and "model.safetensors" in out and len(out.strip().splitlines()) == 1


def test_unitg_syncs_and_reuses_embeddings_once_the_lm_is_done(tag_store: Path) -> None:
    from graphpipe.store import GraphStore
    from graphpipe.train.text.build import TextConfig, build_unitg
    from graphpipe.train.text.lm_trainer import encode
    from graphpipe.train.text.task import TextTask

    config = TextConfig(lm_hidden=32, lm_layers=4, max_len=24, emb_dim=16, gnn_hidden=32,
                        lm_batch_size=32, epochs=10, lm_epochs=1, lm_share=0.3)
    task = TextTask.from_store(GraphStore.open(tag_store), config.max_len)
    trainer = build_unitg(task, config, quiet=True)
    syncs, layers = [], []
    trainer.on_epoch = lambda r: (syncs.append(r["synced"]), layers.append(r["lm_layers_run"]))
    trainer.fit()
    # Δt = 0.3 J = 3: epochs 3, 6, 9 (1-based) sync; the LM finished in the first 3 epochs
    assert [i for i, s in enumerate(syncs) if s != "-"] == [2, 5, 8]
    assert syncs[5] == "same" and syncs[8] == "same" and isinstance(syncs[2], float)
    nodes = np.flatnonzero(task.has_text)
    emb, _ = encode(trainer.lm.model, task.inputs, nodes, trainer.lm.groups[nodes])
    torch.testing.assert_close(trainer.inputs.x[nodes], emb)
    no_text = np.flatnonzero(~task.has_text)
    torch.testing.assert_close(trainer.inputs.x[no_text], trainer.inputs.base[no_text])
    # the layers the LM ran in training: each train node once, at its group's exit depth
    lm = trainer.lm
    train = task.splits["train"][task.has_text[task.splits["train"]]]
    assert lm.steps_taken == len(lm.loader)
    assert sum(layers) == int(np.sum(np.array(lm.model.depths)[lm.groups[train]]))
