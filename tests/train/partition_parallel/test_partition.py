"""local_partition against plain set computations on the whole graph: the ranks' inner
nodes cover the graph once, the halo is exactly the outside sources of inner nodes'
in-edges, the local CSC is the global one relabelled, and each send list is the peer's
halo block from this rank in the same order."""

from __future__ import annotations

import numpy as np
import pytest

from graphpipe.ops.partition import metis_partition
from graphpipe.synthetic import community_graph
from graphpipe.train.partition_parallel import local_partition


def _csc(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(dst, kind="stable")
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(dst, minlength=n), out=indptr[1:])
    return indptr, src[order].astype(np.int64)


@pytest.mark.parametrize("num_parts,directed", [(2, False), (3, False), (4, True)])
def test_partition_matches_sets(num_parts: int, directed: bool) -> None:
    g = community_graph(400, 4, avg_degree=5, feature_dim=4, seed=1, undirected=not directed)
    src, dst = g.src, g.dst
    src = np.concatenate([src, [7, 7]])  # a self loop and a duplicate edge
    dst = np.concatenate([dst, [7, int(g.dst[g.src == 7][0]) if (g.src == 7).any() else 7]])
    n = g.num_nodes
    indptr, indices = _csc(src, dst, n)
    parts = metis_partition(indptr, indices, num_parts, seed=0).parts
    locs = [local_partition(indptr, indices, parts, r, num_parts) for r in range(num_parts)]
    assert np.array_equal(np.sort(np.concatenate([p.inner for p in locs])), np.arange(n))
    in_deg = np.bincount(dst[src != dst], minlength=n)
    out_deg = np.bincount(src[src != dst], minlength=n)
    for r, p in enumerate(locs):
        inner = set(np.flatnonzero(parts == r).tolist())
        halo = sorted({int(s) for s, d in zip(src, dst) if d in inner and s not in inner},
                      key=lambda v: (parts[v], v))
        assert p.halo.tolist() == halo
        local = p.local_ids
        for i, u in enumerate(p.inner):  # the local CSC is the global one, relabelled
            got = local[p.indices[p.indptr[i]:p.indptr[i + 1]]]
            assert got.tolist() == indices[indptr[u]:indptr[u + 1]].tolist()
        assert np.array_equal(p.in_degree, in_deg[local])
        assert np.array_equal(p.out_degree, out_deg[local])
        for q in range(num_parts):
            block = p.halo[p.recv_slice(q)]
            assert (parts[block] == q).all()
            # what q sends to r is r's halo block from q, row for row
            assert np.array_equal(locs[q].inner[locs[q].send[r]], block)
        assert p.send[r].size == 0 and p.recv_slice(r).start == p.recv_slice(r).stop


def test_bad_input() -> None:
    indptr, indices = np.array([0, 1, 2]), np.array([1, 0])
    with pytest.raises(ValueError, match="parts"):
        local_partition(indptr, indices, np.array([0, 2]), 0, 2)
    with pytest.raises(ValueError, match="rank"):
        local_partition(indptr, indices, np.array([0, 1]), 2, 2)
    with pytest.raises(ValueError, match="indices"):
        local_partition(indptr, np.array([1, 5]), np.array([0, 1]), 0, 2)
