"""Negative sampling for link prediction: :func:`negative_sample` (:mod:`.api`,
``backend="auto" | "reference" | "cpu"``, the same draws on each), uniform or in
proportion to a node weight (:func:`degree_weight`); the contract and oracle in
:mod:`.reference`, the Numba kernels in :mod:`.cpu`."""

from .api import BACKENDS, degree_weight, negative_sample
from .reference import negative_sample_reference

__all__ = ["BACKENDS", "degree_weight", "negative_sample", "negative_sample_reference"]
