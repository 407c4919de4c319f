"""Aggregation kernels (CPU Numba path and reference) against oracles (FastGL K1-K4).

The Triton path runs in the interpreter in a subprocess: tests/test_aggregate_triton.py.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ops.aggregate import (
    CSCBlock,
    aggregate,
    aggregate_heads,
    edge_softmax,
    get_block,
    reference_aggregate,
    reference_aggregate_heads,
    reference_edge_softmax,
    reference_sddmm_scores,
    sddmm_scores,
)


def random_block(num_dst: int, num_src: int, max_deg: int, *, seed: int,
                 huge_row: int | None = None, duplicates: bool = True,
                 empty_rows: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Random local CSC: degrees in [0, max_deg], optional one huge row, duplicates."""
    gen = torch.Generator().manual_seed(seed)
    deg = torch.randint(0 if empty_rows else 1, max_deg + 1, (num_dst,), generator=gen)
    if empty_rows and num_dst >= 3:
        deg[1] = 0
        deg[num_dst - 1] = 0
    if huge_row is not None and num_dst > 2:
        deg[2] = huge_row
    indptr = torch.zeros(num_dst + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(deg, 0)
    indices = torch.randint(0, num_src, (int(indptr[-1]),), generator=gen)
    if duplicates and indices.numel() > 4 and deg[0] >= 2:
        indices[int(indptr[0]) + 1] = indices[int(indptr[0])]
    return indptr, indices


def dense_adjacency(indptr: torch.Tensor, indices: torch.Tensor, num_src: int) -> torch.Tensor:
    """Dense float64 (num_dst, num_src) matrix with duplicate edges counted."""
    num_dst = indptr.shape[0] - 1
    a = torch.zeros(num_dst, num_src, dtype=torch.float64)
    for u in range(num_dst):
        for e in range(int(indptr[u]), int(indptr[u + 1])):
            a[u, int(indices[e])] += 1.0
    return a


CASES = [
    # num_dst, num_src, max_deg, huge_row, F
    (37, 90, 6, None, 33),
    (16, 40, 15, None, 1),
    (23, 300, 4, 257, 64),
    (9, 9, 3, None, 7),
]


@pytest.mark.parametrize("num_dst,num_src,max_deg,huge,feat", CASES)
@pytest.mark.parametrize("reduce,norm,weighted", [
    ("sum", None, False), ("mean", None, False), ("sum", "gcn", False),
    ("sum", None, True), ("mean", None, True), ("sum", "gcn", True),
])
def test_cpu_forward_matches_reference(num_dst, num_src, max_deg, huge, feat, reduce, norm,
                                       weighted):
    indptr, indices = random_block(num_dst, num_src, max_deg, seed=num_dst + feat, huge_row=huge)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(num_src, feat, generator=gen)
    w = torch.rand(indices.shape[0], generator=gen) if weighted else None
    out = aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                    edge_weight=w, backend="cpu")
    ref = reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                              edge_weight=w)
    assert out.dtype == torch.float32 and out.shape == (num_dst, feat)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    via_ref = aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                        edge_weight=w, backend="reference")
    torch.testing.assert_close(via_ref, ref.float())


def test_reference_equals_dense_matrix_product_and_manual_gcn():
    """K1/K2: the reference itself against A·x and the hand-written GCN formula."""
    indptr, indices = random_block(12, 30, 5, seed=3)
    x = torch.randn(30, 5, dtype=torch.float64)
    a = dense_adjacency(indptr, indices, 30)
    torch.testing.assert_close(reference_aggregate(indptr, indices, x, num_dst=12), a @ x)
    deg_dst = a.sum(1).clamp(min=1)
    deg_src = a.sum(0).clamp(min=1)
    a_gcn = a / torch.sqrt(deg_dst[:, None] * deg_src[None, :])
    torch.testing.assert_close(
        reference_aggregate(indptr, indices, x, num_dst=12, norm="gcn"), a_gcn @ x)
    torch.testing.assert_close(
        reference_aggregate(indptr, indices, x, num_dst=12, reduce="mean"),
        (a / deg_dst[:, None]) @ x)


def test_zero_degree_rows_are_zero():
    indptr, indices = random_block(10, 20, 4, seed=5)
    x = torch.randn(20, 9)
    deg = indptr[1:] - indptr[:-1]
    for reduce in ("sum", "mean"):
        out = aggregate(indptr, indices, x, num_dst=10, reduce=reduce, backend="cpu")
        assert (deg == 0).any()
        assert torch.all(out[deg == 0] == 0)


def test_gcn_matches_pyg_gcn_norm_on_symmetric_square_block():
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import to_undirected
    gen = torch.Generator().manual_seed(7)
    n = 25
    ei = to_undirected(torch.randint(0, n, (2, 60), generator=gen), num_nodes=n)
    ei = ei[:, ei[0] != ei[1]]
    # CSC by destination: sort by (dst, src)
    order = torch.argsort(ei[1] * n + ei[0])
    src, dst = ei[0][order], ei[1][order]
    indptr = torch.zeros(n + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=n), 0)
    x = torch.randn(n, 8, dtype=torch.float64, generator=gen)
    ei_norm, w = gcn_norm(torch.stack([src, dst]), None, n, add_self_loops=False)
    pyg = torch.zeros(n, 8, dtype=torch.float64).index_add_(0, ei_norm[1],
                                                             x[ei_norm[0]] * w[:, None])
    ours = aggregate(indptr, src, x, num_dst=n, norm="gcn", backend="cpu")
    torch.testing.assert_close(ours, pyg)


def test_mean_matches_pyg_scatter_mean():
    from torch_geometric.utils import scatter
    indptr, indices = random_block(30, 80, 7, seed=11)
    x = torch.randn(80, 16)
    dst = torch.repeat_interleave(torch.arange(30), indptr[1:] - indptr[:-1])
    pyg = scatter(x[indices], dst, dim=0, dim_size=30, reduce="mean")
    ours = aggregate(indptr, indices, x, num_dst=30, reduce="mean", backend="cpu")
    torch.testing.assert_close(ours, pyg, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduce,norm", [("sum", None), ("mean", None), ("sum", "gcn")])
def test_cpu_gradcheck_float64(reduce, norm):
    indptr, indices = random_block(7, 11, 4, seed=2, huge_row=9)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(11, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    w = torch.rand(indices.shape[0], dtype=torch.float64, generator=gen, requires_grad=True)
    torch.autograd.gradcheck(
        lambda x_, w_: aggregate(indptr, indices, x_, num_dst=7, reduce=reduce, norm=norm,
                                 edge_weight=w_, backend="cpu"), (x, w))
    torch.autograd.gradcheck(
        lambda x_: aggregate(indptr, indices, x_, num_dst=7, reduce=reduce, norm=norm,
                             backend="cpu"), (x,))


@pytest.mark.parametrize("reduce,norm,weighted", [
    ("sum", None, False), ("mean", None, True), ("sum", "gcn", True)])
def test_cpu_backward_matches_reference_autograd_float32(reduce, norm, weighted):
    indptr, indices = random_block(40, 100, 12, seed=4, huge_row=300)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(100, 33, generator=gen, requires_grad=True)
    w = torch.rand(indices.shape[0], generator=gen).requires_grad_(True) if weighted else None
    g = torch.randn(40, 33, generator=gen)
    out = aggregate(indptr, indices, x, num_dst=40, reduce=reduce, norm=norm, edge_weight=w,
                    backend="cpu")
    grads = torch.autograd.grad(out, [x] + ([w] if weighted else []), g)
    ref = reference_aggregate(indptr, indices, x, num_dst=40, reduce=reduce, norm=norm,
                              edge_weight=w)
    ref_grads = torch.autograd.grad(ref, [x] + ([w] if weighted else []), g.double())
    for got, want in zip(grads, ref_grads):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-4)


def test_forward_and_backward_are_bitwise_deterministic():
    indptr, indices = random_block(200, 600, 15, seed=9, huge_row=2000)
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(600, 100, generator=gen, requires_grad=True)
    g = torch.randn(200, 100, generator=gen)
    results = []
    for _ in range(3):
        fresh_indptr, fresh_indices = indptr.clone(), indices.clone()  # no shared cache
        out = aggregate(fresh_indptr, fresh_indices, x, num_dst=200, norm="gcn", backend="cpu")
        (gx,) = torch.autograd.grad(out, x, g)
        results.append((out, gx))
    for out, gx in results[1:]:
        assert torch.equal(out, results[0][0])
        assert torch.equal(gx, results[0][1])


def test_float16_and_bfloat16_inputs_come_back_in_their_dtype():
    indptr, indices = random_block(10, 30, 5, seed=1)
    x = torch.randn(30, 8)
    ref = reference_aggregate(indptr, indices, x, num_dst=10)
    for dtype in (torch.float16, torch.bfloat16):
        out = aggregate(indptr, indices, x.to(dtype), num_dst=10, backend="cpu")
        assert out.dtype == dtype
        torch.testing.assert_close(out.double(), ref, rtol=2e-2, atol=5e-2)


def test_transposed_block_is_the_csr_by_source():
    indptr, indices = random_block(15, 25, 6, seed=8)
    block = CSCBlock(indptr, indices, 25)
    t_indptr, t_dst, t_eid = block.transposed()
    assert block.transposed()[0] is t_indptr  # cached
    dst = torch.repeat_interleave(torch.arange(15), indptr[1:] - indptr[:-1])
    for v in range(25):
        lo, hi = int(t_indptr[v]), int(t_indptr[v + 1])
        eids = t_eid[lo:hi]
        assert torch.all(indices[eids] == v)
        assert torch.equal(t_dst[lo:hi], dst[eids])
        assert torch.all(eids[1:] > eids[:-1])
    assert sorted(t_eid.tolist()) == list(range(indices.shape[0]))


def test_block_cache_reuses_and_invalidates():
    indptr, indices = random_block(8, 20, 4, seed=6)
    b1 = get_block(indptr, indices, 8, 20)
    assert get_block(indptr, indices, 8, 20) is b1
    indices[0] = (indices[0] + 1) % 20  # in-place change bumps _version
    b2 = get_block(indptr, indices, 8, 20)
    assert b2 is not b1
    x = torch.randn(20, 4)
    torch.testing.assert_close(aggregate(indptr, indices, x, num_dst=8, backend="cpu").double(),
                               reference_aggregate(indptr, indices, x, num_dst=8))


def test_explicit_block_argument():
    indptr, indices = random_block(8, 20, 4, seed=6)
    block = CSCBlock(indptr, indices, 20)
    x = torch.randn(20, 4)
    out = aggregate(indptr, indices, x, num_dst=8, backend="cpu", block=block)
    torch.testing.assert_close(out.double(), reference_aggregate(indptr, indices, x, num_dst=8))
    with pytest.raises(ValueError, match="block"):
        aggregate(indptr.clone(), indices, x, num_dst=8, backend="cpu", block=block)


@pytest.mark.parametrize("kwargs,match", [
    ({"reduce": "max"}, "'reduce'"),
    ({"norm": "sym"}, "'norm'"),
    ({"norm": "gcn", "reduce": "mean"}, "'norm'"),
    ({"backend": "cuda"}, "'backend'"),
    ({"num_dst": 9}, "'indptr'"),
    ({"edge_weight": torch.ones(3)}, "'edge_weight'"),
    ({"x": torch.randn(20)}, "'x'"),
    ({"x": torch.randn(10, 3)}, "'indices'"),
    ({"indices": torch.zeros(3, dtype=torch.int32)}, "'indices'"),
    ({"indptr": torch.tensor([0, 1, 2, 1, 3, 3, 3, 3, 4])}, "'indptr'"),
    ({"x": torch.randn(6, 3)}, "'num_dst'"),
])
def test_bad_input_raises_value_error_naming_the_argument(kwargs, match):
    indptr = torch.tensor([0, 1, 2, 3, 3, 3, 3, 3, 4])
    indices = torch.tensor([0, 5, 19, 7])
    call = {"indptr": indptr, "indices": indices, "x": torch.randn(20, 3), "num_dst": 8}
    call.update(kwargs)
    with pytest.raises(ValueError, match=match):
        aggregate(call.pop("indptr"), call.pop("indices"), call.pop("x"), **call)


def test_empty_block():
    indptr = torch.zeros(5, dtype=torch.int64)
    indices = torch.zeros(0, dtype=torch.int64)
    x = torch.randn(7, 3, requires_grad=True)
    out = aggregate(indptr, indices, x, num_dst=4, reduce="mean", backend="cpu")
    assert torch.equal(out, torch.zeros(4, 3))
    out.sum().backward()
    assert torch.equal(x.grad, torch.zeros(7, 3))


# =========================================================================== GAT pieces


def test_gat_pieces_forward_match_reference():
    indptr, indices = random_block(30, 70, 9, seed=21, huge_row=100)
    gen = torch.Generator().manual_seed(21)
    heads, dim = 3, 5
    a_src = torch.randn(70, heads, generator=gen)
    a_dst = torch.randn(30, heads, generator=gen)
    x = torch.randn(70, heads, dim, generator=gen)
    s = sddmm_scores(indptr, indices, a_src, a_dst, backend="cpu")
    torch.testing.assert_close(s.double(), reference_sddmm_scores(indptr, indices, a_src, a_dst))
    alpha = edge_softmax(indptr, s, backend="cpu")
    torch.testing.assert_close(alpha.double(), reference_edge_softmax(indptr, s),
                               rtol=1e-5, atol=1e-6)
    dst = torch.repeat_interleave(torch.arange(30), indptr[1:] - indptr[:-1])
    sums = torch.zeros(30, heads, dtype=torch.float64).index_add_(0, dst, alpha.double())
    nonempty = (indptr[1:] - indptr[:-1]) > 0
    torch.testing.assert_close(sums[nonempty], torch.ones_like(sums[nonempty]))
    out = aggregate_heads(indptr, indices, x, alpha, backend="cpu")
    torch.testing.assert_close(out.double(), reference_aggregate_heads(indptr, indices, x, alpha),
                               rtol=1e-5, atol=1e-5)


def test_edge_softmax_is_stable_for_large_scores():
    indptr = torch.tensor([0, 3, 3, 5])
    scores = torch.tensor([[1000.0], [1001.0], [999.0], [-1000.0], [-1000.0]])
    alpha = edge_softmax(indptr, scores, backend="cpu")
    assert torch.isfinite(alpha).all()
    torch.testing.assert_close(alpha[3:], torch.full((2, 1), 0.5))


def test_gat_pieces_gradcheck_float64():
    indptr, indices = random_block(6, 9, 4, seed=13)
    gen = torch.Generator().manual_seed(13)
    a_src = torch.randn(9, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    a_dst = torch.randn(6, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    x = torch.randn(9, 2, 3, dtype=torch.float64, generator=gen, requires_grad=True)
    e = indices.shape[0]
    scores = torch.randn(e, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    alpha = torch.rand(e, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.autograd.gradcheck(
        lambda s, d: sddmm_scores(indptr, indices, s, d, backend="cpu"), (a_src, a_dst))
    torch.autograd.gradcheck(lambda s: edge_softmax(indptr, s, backend="cpu"), (scores,))
    torch.autograd.gradcheck(
        lambda x_, a_: aggregate_heads(indptr, indices, x_, a_, backend="cpu"), (x, alpha))


def test_gat_layer_matches_pyg_gatconv():
    """K2: GATConv(heads=H, concat, no self loops, no bias) on a square block equals
    sddmm_scores -> edge_softmax -> aggregate_heads with the same parameters."""
    from torch_geometric.nn import GATConv
    torch.manual_seed(0)
    n, f_in, heads, dim = 20, 6, 2, 4
    indptr, indices = random_block(n, n, 5, seed=17, duplicates=False)
    dst = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
    conv = GATConv(f_in, dim, heads=heads, add_self_loops=False, bias=False)
    conv.eval()
    x = torch.randn(n, f_in, requires_grad=True)
    want = conv(x, torch.stack([indices, dst]))

    x2 = x.detach().clone().requires_grad_(True)
    z = conv.lin(x2).view(n, heads, dim)
    a_src = (z * conv.att_src).sum(-1)
    a_dst = (z * conv.att_dst).sum(-1)
    s = sddmm_scores(indptr, indices, a_src, a_dst, negative_slope=conv.negative_slope,
                     backend="cpu")
    alpha = edge_softmax(indptr, s, backend="cpu")
    got = aggregate_heads(indptr, indices, z, alpha, backend="cpu").reshape(n, heads * dim)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    g = torch.randn_like(want)
    (gx_want,) = torch.autograd.grad(want, x, g)
    (gx_got,) = torch.autograd.grad(got, x2, g)
    torch.testing.assert_close(gx_got, gx_want, rtol=1e-4, atol=1e-5)


def test_gat_backward_matches_reference_float32():
    indptr, indices = random_block(25, 60, 8, seed=31, huge_row=90)
    gen = torch.Generator().manual_seed(31)
    a_src = torch.randn(60, 2, generator=gen, requires_grad=True)
    a_dst = torch.randn(25, 2, generator=gen, requires_grad=True)
    x = torch.randn(60, 2, 17, generator=gen, requires_grad=True)
    g = torch.randn(25, 2, 17, generator=gen)

    def run(fast: bool):
        if fast:
            s = sddmm_scores(indptr, indices, a_src, a_dst, backend="cpu")
            return aggregate_heads(indptr, indices, x, edge_softmax(indptr, s, backend="cpu"),
                                   backend="cpu")
        s = reference_sddmm_scores(indptr, indices, a_src, a_dst)
        return reference_aggregate_heads(indptr, indices, x, reference_edge_softmax(indptr, s))

    got = torch.autograd.grad(run(True), [a_src, a_dst, x], g)
    want = torch.autograd.grad(run(False), [a_src, a_dst, x], g.double())
    for a, b in zip(got, want):
        torch.testing.assert_close(a.double(), b.double(), rtol=1e-4, atol=1e-4)


def test_gat_bad_input():
    indptr, indices = random_block(5, 9, 3, seed=1)
    with pytest.raises(ValueError, match="'a_dst'"):
        sddmm_scores(indptr, indices, torch.randn(9, 2), torch.randn(5, 3))
    with pytest.raises(ValueError, match="'alpha'"):
        aggregate_heads(indptr, indices, torch.randn(9, 2, 3), torch.randn(indices.shape[0], 3))
    with pytest.raises(ValueError, match="'indptr'"):
        edge_softmax(indptr, torch.randn(indices.shape[0] + 1, 2))
    with pytest.raises(ValueError, match="'scores'"):
        edge_softmax(indptr, torch.randn(indices.shape[0]))


def test_numpy_free_of_nan_for_empty_rows_in_softmax():
    indptr = torch.tensor([0, 0, 2, 2])
    s = torch.randn(2, 4)
    alpha = edge_softmax(indptr, s, backend="cpu")
    assert np.isfinite(alpha.numpy()).all()


def test_serial_and_parallel_kernels_agree_bitwise(monkeypatch):
    """Small calls run on one thread (worksharing.PARALLEL_MIN_WORK); forcing the
    parallel kernels must give the same bits: a row's sum never depends on threads."""
    from graphpipe.ops._core import worksharing
    from graphpipe.ops.features.quantize import quantize
    indptr, indices = random_block(64, 150, 9, seed=41, huge_row=200)
    gen = torch.Generator().manual_seed(41)
    x = torch.randn(150, 2, 19, generator=gen, requires_grad=True)
    a_src = torch.randn(150, 2, generator=gen, requires_grad=True)
    a_dst = torch.randn(64, 2, generator=gen, requires_grad=True)
    g = torch.randn(64, 2, 19, generator=gen)

    def run():
        flat = x.reshape(150, 38)
        out1 = aggregate(indptr, indices, flat, num_dst=64, norm="gcn", backend="cpu")
        out2 = aggregate(indptr, indices, flat, num_dst=64, reduce="mean",
                         edge_weight=a_src[indices, 0], backend="cpu")
        s = sddmm_scores(indptr, indices, a_src, a_dst, backend="cpu")
        out3 = aggregate_heads(indptr, indices, x, edge_softmax(indptr, s, backend="cpu"),
                               backend="cpu")
        loss = (out1.sum() + out2.sum() + (out3 * g).sum())
        grads = torch.autograd.grad(loss, [x, a_src, a_dst])
        return [out1, out2, out3, *grads, quantize(flat.detach(), 2, seed=3).packed]

    monkeypatch.setattr(worksharing, "PARALLEL_MIN_WORK", 1 << 62)
    serial = run()
    monkeypatch.setattr(worksharing, "PARALLEL_MIN_WORK", 0)
    parallel = run()
    for a, b in zip(serial, parallel):
        assert torch.equal(a, b)


def test_property_cpu_matches_reference_on_arbitrary_blocks():
    """Hypothesis: any degrees (0 included), any sources, any F, every reduction."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None)
    @given(degrees=st.lists(st.integers(0, 12), min_size=1, max_size=20),
           extra_src=st.integers(0, 15), feat=st.integers(1, 40), seed=st.integers(0, 2**16),
           mode=st.sampled_from([("sum", None, False), ("mean", None, False),
                                 ("sum", "gcn", False), ("mean", None, True),
                                 ("sum", "gcn", True)]))
    def check(degrees, extra_src, feat, seed, mode):
        reduce, norm, weighted = mode
        num_dst = len(degrees)
        num_src = num_dst + extra_src
        gen = torch.Generator().manual_seed(seed)
        indptr = torch.zeros(num_dst + 1, dtype=torch.int64)
        indptr[1:] = torch.cumsum(torch.tensor(degrees), 0)
        indices = torch.randint(0, num_src, (int(indptr[-1]),), generator=gen)
        x = torch.randn(num_src, feat, dtype=torch.float64, generator=gen, requires_grad=True)
        w = torch.rand(indices.shape[0], dtype=torch.float64, generator=gen) if weighted \
            else None
        out = aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                        edge_weight=w, backend="cpu")
        ref = reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce,
                                  norm=norm, edge_weight=w)
        torch.testing.assert_close(out, ref)
        g = torch.randn(num_dst, feat, dtype=torch.float64, generator=gen)
        torch.testing.assert_close(torch.autograd.grad(out, x, g)[0],
                                   torch.autograd.grad(ref, x, g)[0])

    check()
