"""Graphormer-slim and GT on ClusterLoader sequences: the sparse path equals dense attention
masked to the same pattern, cluster-sparse with threshold 0 equals sparse, the bias
buckets of added cluster-sparse entries are "far", gradients reach every parameter,
graph-level batches are padding-invariant, and bad arguments raise ValueError."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.ingest import ingest
from graphpipe.loaders.cluster import ClusterLoader
from graphpipe.synthetic import community_graph, write_ogb_raw
from graphpipe.synthetic.graph_level import community_count_graphs, write_graph_level_store
from graphpipe.train import GT, GraphormerSlim, build_model
from graphpipe.train.sequence_attention import (
    attend,
    cluster_sparse_context,
    dense_attention_bytes,
    dense_context,
    make_context,
    score_bias,
    sparse_context,
)

DIM, CLASSES, MAX_DIST = 12, 4, 6


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def node_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tmodels")
    write_ogb_raw(root / "raw", community_graph(400, CLASSES, avg_degree=8, feature_dim=DIM, seed=1))
    ingest(root / "raw", root / "store")
    return root / "store"


@pytest.fixture(scope="module")
def graph_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tgraphs")
    write_graph_level_store(community_count_graphs(12, min_nodes=9, max_nodes=20, num_classes=3,
                                                   feature_dim=DIM, seed=0), root / "store")
    return root / "store"


def _batch(store: Path, **kw):
    options = {"seq_len": 96, "parts": 4, "block": 4, "max_dist": MAX_DIST, **kw}
    return next(iter(ClusterLoader(str(store), options.pop("seq_len"), **options)))


def _models(dtype=torch.float64):
    torch.manual_seed(0)
    graphormer = build_model("graphormer", DIM, 32, CLASSES, 2, heads=4, max_dist=MAX_DIST)
    gt = build_model("gt", DIM, 32, CLASSES, 2, heads=4, max_dist=MAX_DIST)
    return [m.to(dtype).eval() for m in (graphormer, gt)]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_sparse_equals_dense_on_the_same_pattern(node_store: Path, dtype, tol) -> None:
    batch = _batch(node_store)
    for model in _models(dtype):
        sparse = model(batch, attention="sparse")
        ctx = dense_context(batch, max_dist=MAX_DIST, with_bias=model.has_bias,
                            restrict_to_pattern=True)
        dense = model(batch, context=ctx)
        assert sparse.shape == (1, batch.seq_len, CLASSES)
        torch.testing.assert_close(sparse, dense, rtol=tol, atol=tol)


def test_full_dense_differs_from_sparse(node_store: Path) -> None:
    batch = _batch(node_store)
    model = _models()[0]
    assert not torch.allclose(model(batch, attention="sparse"), model(batch, attention="dense"))


def test_cluster_sparse_threshold_zero_equals_sparse(node_store: Path) -> None:
    batch = _batch(node_store, pattern="cluster-sparse", threshold=0.0)
    assert batch.cluster_sparse.num_blocks == 0
    for model in _models():     # graphormer: bias path (CSR of M); gt: the cluster kernel
        torch.testing.assert_close(model(batch, attention="cluster-sparse"),
                                   model(batch, attention="sparse"), rtol=1e-10, atol=1e-10)


def test_cluster_sparse_buckets(node_store: Path) -> None:
    """Entries of the exact pattern keep their bucket; entries the format adds are 'far'."""
    batch = _batch(node_store, pattern="cluster-sparse", threshold=1.0, threshold_relative=False)
    csp = batch.cluster_sparse
    assert csp.num_blocks > 0
    ctx = cluster_sparse_context(batch, max_dist=MAX_DIST)
    s = batch.seq_len
    exact = {}
    rows = np.repeat(np.arange(s), np.diff(batch.indptr.numpy()))
    for r, c, kind in zip(rows, batch.indices.numpy(), batch.edge_kind.numpy()):
        exact[(int(r), int(c))] = [0, 1, MAX_DIST + 1][int(kind)]
    m_rows = np.repeat(np.arange(s), np.diff(ctx.indptr.numpy()))
    added = 0
    for r, c, bucket in zip(m_rows, ctx.indices.numpy(), ctx.buckets.numpy()):
        want = 0 if r == c else exact.get((int(r), int(c)), MAX_DIST)
        added += (int(r), int(c)) not in exact
        assert bucket == want, (r, c)
    assert added > 0
    # and the attention over it equals the dense reference masked to M with those buckets
    torch.manual_seed(1)
    q, k, v = (torch.randn(s, 4, 8, dtype=torch.float64) for _ in range(3))
    table = torch.randn(MAX_DIST + 2, 4, dtype=torch.float64)
    out = attend(q, k, v, ctx, score_bias(ctx, table, q.dtype))
    allowed = torch.zeros(1, s, s, dtype=torch.bool)
    allowed[0, torch.from_numpy(m_rows), ctx.indices] = True
    buckets = torch.full((1, s, s), MAX_DIST, dtype=torch.int64)
    buckets[0, torch.from_numpy(m_rows), ctx.indices] = ctx.buckets
    dense = type(ctx)("dense", 1, s, buckets=buckets, allowed=allowed)
    ref = attend(q, k, v, dense, score_bias(dense, table, q.dtype))
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mode", ["sparse", "cluster-sparse", "dense"])
def test_gradients_reach_every_parameter(node_store: Path, mode: str) -> None:
    batch = _batch(node_store, pattern="cluster-sparse", threshold=5.0)
    for model in _models(torch.float32):
        model.train()
        out = model(batch, attention=mode)
        loss = torch.nn.functional.cross_entropy(out.reshape(-1, CLASSES), batch.y.reshape(-1),
                                                 ignore_index=-100)
        loss.backward()
        for name, p in model.named_parameters():
            if isinstance(model, GraphormerSlim) and name.startswith(("in_degree", "out_degree")):
                assert p.grad is not None          # rows of absent degrees stay 0
                continue
            assert p.grad is not None and torch.isfinite(p.grad).all(), (mode, name)
            assert p.grad.abs().sum() > 0, (mode, type(model).__name__, name)


def test_graph_level_heads_and_padding_invariance(graph_store: Path) -> None:
    batch = next(iter(ClusterLoader(str(graph_store), None, input_nodes="all", batch_size=4,
                                    parts=2, max_dist=MAX_DIST, shuffle=False)))
    assert batch.graph_y is not None and batch.batch_size == 4
    torch.manual_seed(0)
    for name in ("graphormer", "gt"):
        token = name == "graphormer"
        model = build_model(name, DIM, 16, 3, 2, heads=2, level="graph", max_dist=MAX_DIST,
                            dropout=0.0).double().eval()
        options = {"parts": 2, "max_dist": MAX_DIST, "shuffle": False, "global_token": token}
        together_batch = next(iter(ClusterLoader(str(graph_store), None, input_nodes="all",
                                                 batch_size=4, **options)))
        singles = list(ClusterLoader(str(graph_store), None, input_nodes=np.arange(4),
                                     batch_size=1, **options))
        for mode in ("sparse", "dense"):
            together = model(together_batch, attention=mode)
            assert together.shape == (4, 3)
            alone = torch.cat([model(s, attention=mode) for s in singles])
            torch.testing.assert_close(together, alone, rtol=1e-9, atol=1e-9)


def test_spd_buckets_used_in_dense_mode(node_store: Path) -> None:
    batch = _batch(node_store, seq_len=48, spd_max_len=64)
    assert batch.spd is not None
    ctx = dense_context(batch, max_dist=MAX_DIST)
    assert torch.equal(ctx.buckets, batch.spd.clamp(0, MAX_DIST + 1))
    no_spd = dense_context(batch, max_dist=MAX_DIST, use_spd=False)
    pattern = sparse_context(batch, max_dist=MAX_DIST)
    rows = torch.repeat_interleave(torch.arange(batch.seq_len), batch.indptr.diff())
    assert torch.equal(no_spd.buckets[0, rows, batch.indices], pattern.buckets)


def test_dense_memory_estimate() -> None:
    one = dense_attention_bytes(1, 1024, 8, 4, device_type="cuda", with_bias=False)
    assert one == 1024 * 1024 * 8 * 4
    assert dense_attention_bytes(2, 1024, 8, 4, device_type="cuda", with_bias=True) == 4 * one
    assert dense_attention_bytes(1, 1024, 8, 4, device_type="cpu", with_bias=False) == 9 * one


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="'hidden' must be a multiple of heads"):
        GraphormerSlim(DIM, 30, CLASSES, 2, heads=4)
    with pytest.raises(ValueError, match="'attention'"):
        GT(DIM, 32, CLASSES, 2, attention="flash")
    with pytest.raises(ValueError, match="'level'"):
        GT(DIM, 32, CLASSES, 2, level="edge")
    with pytest.raises(ValueError, match="'num_layers'"):
        build_model("graphormer", DIM, 32, CLASSES, 0)
    with pytest.raises(ValueError, match="'max_dist'"):
        GraphormerSlim(DIM, 32, CLASSES, 2, max_dist=1)


def test_bad_batches(node_store: Path) -> None:
    batch = _batch(node_store)
    model = _models(torch.float32)[0]
    with pytest.raises(ValueError, match="pattern='cluster-sparse'"):
        model(batch, attention="cluster-sparse")
    with pytest.raises(ValueError, match="'attention' must be one of"):
        make_context(batch, "flash")
    wrong = build_model("graphormer", DIM + 1, 32, CLASSES, 2)
    with pytest.raises(ValueError, match="batch.x must be"):
        wrong(batch)
