"""A store replaced (``graphpipe ingest --overwrite``) while a reader reads it: the reader
finishes on the old data or fails with one line, never mixed data; the new store validates.
The reader is a real process (a NeighborLoader epoch, ``overwrite_reader_child.py``), the
replacement the real command; every wait bounded."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

from graphpipe.store import GraphStore
from graphpipe.store.generation import PinnedPath, StoreReplacedError

NUM_NODES = 400
CHILD = Path(__file__).with_name("overwrite_reader_child.py")
TIMEOUT_S = 300


def _source(folder: Path, generation: int) -> Path:
    """A ring with features ``[i, generation]`` (a row says whose it is), labels, a train split."""
    ids = np.arange(NUM_NODES)
    x = np.stack([ids, np.full(NUM_NODES, generation)], axis=1).astype(np.float32)
    path = folder / f"gen{generation}.npz"
    np.savez(path, src=(ids + 1) % NUM_NODES, dst=ids, x=x, y=ids % 3, train_idx=ids)
    return path


def _ingest(src: Path, dest: Path, *extra: str) -> None:
    result = CliRunner().invoke(cli, ["ingest", str(src), str(dest), "--quiet", *extra])
    assert result.exit_code == 0, result.output


def test_a_loader_epoch_finishes_on_the_old_store(tmp_path):
    dest = tmp_path / "store"
    _ingest(_source(tmp_path, 0), dest)
    child = subprocess.Popen([sys.executable, str(CHILD), str(dest)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        _ingest(_source(tmp_path, 1), dest, "--overwrite")
        out, err = child.communicate("go\n", timeout=TIMEOUT_S)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=30)
    assert child.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["batches"] == NUM_NODES // 50
    assert result["epoch_generations"] == [0] and result["rows_are_x_of_n_id"]  # never mixed
    assert "lazy_generation" not in result  # first read after the swap: one line, not new rows
    assert "replaced (graphpipe ingest --overwrite)" in result["lazy_error"]
    assert "\n" not in result["lazy_error"]
    assert result["fresh_generation"] == 1
    assert CliRunner().invoke(cli, ["validate", str(dest)]).exit_code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gen0.npz", "gen1.npz", "store"]


def test_a_pinned_store_reads_nothing_of_its_replacement(tmp_path):
    """In one process: arrays and tables opened after the swap refuse; a pickled store (a
    spawned worker) keeps the pin; what was read before stays the old store's."""
    dest = tmp_path / "store"
    _ingest(_source(tmp_path, 0), dest)
    store = GraphStore.open(dest)
    indptr = store.indptr
    copy = pickle.loads(pickle.dumps(store.path))
    assert isinstance(copy, PinnedPath) and copy.identity == store.path.identity
    _ingest(_source(tmp_path, 1), dest, "--overwrite")
    assert indptr[-1] == NUM_NODES  # a memory map of the old, deleted file stays valid
    for read in (lambda: store.features(np.arange(3)), lambda: store.split("train"),
                 lambda: store.labels):
        with pytest.raises(StoreReplacedError, match="reopen it"):
            read()
    assert GraphStore.open(dest).features(np.arange(3))[:, 1].tolist() == [1, 1, 1]
