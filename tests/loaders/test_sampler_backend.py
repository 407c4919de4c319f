"""The loader's sampler backend: ``sampler_backend="cuda"`` runs the numba.cuda sampler
(here under ``NUMBA_ENABLE_CUDASIM=1``) and gives the CPU loader's batches bit for bit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from graphpipe.loaders.sampler import resolve_sampler_backend
from graphpipe.ops._core.backend import numba_cuda_available

SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    import numpy as np
    from graphpipe.loaders import NeighborLoader
    from graphpipe.synthetic import community_graph

    g = community_graph(200, 4, avg_degree=6, feature_dim=8, seed=3)
    order = np.lexsort((g.edge_index[0], g.edge_index[1]))
    src, dst = g.edge_index[0][order], g.edge_index[1][order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(dst, minlength=200))]).astype(np.int64)
    data = {"indptr": indptr, "indices": src.astype(np.int64), "x": g.features, "y": g.labels}
    digests = {}
    for backend in ("cpu", "cuda"):
        loader = NeighborLoader(data, [3, 2], batch_size=64, input_nodes=np.arange(150), seed=5,
                                sampler_backend=backend, prefetch=0, window=2)
        assert loader.sampler.backend == backend, loader.sampler
        h = hashlib.sha256()
        batches = 0
        for epoch in range(2):
            loader.set_epoch(epoch)
            for batch in loader:
                batches += 1
                h.update(batch.n_id.numpy().tobytes()); h.update(batch.x.numpy().tobytes())
                for block in batch.blocks:
                    h.update(np.asarray(block.indptr).tobytes()); h.update(np.asarray(block.indices).tobytes())
        digests[backend] = (h.hexdigest(), batches)
    print(json.dumps(digests))
""")


def test_cuda_sampler_gives_the_cpu_batches_under_the_simulator() -> None:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.run([sys.executable, "-c", SCRIPT], check=False, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    digests = json.loads(run.stdout.strip().splitlines()[-1])
    assert digests["cpu"] == digests["cuda"] and digests["cpu"][1] == 6


TYPED_SCRIPT = textwrap.dedent("""
    import hashlib, json
    import numpy as np
    from graphpipe.loaders import GraphData, NeighborLoader

    rng = np.random.default_rng(2)
    num = {"paper": 40, "author": 25}
    rels = {("author", "writes", "paper"): 80, ("paper", "cites", "paper"): 80, ("paper", "rev_writes", "author"): 80}
    data = GraphData.from_dicts(num, {(s, r, d): (rng.integers(0, num[s], e), rng.integers(0, num[d], e))
                                      for (s, r, d), e in rels.items()},
                                x={t: rng.standard_normal((n, 4)).astype(np.float32) for t, n in num.items()},
                                y={"paper": rng.integers(0, 3, 40)})
    digests = {}
    for backend in ("cpu", "cuda"):
        h = hashlib.sha256()
        for options in ({}, {"disjoint": True, "shuffle": True}):
            loader = NeighborLoader(data, [3, 2], input_nodes=("paper", np.arange(30)), batch_size=8, seed=5,
                                    sampler_backend=backend, prefetch=0, **options)
            assert loader.sampler_backend == backend
            for batch in loader:
                for t in num:
                    h.update(batch.n_id[t].numpy().tobytes()); h.update(batch.x[t].numpy().tobytes())
                for et in rels:
                    h.update(batch.edge_index[et].numpy().tobytes()); h.update(batch.e_id[et].numpy().tobytes())
        digests[backend] = h.hexdigest()
    print(json.dumps(digests))
""")


def test_typed_cuda_sampler_gives_the_cpu_batches_under_the_simulator() -> None:
    """sampler_backend="cuda" on a typed graph (every relation's CSC on the GPU once, the
    relation loop over the CUDA hop kernels) gives the CPU typed loader's batches bit for bit,
    with disjoint trees too."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    run = subprocess.run([sys.executable, "-c", TYPED_SCRIPT], check=False, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    digests = json.loads(run.stdout.strip().splitlines()[-1])
    assert digests["cpu"] == digests["cuda"]


def test_backend_resolution() -> None:
    assert resolve_sampler_backend("cpu", "cuda") == "cpu"  # sample on the host, deliver to a GPU
    assert resolve_sampler_backend("auto", "cpu") == "cpu"
    expected = "cuda" if numba_cuda_available() else "cpu"
    assert resolve_sampler_backend("auto", "cuda:0") == expected
    with pytest.raises(ValueError, match="'sampler_backend' must be one of"):
        resolve_sampler_backend("gpu")
    if not numba_cuda_available():
        with pytest.raises(ValueError, match="needs numba.cuda"):
            resolve_sampler_backend("cuda")
        from graphpipe.loaders import GraphData, NeighborLoader

        typed = GraphData.from_dicts({"a": 2}, {("a", "to", "a"): ([0], [1])})
        with pytest.raises(ValueError, match="needs numba.cuda"):   # typed graphs: the same one line
            NeighborLoader(typed, [1], input_nodes="a", sampler_backend="cuda")
