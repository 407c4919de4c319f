"""Fused ReLU + dropout (graphpipe.ops.dropout) against its definition and torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from graphpipe.ops.dropout import dropout_keep_mask, relu_dropout


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("relu", [True, False])
def test_forward_backward_equal_the_masked_formula(dtype: torch.dtype, relu: bool) -> None:
    p = 0.3
    x = torch.randn(700, 33, dtype=dtype, generator=torch.Generator().manual_seed(0)).requires_grad_()
    torch.manual_seed(5)
    out = relu_dropout(x, p, True, relu=relu)
    torch.manual_seed(5)
    seed = int(torch.randint(0, 1 << 62, (1,)))  # the seed relu_dropout drew
    keep = torch.from_numpy(dropout_keep_mask(x.numel(), p, seed)).view_as(x)
    x_ref = x.detach().clone().requires_grad_()
    h = F.relu(x_ref) if relu else x_ref
    expected = torch.where(keep, h / (1 - p), torch.zeros_like(h))
    torch.testing.assert_close(out, expected, rtol=1e-6, atol=0)
    g = torch.randn_like(out)
    out.backward(g)
    expected.backward(g)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-6, atol=0)


def test_keep_rate_and_independence() -> None:
    """Keep fraction within 5 sigma of 1 - p; masks of different seeds differ; the same seed
    gives the same mask; adjacent elements are uncorrelated."""
    n, p = 200_000, 0.5
    a = dropout_keep_mask(n, p, 1)
    sigma = np.sqrt(p * (1 - p) / n)
    assert abs(a.mean() - (1 - p)) < 5 * sigma
    assert np.array_equal(a, dropout_keep_mask(n, p, 1))
    assert not np.array_equal(a, dropout_keep_mask(n, p, 2))
    corr = np.corrcoef(a[:-1].astype(float), a[1:].astype(float))[0, 1]
    assert abs(corr) < 5 / np.sqrt(n)
    assert abs(dropout_keep_mask(n, 0.1, 3).mean() - 0.9) < 5 * np.sqrt(0.09 / n)


def test_eval_and_fallbacks_are_torch() -> None:
    x = torch.randn(50, 4)
    assert torch.equal(relu_dropout(x, 0.5, False), F.relu(x))
    assert torch.equal(relu_dropout(x, 0.0, True), F.relu(x))
    half = x.to(torch.bfloat16)
    out = relu_dropout(half, 0.5, True)
    assert out.dtype == torch.bfloat16 and bool(((out == 0) | (out == 2 * F.relu(half))).all())
    with pytest.raises(ValueError, match=r"'p' must be in \[0, 1\)"):
        relu_dropout(x, 1.0, True)


def test_reproducible_under_torch_seed() -> None:
    x = torch.randn(300, 8)
    torch.manual_seed(3)
    a = relu_dropout(x, 0.5, True)
    torch.manual_seed(3)
    b = relu_dropout(x, 0.5, True)
    c = relu_dropout(x, 0.5, True)
    assert torch.equal(a, b) and not torch.equal(b, c)


def test_inplace_equals_out_of_place_and_backpropagates() -> None:
    w = torch.randn(6, 5, requires_grad=True)
    x = torch.randn(40, 6)
    torch.manual_seed(9)
    a = relu_dropout(x @ w, 0.4, True)
    a.sum().backward()
    grad_a = w.grad.clone()
    w.grad = None
    torch.manual_seed(9)
    h = x @ w
    b = relu_dropout(h, 0.4, True, inplace=True)
    assert b.data_ptr() == h.data_ptr() and torch.equal(a, b)
    b.sum().backward()
    assert torch.equal(grad_a, w.grad)


@pytest.mark.parametrize("relu", [True, False])
def test_inplace_fallback_backpropagates(relu: bool) -> None:
    """The torch fallback (a CUDA tensor or, here, bfloat16) with ``inplace=True``, as every
    GNN's activation calls it: ReLU's output must survive for its backward (an in-place
    dropout on it broke every GNN step on a GPU)."""
    w = torch.randn(6, 5, dtype=torch.bfloat16, requires_grad=True)
    x = torch.randn(40, 6, dtype=torch.bfloat16)
    torch.manual_seed(9)
    out = relu_dropout(x @ w, 0.4, True, inplace=True)
    out.sum().backward()
    kept = (out != 0).to(torch.bfloat16) * (1 / 0.6)  # dropout's scale; ReLU zeros drop too
    want = x.t() @ torch.ones(40, 5, dtype=torch.bfloat16).mul(kept)
    torch.testing.assert_close(w.grad, want)


@pytest.mark.parametrize("n", [1, 2, 5, 4097])  # odd lengths: the last element has no pair
def test_relu_gradient_mask_from_the_output_sign(n: int) -> None:
    """With the ReLU the backward reads the mask from ``out > 0`` (none is stored): zeros,
    negative zeros and infinities get the gradient of ``where(keep, relu(x) / (1 - p), 0)``."""
    p = 0.5
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    x[: min(n, 4)] = torch.tensor([0.0, -0.0, float("inf"), -float("inf")])[: min(n, 4)]
    x.requires_grad_()
    torch.manual_seed(1)
    out = relu_dropout(x, p, True)
    torch.manual_seed(1)
    keep = torch.from_numpy(dropout_keep_mask(n, p, int(torch.randint(0, 1 << 62, (1,)))))
    g = torch.randn(n, generator=torch.Generator().manual_seed(0))
    out.backward(g)
    assert torch.equal(x.grad, torch.where(keep & (x.detach() > 0), g * 2, torch.zeros_like(g)))
    finite = torch.isfinite(x.detach())
    expected = torch.where(keep, torch.relu(x.detach()) * 2, torch.zeros_like(g))
    assert torch.equal(out.detach()[finite], expected[finite])
