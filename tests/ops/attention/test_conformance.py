"""One conformance suite for every backend of ``sparse_attention(backend=...)``.

:class:`AttentionTests` holds the cases (forward, log-sum-exp, gradients, with and
without bias, TorchGT compatibility, an empty query row); each backend subclasses it
and must match the dense float64 oracle ``reference_sparse_attention``. ``TestTriton``
runs on a CUDA GPU, or under ``TRITON_INTERPRET=1`` through
``test_triton_suite_under_interpreter`` (one small pattern: the interpreter is slow).
"""

from __future__ import annotations

import os
from typing import ClassVar

import numpy as np
import pytest
import torch

from graphpipe.ops.attention import reference_sparse_attention, sparse_attention

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def pattern(n: int, density: float, seed: int, empty: tuple[int, ...] = ()):
    """Duplicate-free CSR over queries with self loops, entries of a row shuffled."""
    rng = np.random.default_rng(seed)
    mask = rng.random((n, n)) < density
    np.fill_diagonal(mask, True)
    for i in empty:
        mask[i] = False
    rows = [rng.permutation(np.flatnonzero(mask[i])) for i in range(n)]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(r) for r in rows], out=indptr[1:])
    return torch.from_numpy(indptr), torch.from_numpy(np.concatenate(rows).astype(np.int64))


class AttentionTests:
    """Cases every sparse-attention backend must pass."""

    backend: str = ""
    device: str = "cpu"
    options: ClassVar[dict[str, int]] = {}
    has_lse = True  # the torch path returns no log-sum-exp

    @pytest.mark.parametrize("compat", [None, "torchgt"])
    @pytest.mark.parametrize("with_bias", [False, True])
    @pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 2e-5)])
    def test_matches_reference(self, compat, with_bias, dtype, tol) -> None:
        n, heads, dim = 19, 2, 5
        indptr, indices = pattern(n, 0.3, 1, empty=(4,))
        g = torch.Generator().manual_seed(2)
        spread = 2.5 if compat else 1.0
        q, k = (torch.randn(n, heads, dim, generator=g, dtype=torch.float64) * spread
                for _ in range(2))
        v = torch.randn(n, heads, dim, generator=g, dtype=torch.float64)
        bias = torch.randn(indices.shape[0], heads, generator=g, dtype=torch.float64) \
            if with_bias else None
        grad = torch.randn(n, heads, dim, generator=g, dtype=torch.float64)
        leaves = [t.to(dtype).to(self.device).requires_grad_() for t in (q, k, v)]
        b = bias.to(dtype).to(self.device).requires_grad_() if bias is not None else None
        out = sparse_attention(*leaves, indptr.to(self.device), indices.to(self.device),
                               bias=b, compat=compat, backend=self.backend,
                               return_lse=self.has_lse, **self.options)
        out, lse = out if self.has_lse else (out, None)
        got = torch.autograd.grad(out, leaves + ([b] if b is not None else []),
                                  grad.to(dtype).to(self.device))
        rl = [t.clone().requires_grad_() for t in (q, k, v)]
        rb = bias.clone().requires_grad_() if bias is not None else None
        ref, ref_lse = reference_sparse_attention(*rl, indptr, indices, bias=rb, compat=compat)
        want = torch.autograd.grad(ref, rl + ([rb] if rb is not None else []), grad)
        assert out.dtype == dtype
        torch.testing.assert_close(out.cpu().double(), ref, atol=tol, rtol=tol)
        if lse is not None:
            lse = lse.cpu().double()
            assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse))
            live = ~torch.isinf(ref_lse)
            torch.testing.assert_close(lse[live], ref_lse[live], atol=tol, rtol=tol)
        for a, w in zip(got, want):
            torch.testing.assert_close(a.cpu().double(), w, atol=10 * tol, rtol=10 * tol)
        assert torch.all(out[4] == 0)  # a query with no keys attends to nothing


class TestReference(AttentionTests):
    backend = "reference"


class TestCpu(AttentionTests):
    backend = "cpu"


class TestTorch(AttentionTests):
    backend = "torch"
    has_lse = False


class TestAuto(AttentionTests):
    backend = "auto"


@pytest.mark.skipif(not (INTERPRET or torch.cuda.is_available()),
                    reason="Triton needs a CUDA GPU or TRITON_INTERPRET=1 (see "
                           "test_triton_suite_under_interpreter)")
class TestTriton(AttentionTests):
    backend = "triton"
    device = "cpu" if INTERPRET or not torch.cuda.is_available() else "cuda"
    options: ClassVar[dict[str, int]] = {"block_m": 4, "block_n": 4}


@pytest.mark.skipif(INTERPRET, reason="already interpreted")
def test_triton_suite_under_interpreter(suite_under) -> None:
    pytest.importorskip("triton")
    suite_under(__file__, "TestTriton", TRITON_INTERPRET="1")
