"""Sparse attention: CPU (Numba) path and torch gather/scatter path against the dense
masked float64 reference; gradients; permutation equivariance; the torchgt mode."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from graphpipe.ops.attention import (
    AttentionPattern,
    permute_pattern,
    reference_sparse_attention,
    sparse_attention,
)


def random_pattern(num_q: int, num_k: int, density: float, *, seed: int, self_loops: bool = True,
                   empty_rows: tuple[int, ...] = (), shuffle: bool = True):
    """Duplicate-free CSR over queries; entries within a row in random order."""
    rng = np.random.default_rng(seed)
    mask = rng.random((num_q, num_k)) < density
    if self_loops:
        for i in range(min(num_q, num_k)):
            mask[i, i] = True
    for i in empty_rows:
        mask[i] = False
    rows = []
    for i in range(num_q):
        cols = np.flatnonzero(mask[i])
        rows.append(rng.permutation(cols) if shuffle else cols)
    indptr = np.zeros(num_q + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    indices = np.concatenate(rows).astype(np.int64) if rows else np.zeros(0, np.int64)
    return torch.from_numpy(indptr), torch.from_numpy(indices)


def qkv(num_q, num_k, heads, dim, *, dtype=torch.float64, seed=0, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(num_q, heads, dim, generator=g, dtype=dtype) * spread
    k = torch.randn(num_k, heads, dim, generator=g, dtype=dtype) * spread
    v = torch.randn(num_k, heads, dim, generator=g, dtype=dtype)
    return q, k, v


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("compat", [None, "torchgt"])
@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_forward_matches_dense_reference_float64(with_bias, compat, backend):
    indptr, indices = random_pattern(50, 50, 0.08, seed=1)
    q, k, v = qkv(50, 50, 4, 8, seed=2, spread=2.5 if compat else 1.0)
    bias = torch.randn(indices.shape[0], 4, dtype=torch.float64) if with_bias else None
    ref, ref_lse = reference_sparse_attention(q, k, v, indptr, indices, bias=bias, compat=compat)
    if compat:
        rows = torch.repeat_interleave(torch.arange(50), indptr[1:] - indptr[:-1])
        raw = (q[rows] * k[indices]).sum(-1) / math.sqrt(8)
        assert (raw.abs() > 5).any()   # the clamp is active
    if backend == "cpu":
        out, lse = sparse_attention(q, k, v, indptr, indices, bias=bias, compat=compat,
                                    backend="cpu", return_lse=True)
        torch.testing.assert_close(lse, ref_lse, rtol=0, atol=1e-10)
    else:
        out = sparse_attention(q, k, v, indptr, indices, bias=bias, compat=compat, backend="torch")
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)


def test_torchgt_mode_is_clamped_softmax_plus_eps():
    """O2 written out: exp(clip(s)) + bias, normalised by Z + 1e-6, computed by hand."""
    indptr, indices = random_pattern(12, 12, 0.3, seed=4)
    q, k, v = qkv(12, 12, 2, 4, seed=5, spread=3.0)
    bias = torch.randn(indices.shape[0], 2, dtype=torch.float64)
    out = sparse_attention(q, k, v, indptr, indices, bias=bias, compat="torchgt", backend="cpu")
    expected = torch.zeros_like(q)
    for i in range(12):
        for h in range(2):
            es = range(int(indptr[i]), int(indptr[i + 1]))
            w = [math.exp(min(max(float(q[i, h] @ k[indices[e], h]) / 2.0, -5), 5)
                          + float(bias[e, h])) for e in es]
            z = sum(w) + 1e-6
            expected[i, h] = sum(wi * v[indices[e], h] for wi, e in zip(w, es)) / z
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_float32_cpu_matches_reference():
    indptr, indices = random_pattern(80, 60, 0.1, seed=6)
    q, k, v = qkv(80, 60, 3, 16, dtype=torch.float32, seed=7)
    out = sparse_attention(q, k, v, indptr, indices, backend="cpu")
    ref, _ = reference_sparse_attention(q, k, v, indptr, indices)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("compat", [None, "torchgt"])
def test_cpu_gradients_match_reference_autograd(compat):
    indptr, indices = random_pattern(40, 40, 0.1, seed=8, empty_rows=(3,))
    q, k, v = qkv(40, 40, 2, 8, seed=9, spread=2.5 if compat else 1.0)
    bias = torch.randn(indices.shape[0], 2, dtype=torch.float64)
    grad = torch.randn(40, 2, 8, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    out = sparse_attention(*leaves[:3], indptr, indices, bias=leaves[3], compat=compat,
                           backend="cpu")
    got = torch.autograd.grad(out, leaves, grad)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    ref, _ = reference_sparse_attention(*ref_leaves[:3], indptr, indices, bias=ref_leaves[3],
                                        compat=compat)
    want = torch.autograd.grad(ref, ref_leaves, grad)
    for name, a, b in zip("qkvb", got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=f"gradient of {name}")
    assert got[0][3].abs().max() == 0    # empty row: no gradient


@pytest.mark.parametrize("compat", [None, "torchgt"])
def test_gradcheck_cpu_float64(compat):
    indptr, indices = random_pattern(7, 6, 0.4, seed=10)
    q, k, v = qkv(7, 6, 2, 3, seed=11, spread=1.5)
    bias = torch.randn(indices.shape[0], 2, dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (q, k, v, bias)]

    def fn(q_, k_, v_, b_):
        return sparse_attention(q_, k_, v_, indptr, indices, bias=b_, compat=compat, backend="cpu")

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


def test_rows_without_keys_give_zero_and_minus_inf():
    indptr, indices = random_pattern(10, 10, 0.3, seed=12, empty_rows=(0, 5))
    q, k, v = qkv(10, 10, 2, 4, seed=13)
    out, lse = sparse_attention(q, k, v, indptr, indices, backend="cpu", return_lse=True)
    assert torch.all(out[[0, 5]] == 0) and torch.all(lse[[0, 5]] == -torch.inf)
    ref, ref_lse = reference_sparse_attention(q, k, v, indptr, indices)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    torch.testing.assert_close(lse, ref_lse)
    out_c = sparse_attention(q, k, v, indptr, indices, backend="cpu", compat="torchgt")
    assert torch.all(out_c[[0, 5]] == 0)
    # -inf bias on every entry of a row makes it empty too
    bias = torch.zeros(indices.shape[0], 2, dtype=torch.float64)
    bias[int(indptr[2]):int(indptr[3])] = -torch.inf
    out_b = sparse_attention(q, k, v, indptr, indices, bias=bias, backend="cpu")
    assert torch.all(out_b[2] == 0)
    torch.testing.assert_close(out_b[3:5], out[3:5])


def test_entry_order_within_rows_does_not_matter():
    indptr, indices = random_pattern(30, 30, 0.2, seed=14, shuffle=False)
    q, k, v = qkv(30, 30, 2, 4, seed=15)
    bias = torch.randn(indices.shape[0], 2, dtype=torch.float64)
    base = sparse_attention(q, k, v, indptr, indices, bias=bias, backend="cpu")
    order = torch.cat([int(indptr[i]) + torch.randperm(int(indptr[i + 1] - indptr[i]),
                                                        generator=torch.Generator().manual_seed(i))
                       for i in range(30)])
    shuffled = sparse_attention(q, k, v, indptr, indices[order].clone(), bias=bias[order],
                                backend="cpu")
    torch.testing.assert_close(shuffled, base, rtol=0, atol=1e-12)


@pytest.mark.parametrize("compat", [None, "torchgt"])
def test_permuting_the_sequence_permutes_the_output(compat):
    n = 60
    indptr, indices = random_pattern(n, n, 0.07, seed=16)
    q, k, v = qkv(n, n, 3, 8, seed=17)
    bias = torch.randn(indices.shape[0], 3, dtype=torch.float64)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(3))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(n)
    new_ptr, new_idx, order = permute_pattern(indptr, indices, perm)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    base = sparse_attention(*leaves, indptr, indices, bias=bias, compat=compat, backend="cpu")
    base.sum().backward()
    p_leaves = [t[perm].detach().clone().requires_grad_() for t in (q, k, v)]
    moved = sparse_attention(*p_leaves, new_ptr, new_idx, bias=bias[order], compat=compat,
                             backend="cpu")
    moved.sum().backward()
    torch.testing.assert_close(moved[inverse], base, rtol=0, atol=1e-12)
    for a, b in zip(p_leaves, leaves):
        torch.testing.assert_close(a.grad[inverse], b.grad, rtol=0, atol=1e-12)


def test_long_sequence_needs_no_quadratic_memory():
    """S = 400K: an O(S²) float32 buffer would be 640 GB; the kernels need O(nnz·H)."""
    s = 400_000
    rng = np.random.default_rng(0)
    deg = 3
    nbr = (np.arange(s)[:, None] + rng.integers(-50, 50, (s, deg))) % s
    indices = torch.from_numpy(np.concatenate([np.arange(s)[:, None], nbr], 1).ravel())
    indptr = torch.arange(0, s * (deg + 1) + 1, deg + 1, dtype=torch.int64)
    q, k, v = (t.requires_grad_() for t in qkv(s, s, 1, 4, dtype=torch.float32, seed=1))
    out = sparse_attention(q, k, v, indptr, indices, backend="cpu")
    out.square().sum().backward()
    assert torch.isfinite(out).all() and torch.isfinite(k.grad).all()
    # rows 0..4 recomputed by hand from their entries
    for i in range(5):
        js = indices[i * (deg + 1):(i + 1) * (deg + 1)]
        w = torch.softmax((q[i, 0] @ k[js, 0].T) / 2.0, 0)
        torch.testing.assert_close(out[i, 0], w @ v[js, 0], rtol=1e-5, atol=1e-6)


def test_pattern_cache_and_transposed_copy():
    indptr, indices = random_pattern(20, 15, 0.3, seed=18)
    pat = AttentionPattern(indptr, indices, 15)
    ti, tq, te = pat.transposed()
    assert ti[-1] == indices.shape[0]
    for j in range(15):
        slots = slice(int(ti[j]), int(ti[j + 1]))
        assert torch.all(indices[te[slots]] == j)
        assert torch.all(tq[slots][1:] >= tq[slots][:-1])
        rows = torch.repeat_interleave(torch.arange(20), indptr[1:] - indptr[:-1])
        assert torch.equal(rows[te[slots]], tq[slots])


@pytest.mark.parametrize("kwargs, match", [
    ({"q": torch.zeros(4, 2)}, "'q' must be a 3-D"),
    ({"indices": torch.tensor([0, 9])}, r"'indices' must lie in \[0, num_keys=4\)"),
    ({"indices": torch.tensor([0, 1], dtype=torch.int32)}, "'indices' must be a 1-D int64"),
    ({"bias": torch.zeros(3, 2)}, r"'bias' must have shape \(nnz=2"),
    ({"compat": "flash"}, "'compat'"),
    ({"backend": "gpu"}, "'backend'"),
])
def test_bad_input_names_the_argument(kwargs, match):
    args = {"q": torch.zeros(4, 2, 3), "k": torch.zeros(4, 2, 3), "v": torch.zeros(4, 2, 3),
                "indptr": torch.tensor([0, 1, 2, 2, 2]), "indices": torch.tensor([0, 1])}
    args.update(kwargs)
    q, k, v, ip, ix = (args.pop(n) for n in ("q", "k", "v", "indptr", "indices"))
    with pytest.raises(ValueError, match=match):
        sparse_attention(q, k, v, ip, ix, **args)


def global_token_pattern(n: int, density: float, *, seed: int):
    """Position 0 attends to and is attended by every position (a global token), plus
    random entries and self-loops: row 0 and key 0 have ``n`` entries."""
    indptr, indices = random_pattern(n, n, density, seed=seed)
    mask = torch.zeros(n, n, dtype=torch.bool)
    rows = torch.repeat_interleave(torch.arange(n), indptr[1:] - indptr[:-1])
    mask[rows, indices] = True
    mask[0, :] = True
    mask[:, 0] = True
    rng = np.random.default_rng(seed)
    cols = [torch.from_numpy(rng.permutation(np.flatnonzero(mask[i].numpy()))) for i in range(n)]
    new_ptr = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor([len(c) for c in cols]), 0, out=new_ptr[1:])
    return new_ptr, torch.cat(cols).to(torch.int64)


@pytest.mark.parametrize("split", [3, 16, 10_000])
@pytest.mark.parametrize("compat", [None, "torchgt"])
def test_split_rows_and_keys_match_reference(split, compat):
    """Rows and keys longer than ``split`` entries (the global token's, and with split=3
    most rows) are cut into segments run in parallel and merged: same result, same
    gradients as the dense reference (float64), whatever the split."""
    n = 70
    indptr, indices = global_token_pattern(n, 0.08, seed=21)
    assert int(indptr[1] - indptr[0]) == n
    q, k, v = qkv(n, n, 3, 5, seed=22, spread=2.5 if compat else 1.0)
    bias = torch.randn(indices.shape[0], 3, dtype=torch.float64)
    bias[int(indptr[5]):int(indptr[6])] = -torch.inf     # a row with no live entry
    grad = torch.randn(n, 3, 5, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    out, lse = sparse_attention(*leaves[:3], indptr, indices, bias=leaves[3], compat=compat,
                                backend="cpu", return_lse=True, split=split)
    got = torch.autograd.grad(out, leaves, grad)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
    ref, ref_lse = reference_sparse_attention(*ref_leaves[:3], indptr, indices,
                                              bias=ref_leaves[3], compat=compat)
    want = torch.autograd.grad(ref, ref_leaves, grad)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(lse, ref_lse, rtol=0, atol=1e-10)
    for name, a, b in zip("qkvb", got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=f"gradient of {name}")


def test_gradcheck_cpu_with_split_rows():
    indptr, indices = global_token_pattern(9, 0.3, seed=23)
    q, k, v = qkv(9, 9, 2, 3, seed=24, spread=1.5)
    bias = torch.randn(indices.shape[0], 2, dtype=torch.float64)
    inputs = [t.clone().requires_grad_() for t in (q, k, v, bias)]

    def fn(q_, k_, v_, b_):
        return sparse_attention(q_, k_, v_, indptr, indices, bias=b_, backend="cpu", split=2)

    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-7)


def test_float32_long_global_token_row_matches_reference():
    """A 3000-entry global-token row and column in float32 (split into segments by the
    default plan) against the float64 reference."""
    n = 3000
    rng = np.random.default_rng(25)
    nbr = (np.arange(n)[:, None] + rng.integers(1, 40, (n, 4))) % n
    rows = [np.arange(n)] + [np.unique(np.concatenate([[0, i], nbr[i]])) for i in range(1, n)]
    indptr = torch.from_numpy(np.concatenate([[0], np.cumsum([len(r) for r in rows])]))
    indices = torch.from_numpy(np.concatenate(rows).astype(np.int64))
    q, k, v = qkv(n, n, 2, 8, dtype=torch.float32, seed=26)
    grad = torch.randn(n, 2, 8)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = sparse_attention(*leaves, indptr, indices, backend="cpu", split=256)
    got = torch.autograd.grad(out, leaves, grad)
    ref_leaves = [t.double().requires_grad_() for t in (q, k, v)]
    ref, _ = reference_sparse_attention(*ref_leaves, indptr, indices)
    want = torch.autograd.grad(ref, ref_leaves, grad.double())
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-4, msg=f"gradient of {name}")


@pytest.mark.parametrize("target", [1, 4, 50])
def test_work_plan_covers_every_row_once(target):
    from graphpipe.ops.attention.cpu import build_plan

    indptr, _ = global_token_pattern(40, 0.2, seed=27)
    ip = indptr.numpy()
    chunk_ptr, seg_row, seg_start, seg_end, long_rows, long_ptr = build_plan(ip, target)
    assert chunk_ptr[0] == 0 and chunk_ptr[-1] == 40 and np.all(np.diff(chunk_ptr) > 0)
    deg = np.diff(ip)
    np.testing.assert_array_equal(long_rows, np.flatnonzero(deg > target))
    for r, i in enumerate(long_rows):
        segs = range(long_ptr[r], long_ptr[r + 1])
        assert all(seg_row[g] == i for g in segs)
        assert seg_start[segs[0]] == ip[i] and seg_end[segs[-1]] == ip[i + 1]
        assert all(seg_end[g] == seg_start[g + 1] for g in segs[:-1])
        assert all(0 < seg_end[g] - seg_start[g] <= target for g in segs)


def test_bad_split_option():
    q = torch.zeros(2, 1, 2)
    with pytest.raises(ValueError, match="'split'"):
        sparse_attention(q, q, q, torch.tensor([0, 1, 2]), torch.tensor([0, 1]), split=0)


def test_float32_exp_matches_libm_and_flushes_minus_inf():
    """The vectorisable float32 exp of the CPU kernels (Cody-Waite + polynomial) against
    float64 exp: within 1 ulp on (-87, 88]; 0 at -87 and below (no subnormals), -inf included."""
    import numba

    from graphpipe.ops.attention.cpu import exp_lanes

    @numba.njit
    def run(x, out):
        for i in range(x.shape[0]):
            out[i] = exp_lanes(x[i])

    x = np.concatenate([np.linspace(-86.999, 88.0, 200001), [0.0, -1e-8, 1e-8, -86.99]]
                       ).astype(np.float32)
    got = np.empty_like(x)
    run(x, got)
    want = np.exp(x.astype(np.float64))
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / ulp) <= 1.0
    edge = np.array([-np.inf, -1e30, -87.0, -200.0], dtype=np.float32)
    out = np.empty_like(edge)
    run(edge, out)
    np.testing.assert_array_equal(out, 0.0)
    assert got[np.flatnonzero(x == 0.0)[0]] == 1.0


def test_heads_last_copies_strided_views():
    from graphpipe.ops.attention.cpu import heads_last

    qkv = torch.randn(7, 3, 4, 5)
    q = qkv.unbind(1)[1]                       # (7, 4, 5), not contiguous
    out = np.empty((7, 5, 4), dtype=np.float32)
    heads_last(q.numpy(), out)
    np.testing.assert_array_equal(out, q.permute(0, 2, 1).numpy())


def test_float32_minus_inf_bias_and_thread_count_independence():
    """float32 (the vectorised exp path): a row whose entries all carry a -inf bias is
    empty (out 0, lse -inf, no gradient through it), single -inf entries drop out, and
    forward and backward are bit-identical with 1 and 2 Numba threads (long rows split)."""
    import numba

    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    if threads < 2:
        pytest.skip("needs 2 Numba threads")
    indptr, indices = random_pattern(300, 300, 0.05, seed=40)
    q, k, v = qkv(300, 300, 4, 8, dtype=torch.float32, seed=41)
    bias = torch.randn(indices.shape[0], 4, dtype=torch.float32)
    bias[int(indptr[7]):int(indptr[8])] = -torch.inf          # row 7: every entry masked
    bias[int(indptr[9]), 1] = -torch.inf                       # one entry of row 9, head 1
    grad = torch.randn(300, 4, 8)

    def run(num_threads):
        previous = numba.get_num_threads()
        numba.set_num_threads(num_threads)
        try:
            leaves = [t.clone().requires_grad_() for t in (q, k, v, bias)]
            out, lse = sparse_attention(*leaves[:3], indptr, indices, bias=leaves[3],
                                        backend="cpu", split=16, return_lse=True)
            grads = torch.autograd.grad(out, leaves, grad)
        finally:
            numba.set_num_threads(previous)
        return out.detach(), lse, grads

    out1, lse1, grads1 = run(1)
    out2, lse2, grads2 = run(threads)
    assert torch.equal(out1, out2) and torch.equal(lse1, lse2)
    for a, b in zip(grads1, grads2):
        assert torch.equal(a, b)
    assert torch.all(out1[7] == 0) and torch.all(lse1[7] == -torch.inf)
    assert torch.all(grads1[0][7] == 0) and torch.all(grads1[3][int(indptr[7]):int(indptr[8])] == 0)
    ref, ref_lse = reference_sparse_attention(q.double(), k.double(), v.double(), indptr,
                                              indices, bias=bias.double())
    live = torch.ones(300, dtype=torch.bool)
    live[7] = False
    torch.testing.assert_close(out1[live].double(), ref[live], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(lse1[live].double(), ref_lse[live], rtol=1e-5, atol=1e-5)
