"""Row widths (Sylvie's degree-ranked rule against a plain-Python ECDF) and the halo codec:
every decoded value within one quantization step of the original, float32 rows exact,
the buffer exactly the documented number of bytes, rounding unbiased."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graphpipe.train.partition_parallel import RowCodec, auto_bits, row_bits


def _auto_oracle(degree: list[int]) -> list[int]:
    n = len(degree)
    out = []
    for d in degree:
        p = sum(1 for e in degree if e <= d) / n
        out.append(1 if p < 0.25 else 2 if p < 0.5 else 4 if p < 0.75 else 8)
    return out


@pytest.mark.parametrize("seed", range(5))
def test_auto_bits_matches_ecdf(seed: int) -> None:
    rng = np.random.default_rng(seed)
    degree = rng.integers(1, 30, size=int(rng.integers(1, 200)))
    assert auto_bits(degree).tolist() == _auto_oracle(degree.tolist())
    assert auto_bits(degree)[np.argmax(degree)] == 8


def test_row_bits_fixed_and_bad() -> None:
    assert row_bits(4, np.array([1, 2, 3])).tolist() == [4, 4, 4]
    assert row_bits(32, np.array([1])).tolist() == [32]
    for bad in (3, 16, "x", True):
        with pytest.raises(ValueError, match="bits"):
            row_bits(bad, np.array([1]))


@pytest.mark.parametrize("dim", [1, 7, 33])
def test_codec_bound_and_size(dim: int) -> None:
    rng = np.random.default_rng(dim)
    bits = rng.choice([1, 2, 4, 8, 32], size=300)
    rows = torch.from_numpy(rng.normal(size=(300, dim)).astype(np.float32) * 3)
    rows[5] = 2.5  # a constant row decodes exactly
    codec = RowCodec(bits, dim)
    expected = sum(4 * dim if b == 32 else (dim * b + 7) // 8 + 8 for b in bits)
    buffer = codec.encode(rows, seed=11)
    assert codec.nbytes == expected == buffer.numel()
    out = codec.decode(buffer)
    err = (out - rows).abs().amax(1)
    span = rows.amax(1) - rows.amin(1)
    step = torch.tensor([0.0 if b == 32 else 1.0 / ((1 << int(b)) - 1) for b in bits]) * span
    assert torch.all(err <= step * (1 + 1e-5) + 1e-6)
    assert torch.allclose(codec.error_bound(rows), step, rtol=1e-6, atol=0)
    assert torch.equal(out[torch.from_numpy(bits == 32)], rows[torch.from_numpy(bits == 32)])
    assert torch.equal(out[5], rows[5])


def test_codec_unbiased() -> None:
    rows = torch.tensor([[0.0, 0.3, 1.0, 0.71]]).repeat(4000, 1)
    codec = RowCodec(np.full(4000, 1), 4)
    mean = codec.decode(codec.encode(rows, seed=3)).mean(0)
    assert torch.allclose(mean, rows[0], atol=0.03)


def test_decode_refuses_wrong_buffer() -> None:
    codec = RowCodec(np.array([4, 4]), 3)
    with pytest.raises(ValueError, match="bytes"):
        codec.decode(torch.zeros(codec.nbytes + 1, dtype=torch.uint8))
