"""Ingest options under a memory limit (graphpipe/ingest/options.py): an ingest that cannot
hold its minimum, or that is told to use more memory than the process may take, refuses
up front in one line (exit 2) and leaves no store behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
import pytest
from click.testing import CliRunner
from graphpipe.cli.main import cli

MB = 1 << 20


@pytest.fixture()
def npz(tmp_path: Path) -> Path:
    path = tmp_path / "tri.npz"
    np.savez(path, edge_index=np.array([[0, 1, 2, 0], [1, 2, 0, 2]]), x=np.eye(3, dtype=np.float32),
             y=np.array([0, 1, 1]), train_idx=np.array([0, 2]))
    return path


@pytest.mark.parametrize("room, args, message", [
    (16 * MB, [], "graphpipe ingest needs about 64 MB of memory more than it holds now"),
    (512 * MB, ["--memory-limit", "4GB"],
     "graphpipe ingest with a memory limit of 4.0 GB needs about 4.1 GB of memory"),
])
def test_ingest_refuses_up_front_under_a_limit(npz: Path, tmp_path: Path, monkeypatch, room: int,
                                               args: list[str], message: str) -> None:
    monkeypatch.setenv("GRAPHPIPE_MEMORY_LIMIT", str(psutil.Process().memory_info().rss + room))
    result = CliRunner().invoke(cli, ["ingest", str(npz), str(tmp_path / "s"), *args])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}"), result.output
    assert "from GRAPHPIPE_MEMORY_LIMIT" in lines[0]
    assert not (tmp_path / "s").exists()
