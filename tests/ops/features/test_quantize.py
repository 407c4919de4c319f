"""Per-row stochastic low-bit quantization (Sylvie) against its NumPy reference and
its defining properties."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.ops.features.quantize import (
    QuantizedRows,
    dequantize,
    quantize,
    reference_dequantize,
    reference_pack,
    reference_quantize,
    unpack_codes,
)

BITS = (1, 2, 4, 8)


def features(rows: int, cols: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen) * torch.rand(rows, 1, generator=gen) * 10
    return x + torch.randn(rows, 1, generator=gen) * 5


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("cols", [1, 3, 7, 8, 9, 33, 100])
def test_matches_numpy_reference_bitwise(bits, cols):
    x = features(23, cols, seed=cols)
    q = quantize(x, bits, seed=1234)
    codes, mins, scales = reference_quantize(x.numpy(), bits, 1234)
    assert q.packed.dtype == torch.uint8
    assert q.packed.shape == (23, (cols * bits + 7) // 8)
    assert np.array_equal(unpack_codes(q).numpy(), codes)
    assert np.array_equal(q.packed.numpy(), reference_pack(codes, bits))
    assert np.array_equal(q.mins.numpy(), mins)
    assert np.array_equal(q.scales.numpy(), scales)
    np.testing.assert_array_equal(dequantize(q).numpy(), reference_dequantize(codes, mins, scales))


@pytest.mark.parametrize("bits", BITS)
def test_codes_in_range_and_error_below_scale(bits):
    x = features(64, 45, seed=bits)
    q = quantize(x, bits, seed=7)
    codes = unpack_codes(q)
    assert int(codes.max()) <= (1 << bits) - 1
    deq = dequantize(q)
    assert deq.dtype == torch.float32 and deq.shape == x.shape
    err = (deq - x).abs()
    # stochastic rounding moves a value by less than one step; float32 slack on top
    bound = q.scales[:, None] * (1 + 1e-5) + 1e-6 * x.abs().amax(1, keepdim=True)
    assert torch.all(err <= bound)
    # both row extremes are representable: min is the zero point
    torch.testing.assert_close(q.mins, x.amin(1))


@pytest.mark.parametrize("bits", BITS)
def test_unbiased_over_many_draws(bits):
    # 4000 copies of the same 20-value row in one call: identical min/scale, and the
    # noise is drawn per element (row, column), so each copy is an independent draw
    row = features(1, 20, seed=11)
    draws = 4000
    q = quantize(row.expand(draws, 20), bits, seed=2024)
    mean = dequantize(q).double().mean(0)
    scale = float(q.scales[0])
    assert torch.all(q.scales == q.scales[0])
    # each draw's error is in (-scale, scale) with variance <= scale^2/4: the mean's
    # standard error is <= scale / (2 sqrt(draws)); allow 5 sigma (+ float32 slack)
    tol = 5 * scale / (2 * np.sqrt(draws)) + 1e-5 * row.abs().double()[0]
    assert torch.all((mean - row.double()[0]).abs() <= tol)
    # and the rounding really is random: codes of one column differ across copies
    codes = unpack_codes(q)
    frac = ((row[0] - q.mins[0]) / scale) % 1
    varied = (frac > 0.05) & (frac < 0.95)
    assert torch.all(codes[:, varied].double().std(0) > 0)


def test_rounding_is_actually_stochastic():
    x = torch.full((1, 1000), 0.3)
    x[0, 0] = 0.0
    x[0, 1] = 1.0  # scale = 1 at 1 bit: 0.3 rounds up with probability 0.3
    codes = unpack_codes(quantize(x, 1, seed=3))[0, 2:].double()
    assert 0.25 < codes.mean().item() < 0.35


def test_constant_rows_dequantize_exactly():
    x = torch.tensor([[2.5] * 13, [-1.0] * 13, [0.0] * 13])
    for bits in BITS:
        q = quantize(x, bits, seed=1)
        assert torch.all(q.scales == 0)
        assert torch.all(unpack_codes(q) == 0)
        assert torch.equal(dequantize(q), x)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("cols", [1, 5, 13, 31])
def test_pack_unpack_round_trip_for_any_codes(bits, cols):
    rng = np.random.default_rng(bits * 100 + cols)
    codes = rng.integers(0, 1 << bits, (6, cols)).astype(np.uint8)
    packed = reference_pack(codes, bits)
    q = QuantizedRows(torch.from_numpy(packed), torch.zeros(6), torch.ones(6), bits, cols)
    assert np.array_equal(unpack_codes(q).numpy(), codes)
    assert np.array_equal(dequantize(q).numpy(), codes.astype(np.float32))


def test_packed_layout_is_lsb_first_per_row():
    codes = np.array([[1, 2, 3, 0, 1]], dtype=np.uint8)
    packed = reference_pack(codes, 2)
    assert packed.tolist() == [[1 | 2 << 2 | 3 << 4, 1]]
    x = torch.tensor([[0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0]])
    q = quantize(x, 1, seed=0)  # levels are exactly 0/1: no randomness can change them
    assert q.packed.tolist() == [[0b00011010, 0b1]]


def test_seed_and_generator_reproducibility():
    x = features(10, 17, seed=2)
    a = quantize(x, 2, seed=99)
    b = quantize(x, 2, seed=99)
    c = quantize(x, 2, seed=100)
    assert torch.equal(a.packed, b.packed)
    assert not torch.equal(a.packed, c.packed)
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(quantize(x, 4, generator=g1).packed, quantize(x, 4, generator=g2).packed)


def test_payload_size_and_dtypes():
    q = quantize(features(10, 100, seed=1), 2, seed=0)
    assert q.packed.shape == (10, 25)
    assert q.nbytes() == 10 * 25 + 10 * 8
    assert q.mins.dtype == torch.float32 and q.scales.dtype == torch.float32
    assert q.shape == (10, 100)


def test_float64_and_half_inputs():
    x = features(5, 12, seed=4)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        xd = x.to(dtype)
        q = quantize(xd, 8, seed=1)
        err = (dequantize(q) - xd.float()).abs()
        assert torch.all(err <= q.scales[:, None] * (1 + 1e-5) + 1e-5)


def test_empty_inputs():
    q = quantize(torch.zeros(0, 5), 4, seed=0)
    assert q.packed.shape == (0, 3) and dequantize(q).shape == (0, 5)
    q = quantize(torch.zeros(3, 0), 4, seed=0)
    assert dequantize(q).shape == (3, 0)


@pytest.mark.parametrize("call,match", [
    (lambda: quantize(torch.randn(3, 4), 3), "'bits'"),
    (lambda: quantize(torch.randn(3, 4), 16), "'bits'"),
    (lambda: quantize(torch.randn(3), 4), "'x'"),
    (lambda: quantize(torch.ones(3, 4, dtype=torch.int64), 4), "'x'"),
    (lambda: quantize(torch.tensor([[1.0, float("nan")]]), 4), "'x'"),
    (lambda: quantize(torch.tensor([[1.0, float("inf")]]), 4), "'x'"),
    (lambda: quantize(torch.randn(3, 4), 4, seed=-1), "'seed'"),
    (lambda: quantize(torch.randn(3, 4), 4, seed=1, generator=torch.Generator()), "'seed'"),
    (lambda: dequantize(torch.zeros(3)), "'q'"),
    (lambda: dequantize(QuantizedRows(torch.zeros(2, 3, dtype=torch.uint8), torch.zeros(2),
                                      torch.zeros(2), 4, 9)), "'q.packed'"),
])
def test_bad_input(call, match):
    with pytest.raises(ValueError, match=match):
        call()
