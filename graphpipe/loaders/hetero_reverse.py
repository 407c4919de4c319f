"""Reverse relations for a typed graph, as PyG's ``T.ToUndirected()`` adds them.

OGB ships each relation in one direction only (ogbn-mag: ``author -writes-> paper``,
``paper -has_topic-> field_of_study``...), so messages never flow from a paper's fields
or its authors' institutions back to the paper. :func:`add_reverse_relations` returns
the same graph with, for every relation ``(s, r, d)`` between two types, a relation
``(d, "rev_" + r, s)`` holding the transposed edges, and every relation within one type
(``paper -cites-> paper``) made symmetric (both directions, duplicates dropped): PyG's
``ToUndirected(merge=True)`` on a ``HeteroData``. Built in memory (one ``(E,)`` index per
new relation); features, labels and splits are shared, not copied. A reverse edge's
``e_id`` is its forward edge's (PyG's ``ToUndirected`` flips ``edge_index`` in place);
a merged same-type relation reports CSC slots.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from graphpipe.loaders.hetero_graph_data import HeteroGraphData, coo_to_csc
from graphpipe.ops.sampling.hetero_types import HeteroCSC

__all__ = ["add_reverse_relations"]


def _coo(indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` int64 of a CSC by destination."""
    indptr = np.asarray(indptr, dtype=np.int64)
    dst = np.repeat(np.arange(indptr.shape[0] - 1, dtype=np.int64), np.diff(indptr))
    return np.asarray(indices, dtype=np.int64), dst


def _symmetric(indptr: np.ndarray, indices: np.ndarray, n: int, where: str
               ) -> tuple[np.ndarray, np.ndarray]:
    src, dst = _coo(indptr, indices)
    pairs = np.unique(np.concatenate([dst * n + src, src * n + dst]))
    csc_indptr, csc_indices, _ = coo_to_csc(pairs % n, pairs // n, n, n, where)
    return csc_indptr, csc_indices


def add_reverse_relations(data: HeteroGraphData) -> HeteroGraphData:
    """``data`` with reverse relations added (see the module docstring).

    >>> import numpy as np
    >>> data = HeteroGraphData.from_dicts(
    ...     {"paper": 2, "author": 3},
    ...     {("author", "writes", "paper"): (np.array([0, 2]), np.array([1, 1])),
    ...      ("paper", "cites", "paper"): (np.array([0]), np.array([1]))})
    >>> both = add_reverse_relations(data)
    >>> both.edge_types
    [('author', 'writes', 'paper'), ('paper', 'cites', 'paper'), ('paper', 'rev_writes', 'author')]
    >>> [a.tolist() for a in both.typed_csc(("paper", "rev_writes", "author"))]
    [[0, 1, 1, 2], [1, 1]]
    >>> both.edge_order[("paper", "rev_writes", "author")].tolist()   # the forward edges' IDs
    [0, 1]
    >>> [a.tolist() for a in both.typed_csc(("paper", "cites", "paper"))]
    [[0, 1, 2], [1, 0]]
    """
    graph, counts = data.graph, data.graph.num_nodes
    csc = dict(graph.csc)
    order = dict(data.edge_order)
    names = set(graph.edge_types)
    for et in list(graph.edge_types):
        s, r, d = et
        if r.startswith("rev_") and (d, r[4:], s) in names:
            continue  # already a reverse (``graphpipe ingest --add-reverse-edges``)
        indptr, indices = graph.csc[et]
        where = "___".join(et)
        if s == d:
            csc[et] = _symmetric(indptr, indices, counts[s], where)
            order.pop(et, None)  # merged edges have no single input position
            continue
        rev = (d, "rev_" + r, s)
        if rev in names:
            continue
        src, dst = _coo(indptr, indices)
        rev_indptr, rev_indices, slots = coo_to_csc(dst, src, counts[d], counts[s], where)
        csc[rev] = (rev_indptr, rev_indices)
        # a reverse edge's e_id is its forward edge's (PyG flips edge_index in place)
        order[rev] = data.edge_order[et][slots] if et in data.edge_order else slots
    new_graph = HeteroCSC.from_arrays(counts, csc)
    return replace(data, graph=new_graph, edge_order=order)
