"""One conformance suite for every backend of the aggregation ops.

:class:`AggregateTests` holds the cases (``aggregate`` forward and backward,
``sddmm_scores`` -> ``edge_softmax`` -> ``aggregate_heads``, determinism); each backend
subclasses it (like zarr's ``StoreTests``) and must match the ``reference_*`` oracles.
``TestTriton`` runs on a CUDA GPU, or on the CPU under ``TRITON_INTERPRET=1``:
``test_triton_suite_under_interpreter`` runs that same class in such a subprocess (small
blocks: the interpreter runs every program in NumPy).
"""

from __future__ import annotations

import os

import pytest
import torch

from graphpipe.ops.aggregate import (
    aggregate,
    aggregate_heads,
    edge_softmax,
    reference_aggregate,
    reference_aggregate_heads,
    reference_edge_softmax,
    reference_sddmm_scores,
    sddmm_scores,
)

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def random_block(num_dst: int, num_src: int, max_deg: int, *, seed: int,
                 huge_row: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random local CSC with two empty rows, one optional huge row and a duplicate edge."""
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
    indices[1] = indices[0]
    return indptr, indices


CASES = [(13, 40, 6, 25, 16), (6, 6, 3, None, 7)]  # num_dst, num_src, max_deg, huge, F
COMBOS = [("sum", None, False), ("mean", None, False), ("sum", "gcn", False),
          ("sum", None, True), ("mean", None, True), ("sum", "gcn", True)]


class AggregateTests:
    """Cases every aggregation backend must pass (float32 in, float64 oracle)."""

    backend: str = ""
    device: str = "cpu"

    def to(self, *ts: torch.Tensor | None) -> list[torch.Tensor | None]:
        return [None if t is None else t.to(self.device) for t in ts]

    @pytest.mark.parametrize("case", range(len(CASES)))
    @pytest.mark.parametrize("reduce,norm,weighted", COMBOS)
    def test_forward(self, case, reduce, norm, weighted) -> None:
        num_dst, num_src, max_deg, huge, feat = CASES[case]
        indptr, indices = random_block(num_dst, num_src, max_deg, seed=case, huge_row=huge)
        gen = torch.Generator().manual_seed(case)
        x = torch.randn(num_src, feat, generator=gen)
        w = torch.rand(indices.shape[0], generator=gen) if weighted else None
        ip, ix, xd, wd = self.to(indptr, indices, x, w)
        out = aggregate(ip, ix, xd, num_dst=num_dst, reduce=reduce, norm=norm, edge_weight=wd,
                        backend=self.backend)
        ref = reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce=reduce, norm=norm,
                                  edge_weight=w)
        assert out.dtype == torch.float32 and out.shape == (num_dst, feat)
        torch.testing.assert_close(out.cpu().double(), ref.double(), rtol=1e-5, atol=1e-5)

    @pytest.mark.parametrize("reduce,norm,weighted", [COMBOS[1], COMBOS[5]])
    def test_backward(self, reduce, norm, weighted) -> None:
        indptr, indices = random_block(12, 30, 5, seed=5, huge_row=20)
        gen = torch.Generator().manual_seed(5)
        x = torch.randn(30, 9, generator=gen, requires_grad=True)
        w = torch.rand(indices.shape[0], generator=gen, requires_grad=True)
        g = torch.randn(12, 9, generator=gen)
        ew = w if weighted else None
        inputs = [x] + ([w] if weighted else [])
        ref = reference_aggregate(indptr, indices, x, num_dst=12, reduce=reduce, norm=norm,
                                  edge_weight=ew)
        want = torch.autograd.grad(ref, inputs, g.double())
        leaves = [t.detach().to(self.device).requires_grad_() for t in inputs]
        ip, ix, gd = self.to(indptr, indices, g)
        out = aggregate(ip, ix, leaves[0], num_dst=12, reduce=reduce, norm=norm,
                        edge_weight=leaves[1] if weighted else None, backend=self.backend)
        got = torch.autograd.grad(out, leaves, gd)
        for a, b in zip(got, want):
            torch.testing.assert_close(a.cpu().double(), b.double(), rtol=1e-4, atol=1e-5)

    def test_attention_heads(self) -> None:
        indptr, indices = random_block(10, 24, 5, seed=9, huge_row=12)
        gen = torch.Generator().manual_seed(9)
        heads, feat = 2, 5
        a_src, a_dst = torch.randn(24, heads, generator=gen), torch.randn(10, heads, generator=gen)
        x = torch.randn(24, heads, feat, generator=gen)
        ip, ix, asd, add, xd = self.to(indptr, indices, a_src, a_dst, x)
        s = sddmm_scores(ip, ix, asd, add, backend=self.backend)
        alpha = edge_softmax(ip, s, backend=self.backend)
        out = aggregate_heads(ip, ix, xd, alpha, backend=self.backend)
        s_ref = reference_sddmm_scores(indptr, indices, a_src, a_dst)
        a_ref = reference_edge_softmax(indptr, s_ref)
        o_ref = reference_aggregate_heads(indptr, indices, x, a_ref)
        for got, want in ((s, s_ref), (alpha, a_ref), (out, o_ref)):
            torch.testing.assert_close(got.cpu().double(), want.double(), rtol=1e-5, atol=1e-5)

    def test_deterministic(self) -> None:
        indptr, indices = random_block(13, 40, 6, seed=2, huge_row=25)
        x = torch.randn(40, 8, generator=torch.Generator().manual_seed(2))
        ip, ix, xd = self.to(indptr, indices, x)
        outs = [aggregate(ip, ix, xd, num_dst=13, norm="gcn", backend=self.backend)
                for _ in range(3)]
        assert all(torch.equal(o, outs[0]) for o in outs[1:])


class TestReference(AggregateTests):
    backend = "reference"


class TestCpu(AggregateTests):
    backend = "cpu"


class TestAuto(AggregateTests):
    """CPU tensors: ``"auto"`` is the Numba path."""

    backend = "auto"


@pytest.mark.skipif(not (INTERPRET or torch.cuda.is_available()),
                    reason="Triton needs a CUDA GPU or TRITON_INTERPRET=1 (see "
                           "test_triton_suite_under_interpreter)")
class TestTriton(AggregateTests):
    backend = "triton"
    device = "cpu" if INTERPRET or not torch.cuda.is_available() else "cuda"


@pytest.mark.skipif(INTERPRET, reason="already interpreted")
def test_triton_suite_under_interpreter(suite_under) -> None:
    pytest.importorskip("triton")
    suite_under(__file__, "TestTriton", TRITON_INTERPRET="1")
