"""Cluster-sparse format (Elastic Computation Reformation), its attention kernels and the
Auto Tuner."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from graphpipe.ops.attention import reference_sparse_attention, sparse_attention
from graphpipe.ops.attention.cluster_sparse import (
    ThresholdTuner,
    cluster_sparse_attention,
    cluster_sparse_pattern,
    reference_cluster_sparse_attention,
)


def clustered_pattern(sizes, p_in, p_out, *, seed, global_token=False):
    """A duplicate-free, reordered pattern with self-loops: dense-ish diagonal clusters,
    sparse off-diagonal ones. With ``global_token`` position 0 attends to / is attended
    by everyone and forms its own cluster."""
    rng = np.random.default_rng(seed)
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    s = int(offsets[-1])
    cluster = np.repeat(np.arange(len(sizes)), sizes)
    prob = np.where(cluster[:, None] == cluster[None, :], p_in, p_out)
    mask = rng.random((s, s)) < prob
    mask |= mask.T
    np.fill_diagonal(mask, True)
    if global_token:
        offsets = np.concatenate([[0], offsets + 1])
        s += 1
        full = np.zeros((s, s), dtype=bool)
        full[1:, 1:] = mask
        full[0, :] = full[:, 0] = True
        mask = full
    indptr = np.zeros(s + 1, dtype=np.int64)
    np.cumsum(mask.sum(1), out=indptr[1:])
    indices = np.concatenate([rng.permutation(np.flatnonzero(r)) for r in mask]).astype(np.int64)
    return indptr, indices, offsets, mask


def mask_of(csp) -> np.ndarray:
    indptr, indices = csp.to_csr()
    m = np.zeros((csp.size, csp.size), dtype=np.int64)
    np.add.at(m, (np.repeat(np.arange(csp.size), np.diff(indptr)), indices), 1)
    return m


def qkv(s, heads, dim, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, heads, dim, generator=g, dtype=dtype) for _ in range(3)]


@pytest.mark.parametrize("placement", ["random", "cover"])
def test_transform_structure(placement):
    indptr, indices, offsets, mask = clustered_pattern([40, 37, 24, 6], 0.4, 0.02, seed=1)
    d_b = 8
    beta_g = indices.shape[0] / len(mask) ** 2
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=5 * beta_g, block_size=d_b,
                                 placement=placement, seed=3)
    m = mask_of(csp)
    assert m.max() == 1                                   # blocks and residual are disjoint
    sizes = np.diff(offsets)
    assert csp.transferred.any() and not csp.transferred.all()
    for a in range(4):
        for b in range(4):
            rect = (slice(offsets[a], offsets[a + 1]), slice(offsets[b], offsets[b + 1]))
            if not csp.transferred[a, b]:
                np.testing.assert_array_equal(m[rect], mask[rect])   # kept exactly
                continue
            assert sizes[a] >= d_b and sizes[b] >= d_b
            mine = [blk for blk in csp.blocks.tolist()
                    if offsets[a] <= blk[0] < offsets[a + 1] and offsets[b] <= blk[1] < offsets[b + 1]]
            e_ab = int(csp.edges[a, b])
            assert 1 <= len(mine) <= e_ab // d_b ** 2 + 1
            assert len({tuple(x) for x in mine}) == len(mine)
            covered = np.zeros((sizes[a], sizes[b]), dtype=bool)
            for r0, c0 in mine:
                lr, lc = r0 - offsets[a], c0 - offsets[b]
                assert lr % d_b == 0 and lc % d_b == 0
                assert lr + d_b <= sizes[a] and lc + d_b <= sizes[b]
                covered[lr:lr + d_b, lc:lc + d_b] = True
            loops = np.zeros_like(covered)
            if a == b:
                np.fill_diagonal(loops, True)
            np.testing.assert_array_equal(m[rect].astype(bool), covered | loops)
    assert np.all(np.diag(m) == 1)                           # self-loops survive


def test_cover_placement_covers_the_densest_cells_first():
    s, d_b = 32, 8
    mask = np.eye(s, dtype=bool)
    mask[0:8, 16:24] = True   # one full cell inside the off-diagonal cluster block (0, 1)
    mask[16:24, 0:8] = True
    mask[7, 23] = mask[23, 7] = False   # 63 entries: floor(63 / 64) + 1 = one sub-block
    offsets = np.array([0, 16, 32])
    indptr = np.zeros(s + 1, dtype=np.int64)
    np.cumsum(mask.sum(1), out=indptr[1:])
    indices = np.concatenate([np.flatnonzero(r) for r in mask]).astype(np.int64)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.3, block_size=d_b,
                                 placement="cover")
    assert csp.transferred[0, 1] and csp.transferred[1, 0]
    blocks = {tuple(b) for b in csp.blocks.tolist()}
    assert (0, 16) in blocks and (16, 0) in blocks
    assert sum(1 for r0, c0 in blocks if r0 < 16 <= c0) == 1
    expected = mask[0:16, 16:32].copy()
    expected[7, 7] = True   # the sub-block fills the one missing pair (7, 23)
    np.testing.assert_array_equal(mask_of(csp).astype(bool)[0:16, 16:32], expected)


def test_threshold_zero_changes_nothing_and_monotone_and_seeded():
    indptr, indices, offsets, mask = clustered_pattern([30, 30, 20], 0.3, 0.03, seed=2)
    csp0 = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.0, block_size=4)
    assert csp0.num_blocks == 0 and not csp0.transferred.any()
    np.testing.assert_array_equal(mask_of(csp0), mask.astype(np.int64))
    previous = csp0.transferred
    for thr in (0.01, 0.05, 0.2, 0.5, 1.0):
        csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=thr, block_size=4)
        assert np.all(csp.transferred >= previous)
        previous = csp.transferred
    assert previous.all()   # threshold 1 transfers every eligible (non-full) block
    a = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.2, block_size=4, seed=9)
    b = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.2, block_size=4, seed=9)
    np.testing.assert_array_equal(a.blocks, b.blocks)
    np.testing.assert_array_equal(a.residual_indices, b.residual_indices)


def test_global_token_row_and_column_are_kept():
    indptr, indices, offsets, _mask = clustered_pattern([24, 24], 0.3, 0.05, seed=4,
                                                       global_token=True)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=1.0, block_size=8)
    m = mask_of(csp)
    assert np.all(m[0] == 1) and np.all(m[:, 0] == 1)
    assert csp.num_blocks > 0


def test_attention_equals_sparse_attention_when_nothing_is_replaced():
    indptr, indices, offsets, _ = clustered_pattern([20, 17, 12], 0.3, 0.05, seed=5)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.0, block_size=4)
    q, k, v = qkv(49, 2, 8, seed=6)
    ip, ix = torch.from_numpy(indptr), torch.from_numpy(indices)
    out = cluster_sparse_attention(q, k, v, csp, backend="cpu")
    want = sparse_attention(q, k, v, ip, ix, backend="cpu")
    torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("placement", ["random", "cover"])
def test_attention_equals_dense_under_transformed_mask_with_gradients(placement):
    indptr, indices, offsets, _ = clustered_pattern([20, 19, 12, 3], 0.3, 0.04, seed=7,
                                                    global_token=True)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.5, block_size=4,
                                 placement=placement, seed=1)
    assert csp.num_blocks > 0 and csp.residual_indices.shape[0] > 0
    s = csp.size
    q, k, v = qkv(s, 2, 5, seed=8)
    grad = torch.randn(s, 2, 5, dtype=torch.float64)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out, lse = cluster_sparse_attention(*leaves, csp, backend="cpu", return_lse=True)
    got = torch.autograd.grad(out, leaves, grad)
    ref_leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref, ref_lse = reference_cluster_sparse_attention(*ref_leaves, csp)
    want = torch.autograd.grad(ref, ref_leaves, grad)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-10)
    torch.testing.assert_close(lse, ref_lse, rtol=0, atol=1e-10)
    for name, a, b in zip("qkv", got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10, msg=f"gradient of {name}")


def test_gradcheck_cluster_sparse_cpu():
    indptr, indices, offsets, _ = clustered_pattern([8, 6], 0.4, 0.1, seed=9)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=1.0, block_size=2)
    assert csp.num_blocks > 0
    inputs = [t.requires_grad_() for t in qkv(14, 1, 3, seed=10)]
    assert torch.autograd.gradcheck(lambda a, b, c: cluster_sparse_attention(a, b, c, csp,
                                                                             backend="cpu"),
                                    inputs, eps=1e-6, atol=1e-7)


def test_float32_matches_reference():
    indptr, indices, offsets, _ = clustered_pattern([40, 36, 20], 0.3, 0.03, seed=11)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.2, block_size=16)
    q, k, v = qkv(96, 4, 16, seed=12, dtype=torch.float32)
    out = cluster_sparse_attention(q, k, v, csp, backend="cpu")
    ref, _ = reference_cluster_sparse_attention(q, k, v, csp)
    torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-6)


def test_bad_arguments_name_the_argument():
    indptr, indices, offsets, _ = clustered_pattern([8, 8], 0.4, 0.1, seed=13)
    with pytest.raises(ValueError, match="'offsets'"):
        cluster_sparse_pattern(indptr, indices, offsets[:-1], threshold=0.1)
    with pytest.raises(ValueError, match="'placement'"):
        cluster_sparse_pattern(indptr, indices, offsets, threshold=0.1, placement="grid")
    with pytest.raises(ValueError, match="'block_size'"):
        cluster_sparse_pattern(indptr, indices, offsets, threshold=0.1, block_size=0)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.1)
    with pytest.raises(ValueError, match="'q', 'k', 'v' must have shape"):
        cluster_sparse_attention(*qkv(15, 1, 2, seed=0), csp)


# ------------------------------------------------------------------ Auto Tuner


def test_tuner_lag_rule_moves_up_and_down_with_caps():
    beta_g = 1e-3
    tuner = ThresholdTuner(lag=2)
    assert tuner.index == 1 and tuner.threshold(beta_g) == pytest.approx(beta_g)
    # loss falls ever faster -> |LDR| non-decreasing -> index climbs, capped at 6
    losses = [10 - 0.1 * t * t for t in range(20)]
    for loss in losses:
        tuner.step(loss, 1.0)
    assert tuner.index == 6 and tuner.threshold(beta_g) == 1.0
    ups = [d for d in tuner.history if d.action == "up"]
    assert all(d.index == min(d.index_before + 1, 6) for d in ups) and len(ups) >= 5
    # then the descent slows down -> index falls, floored at 0
    for t in range(40):
        tuner.step(losses[-1] - 0.5 * 0.5 ** t, 1.0)
    assert tuner.index == 0 and tuner.threshold(beta_g) == 0.0
    # F_t recursion
    h = tuner.history
    for prev, cur in itertools.pairwise(h):
        assert cur.smoothed == pytest.approx(0.9 * prev.smoothed + 0.1 * cur.loss)
        assert cur.ldr == pytest.approx(abs(cur.smoothed - prev.smoothed) / cur.epoch_time)


def test_tuner_window_rule_holds_on_constant_rates(caplog):
    tuner = ThresholdTuner(rule="window", window=5, start=3)
    for t in range(12):
        tuner.step(100.0 * 0.5 ** t, 1.0)     # descent slows: rates fall -> down
    assert tuner.index < 3
    assert all(d.action in ("warm-up", "hold", "down") for d in tuner.history)
    flat = ThresholdTuner(rule="window", window=5, start=3, smoothing=0.0)
    with caplog.at_level("INFO", logger="graphpipe.ops.attention.cluster_sparse"):
        for t in range(12):
            flat.step(100.0 - t, 1.0)   # F = L exactly: every rate is 1 -> hold
    assert flat.index == 3
    assert all(d.action in ("warm-up", "hold") for d in flat.history)
    assert sum("threshold tuner epoch" in r.message for r in caplog.records) == 12


# ------------------------------------------------------------------ Triton under the interpreter

TRITON_SCRIPT = textwrap.dedent("""
    import sys, numpy as np, torch
    sys.path.insert(0, "tests/ops/attention")
    from test_cluster_sparse import clustered_pattern
    from graphpipe.ops.attention.cluster_sparse import (cluster_sparse_pattern, cluster_sparse_attention,
                                              reference_cluster_sparse_attention)
    failures = []
    cases = [([9, 9, 5], 4, 5, torch.float64, 1e-10), ([33, 17], 16, 16, torch.float32, 3e-5)]
    for sizes, d_b, dim, dtype, tol in cases:
        indptr, indices, offsets, _ = clustered_pattern(sizes, 0.3, 0.05, seed=1, global_token=True)
        csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.5, block_size=d_b)
        assert csp.num_blocks > 0
        s = csp.size
        g = torch.Generator().manual_seed(0)
        q, k, v, grad = (torch.randn(s, 2, dim, generator=g, dtype=torch.float64) for _ in range(4))
        leaves = [t.to(dtype).requires_grad_() for t in (q, k, v)]
        out = cluster_sparse_attention(*leaves, csp, backend="triton", block_m=4, block_n=4)
        got = torch.autograd.grad(out, leaves, grad.to(dtype))
        rl = [t.clone().requires_grad_() for t in (q, k, v)]
        ref, _ = reference_cluster_sparse_attention(*rl, csp)
        want = torch.autograd.grad(ref, rl, grad)
        if not torch.allclose(out.double(), ref, atol=tol, rtol=tol):
            failures.append(f"d_b={d_b}: out {(out.double() - ref).abs().max()}")
        for name, a, w in zip("qkv", got, want):
            if not torch.allclose(a.double(), w, atol=10 * tol, rtol=10 * tol):
                failures.append(f"d_b={d_b}: grad {name} {(a.double() - w).abs().max()}")
    assert not failures, failures
    print("OK")
""")


def test_triton_cluster_sparse_under_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, "-c", TRITON_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_reference_matches_sparse_reference_on_the_full_mask():
    """The cluster-sparse oracle is the sparse oracle on to_csr(): check to_csr once more by
    building the dense mask independently from blocks + residual."""
    indptr, indices, offsets, _ = clustered_pattern([16, 16], 0.3, 0.05, seed=14)
    csp = cluster_sparse_pattern(indptr, indices, offsets, threshold=0.5, block_size=4)
    m = np.zeros((32, 32), dtype=bool)
    for r0, c0 in csp.blocks.tolist():
        m[r0:r0 + 4, c0:c0 + 4] = True
    rows = np.repeat(np.arange(32), np.diff(csp.residual_indptr))
    m[rows, csp.residual_indices] = True
    ip = np.zeros(33, dtype=np.int64)
    np.cumsum(m.sum(1), out=ip[1:])
    ix = np.concatenate([np.flatnonzero(r) for r in m])
    q, k, v = qkv(32, 1, 4, seed=15)
    a, _ = reference_cluster_sparse_attention(q, k, v, csp)
    b, _ = reference_sparse_attention(q, k, v, torch.from_numpy(ip), torch.from_numpy(ix))
    torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
