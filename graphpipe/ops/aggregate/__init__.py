"""Neighbour aggregation (SpMM, SDDMM, edge softmax) over a local CSC block.

:mod:`.api` is the front (argument checks, backend choice, autograd); :mod:`.cpu` holds
the Numba kernels and :mod:`.triton` the GPU kernels; the ``reference_*`` functions
(:mod:`.reference`) are the oracles every backend is tested against."""

from .api import (
    CSCBlock,
    aggregate,
    aggregate_heads,
    edge_softmax,
    get_block,
    reference_aggregate,
    reference_aggregate_heads,
    reference_edge_softmax,
    reference_sddmm_scores,
    sddmm_scores,
)
from .sage import sage_mean

__all__ = ["CSCBlock", "aggregate", "aggregate_heads", "edge_softmax", "get_block",
           "reference_aggregate", "reference_aggregate_heads", "reference_edge_softmax",
           "reference_sddmm_scores", "sage_mean", "sddmm_scores"]
