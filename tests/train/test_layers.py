"""Layers of graphpipe.train against torch_geometric.nn with the same weights (oracle),
on bipartite sampled-style blocks and on square graphs; forward and weight gradients."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch_geometric.nn as pyg_nn

from graphpipe.train.layers import (
    GATConv,
    GCNConv,
    GINConv,
    LocalGraph,
    SAGEConv,
    add_self_loops,
    csc_from_edge_index,
)
from graphpipe.train.models import MODELS, SEQUENCE_MODELS, build_model

GNN_MODELS = [name for name in MODELS if name not in SEQUENCE_MODELS]

TOL = {"atol": 1e-5, "rtol": 1e-5}


def _block(num_src: int, num_dst: int, num_edges: int, seed: int, *, loops: bool = False,
           zero_deg: int = 2) -> tuple[LocalGraph, torch.Tensor]:
    """A random block (some zero in-degree destinations, duplicate edges possible) and its
    PyG edge_index (row 0 local sources, row 1 local destinations)."""
    g = torch.Generator().manual_seed(seed)
    dst = torch.randint(zero_deg, num_dst, (num_edges,), generator=g)
    src = torch.randint(0, num_src, (num_edges,), generator=g)
    if not loops:
        src = torch.where(src == dst, (src + 1) % num_src, src)
    edge_index = torch.stack([src, dst])
    return csc_from_edge_index(edge_index, num_src, num_dst), edge_index


def _symmetric(num_nodes: int, num_pairs: int, seed: int) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    u = rng.integers(0, num_nodes, num_pairs)
    v = rng.integers(0, num_nodes, num_pairs)
    keep = u != v
    pairs = np.unique(np.stack([np.minimum(u, v), np.maximum(u, v)])[:, keep], axis=1)
    both = np.concatenate([pairs, pairs[::-1]], axis=1)
    return torch.from_numpy(both).long()


def _x(rows: int, dim: int, seed: int) -> torch.Tensor:
    return torch.randn(rows, dim, generator=torch.Generator().manual_seed(seed))


def _close(a: torch.Tensor, b: torch.Tensor) -> None:
    torch.testing.assert_close(a, b, **TOL)


# ---------------------------------------------------------------------------------- SAGE
@pytest.mark.parametrize("in_dim,out_dim", [(12, 7), (5, 9)])  # both matmul orders
def test_sage_matches_pyg_on_block(in_dim: int, out_dim: int) -> None:
    block, ei = _block(40, 15, 120, seed=1)
    x = _x(40, in_dim, 2).requires_grad_()
    ours = SAGEConv(in_dim, out_dim)
    ref = pyg_nn.SAGEConv(in_dim, out_dim, aggr="mean", root_weight=True)
    ref.lin_l.weight.data.copy_(ours.lin_l.weight)
    ref.lin_l.bias.data.copy_(ours.lin_l.bias)
    ref.lin_r.weight.data.copy_(ours.lin_r.weight)
    out = ours(x, block)
    x_ref = x.detach().clone().requires_grad_()
    expected = ref((x_ref, x_ref[:15]), ei, size=(40, 15))
    assert out.shape == (15, out_dim)
    _close(out, expected)
    (out * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    (expected * torch.linspace(-1, 1, out.numel()).view_as(out)).sum().backward()
    _close(ours.lin_l.weight.grad, ref.lin_l.weight.grad)
    _close(ours.lin_r.weight.grad, ref.lin_r.weight.grad)
    _close(x.grad, x_ref.grad)


def test_sage_edge_index_path_equals_block_path() -> None:
    ei = _symmetric(25, 60, seed=3)
    x = _x(25, 6, 4)
    conv = SAGEConv(6, 4)
    via_index = conv(x, ei)
    via_block = conv(x, csc_from_edge_index(ei, 25, 25))
    ref = pyg_nn.SAGEConv(6, 4)
    ref.lin_l.load_state_dict(conv.lin_l.state_dict())
    ref.lin_r.load_state_dict(conv.lin_r.state_dict())
    _close(via_index, via_block)
    _close(via_index, ref(x, ei))


# ---------------------------------------------------------------------------------- GCN
@pytest.mark.parametrize("self_loops", [True, False])
@pytest.mark.parametrize("in_dim,out_dim", [(10, 4), (4, 10)])
def test_gcn_matches_pyg_on_square_symmetric_graph(self_loops: bool, in_dim: int,
                                                    out_dim: int) -> None:
    """PyG's gcn_norm takes both degrees from the target side; on a square graph with a
    symmetric edge set (plus self loops) in- and out-degrees agree, so the definitions meet."""
    ei = _symmetric(30, 70, seed=5)
    x = _x(30, in_dim, 6)
    ours = GCNConv(in_dim, out_dim, add_self_loops=self_loops)
    with torch.no_grad():
        ours.bias.uniform_(-1, 1)
    ref = pyg_nn.GCNConv(in_dim, out_dim, add_self_loops=self_loops, normalize=True)
    ref.lin.weight.data.copy_(ours.lin.weight)
    ref.bias.data.copy_(ours.bias)
    _close(ours(x, ei), ref(x, ei))


def test_gcn_on_bipartite_block_is_the_documented_formula() -> None:
    """A_hat[u, v] = 1/sqrt(deg_dst(u) deg_src(v)) over block edges + one self loop per dst."""
    block, ei = _block(20, 8, 50, seed=7)
    x = _x(20, 5, 8).double()
    conv = GCNConv(5, 3).double()
    with torch.no_grad():
        conv.bias.uniform_(-1, 1)
    loops = torch.arange(8)
    src = torch.cat([ei[0], loops])
    dst = torch.cat([ei[1], loops])
    a = torch.zeros(8, 20, dtype=torch.float64)
    a.index_put_((dst, src), torch.ones(src.shape[0], dtype=torch.float64), accumulate=True)
    deg_dst = a.sum(1).clamp(min=1)
    deg_src = a.sum(0).clamp(min=1)
    a_hat = a / torch.sqrt(deg_dst[:, None] * deg_src[None, :])
    expected = a_hat @ x @ conv.lin.weight.t() + conv.bias
    torch.testing.assert_close(conv(x, block), expected, atol=1e-10, rtol=1e-10)


def test_add_self_loops_replaces_existing_loops() -> None:
    ei = torch.tensor([[0, 1, 2, 1, 3], [0, 0, 1, 1, 2]])  # loops at 0 and 1
    g = add_self_loops(csc_from_edge_index(ei, 4, 3))
    rows = [g.indices[g.indptr[u]:g.indptr[u + 1]].tolist() for u in range(3)]
    assert rows == [[0, 1], [1, 2], [2, 3]]


# ---------------------------------------------------------------------------------- GIN
@pytest.mark.parametrize("eps", [0.0, 0.3])
def test_gin_matches_pyg_on_block(eps: float) -> None:
    block, ei = _block(35, 12, 90, seed=9)
    x = _x(35, 6, 10)
    mlp = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 5))
    ours = GINConv(mlp, eps=eps, train_eps=True)
    ref = pyg_nn.GINConv(mlp, eps=eps, train_eps=True)
    _close(ours(x, block), ref((x, x[:12]), ei, size=(35, 12)))


# ---------------------------------------------------------------------------------- GAT
@pytest.mark.parametrize("concat", [True, False])
@pytest.mark.parametrize("self_loops", [True, False])
def test_gat_matches_pyg_on_block(concat: bool, self_loops: bool) -> None:
    block, ei = _block(40, 14, 110, seed=11, loops=True)
    x = _x(40, 7, 12).requires_grad_()
    ours = GATConv(7, 5, heads=3, concat=concat, add_self_loops=self_loops)
    with torch.no_grad():
        ours.bias.uniform_(-1, 1)
    ref = pyg_nn.GATConv(7, 5, heads=3, concat=concat, add_self_loops=self_loops,
                         negative_slope=0.2)
    ref.lin.weight.data.copy_(ours.lin.weight)
    ref.att_src.data.copy_(ours.att_src)
    ref.att_dst.data.copy_(ours.att_dst)
    ref.bias.data.copy_(ours.bias)
    out = ours(x, block)
    x_ref = x.detach().clone().requires_grad_()
    expected = ref((x_ref, x_ref[:14]), ei, size=(40, 14))
    _close(out, expected)
    weights = torch.linspace(-1, 1, out.numel()).view_as(out)
    (out * weights).sum().backward()
    (expected * weights).sum().backward()
    _close(ours.lin.weight.grad, ref.lin.weight.grad)
    _close(ours.att_src.grad, ref.att_src.grad)
    _close(ours.att_dst.grad, ref.att_dst.grad)
    _close(x.grad, x_ref.grad)


def test_gat_attention_dropout_only_in_training() -> None:
    block, _ = _block(30, 10, 80, seed=13)
    x = _x(30, 4, 14)
    conv = GATConv(4, 3, heads=2, dropout=0.5)
    conv.eval()
    assert torch.equal(conv(x, block), conv(x, block))
    conv.train()
    torch.manual_seed(0)
    a = conv(x, block)
    torch.manual_seed(1)
    b = conv(x, block)
    assert not torch.equal(a, b)


# ---------------------------------------------------------------------------------- errors, registry
def test_layer_input_errors() -> None:
    block, _ = _block(20, 6, 30, seed=15)
    conv = SAGEConv(4, 3)
    with pytest.raises(ValueError, match="in_dim=4"):
        conv(_x(20, 5, 0), block)
    with pytest.raises(ValueError, match="num_src=20"):
        conv(_x(19, 4, 0), LocalGraph(block.indptr, block.indices, 6, 20))
    with pytest.raises(ValueError, match="edge_index"):
        conv(_x(20, 4, 0), torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"row 0 \(sources\)"):
        conv(_x(20, 4, 0), torch.tensor([[25], [0]]))


def test_build_model_registry() -> None:
    with pytest.raises(ValueError, match="unknown model 'sagex'; known models: gat, gcn, gin, graphormer, gt, mlp, sage"):
        build_model("sagex", 4, 8, 2, 2)
    with pytest.raises(ValueError, match="'hidden' must be a multiple of heads=3"):
        build_model("gat", 4, 8, 2, 2, heads=3)
    with pytest.raises(ValueError, match="'num_layers' must be a positive integer"):
        build_model("sage", 4, 8, 2, 0)
    for name in GNN_MODELS:
        model = build_model(name, 6, 8, 3, 2, dropout=0.1)
        assert model.config["name"] == name and model.config["dropout"] == 0.1


def test_models_run_on_loader_batches() -> None:
    """Each model on real sampled batches: shapes, and layer l consumes blocks[l]."""
    from graphpipe.loaders import NeighborLoader

    rng = np.random.default_rng(0)
    n = 300
    ei = _symmetric(n, 1200, seed=1).numpy()
    order = np.argsort(ei[1], kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ei[1], minlength=n), out=indptr[1:])
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = rng.integers(0, 3, n)
    loader = NeighborLoader((indptr, ei[0][order].astype(np.int64), x, y), [4, 3], batch_size=64,
                            input_nodes=None, seed=0, prefetch=0, shuffle=True)
    batch = next(iter(loader))
    for name in GNN_MODELS:
        model = build_model(name, 6, 8, 3, 2)
        out = model(batch)
        assert out.shape == (batch.batch_size, 3)
        out.sum().backward()
    with pytest.raises(ValueError, match="num_layers=3 but the batch has 2 blocks"):
        build_model("sage", 6, 8, 3, 3)(batch)
