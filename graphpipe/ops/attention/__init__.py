"""Sparse attention over a CSR pattern (:mod:`.api`, kernels in :mod:`.cpu` and
:mod:`.triton`) and cluster-sparse attention over dense cluster blocks plus a sparse
residual (:mod:`.cluster_sparse`)."""

from .api import (
    AttentionPattern,
    gather_scatter_attention,
    get_pattern,
    permute_pattern,
    reference_sparse_attention,
    sparse_attention,
)

__all__ = ["AttentionPattern", "gather_scatter_attention", "get_pattern", "permute_pattern",
           "reference_sparse_attention", "sparse_attention"]
