"""The ported examples: each ``.diff`` is current, and the port runs (a short schedule)
on a small generated store laid out where the script looks for its data."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphpipe.ingest import ingest
from graphpipe.synthetic import community_graph, write_ogb_raw

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _make_diff():
    spec = importlib.util.spec_from_file_location("make_diff", EXAMPLES / "make_diff.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_diffs_are_current():
    make_diff = _make_diff()
    pairs = make_diff.pairs()
    assert [p[1].name for p in pairs] == ["dgl_node_classification.py", "graphbolt_node_classification.py",
                                          "pyg_products_sage.py", "pyg_products_sage_graphpipe.py"]
    for orig, port, target in pairs:
        assert target.read_text() == make_diff.unified(orig, port), (
            f"{target.name} is stale: run python examples/make_diff.py")
    # the counts docs/dropin.md quotes
    assert make_diff.counts((EXAMPLES / "pyg_products_sage.diff").read_text()) == (6, 8)
    assert make_diff.counts((EXAMPLES / "pyg_products_sage_graphpipe.diff").read_text()) == (3, 4)
    for port in ("dgl_node_classification", "graphbolt_node_classification"):  # the import only
        assert make_diff.counts((EXAMPLES / f"{port}.diff").read_text()) == (1, 1)


def short_schedule(source: str, runs: int, epochs: int) -> str:
    """The script with ``runs`` runs of ``epochs`` epochs (the loops' bounds replaced;
    the rest of the script untouched)."""
    source, n_runs = re.subn(r"for run in range\(1, \d+\):", f"for run in range(1, {runs + 1}):",
                             source)
    source, n_epochs = re.subn(r"for epoch in range\(1, \d+\):",
                               f"for epoch in range(1, {epochs + 1}):", source)
    assert n_runs == n_epochs == 1, "the schedule loops of the example changed"
    return source


def _run_port(tmp_path, name: str) -> str:
    """Run ``examples/<name>`` for one run of 6 epochs on a generated products-like store
    at ``../data/products`` from the script; its stdout."""
    pytest.importorskip("torch_geometric")
    os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb's import-time version check needs the network
    pytest.importorskip("ogb")
    graph = community_graph(3000, 8, feature_dim=32, avg_degree=10, seed=0)
    write_ogb_raw(tmp_path / "raw_products", graph)
    ingest(tmp_path / "raw_products", tmp_path / "data" / "products")
    shutil.rmtree(tmp_path / "raw_products")
    (tmp_path / "examples").mkdir()
    script = tmp_path / "examples" / name
    script.write_text(short_schedule((EXAMPLES / name).read_text(), 1, 6))
    env = {**os.environ, "OUTDATED_IGNORE": "1"}  # ogb's version check needs the network
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=900, check=False, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    final = re.search(r"Final Test: ([0-9.]+)", proc.stdout)
    assert final, proc.stdout[-2000:]
    assert float(final.group(1)) > 0.6, proc.stdout[-2000:]   # chance: 1/8
    assert len(re.findall(r"^Train: ", proc.stdout, re.MULTILINE)) == 1   # test() ran after epoch 5
    return proc.stdout


@pytest.mark.requires_pyg_sampler
@pytest.mark.slow
def test_pyg_products_sage_port_runs(tmp_path):
    """The port, run as a script: PyG's NeighborLoader over the store's backend trains,
    evaluates with layer-wise inference (after epoch 5) and beats chance by far."""
    _run_port(tmp_path, "pyg_products_sage.py")


@pytest.mark.slow
def test_pyg_products_sage_graphpipe_port_runs(tmp_path):
    """The second port, run as a script: graphpipe's NeighborLoader on ``dataset[0]`` (the
    store), OGB's dataset face (``get_idx_split``, ``num_features``, ``data.x``/``data.y``):
    trains, evaluates with PyG's layer-wise inference idiom and beats chance by far."""
    _run_port(tmp_path, "pyg_products_sage_graphpipe.py")
