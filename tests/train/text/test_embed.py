"""`graphpipe embed`: the derived array equals the LM's mean-pooled output per node; a
run killed half way resumes from its saved chunks; other parameters are refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import GraphStore
from graphpipe.train.text import embed as embed_mod
from graphpipe.train.text.lm import LMEncoder, build_lm
from graphpipe.train.text.tokens import TokenInputs


@pytest.fixture()
def store_copy(tag_store: Path, tmp_path: Path) -> Path:
    shutil.copytree(tag_store, tmp_path / "s")
    return tmp_path / "s"


@pytest.fixture(scope="module")
def lm_folder(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("lm") / "lm"
    build_lm("bert", vocab_size=2000, hidden=16, layers=2, heads=2, max_len=32).save_pretrained(
        folder, safe_serialization=True)
    return folder


def test_embed_equals_the_lm(store_copy: Path, lm_folder: Path) -> None:
    result = CliRunner().invoke(cli, ["embed", str(store_copy), "--lm", str(lm_folder),
                                      "--max-len", "32", "--chunk-rows", "70", "-q"])
    assert result.exit_code == 0, result.output
    store = GraphStore.open(store_copy)
    emb = store.array("derived/lm_emb")
    assert emb.shape == (300, 16) and store.manifest["derived"]["lm_embed:lm_emb"]["dim"] == 16
    enc = LMEncoder(build_lm(path=lm_folder, vocab_size=0)).eval()
    inputs = TokenInputs.from_store(store, 32)
    with torch.no_grad():
        ids, mask = inputs.batch(np.array([0, 77, 299]))
        want = enc(ids, mask).numpy()
    np.testing.assert_allclose(emb[[0, 77, 299]], want, rtol=1e-4, atol=1e-5)
    assert not (store_copy / ".embed-lm_emb").exists()
    assert CliRunner().invoke(cli, ["validate", str(store_copy)]).exit_code == 0
    again = CliRunner().invoke(cli, ["embed", str(store_copy), "--lm", str(lm_folder)])
    assert again.exit_code == 2 and "already exists" in again.output


def test_a_killed_run_resumes(store_copy: Path, lm_folder: Path, monkeypatch) -> None:
    calls: list[int] = []
    real = embed_mod._encode_chunk

    def dies_on_third(encoder, inputs, start, stop, depth, batch_size):
        calls.append(start)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(encoder, inputs, start, stop, depth, batch_size)

    monkeypatch.setattr(embed_mod, "_encode_chunk", dies_on_third)
    store = GraphStore.open(store_copy)
    with pytest.raises(KeyboardInterrupt):
        embed_mod.embed_store(store, lm_folder, max_len=32, chunk_rows=50)
    assert len(list((store_copy / ".embed-lm_emb").glob("part-*.npy"))) == 2
    assert not store.has_array("derived/lm_emb")
    with pytest.raises(ValueError, match="other parameters"):
        embed_mod.embed_store(store, lm_folder, max_len=16, chunk_rows=50)
    calls.clear()
    monkeypatch.setattr(embed_mod, "_encode_chunk", lambda *a: (calls.append(a[2]), real(*a))[1])
    entry = embed_mod.embed_store(store, lm_folder, max_len=32, chunk_rows=50)
    assert calls == [100, 150, 200, 250] and entry["encoded_this_run"] == 200
    fresh = GraphStore.open(store_copy)
    whole = fresh.array("derived/lm_emb")
    # the chunks saved before the kill are those a straight run computes
    np.testing.assert_array_equal(whole[:100], embed_mod._encode_chunk(
        LMEncoder(build_lm(path=lm_folder, vocab_size=0)).eval(),
        TokenInputs.from_store(fresh, 32), 0, 100, None, 64))


def test_embed_refuses_up_front_under_a_limit(store_copy: Path, lm_folder: Path,
                                              monkeypatch) -> None:
    """100 MB above what this process holds (GRAPHPIPE_MEMORY_LIMIT), with batches of 4096
    sequences: one line naming the need (their activations), exit 2, no work folder."""
    import psutil

    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", str(psutil.Process().memory_info().rss + (100 << 20)))
    need = embed_mod.embed_memory_need(lm_folder, 300, 4096, 32)
    assert need > 100 << 20
    result = CliRunner().invoke(cli, ["embed", str(store_copy), "--lm", str(lm_folder),
                                      "--batch-size", "4096", "--max-len", "32"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: graphpipe embed needs about "), lines
    assert not (store_copy / ".embed-lm_emb").exists()
