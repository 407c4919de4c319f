"""One conformance suite for every backend of ``negative_sample(backend=...)``: the draws
of the plain-Python oracle bit for bit, the right distribution, the same refusals."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.negative import degree_weight, negative_sample, negative_sample_reference
from graphpipe.ops.negative.cpu import PARALLEL_FROM

CASES = [  # num_samples, num_nodes, seed, weight
    (200, 17, 0, None),
    (64, 1, 5, None),
    (0, 9, 1, None),
    (300, 6, 2**63 + 11, np.array([0.0, 2.0, 0.0, 1.0, 5.0, 0.0])),
    (128, 4, 9, np.array([1, 1, 1, 1])),
    (PARALLEL_FROM + 5, 1000, 3, None),  # the parallel kernels
    (PARALLEL_FROM + 5, 50, 4, np.arange(50) % 7),
]


class NegativeTests:
    """Cases every backend must pass."""

    backend = "reference"

    def draw(self, *args, **kwargs) -> np.ndarray:
        return negative_sample(*args, backend=self.backend, **kwargs)

    @pytest.mark.parametrize("case", range(len(CASES)))
    def test_same_draws_as_the_oracle(self, case) -> None:
        num, n, seed, weight = CASES[case]
        got = self.draw(num, n, seed=seed, weight=weight)
        cdf, last = (None, -1) if weight is None else (np.cumsum(weight.astype(float)),
                                                       int(np.flatnonzero(weight)[-1]))
        want = negative_sample_reference(num, n, seed % 2**64, cdf, last)
        assert got.dtype == np.int64 and got.shape == (num,)
        assert np.array_equal(got, want)
        assert got.size == 0 or (got.min() >= 0 and got.max() < n)
        if weight is not None:
            assert (weight[got] > 0).all()  # a node of weight 0 is never drawn

    def test_uniform_distribution(self) -> None:
        counts = np.bincount(self.draw(40_000, 8, seed=1), minlength=8)
        chi2 = ((counts - 5000.0) ** 2 / 5000.0).sum()
        assert chi2 < 24.3  # chi-square, 7 dof, p = 0.001

    def test_degree_proportional_distribution(self) -> None:
        weight = degree_weight(np.array([0, 1, 3, 3, 7, 15]))  # degrees 1, 2, 0, 4, 8
        counts = np.bincount(self.draw(45_000, 5, seed=2, weight=weight), minlength=5)
        expected = 45_000 * weight / weight.sum()
        assert counts[2] == 0
        keep = expected > 0
        chi2 = ((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum()
        assert chi2 < 16.3  # 3 dof, p = 0.001

    def test_seed_changes_the_draws(self) -> None:
        assert not np.array_equal(self.draw(50, 1000, seed=1), self.draw(50, 1000, seed=2))

    @pytest.mark.parametrize("kwargs, message", [
        ({"num_samples": -1, "num_nodes": 3}, "num_samples"),
        ({"num_samples": 2, "num_nodes": 0}, "num_nodes"),
        ({"num_samples": 2, "num_nodes": 2**32}, "2\\*\\*32"),
        ({"num_samples": 2, "num_nodes": 3, "weight": np.ones(4)}, "'weight' must be a numeric"),
        ({"num_samples": 2, "num_nodes": 3, "weight": np.array([1.0, -1.0, 1.0])}, "non-negative"),
        ({"num_samples": 2, "num_nodes": 2, "weight": np.zeros(2)}, "positive entry"),
        ({"num_samples": 2, "num_nodes": 2, "weight": np.array([np.nan, 1.0])}, "finite"),
    ])
    def test_bad_arguments(self, kwargs, message) -> None:
        with pytest.raises(ValueError, match=message):
            self.draw(seed=0, **kwargs)


class TestReference(NegativeTests):
    backend = "reference"


class TestCpu(NegativeTests):
    backend = "cpu"


class TestAuto(NegativeTests):
    backend = "auto"


def test_unknown_backend() -> None:
    with pytest.raises(ValueError, match="backend"):
        negative_sample(3, 3, seed=0, backend="gpu")
