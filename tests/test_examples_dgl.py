"""examples/dgl_graphsage*.py: DGL's minibatch GraphSAGE on DGL's DataLoader and, ported, on
graphpipe's NeighborLoader, each run a few steps in the DGL environment (skipped without one);
the committed .diff is the diff of the two files."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import pytest

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_npz

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    tmp = tmp_path_factory.mktemp("example")
    write_npz(os.path.join(tmp, "g.npz"), community_graph(1500, 4, feature_dim=8, avg_degree=8, seed=1))
    return str(ingest(os.path.join(tmp, "g.npz"), os.path.join(tmp, "store")).path)


def test_diff_file_is_the_diff_of_the_two_scripts() -> None:
    original = (EXAMPLES / "dgl_graphsage_dgl.py").read_text().splitlines(keepends=True)
    port = (EXAMPLES / "dgl_graphsage.py").read_text().splitlines(keepends=True)
    committed = (EXAMPLES / "dgl_graphsage.diff").read_text().splitlines(keepends=True)
    fresh = list(difflib.unified_diff(original, port, "dgl_graphsage_dgl.py", "dgl_graphsage.py"))
    body = [line for line in committed[2:] if not line.startswith("@@")]
    assert body == [line for line in fresh[2:] if not line.startswith("@@")]


@pytest.mark.parametrize("script", ["dgl_graphsage_dgl.py", "dgl_graphsage.py"])
def test_example_runs_a_few_steps(script: str, store_path: str, numpy1_env) -> None:
    out = numpy1_env(str(EXAMPLES / script), "--store", store_path, "--epochs", "1",
                     "--max-steps", "2", "--batch-size", "256")
    assert re.search(r"Epoch 00000 \| Loss \d+\.\d+ \| Accuracy \d\.\d+", out), out
    assert re.search(r"Test Accuracy \d\.\d+", out), out
