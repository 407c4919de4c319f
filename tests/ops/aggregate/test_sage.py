"""graphpipe.ops.aggregate.sage_mean (the fused SAGE mean + two linear maps) against its
definition in float64 reference ops: values and every gradient, with and without the root
weight and the bias, zero in-degree destinations and duplicate edges included."""

from __future__ import annotations

import pytest
import torch

from graphpipe.ops.aggregate import reference_aggregate, sage_mean
from graphpipe.ops.aggregate.sage import sage_mean_composed

from .test_conformance import random_block


def _definition(x, indptr, indices, num_dst, w_l, b, w_r):
    mean = reference_aggregate(indptr, indices, x, num_dst=num_dst, reduce="mean").to(x.dtype)
    out = mean @ w_l.t()
    if b is not None:
        out = out + b
    return out if w_r is None else out + x[:num_dst] @ w_r.t()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("root,bias", [(True, True), (False, True), (True, False)])
@pytest.mark.parametrize("fn", [sage_mean, sage_mean_composed])
def test_sage_mean_equals_its_definition(dtype: torch.dtype, root: bool, bias: bool, fn) -> None:
    num_dst, num_src, dim, out_dim = 30, 70, 9, 5
    indptr, indices = random_block(num_dst, num_src, 6, seed=3)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(num_src, dim, generator=gen, dtype=dtype)
    w_l = torch.randn(out_dim, dim, generator=gen, dtype=dtype)
    b = torch.randn(out_dim, generator=gen, dtype=dtype) if bias else None
    w_r = torch.randn(out_dim, dim, generator=gen, dtype=dtype) if root else None
    leaves = [t for t in (x, w_l, b, w_r) if t is not None]
    ours = [t.clone().requires_grad_() for t in leaves]
    theirs = [t.clone().requires_grad_() for t in leaves]

    def call(fn, ts):
        it = iter(ts)
        args = [next(it) if t is not None else None for t in (x, w_l, b, w_r)]
        return fn(args[0], indptr, indices, num_dst, args[1], args[2], args[3])

    out = call(fn, ours)
    expected = call(_definition, theirs)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(out, expected, **tol)
    assert out.shape == (num_dst, out_dim)
    g = torch.randn(out.shape, generator=gen, dtype=dtype)
    out.backward(g)
    expected.backward(g)
    for a, e in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, e.grad, **tol)


def test_sage_mean_without_input_gradient_leaves_x_alone() -> None:
    """Layer 0 reads features that need no gradient: only the weights get one."""
    indptr, indices = random_block(8, 20, 4, seed=1)
    x = torch.randn(20, 3)
    w_l, w_r = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    sage_mean(x, indptr, indices, 8, w_l, None, w_r).sum().backward()
    assert x.grad is None and w_l.grad.shape == (4, 3) and w_r.grad.shape == (4, 3)
