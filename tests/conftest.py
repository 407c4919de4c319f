"""Shared fixtures: small synthetic graphs and the same graphs written as OGB folders.

Session-scoped, so treat them as read-only. Reading an OGB folder with
``ogb.nodeproppred.NodePropPredDataset`` writes a cache into its ``processed/``
folder, and a second read of the same folder then fails on torch >= 2.6
(OGB's ``torch.load`` of that cache is refused by ``weights_only``): read a
fixture folder with OGB through :func:`load_with_ogb` (fixture
``ogb_loader``), which works on a throw-away copy.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from graphpipe.synthetic import (
    SyntheticGraph,
    community_graph,
    ogb_meta_dict,
    rmat_graph,
    write_ogb_raw,
)

SMALL_COMMUNITY = {"num_nodes": 2000, "num_classes": 8, "feature_dim": 32, "avg_degree": 10,
                   "seed": 0}
RMAT_SMALL = {"scale": 10, "edge_factor": 16, "feature_dim": 16, "num_classes": 4, "seed": 0}


def load_with_ogb(folder: str | Path, meta_dict: dict | None = None, name: str = "ogbn-synthetic"):
    """Read an OGB folder with OGB's own ``NodePropPredDataset`` (on a copy); returns
    ``(graph_dict, labels, split_dict)`` as OGB gives them."""
    from ogb.nodeproppred import NodePropPredDataset

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(folder).name
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("data_processed"))
        meta = dict(meta_dict) if meta_dict is not None else ogb_meta_dict(copy)
        meta["dir_path"] = str(copy)
        dataset = NodePropPredDataset(name, meta_dict=meta)
        graph, labels = dataset[0]
        return graph, labels, dataset.get_idx_split()


@pytest.fixture(scope="session")
def ogb_loader():
    """:func:`load_with_ogb`: ``ogb_loader(folder, meta_dict=None) -> (graph, labels, splits)``."""
    return load_with_ogb


@pytest.fixture(scope="session")
def small_community() -> SyntheticGraph:
    """2000 nodes, 8 classes, 32 float32 features, 20,000 edges (each pair both ways),
    random 60/20/20 splits."""
    params = dict(SMALL_COMMUNITY)
    return community_graph(params.pop("num_nodes"), params.pop("num_classes"), **params)


@pytest.fixture(scope="session")
def ogb_raw_folder(small_community, tmp_path_factory) -> tuple[Path, dict]:
    """``small_community`` in OGB's CSV raw layout: ``(folder, meta_dict)``."""
    folder = write_ogb_raw(tmp_path_factory.mktemp("ogb") / "small_community", small_community)
    return folder, ogb_meta_dict(folder)


@pytest.fixture(scope="session")
def ogb_raw_binary_folder(small_community, tmp_path_factory) -> tuple[Path, dict]:
    """``small_community`` in OGB's binary raw layout (``raw/data.npz``):
    ``(folder, meta_dict)``."""
    folder = write_ogb_raw(tmp_path_factory.mktemp("ogb_bin") / "small_community",
                           small_community, binary=True)
    return folder, ogb_meta_dict(folder)


@pytest.fixture(scope="session")
def tiny_text_store(tmp_path_factory) -> str:
    """An 80-node text-attributed store (``tag_graph``'s titles as the node text, PyG
    ``Data`` with masks; WordPiece of 120 tokens trained on it): the text trainers' tests."""
    import numpy as np
    import torch
    from torch_geometric.data import Data

    from graphpipe.interop.pyg_text import write_pyg_text_store
    from graphpipe.synthetic.tag import tag_graph

    g, titles, _ = tag_graph(80, 2, seed=0)
    data = Data(x=torch.from_numpy(g.features), y=torch.from_numpy(g.labels),
                edge_index=torch.from_numpy(np.stack([g.src, g.dst])))
    for name, split in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        data[name] = torch.zeros(80, dtype=torch.bool)
        data[name][torch.from_numpy(g.splits[split])] = True
    data.text = titles
    root = tmp_path_factory.mktemp("tiny_text")
    return str(write_pyg_text_store(data, root / "s", vocab_size=120).path)


@pytest.fixture(scope="session")
def rmat_small() -> SyntheticGraph:
    """R-MAT scale 10, edge factor 16 (1024 nodes, 16,384 edges, duplicates and self-loops
    kept), 16 random features, 4 random classes, random splits."""
    params = dict(RMAT_SMALL)
    return rmat_graph(params.pop("scale"), params.pop("edge_factor"), **params)


ROOT = Path(__file__).resolve().parent.parent

# PyG's samplers (its NeighborLoader, LinkNeighborLoader, heterogeneous NeighborLoader: the
# oracles of many tests) need pyg-lib or torch-sparse, and the package index has no wheel of
# either for this torch (CPU). A test that runs one is marked ``@pytest.mark.requires_pyg_sampler``
# and skips with this one reason where neither is installed; everything else runs.
HAS_PYG_SAMPLER = any(importlib.util.find_spec(name) is not None
                      for name in ("pyg_lib", "torch_sparse"))
NO_PYG_SAMPLER = ("PyG's NeighborSampler needs pyg-lib or torch-sparse; "
                  "no wheel for this torch on PyPI")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "requires_pyg_sampler: runs PyG's own neighbour sampler "
                            "(pyg-lib or torch-sparse); skipped where neither is installed")


def pytest_runtest_setup(item) -> None:
    if item.get_closest_marker("requires_pyg_sampler") and not HAS_PYG_SAMPLER:
        pytest.skip(NO_PYG_SAMPLER)


def run_suite_under(test_file: str, test_class: str, **env: str) -> None:
    """Run ``test_file::test_class`` in a fresh pytest under the environment ``env`` (e.g.
    ``NUMBA_ENABLE_CUDASIM="1"``, ``TRITON_INTERPRET="1"``, which must be set before the
    kernels are imported); it must pass with nothing skipped."""
    full_env = {**os.environ, **env, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           f"{Path(test_file).resolve()}::{test_class}"], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


@pytest.fixture(scope="session")
def suite_under():
    """:func:`run_suite_under`: ``suite_under(__file__, "TestCuda", NUMBA_ENABLE_CUDASIM="1")``."""
    return run_suite_under


def numpy1_python() -> str | None:
    """The interpreter of the NumPy-1 (DGL 2.1, torch 2.2.1) environment of ``make peers``:
    ``$GRAPHPIPE_DGL_PYTHON``, else the repository's ``.venv-dgl/bin/python``, else None."""
    given = os.environ.get("GRAPHPIPE_DGL_PYTHON")
    if given:
        return given
    default = ROOT / ".venv-dgl" / "bin" / "python"
    return str(default) if default.exists() else None


def run_in_numpy1_env(script: str, *args: str, timeout: int = 600) -> str:
    """Run ``python -c script args`` (or a script file given as ``script``) in the NumPy-1
    environment with this checkout first on the path; returns its stdout, fails the test
    with its output when it fails, skips it when there is no such environment."""
    python = numpy1_python()
    if python is None:
        pytest.skip("no NumPy-1/DGL environment (make peers, or set GRAPHPIPE_DGL_PYTHON)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"}
    command = [python, script, *args] if script.endswith(".py") else [python, "-c", script, *args]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope="session")
def numpy1_env():
    """:func:`run_in_numpy1_env`: ``numpy1_env(script_or_file, *args) -> stdout``."""
    return run_in_numpy1_env


def communicate_all(procs: list[subprocess.Popen], timeout: float = 600) -> list[tuple]:
    """Every process's ``communicate()`` (its ``(stdout, stderr)``), waiting at most
    ``timeout`` seconds for each; whatever still runs afterwards (a timeout) is killed."""
    try:
        return [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def run_train(args: list, env: dict, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    """``graphpipe train *args`` in a fresh interpreter (``launcher``: e.g. torchrun's module)."""
    cmd = [sys.executable, *(launcher or []), "-m", "graphpipe.cli.main", "train", *map(str, args)]
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600, env=env)


def check_nproc_then_torchrun_resume(store: Path, tmp_path: Path, first_args: list, common: list,
                                     env: dict, metric: str = "acc") -> str:
    """``train STORE --nproc 2 *first_args --epochs 1`` with a checkpoint and a metrics log,
    then ``--resume`` to epoch 2 under torchrun with one rank; checks what every data-parallel
    path promises (rank 0 prints once, ending with ``test <metric>``, both ranks logged, the
    resume starts at epoch 1) and returns the first run's stdout for the caller's own checks."""
    import json
    import re

    ckpt, log = tmp_path / "ck.pt", tmp_path / "log.jsonl"
    first = run_train([store, "--nproc", "2", *first_args, "--epochs", "1", "--checkpoint", ckpt,
                       "--metrics-log", log, *common], env)
    assert first.returncode == 0, first.stderr[-2000:]
    lines = first.stdout.strip().splitlines()
    assert re.fullmatch(rf"test {metric} \d\.\d{{4}}", lines[-1]), first.stdout
    assert sum(line.startswith("epoch") for line in lines) == 1          # rank 0 prints, once
    record = json.loads(log.read_text())
    assert [r["rank"] for r in record["ranks"]] == [0, 1]
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nnodes", "1", "--nproc-per-node", "1"]
    second = run_train([store, "--epochs", "2", "--resume", ckpt, *common], env, launcher=torchrun)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "data parallel: 1 ranks (gloo)" in second.stdout
    assert re.search(r"^epoch\s+1 ", second.stdout, re.MULTILINE)
    assert not re.search(r"^epoch\s+0 ", second.stdout, re.MULTILINE)
    assert re.fullmatch(rf"test {metric} \d\.\d{{4}}", second.stdout.strip().splitlines()[-1])
    return first.stdout


@pytest.fixture(scope="session")
def nproc_then_torchrun_resume():
    """:func:`check_nproc_then_torchrun_resume`."""
    return check_nproc_then_torchrun_resume
