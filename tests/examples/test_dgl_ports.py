"""DGL's two upstream node classification examples and their one-import ports
(examples/dgl_node_classification*.py on dgl.dataloading / graphpipe.dgl,
examples/graphbolt_node_classification*.py on dgl.graphbolt / graphpipe.graphbolt), each run
for one epoch in the DGL environment (skipped without one) on a small products-like graph."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

from graphpipe.export import write_graphbolt
from graphpipe.ingest import IngestOptions, ingest
from graphpipe.synthetic import community_graph

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    tmp = tmp_path_factory.mktemp("dgl_ports")
    g = community_graph(2000, 6, feature_dim=16, avg_degree=8, train_frac=0.5, valid_frac=0.2, seed=2)
    np.savez(os.path.join(tmp, "g.npz"), src=g.src, dst=g.dst, x=g.features, y=g.labels,
             train_idx=g.splits["train"], valid_idx=g.splits["valid"], test_idx=g.splits["test"])
    store = ingest(os.path.join(tmp, "g.npz"), os.path.join(tmp, "store"), IngestOptions(edge_ids="always"))
    return str(store.path), str(write_graphbolt(store, tmp / "gb"))


@pytest.mark.parametrize("script", ["dgl_node_classification.orig.py", "dgl_node_classification.py",
                                    "graphbolt_node_classification.orig.py",
                                    "graphbolt_node_classification.py"])
def test_script_runs_an_epoch(script: str, data: tuple[str, str], numpy1_env) -> None:
    flag, path = ("--store", data[0]) if script.startswith("dgl_") else ("--dataset", data[1])
    out = numpy1_env(str(EXAMPLES / script), flag, path, "--epochs", "1")
    assert re.search(r"Epoch 00000 \| Loss \d+\.\d+ \| Accuracy \d\.\d+ \| Time \d+\.\d+", out), out
    assert re.search(r"Test [Aa]ccuracy \d\.\d+", out), out
