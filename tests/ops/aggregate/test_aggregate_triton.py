"""Triton aggregation kernels, run by Triton's interpreter on CPU tensors.

``TRITON_INTERPRET=1`` must be set before triton is first imported, and other test
modules may already have imported it in the pytest process, so every interpreted
check runs in a fresh subprocess: this file re-executes itself with
``python tests/test_aggregate_triton.py <group>``. Inputs are tiny (the interpreter is
slow). The degree-grouped task plan is plain torch and is checked in-process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]


def random_block(num_dst: int, num_src: int, max_deg: int, *, seed: int,
                 huge_row: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random local CSC with empty rows, one optional huge row and a duplicate edge."""
    gen = torch.Generator().manual_seed(seed)
    deg = torch.randint(0, max_deg + 1, (num_dst,), generator=gen)
    deg[0] = max(int(deg[0]), 2)
    deg[1] = 0
    deg[num_dst - 1] = 0
    if huge_row is not None:
        deg[2] = huge_row
    indptr = torch.zeros(num_dst + 1, dtype=torch.int64)
    indptr[1:] = torch.cumsum(deg, 0)
    indices = torch.randint(0, num_src, (int(indptr[-1]),), generator=gen)
    indices[1] = indices[0]  # duplicate edge in row 0
    return indptr, indices


# =========================================================================== interpreted checks


def check_forward() -> None:
    from graphpipe.ops.aggregate import aggregate, reference_aggregate
    cases = [(13, 40, 6, 45, 33), (9, 20, 4, None, 1), (11, 30, 5, 20, 32),
             (6, 6, 3, None, 7)]
    for num_dst, num_src, max_deg, huge, feat in cases:
        indptr, indices = random_block(num_dst, num_src, max_deg, seed=feat, huge_row=huge)
        gen = torch.Generator().manual_seed(feat)
        x = torch.randn(num_src, feat, generator=gen)
        w = torch.rand(indices.shape[0], generator=gen)
        for reduce, norm, ew in [("sum", None, None), ("mean", None, None),
                                 ("sum", "gcn", None), ("sum", None, w), ("mean", None, w),
                                 ("sum", "gcn", w)]:
            for threshold in (4, 32):
                out = aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                                edge_weight=ew, backend="triton", degree_threshold=threshold)
                ref = reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce,
                                          norm=norm, edge_weight=ew)
                assert out.dtype == torch.float32 and out.shape == (num_dst, feat)
                torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
    # odd tile shapes and float64
    indptr, indices = random_block(10, 25, 5, seed=3, huge_row=19)
    x = torch.randn(25, 33, dtype=torch.float64)
    out = aggregate(indptr, indices, x, num_dst=10, backend="triton", block_x=4, block_y=16,
                    block_k=2, degree_threshold=5)
    torch.testing.assert_close(out, reference_aggregate(indptr, indices, x, num_dst=10))


def check_backward() -> None:
    from graphpipe.ops.aggregate import aggregate, reference_aggregate
    indptr, indices = random_block(12, 30, 5, seed=5, huge_row=40)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(30, 33, generator=gen, requires_grad=True)
    w = torch.rand(indices.shape[0], generator=gen, requires_grad=True)
    g = torch.randn(12, 33, generator=gen)
    for reduce, norm, weighted in [("sum", None, False), ("mean", None, False),
                                   ("mean", None, True), ("sum", "gcn", True)]:
        ew = w if weighted else None
        inputs = [x] + ([w] if weighted else [])
        ref = reference_aggregate(indptr, indices, x, num_dst=12, reduce=reduce, norm=norm,
                                  edge_weight=ew)
        want = torch.autograd.grad(ref, inputs, g.double())
        for atomic in (False, True):
            out = aggregate(indptr, indices, x, num_dst=12, reduce=reduce, norm=norm,
                            edge_weight=ew, backend="triton", degree_threshold=8,
                            atomic_backward=atomic)
            got = torch.autograd.grad(out, inputs, g)
            for a, b in zip(got, want):
                torch.testing.assert_close(a.double(), b.double(), rtol=1e-4, atol=1e-5)
    # gradcheck in float64 on a tiny block (transposed backward, chunked rows)
    indptr, indices = random_block(5, 7, 3, seed=8, huge_row=7)
    x64 = torch.randn(7, 3, dtype=torch.float64, requires_grad=True)
    w64 = torch.rand(indices.shape[0], dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(
        lambda a, b: aggregate(indptr, indices, a, num_dst=5, reduce="mean", edge_weight=b,
                               backend="triton", degree_threshold=3), (x64, w64))


def check_heads_and_determinism() -> None:
    from graphpipe.ops.aggregate import (
        aggregate,
        aggregate_heads,
        edge_softmax,
        reference_aggregate_heads,
        reference_edge_softmax,
        reference_sddmm_scores,
        sddmm_scores,
    )
    indptr, indices = random_block(10, 24, 5, seed=9, huge_row=30)
    gen = torch.Generator().manual_seed(9)
    heads, dim = 3, 5
    a_src = torch.randn(24, heads, generator=gen, requires_grad=True)
    a_dst = torch.randn(10, heads, generator=gen, requires_grad=True)
    x = torch.randn(24, heads, dim, generator=gen, requires_grad=True)
    g = torch.randn(10, heads, dim, generator=gen)
    s_ref = reference_sddmm_scores(indptr, indices, a_src, a_dst)
    ref = reference_aggregate_heads(indptr, indices, x, reference_edge_softmax(indptr, s_ref))
    want = torch.autograd.grad(ref, [a_src, a_dst, x], g.double())
    for atomic in (False, True):
        s = sddmm_scores(indptr, indices, a_src, a_dst, backend="triton")
        alpha = edge_softmax(indptr, s, backend="triton")
        out = aggregate_heads(indptr, indices, x, alpha, backend="triton", degree_threshold=8,
                              atomic_backward=atomic)
        torch.testing.assert_close(out.double(), ref, rtol=1e-5, atol=1e-5)
        got = torch.autograd.grad(out, [a_src, a_dst, x], g)
        for a, b in zip(got, want):
            torch.testing.assert_close(a.double(), b.double(), rtol=1e-4, atol=1e-5)
    # edge softmax kernel: stability, empty rows, gradcheck in float64
    big = torch.tensor([[1000.0], [1001.0], [999.0], [-1000.0], [-1000.0]])
    alpha = edge_softmax(torch.tensor([0, 3, 3, 5]), big, backend="triton")
    assert torch.isfinite(alpha).all()
    torch.testing.assert_close(alpha[3:], torch.full((2, 1), 0.5))
    sm_indptr = torch.tensor([0, 3, 3, 5, 30, 31])
    s64 = torch.randn(31, 2, dtype=torch.float64, generator=gen, requires_grad=True)
    torch.testing.assert_close(edge_softmax(sm_indptr, s64, backend="triton"),
                               reference_edge_softmax(sm_indptr, s64))
    torch.autograd.gradcheck(lambda z: edge_softmax(sm_indptr, z, backend="triton"), (s64,))
    # K4: forward bitwise identical across runs (fresh blocks each time)
    xf = torch.randn(24, 40, generator=gen)
    outs = [aggregate(indptr.clone(), indices.clone(), xf, num_dst=10, norm="gcn",
                      backend="triton", degree_threshold=8) for _ in range(3)]
    assert all(torch.equal(o, outs[0]) for o in outs[1:])


GROUPS = {"forward": check_forward, "backward": check_backward,
          "heads": check_heads_and_determinism}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_triton_interpreted(group):
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, __file__, group], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert f"OK {group}" in proc.stdout


# =========================================================================== in-process


def test_task_plan_groups_by_degree_and_chunks_heavy_rows():
    from graphpipe.ops.aggregate.triton import TaskPlan
    indptr, _indices = random_block(30, 50, 9, seed=2, huge_row=45)
    deg = indptr[1:] - indptr[:-1]
    plan = TaskPlan(indptr, threshold=8)
    # light rows: every row of degree <= 8 exactly once, in non-decreasing degree
    assert sorted(plan.light_row.tolist()) == torch.nonzero(deg <= 8).flatten().tolist()
    light_deg = plan.light_end - plan.light_start
    assert torch.all(light_deg[1:] >= light_deg[:-1])
    assert torch.equal(light_deg, deg[plan.light_row])
    # heavy rows: chunks of at most 8 edges tile each heavy row's edge range exactly
    assert plan.heavy_row.tolist() == torch.nonzero(deg > 8).flatten().tolist()
    assert torch.all(plan.chunk_end - plan.chunk_start <= 8)
    assert torch.all(plan.chunk_end > plan.chunk_start)
    for h, row in enumerate(plan.heavy_row.tolist()):
        lo, hi = int(plan.heavy_start[h]), int(plan.heavy_end[h])
        covered = [e for c in range(lo, hi)
                   for e in range(int(plan.chunk_start[c]), int(plan.chunk_end[c]))]
        assert covered == list(range(int(indptr[row]), int(indptr[row + 1])))
    assert plan.num_chunks == int(((deg[deg > 8] + 7) // 8).sum())


def test_triton_options_are_validated():
    from graphpipe.ops.aggregate.triton import _options
    assert _options({})["block_x"] * _options({})["block_y"] == 256  # FastGL's 8 x 32
    with pytest.raises(ValueError, match="'block_y'"):
        _options({"block_y": 48})
    with pytest.raises(ValueError, match="'block_x'"):
        _options({"block_x": 64, "block_y": 32})
    with pytest.raises(ValueError, match="'degree_threshold'"):
        _options({"degree_threshold": 0})
    from graphpipe.ops.aggregate import aggregate
    with pytest.raises(ValueError, match="option"):
        aggregate(torch.tensor([0, 0]), torch.zeros(0, dtype=torch.int64), torch.randn(2, 2),
                  num_dst=1, backend="triton", tile=3)


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") != "1":
        raise SystemExit("run with TRITON_INTERPRET=1")
    name = sys.argv[1]
    GROUPS[name]()
    print(f"OK {name}")
