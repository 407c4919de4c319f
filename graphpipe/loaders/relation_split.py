"""A random link split of one relation of a typed graph, with PyG's
``RandomLinkSplit`` semantics (``is_undirected=False``, ``add_negative_train_samples=False``):

- the relation's ``E`` edges are permuted (``seed``); the last ``int(test * E)`` are the
  ``test`` edges, the ``int(valid * E)`` before them ``valid``, the rest ``train``;
- message passing: ``train`` sees the train edges, ``valid`` the train edges, ``test`` the
  train and valid edges (PyG's ``train_data`` / ``val_data`` / ``test_data``
  ``edge_index``); every other relation is kept whole. The relation's reverse is rebuilt
  from the kept edges (PyG's ``rev_edge_types``), so no valid or test edge reaches a
  message in either direction; a reverse the graph already holds (``rev_<rel>``, as
  ``graphpipe ingest --add-reverse-edges`` writes it) is dropped and rebuilt the same way;
- ``valid`` / ``test`` negatives, one of two layouts:

  - shared (default): ``ceil(neg_ratio * n)`` pairs of a source-type and a
    destination-type node drawn uniformly, none an edge of the relation (PyG's
    ``negative_sampling``), shared by the split's positives (ogbl-collab's Hits@K
    layout, ``neg_src`` / ``neg_dst``);
  - per edge (``neg_per_edge=K``): for each positive ``(s, d)``, ``K`` destination-type
    nodes ``d'`` drawn uniformly with ``(s, d')`` not an edge of the relation
    (ogbl-citation2's and ogbl-wikikg2's MRR layout, ``neg_dst2d`` ``(n, K)``; drawn
    again where a draw hits an edge, kept after 64 rounds only when ``s`` links to
    almost every destination).

  Both come from the split's ``seed`` after the permutation, so the split's edges and
  message-passing graphs do not depend on the layout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from graphpipe.loaders.graph_data import GraphData, coo_to_csc
from graphpipe.ops.sampling import HeteroCSC
from graphpipe.ops.sampling.types import as_etype, etype_str
from graphpipe.store.link import LinkSplit

__all__ = ["RelationSplit", "random_relation_split"]


@dataclass
class RelationSplit:
    """The split of ``relation``: supervision edges and message-passing graphs per split.

    Attributes:
        relation: ``(src type, rel, dst type)``.
        edges: ``{"train", "valid", "test": LinkSplit}`` (``valid`` and ``test`` with
            ``neg_src`` / ``neg_dst``); IDs local to their type.
        graphs: ``{"train", "valid", "test": GraphData}`` the message-passing graph of each
            (reverse relations added, PyG's ``ToUndirected``).
    """

    relation: tuple[str, str, str]
    edges: dict[str, LinkSplit]
    graphs: dict[str, GraphData]


def _relation_edges(data: GraphData, et: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(src, dst, edge id)`` of relation ``et`` in CSC order (edge id: the input position)."""
    indptr, indices = data.typed_csc(et)
    dst = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(np.asarray(indptr)))
    ids = data.edge_order.get(et)
    return (np.asarray(indices, dtype=np.int64), dst,
            np.arange(dst.shape[0], dtype=np.int64) if ids is None else np.asarray(ids))


def _with_edges(data: GraphData, et: tuple, src: np.ndarray, dst: np.ndarray,
                ids: np.ndarray, drop: tuple | None) -> GraphData:
    """``data`` whose relation ``et`` holds only ``src -> dst`` (input positions ``ids``),
    without relation ``drop``, reverse relations added."""
    counts = data.graph.num_nodes
    indptr, indices, slots = coo_to_csc(src, dst, counts[et[0]], counts[et[2]], etype_str(et))
    csc = {k: v for k, v in data.graph.csc.items() if k != drop}
    csc[et] = (indptr, indices)
    order = {k: v for k, v in data.edge_order.items() if k not in (et, drop)}
    order[et] = ids[slots]
    feats = {k: v for k, v in data.edge_features.items() if k not in (et, drop)}
    graph = HeteroCSC.from_arrays(dict(counts), csc)
    kept = replace(data, graph=graph, edge_order=order, edge_features=feats, _rows={})
    return kept.with_reverse_relations(merge=True)


def _negatives(rng: np.random.Generator, count: int, num_src: int, num_dst: int,
               edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``count`` uniform ``(src, dst)`` pairs whose codes ``src * num_dst + dst`` are not in
    the sorted ``edges`` (drawn in rounds; fewer only when almost every pair is an edge)."""
    out: list[np.ndarray] = []
    have = 0
    for _ in range(64):
        if have >= count:
            break
        codes = rng.integers(0, num_src * num_dst, size=2 * (count - have) + 16, dtype=np.int64)
        if edges.shape[0]:
            pos = np.minimum(np.searchsorted(edges, codes), edges.shape[0] - 1)
            codes = codes[edges[pos] != codes]
        out.append(codes[: count - have])
        have += out[-1].shape[0]
    codes = np.concatenate(out) if out else np.empty(0, dtype=np.int64)
    return codes // num_dst, codes % num_dst


def _per_edge_negatives(rng: np.random.Generator, src: np.ndarray, k: int, num_dst: int,
                        edges: np.ndarray) -> np.ndarray:
    """int64 ``(n, k)``: ``k`` uniform destinations per source ``src[i]`` whose pair
    ``src[i] * num_dst + d`` is not in the sorted ``edges`` (the hits drawn again, at most
    64 rounds).

    >>> edges = np.array([0 * 3 + 1, 0 * 3 + 2])                  # source 0 links to 1 and 2
    >>> _per_edge_negatives(np.random.default_rng(0), np.array([0, 0]), 4, 3, edges).tolist()
    [[0, 0, 0, 0], [0, 0, 0, 0]]
    """
    out = rng.integers(0, num_dst, size=(src.shape[0], k), dtype=np.int64)
    if not edges.shape[0]:
        return out
    for _ in range(64):
        codes = src[:, None] * num_dst + out
        pos = np.minimum(np.searchsorted(edges, codes), edges.shape[0] - 1)
        hit = edges[pos] == codes
        count = int(hit.sum())
        if not count:
            break
        out[hit] = rng.integers(0, num_dst, size=count, dtype=np.int64)
    return out


def random_relation_split(data: GraphData, relation: Any, *, valid: float = 0.1,
                          test: float = 0.2, neg_ratio: float = 1.0,
                          neg_per_edge: int | None = None, seed: int = 0) -> RelationSplit:
    """The random link split of ``relation`` of the typed graph ``data`` (module docstring;
    ``data`` as stored, without added reverse relations). ``valid`` / ``test``: fractions
    of the relation's edges (PyG's defaults 0.1 / 0.2); ``neg_ratio``: shared negatives
    per valid / test positive; ``neg_per_edge``: ``K`` negatives of each valid / test
    positive instead (``neg_dst2d``, for MRR).

    >>> data = GraphData.from_dicts({"author": 4, "paper": 5},
    ...     {("author", "writes", "paper"): (np.array([0, 0, 1, 2, 3, 3, 1, 2, 0, 3]),
    ...                                      np.array([0, 1, 1, 2, 3, 4, 4, 0, 2, 2]))})
    >>> split = random_relation_split(data, "author___writes___paper", valid=0.2, test=0.2)
    >>> [split.edges[s].num_pos for s in ("train", "valid", "test")]
    [6, 2, 2]
    >>> [split.graphs[s].num_edges_dict[("paper", "rev_writes", "author")]
    ...  for s in ("train", "valid", "test")]
    [6, 6, 8]
    >>> split = random_relation_split(data, "author___writes___paper", valid=0.2, test=0.2,
    ...                               neg_per_edge=3)
    >>> split.edges["test"].neg_dst2d.shape, split.edges["test"].neg_src
    ((2, 3), None)
    """
    et = as_etype(relation)
    if et not in data.graph.csc:
        raise ValueError(f"the graph has no relation {etype_str(et)!r} (relations: "
                         f"{', '.join(etype_str(e) for e in data.edge_types)})")
    for name, value in (("valid", valid), ("test", test)):
        if not 0.0 <= float(value) < 1.0:
            raise ValueError(f"'{name}' must be a fraction in [0, 1) (got {value!r})")
    if float(valid) + float(test) >= 1.0:
        raise ValueError(f"'valid' + 'test' must leave training edges (got {valid} + {test})")
    if not neg_ratio > 0:
        raise ValueError(f"'neg_ratio' must be positive (got {neg_ratio!r})")
    if neg_per_edge is not None and (isinstance(neg_per_edge, bool) or int(neg_per_edge) < 1):
        raise ValueError(f"'neg_per_edge' must be a positive integer (got {neg_per_edge!r})")
    src, dst, ids = _relation_edges(data, et)
    num = src.shape[0]
    n_val, n_test = int(valid * num), int(test * num)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(num)
    n_train = num - n_val - n_test
    parts = {"train": perm[:n_train], "valid": perm[n_train:n_train + n_val],
             "test": perm[n_train + n_val:]}
    num_src, num_dst = data.graph.num_nodes[et[0]], data.graph.num_nodes[et[2]]
    codes = np.unique(src * num_dst + dst)
    edges = {"train": LinkSplit(src[parts["train"]], dst[parts["train"]])}
    for name in ("valid", "test"):
        p = parts[name]
        if neg_per_edge is not None:
            neg2d = _per_edge_negatives(rng, src[p], int(neg_per_edge), num_dst, codes)
            edges[name] = LinkSplit(src[p], dst[p], neg_dst2d=neg2d)
            continue
        neg_src, neg_dst = _negatives(rng, math.ceil(neg_ratio * p.shape[0]), num_src, num_dst, codes)
        edges[name] = LinkSplit(src[p], dst[p], neg_src=neg_src, neg_dst=neg_dst)
    rev = (et[2], "rev_" + et[1], et[0])
    drop = rev if rev in data.graph.csc and et[0] != et[2] else None
    seen = np.concatenate([parts["train"], parts["valid"]])
    graphs = {"train": _with_edges(data, et, src[parts["train"]], dst[parts["train"]],
                                   ids[parts["train"]], drop)}
    graphs["valid"] = graphs["train"]
    graphs["test"] = _with_edges(data, et, src[seen], dst[seen], ids[seen], drop)
    return RelationSplit(et, edges, graphs)
