"""What a sampler reads and returns.

One relation (a homogeneous graph): the store's CSC ``(indptr, indices)`` in, one
:class:`SampledBlock` per hop (DGL's block convention, local IDs) inside a
:class:`SampleOutput` out; every backend of :func:`graphpipe.ops.sampling.sample_neighbors`
and the random-walk sampler build it with :func:`assemble`.

Several relations (a typed graph): :class:`HeteroCSC` (one CSC by destination per
relation, checked once) in, :class:`HeteroSampleOutput` out, with per-relation fanouts
(:func:`resolve_fanouts`), the seeds per node type (:func:`check_seed_dict`) and the random
key of a relation (:func:`relation_key`). Edge types are ``(src_type, rel, dst_type)``
tuples; their string form is ``"src___rel___dst"`` (OGB's folder names, :func:`etype_str`).
Local IDs are *typed*: each node type has its own ``0..n_t-1`` numbering (``n_id[t][i]`` is
the global ID, in type ``t``'s own ID space, of local node ``i`` of type ``t``). A
homogeneous graph is the one-relation case ``(_N, _E, _N)`` (DGL's names,
:data:`DEFAULT_ETYPE`, :meth:`HeteroCSC.homogeneous`), whose random stream is the
homogeneous sampler's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from graphpipe.ops._core.checks import check_fanouts, check_node_ids
from graphpipe.ops._core.rng import mix64_py

__all__ = ["DEFAULT_ETYPE", "DEFAULT_NTYPE", "FRONTIERS", "EdgeType", "HeteroCSC",
           "HeteroSampleOutput", "SampleOutput", "SampledBlock", "as_etype", "assemble",
           "check_frontier", "check_seed_dict", "etype_str", "relation_key", "relation_salt", "resolve_fanouts",
           "split_graph_args"]

FRONTIERS = ("new", "all")
"""Which nodes a hop after the first expands: ``"new"`` only the nodes the hop before
reached first (PyG's ``NeighborLoader``, torch-sparse / pyg-lib ``neighbor_sample``);
``"all"`` every node known so far, seeds included (DGL's ``NeighborSampler``)."""


def check_frontier(frontier: str) -> str:
    """``frontier`` if it is one of :data:`FRONTIERS`, else ``ValueError``."""
    if not isinstance(frontier, str) or frontier not in FRONTIERS:
        raise ValueError(f"'frontier' must be one of {FRONTIERS} (got {frontier!r})")
    return frontier


@dataclass
class SampledBlock:
    """One layer of a sampled subgraph in DGL's block convention (local IDs).

    Attributes:
        indptr: int64 (num_dst+1,) local CSC offsets by destination.
        indices: int64 (num_edges,) local source IDs in ``[0, num_src)``.
        num_dst: destinations are local IDs ``0..num_dst-1`` (a prefix of the sources).
        num_src: number of source nodes (local IDs ``0..num_src-1``).
        edge_ids: int64 (num_edges,) position of each sampled edge in the store's CSC
            ``indices`` (edge slot), for edge features; -1 for edges that are not graph
            edges (random-walk neighbourhoods).
        edge_weight: optional float32 (num_edges,) weight per edge (random-walk visit
            counts); ``None`` for uniform sampling.
    """

    indptr: np.ndarray
    indices: np.ndarray
    num_dst: int
    num_src: int
    edge_ids: np.ndarray
    edge_weight: np.ndarray | None = None

    @property
    def num_edges(self) -> int:
        return int(self.indices.shape[0])

    def dst_of_edges(self) -> np.ndarray:
        """int64 (num_edges,) local destination ID of every edge (CSC expanded)."""
        return np.repeat(np.arange(self.num_dst, dtype=np.int64), np.diff(self.indptr))


@dataclass
class SampleOutput:
    """A sampled multi-hop subgraph of one batch.

    Attributes:
        n_id: int64 (num_nodes,) global IDs; seeds first (local 0..B-1 in the given
            order), then each hop's new nodes in discovery order.
        blocks: ``blocks[0]`` is the outermost layer (input layer, ``num_src ==
            len(n_id)``); ``blocks[-1]`` has ``num_dst == batch_size`` (DGL/PyG model
            order). ``blocks[l].num_dst == blocks[l+1].num_src``.
        batch_size: number of seeds.
        num_sampled_nodes: per hop, seeds first (length ``len(fanouts)+1``).
        num_sampled_edges: per hop, seed hop first (length ``len(fanouts)``).
        batch: int64 ``(num_nodes,)`` for a disjoint sample (one tree per seed, IDs may
            repeat across trees): the tree of each node; None otherwise.
        seed_time: int64 ``(batch_size,)`` for a temporal sample: each seed's time (every
            node of its tree was sampled no later than it); None otherwise.
    """

    n_id: np.ndarray
    blocks: list[SampledBlock]
    batch_size: int
    num_sampled_nodes: list[int] = field(default_factory=list)
    num_sampled_edges: list[int] = field(default_factory=list)
    batch: np.ndarray | None = None
    seed_time: np.ndarray | None = None


def assemble(n_id: np.ndarray, batch_size: int, hops: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]) -> SampleOutput:
    """A :class:`SampleOutput` from ``n_id`` and per-hop ``(indptr, local_src, edge_ids, num_dst,
    num_src)``, seed hop first (blocks come out outermost first)."""
    blocks = [
        SampledBlock(indptr=ip, indices=src, num_dst=nd, num_src=ns, edge_ids=eid)
        for ip, src, eid, nd, ns in reversed(hops)
    ]
    num_sampled_nodes = [batch_size] + [ns - nd for (_, _, _, nd, ns) in hops]
    return SampleOutput(
        n_id=n_id,
        blocks=blocks,
        batch_size=batch_size,
        num_sampled_nodes=num_sampled_nodes,
        num_sampled_edges=[int(h[1].shape[0]) for h in hops],
    )


# --------------------------------------------------------------------------------------
# Typed graphs (several relations)

EdgeType = tuple[str, str, str]
_CHUNK = 1 << 22

DEFAULT_NTYPE = "_N"
"""The node type of a homogeneous graph (DGL's name)."""
DEFAULT_ETYPE: EdgeType = (DEFAULT_NTYPE, "_E", DEFAULT_NTYPE)
"""The relation of a homogeneous graph (DGL's ``("_N", "_E", "_N")``); its random key is the
hop key (:func:`relation_key`), so sampling it as a typed graph draws what the
homogeneous sampler draws."""


def etype_str(etype: EdgeType) -> str:
    """``"src___rel___dst"``, the string form of an edge type (OGB's folder name)."""
    return "___".join(etype)


def as_etype(key: Any) -> EdgeType:
    """``(src, rel, dst)`` from a 3-tuple of strings or ``"src___rel___dst"``."""
    if isinstance(key, str):
        parts = key.split("___")
        if len(parts) == 3:
            return (parts[0], parts[1], parts[2])
    elif isinstance(key, (tuple, list)) and len(key) == 3 and all(isinstance(p, str) for p in key):
        return (key[0], key[1], key[2])
    raise ValueError(f"edge types must be (src, rel, dst) tuples or 'src___rel___dst' (got {key!r})")


def _check_relation(name: str, indptr: Any, indices: Any, num_dst: int, num_src: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(indptr, indices)`` once they form a CSC of ``num_dst`` destinations whose every
    index is a source ID in ``[0, num_src)``; ``ValueError`` naming the relation otherwise.
    Reads the arrays in chunks (memory maps are not copied whole)."""
    indptr, indices = np.asarray(indptr), np.asarray(indices)
    if indptr.ndim != 1 or indptr.shape[0] != num_dst + 1 or indptr.dtype.kind not in "iu":
        raise ValueError(f"relation {name!r}: indptr must be ({num_dst + 1},) integers "
                         f"(got {indptr.shape} {indptr.dtype})")
    if indices.ndim != 1 or indices.dtype.kind not in "iu":
        raise ValueError(f"relation {name!r}: indices must be 1-D integers (got {indices.shape} "
                         f"{indices.dtype})")
    if indptr.dtype != np.int64:
        indptr = indptr.astype(np.int64)
    if indices.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        indices = indices.astype(np.int64)
    if int(indptr[0]) != 0 or int(indptr[-1]) != indices.shape[0]:
        raise ValueError(f"relation {name!r}: indptr must run from 0 to len(indices)="
                         f"{indices.shape[0]} (got {int(indptr[0])} .. {int(indptr[-1])})")
    for lo in range(0, num_dst, _CHUNK):
        if np.any(np.diff(indptr[lo:lo + _CHUNK + 1]) < 0):
            raise ValueError(f"relation {name!r}: indptr decreases")
    for lo in range(0, indices.shape[0], _CHUNK):
        part = indices[lo:lo + _CHUNK]
        if int(part.min()) < 0 or int(part.max()) >= num_src:
            raise ValueError(f"relation {name!r}: indices must be source IDs in [0, {num_src})")
    return np.ascontiguousarray(indptr), np.ascontiguousarray(indices)


@dataclass(frozen=True)
class HeteroCSC:
    """A typed graph as one CSC by destination per relation (what the sampler reads).

    Attributes:
        num_nodes: ``{ntype: N_t}``.
        edge_types: ``[(src, rel, dst), ...]``; the order relations are expanded in
            within a hop (PyG's: ``data.edge_types``).
        csc: ``{etype: (indptr, indices)}``: ``indptr`` int64 ``(N_dst+1,)``, ``indices``
            int32/int64 ``(E,)`` source IDs of type ``src`` (in-neighbours of each
            destination, the edge slot of a neighbour is its position in ``indices``).

    Build it with :meth:`from_arrays`, which checks every relation once so the Numba
    kernels can trust each slice and index (``checked``); the samplers refuse a graph
    built otherwise unless its maker vouches for the arrays (``checked=True``: a typed
    store's relations, checked by :meth:`graphpipe.store.GraphStore.typed_csc`).

    >>> import numpy as np
    >>> g = HeteroCSC.from_arrays({"paper": 3, "author": 2},
    ...     {("author", "writes", "paper"): (np.array([0, 1, 2, 2]), np.array([0, 1]))})
    >>> g.edge_types, g.num_edges(("author", "writes", "paper"))
    ([('author', 'writes', 'paper')], 2)
    """

    num_nodes: dict[str, int]
    edge_types: list[EdgeType]
    csc: dict[EdgeType, tuple[np.ndarray, np.ndarray]]
    checked: bool = False

    @classmethod
    def from_arrays(cls, num_nodes: Mapping[str, int],
                    csc: Mapping[Any, tuple[Any, Any]]) -> HeteroCSC:
        """Checked :class:`HeteroCSC` from ``{ntype: N_t}`` and ``{etype: (indptr, indices)}``
        (``etype`` a tuple or ``"src___rel___dst"``); ``ValueError`` naming the relation."""
        counts = {}
        for t, n in num_nodes.items():
            if not isinstance(t, str) or isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
                raise ValueError(f"'num_nodes' must map type names to counts >= 0 (got {t!r}: {n!r})")
            counts[t] = int(n)
        checked: dict[EdgeType, tuple[np.ndarray, np.ndarray]] = {}
        for key, (indptr, indices) in csc.items():
            et = as_etype(key)
            for t in (et[0], et[2]):
                if t not in counts:
                    raise ValueError(f"relation {etype_str(et)!r} names an unknown node type {t!r}")
            if et in checked:
                raise ValueError(f"relation {etype_str(et)!r} is given twice")
            checked[et] = _check_relation(etype_str(et), indptr, indices, counts[et[2]], counts[et[0]])
        return cls(num_nodes=counts, edge_types=list(checked), csc=checked, checked=True)

    @classmethod
    def homogeneous(cls, indptr: Any, indices: Any, num_nodes: int | None = None) -> HeteroCSC:
        """The one-relation graph :data:`DEFAULT_ETYPE` over one CSC (``num_nodes``
        defaults to ``len(indptr) - 1``): a homogeneous graph seen as a typed one.

        >>> import numpy as np
        >>> HeteroCSC.homogeneous(np.array([0, 1, 2]), np.array([1, 0])).num_nodes
        {'_N': 2}
        """
        n = int(np.asarray(indptr).shape[0]) - 1 if num_nodes is None else num_nodes
        return cls.from_arrays({DEFAULT_NTYPE: n}, {DEFAULT_ETYPE: (indptr, indices)})

    @property
    def node_types(self) -> list[str]:
        return list(self.num_nodes)

    def num_edges(self, etype: EdgeType) -> int:
        return int(self.csc[etype][1].shape[0])


def resolve_fanouts(fanouts: Sequence[int] | Mapping[Any, Sequence[int]],
                    edge_types: Sequence[EdgeType]) -> dict[EdgeType, list[int]]:
    """Per-relation fanouts, seed hop first, as PyG's ``NumNeighbors`` reads them: one list
    for every relation, or a dict with a list for *every* relation (tuple or
    ``"src___rel___dst"`` keys), all of one length; ``-1`` = all neighbours, ``0`` = none.

    >>> et = [("a", "to", "b"), ("b", "to", "a")]
    >>> resolve_fanouts([2, 1], et)[("b", "to", "a")]
    [2, 1]
    >>> resolve_fanouts({"a___to___b": [3], ("b", "to", "a"): [0]}, et)
    {('a', 'to', 'b'): [3], ('b', 'to', 'a'): [0]}
    """
    if not isinstance(fanouts, Mapping):
        values = check_fanouts(fanouts)
        return {et: list(values) for et in edge_types}
    given = {as_etype(k): check_fanouts(v) for k, v in fanouts.items()}
    unknown = set(given) - set(edge_types)
    if unknown:
        raise ValueError(f"'fanouts' names relations the graph lacks: "
                         f"{sorted(etype_str(e) for e in unknown)}")
    missing = [etype_str(e) for e in edge_types if e not in given]
    if missing:
        raise ValueError(f"'fanouts' misses relations {missing} (give every relation a list)")
    if len({len(v) for v in given.values()}) > 1:
        raise ValueError("'fanouts' lists must all have the same number of hops "
                         f"(got {sorted({len(v) for v in given.values()})})")
    return {et: given[et] for et in edge_types}


def relation_key(hkey: int, etype: EdgeType) -> int:
    """64-bit key of relation ``etype`` in the hop whose key is ``hkey``
    (:func:`graphpipe.ops.sampling.keys.hop_key`): ``mix64(hkey ^ mix64(fnv1a(name)))``,
    so a relation's draws depend on its name, not on its position in the graph; the
    homogeneous relation :data:`DEFAULT_ETYPE` keeps ``hkey`` itself (the homogeneous
    sampler's stream, on the CPU and the GPU alike).

    >>> relation_key(7, DEFAULT_ETYPE), relation_key(7, ("a", "to", "a")) != 7
    (7, True)
    """
    if tuple(etype) == DEFAULT_ETYPE:
        return int(hkey)
    return mix64_py(int(hkey) ^ relation_salt(etype))


def relation_salt(etype: EdgeType) -> int:
    """``mix64(fnv1a(name))`` of relation ``etype``: what :func:`relation_key` mixes into a
    hop key (vectorised callers XOR it into many hop keys at once)."""
    h = 0xCBF29CE484222325
    for b in etype_str(etype).encode():
        h = ((h ^ b) * 0x100000001B3) & ((1 << 64) - 1)
    return mix64_py(h)


def split_graph_args(args: Sequence[Any], batch_name: str = "seeds") -> tuple[Any, Any, Any]:
    """``(graph, seeds, fanouts)`` from a sampler's positional arguments, in either form:
    ``(graph, seeds, fanouts)`` with a :class:`HeteroCSC` (typed), or
    ``(indptr, indices, seeds, fanouts)`` (one relation; ``graph`` is then the pair
    ``(indptr, indices)``). ``TypeError`` for anything else."""
    if len(args) == 3 and isinstance(args[0], HeteroCSC):
        return args[0], args[1], args[2]
    if len(args) == 4 and not isinstance(args[0], HeteroCSC):
        return (args[0], args[1]), args[2], args[3]
    first = type(args[0]).__name__ if args else "nothing"
    raise TypeError(f"expected (graph: HeteroCSC, {batch_name}, fanouts) or (indptr, indices, "
                    f"{batch_name}, fanouts) (got {len(args)} positional arguments, the first "
                    f"a {first})")


def check_seed_dict(graph: HeteroCSC, seeds: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``{ntype: int64 seeds}`` for every node type (empty where none are given), after
    checking the graph was checked (:meth:`HeteroCSC.from_arrays`), the types exist and
    the IDs are in range and unique within their type."""
    if not getattr(graph, "checked", False):
        raise ValueError("'graph' must be built with HeteroCSC.from_arrays (its relations "
                         "checked once before any kernel indexes with them)")
    if not isinstance(seeds, Mapping):
        raise ValueError(f"'seeds' must be a dict {{node type: IDs}} "  # noqa: TRY004 - bad arguments are ValueError here
                         f"(got {type(seeds).__name__})")
    unknown = set(seeds) - set(graph.num_nodes)
    if unknown:
        raise ValueError(f"'seeds' names unknown node types {sorted(map(str, unknown))}")
    out = {}
    for t, n in graph.num_nodes.items():
        ids = check_node_ids(seeds.get(t, np.empty(0, np.int64)), n, f"seeds[{t!r}]")
        if ids.shape[0] != np.unique(ids).shape[0]:
            raise ValueError(f"'seeds[{t!r}]' must be unique node IDs")
        out[t] = ids
    return out


def hop_block_shapes(num_sampled_nodes: dict[str, list[int]],
                     num_sampled_edges: dict[EdgeType, list[int]], hop: int
                     ) -> list[tuple[EdgeType, int, int, int, int]]:
    """Per relation ``(s, r, d)``, the typed block of ``hop`` (0 = the seeds' hop) as
    ``(etype, lo, hi, num_dst, num_src)``: its edges are ``[lo, hi)`` of the relation's
    sampled edges, its destinations the first ``num_dst`` nodes of ``d`` known before the
    hop, its sources the first ``num_src`` of ``s`` known after it (PyG's per-hop counts).

    >>> hop_block_shapes({"a": [2, 3, 1]}, {("a", "r", "a"): [4, 2]}, 1)
    [(('a', 'r', 'a'), 4, 6, 5, 6)]
    """
    return [(et, sum(counts[:hop]), sum(counts[:hop + 1]), sum(num_sampled_nodes[et[2]][:hop + 1]),
             sum(num_sampled_nodes[et[0]][:hop + 2])) for et, counts in num_sampled_edges.items()]


@dataclass
class HeteroSampleOutput:
    """A sampled typed multi-hop subgraph of one batch (typed local IDs).

    Attributes:
        n_id: ``{ntype: int64 (n_t,)}`` global IDs of type ``t``; the seeds of ``t``
            first (in the given order), then each hop's new nodes in discovery order.
            Every node type of the graph is present (empty when not reached).
        row: ``{etype: int64 (E_r,)}`` local source ID (in ``n_id[src]``) of each
            sampled edge; edges of hop 1 first, then hop 2, ... (PyG's
            ``edge_index[0]``).
        col: ``{etype: int64 (E_r,)}`` local destination ID (in ``n_id[dst]``), PyG's
            ``edge_index[1]``.
        edge_ids: ``{etype: int64 (E_r,)}`` the edge slot (position in the relation's
            CSC ``indices``) of each sampled edge.
        num_seeds: ``{ntype: seeds of that type}``.
        num_sampled_nodes: ``{ntype: [seeds, new in hop 1, ...]}`` (length hops + 1).
        num_sampled_edges: ``{etype: [edges of hop 1, ...]}`` (length hops).
        frontier: ``"new"`` (PyG) or ``"all"`` (DGL), as sampled.
        batch: ``{ntype: int64 (n_t,)}`` the tree of each node when sampled one tree per
            seed (PyG's ``disjoint=True``), else None.
    """

    n_id: dict[str, np.ndarray]
    row: dict[EdgeType, np.ndarray]
    col: dict[EdgeType, np.ndarray]
    edge_ids: dict[EdgeType, np.ndarray]
    num_seeds: dict[str, int]
    num_sampled_nodes: dict[str, list[int]] = field(default_factory=dict)
    num_sampled_edges: dict[EdgeType, list[int]] = field(default_factory=dict)
    frontier: str = "new"
    batch: dict[str, np.ndarray] | None = None

    @property
    def num_hops(self) -> int:
        return len(next(iter(self.num_sampled_nodes.values()), [0])) - 1

    def edge_index(self, etype: EdgeType) -> np.ndarray:
        """``(2, E_r)``: ``row[etype]`` over ``col[etype]`` (PyG's ``edge_index``); the
        sampler's own buffer, not a copy, when ``row`` and ``col`` are its two rows (the
        CPU sampler writes them so)."""
        row, col = self.row[etype], self.col[etype]
        base = row.base
        if (isinstance(base, np.ndarray) and base is col.base and base.shape == (2, row.shape[0])
                and base.flags.c_contiguous and row.dtype == base.dtype
                and row.ctypes.data == base.ctypes.data
                and col.ctypes.data == base.ctypes.data + base.strides[0]):
            return base
        return np.stack([row, col])

    def blocks(self) -> list[dict[EdgeType, SampledBlock]]:
        """DGL-style typed blocks, outermost (input) layer first: per layer a
        :class:`~graphpipe.ops.sampling.types.SampledBlock` per relation whose
        destinations are the ``num_dst`` first nodes of the ``dst`` type known before
        the hop and whose sources are the ``num_src`` first of the ``src`` type known
        after it (a destination's rows are empty when the hop did not expand it)."""
        layers = []
        for h in range(self.num_hops):
            layer = {}
            for et, lo, hi, num_dst, num_src in hop_block_shapes(self.num_sampled_nodes,
                                                                 self.num_sampled_edges, h):
                col = self.col[et][lo:hi]
                indptr = np.zeros(num_dst + 1, dtype=np.int64)
                np.cumsum(np.bincount(col, minlength=num_dst), out=indptr[1:])
                order = np.argsort(col, kind="stable")  # already sorted unless frontier="all"
                layer[et] = SampledBlock(indptr=indptr, indices=self.row[et][lo:hi][order],
                                         num_dst=num_dst, num_src=num_src,
                                         edge_ids=self.edge_ids[et][lo:hi][order])
            layers.append(layer)
        return layers[::-1]
