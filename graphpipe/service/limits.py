"""Bounds on what one client request may make the server do, checked before any work.

Every limit here is checked on the request as received, before the server samples,
gathers or allocates anything in proportion to it:

- JSON documents (the DoExchange descriptor command, DoAction bodies, request
  app_metadata) are refused above a byte size and a nesting depth (a deeply nested
  document would otherwise exhaust the parser's recursion);
- ``fanouts`` are at most :data:`MAX_LAYERS` integers in ``[-1, MAX_FANOUT]``;
- :func:`sample_bytes_bound` is an upper bound of the bytes sampling one seed batch
  allocates and answers (``n_id``, each hop's ``indptr``/``indices``/``edge_ids``, the
  ID-map table, the kernel's scratch, and the feature / label rows when asked), from the
  seeds' exact first-hop degrees, the graph's largest in-degree, and ``N`` and ``E``
  as caps. The server refuses a request batch whose bounds add up to more than its
  ``--max-request-bytes``; :func:`typed_bytes_bound` is its typed twin (per relation,
  from each relation's largest in-degree and each type's node count).

Every refusal is a ``ValueError`` naming the field, the value and the limit (the
server answers it with status INVALID_ARGUMENT).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["MAX_FANOUT", "MAX_JSON_BYTES", "MAX_JSON_DEPTH", "MAX_LAYERS", "MAX_METADATA_BYTES",
           "GraphShape", "check_fanouts", "effective_fanouts", "parse_json", "sample_bytes_bound",
           "typed_bytes_bound"]

#: most hops of a ``sample`` request
MAX_LAYERS = 16
#: largest fanout (with ``replace`` the request bound limits it further)
MAX_FANOUT = (1 << 31) - 1
#: most bytes of a descriptor command or an action body
MAX_JSON_BYTES = 64 << 10
#: most bytes of a request batch's app_metadata (``{"free": [offset, ...]}``)
MAX_METADATA_BYTES = 4 << 20
#: deepest nesting of a JSON document (graphpipe's documents nest at most 2 deep)
MAX_JSON_DEPTH = 4
#: bytes per slot of the kernel's ID-map table (key and value), at load <= 0.5
_TABLE_BYTES_PER_NODE = 2 * (8 + 4)


def parse_json(data: bytes, what: str, *, max_bytes: int = MAX_JSON_BYTES,
               max_depth: int = MAX_JSON_DEPTH, expected: str = "UTF-8 JSON") -> Any:
    """The JSON document ``data``; ValueError naming ``what`` when it is not UTF-8 JSON
    (the message says it must be ``expected``), is larger than ``max_bytes`` or nests
    deeper than ``max_depth``."""
    data = bytes(data)
    if len(data) > max_bytes:
        raise ValueError(f"{what} is {len(data)} bytes; the limit is {max_bytes}")
    try:
        doc = json.loads(data.decode("utf-8"))
    except RecursionError:
        raise ValueError(f"{what} nests deeper than {max_depth} levels") from None
    except ValueError as exc:  # not UTF-8, not JSON, an integer of more than 4300 digits
        raise ValueError(f"{what} must be {expected} (got {data[:60]!r}: {str(exc)[:200]})") from None
    if _depth(doc, max_depth + 1) > max_depth:
        raise ValueError(f"{what} nests deeper than {max_depth} levels")
    return doc


def _depth(doc: Any, stop: int) -> int:
    """Nesting depth of ``doc`` (a scalar is 0), counted no further than ``stop``."""
    if stop <= 0 or not isinstance(doc, (list, dict)):
        return 0
    children = doc.values() if isinstance(doc, dict) else doc
    return 1 + max((_depth(c, stop - 1) for c in children), default=0)


def check_fanouts(value: Any) -> list[int]:
    """``fanouts`` of a request: 1..MAX_LAYERS integers in [-1, MAX_FANOUT] (bools refused)."""
    if not isinstance(value, list) or not value:
        raise ValueError(f"'fanouts' must be a non-empty list of integers (got {value!r:.80})")
    if len(value) > MAX_LAYERS:
        raise ValueError(f"'fanouts' may have at most {MAX_LAYERS} hops (got {len(value)})")
    for f in value:
        if isinstance(f, bool) or not isinstance(f, int) or f < -1:
            raise ValueError(f"'fanouts' entries must be integers >= -1 (got {value!r:.80})")
        if f > MAX_FANOUT:
            raise ValueError(f"'fanouts' entries must be at most {MAX_FANOUT} (got {f:.3g})")
    return [int(f) for f in value]


class GraphShape:
    """What the bound needs to know of a graph: ``indptr`` (int64 ``(N+1,)``), ``N``,
    ``E`` and the largest in-degree (computed once, in chunks)."""

    def __init__(self, indptr: np.ndarray, *, chunk: int = 1 << 22):
        self.indptr = indptr
        self.num_nodes = int(indptr.shape[0]) - 1
        self.num_edges = int(indptr[-1]) if self.num_nodes >= 0 else 0
        max_degree = 0
        for lo in range(0, max(self.num_nodes, 0), chunk):
            part = np.asarray(indptr[lo:min(lo + chunk, self.num_nodes) + 1])
            max_degree = max(max_degree, int(np.diff(part).max()))
        self.max_degree = max_degree


def effective_fanouts(fanouts: Sequence[int], replace: bool, max_degree: int) -> list[int]:
    """The fanouts the kernel gets: without replacement a fanout >= the largest in-degree
    takes every neighbour of every node, exactly as -1 does (same edges, same order), so
    it is passed as -1 (no scratch sized by the fanout)."""
    if replace:
        return list(fanouts)
    return [-1 if f >= max_degree else f for f in fanouts]


def sample_bytes_bound(graph: GraphShape, seeds: np.ndarray, fanouts: Sequence[int], replace: bool,
                       row_bytes: int = 0, seed_row_bytes: int = 0) -> int:
    """Upper bound of the bytes sampling ``seeds`` (int64 ``(B,)``) allocates and answers.

    ``fanouts`` as :func:`effective_fanouts` returns them; ``row_bytes``: feature bytes
    per sampled node, ``seed_row_bytes``: label bytes per seed (0 when not asked).
    Python integers: no overflow whatever the fanouts.
    """
    nodes = int(seeds.shape[0])
    total = 8 * nodes + seed_row_bytes * nodes
    scratch = max([f for f in fanouts if f > 32], default=0)
    total += 24 * scratch
    for hop, f in enumerate(fanouts):
        if hop == 0 and nodes:
            degrees = graph.indptr[seeds + 1] - graph.indptr[seeds]
            edges = int(degrees.sum()) if f < 0 else \
                (nodes * f if replace else int(np.minimum(degrees, f).sum()))
        else:
            per_node = graph.max_degree if f < 0 else (f if replace else min(f, graph.max_degree))
            edges = nodes * per_node
            if not replace or f < 0:  # distinct destinations: each stored edge at most once
                edges = min(edges, graph.num_edges)
        total += 8 * (nodes + 1) + 16 * edges
        nodes = min(nodes + edges, max(graph.num_nodes, nodes))
    return total + (8 + _TABLE_BYTES_PER_NODE + row_bytes) * nodes


def typed_bytes_bound(num_nodes: dict[str, int], max_degree: dict[Any, int], ntype: str, seeds: int,
                      fanouts: dict[Any, list[int]]) -> int:
    """Upper bound of the bytes one typed sample of ``seeds`` seeds of ``ntype`` takes
    (its ``n_id``, edges and hop counts, 8 bytes each): per hop, every relation's edges
    are at most its destination frontier times its fanout (or its largest in-degree),
    and a type's next frontier at most the edges leaving it and its node count.
    ``num_nodes``: ``{ntype: N_t}``; ``max_degree`` and ``fanouts`` by relation
    ``(src, rel, dst)``. Python integers: no overflow whatever the request says.

    >>> et = ("a", "to", "a")
    >>> typed_bytes_bound({"a": 10}, {et: 3}, "a", 2, {et: [5, 5]})  # 2 + 6 + 10 nodes, 6 + 18 edges
    1120
    """
    frontier = {t: 0 for t in num_nodes}
    frontier[ntype] = seeds
    nodes, edges = seeds, 0
    hops = len(next(iter(fanouts.values()), []))
    for hop in range(hops):
        nxt = {t: 0 for t in num_nodes}
        for et, per_hop in fanouts.items():
            f = per_hop[hop]
            width = max_degree[et] if f < 0 else min(f, max_degree[et]) if f else 0
            e = frontier[et[2]] * width
            edges += e
            nxt[et[0]] += e
        frontier = {t: min(n, num_nodes[t]) for t, n in nxt.items()}
        nodes += sum(frontier.values())
    return 8 * (2 * nodes + 4 * edges) + 64 * len(fanouts)
