"""graphpipe beside DGL 2.x: installed in a NumPy-1 environment (torch 2.2.1, NumPy 1.26, the
peer environment of ``make peers``), its declared bounds hold there and it ingests and loads.

The environment is ``$GRAPHPIPE_DGL_PYTHON`` or the repository's ``.venv-dgl/bin/python``;
without one the tests are skipped. Build it with ``make peers`` (see docs/guide/dgl.md "graphpipe
beside DGL"); it runs this checkout's code (``PYTHONPATH``), with the dependencies pip
resolved there."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_REQUIREMENTS = r"""
import sys, tomllib
from importlib.metadata import version, PackageNotFoundError
from packaging.requirements import Requirement
import numpy, graphpipe
assert numpy.__version__.startswith("1."), numpy.__version__
assert graphpipe.__file__.startswith(sys.argv[1]), graphpipe.__file__
deps = tomllib.load(open(sys.argv[2], "rb"))["project"]["dependencies"]
for text in deps:
    req = Requirement(text)
    if req.marker is not None and not req.marker.evaluate():
        continue
    try:
        have = version(req.name)
    except PackageNotFoundError:
        raise SystemExit(f"{req.name} is not installed")
    if not req.specifier.contains(have, prereleases=True):
        raise SystemExit(f"{req.name} {have} does not satisfy {req}")
    print(req.name, have)
"""

_EPOCH = r"""
import os, tempfile, numpy as np, torch
from graphpipe.ingest import ingest
from graphpipe.loaders import NeighborLoader
from graphpipe.synthetic import community_graph, write_npz
with tempfile.TemporaryDirectory() as tmp:
    g = community_graph(1000, 4, feature_dim=8, avg_degree=6, seed=0)
    npz = os.path.join(tmp, "g.npz")
    write_npz(npz, g)
    store = ingest(npz, os.path.join(tmp, "store"))
    seen = []
    for batch in NeighborLoader(store, [5, 3], input_nodes="train", batch_size=128, seed=0,
                                cache="degree"):
        assert torch.equal(batch.x, torch.from_numpy(store.features(batch.n_id.numpy())))
        assert torch.equal(batch.y, torch.from_numpy(store.labels[batch.n_id.numpy()]))  # PyG: every node
        assert torch.equal(batch.y[:batch.batch_size], torch.from_numpy(store.labels[batch.seeds.numpy()]))
        seen.append(batch.seeds.numpy())
    assert np.array_equal(np.sort(np.concatenate(seen)), store.split("train"))
    print("epoch", len(seen), np.__version__, torch.__version__)
"""


def test_declared_bounds_hold_in_the_numpy1_env(numpy1_env) -> None:
    out = numpy1_env(_REQUIREMENTS, str(ROOT), str(ROOT / "pyproject.toml"))
    assert "pyarrow" in out and "numba" in out and "zarr" in out


def test_ingest_and_an_epoch_in_the_numpy1_env(numpy1_env) -> None:
    out = numpy1_env(_EPOCH)
    assert out.startswith("epoch ") and " 1." in out


_TORCH_FILE = r"""
import os, tempfile, torch
from graphpipe.ingest.safe_load import load_torch_file
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "t.pt")
    torch.save({"edge_index": torch.arange(6).reshape(2, 3)}, path)
    print(load_torch_file(path, path)["edge_index"].tolist())
"""


def test_plain_torch_files_load_on_torch_2_2(numpy1_env) -> None:
    assert numpy1_env(_TORCH_FILE).strip() == "[[0, 1, 2], [3, 4, 5]]"
