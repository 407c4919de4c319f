"""What the heterogeneous :class:`graphpipe.loaders.NeighborLoader` yields: :class:`HeteroMiniBatch`,
a sampled typed subgraph with its features, in PyG's layout (``n_id`` / ``x`` /
``edge_index`` dicts, seeds first in the target type) and as DGL-style typed blocks.

It has ``HeteroData``'s face, as :class:`graphpipe.loaders.MiniBatch` has ``Data``'s, so a
PyG script runs on it unchanged: ``batch["paper"].x`` / ``.y`` / ``.n_id`` /
``.batch_size`` per node type, ``batch["author", "writes", "paper"].edge_index`` / ``.e_id``
per relation, ``batch.x_dict`` / ``batch.edge_index_dict`` / any ``batch.<attr>_dict``,
``batch.metadata()`` and ``batch.to(device, "edge_index")`` (only the named attributes
move). ``batch.to_pyg()`` gives the same as a ``HeteroData``.

For a model: ``batch.x[t]`` are the input rows of the nodes ``batch.n_id[t]``;
``batch.edge_index[(s, r, d)]`` is ``(2, E)`` with row 0 a local ID into ``n_id[s]``
and row 1 a local ID into ``n_id[d]``; the logits to score are those of the first
``batch.batch_size`` nodes of ``batch.target_type`` and ``batch.y[:batch.batch_size]``
their labels.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from graphpipe.loaders.lazy_edge_ids import LazyEdgeIds
from graphpipe.loaders.minibatch import Block
from graphpipe.ops.sampling.types import hop_block_shapes

__all__ = ["HeteroMiniBatch", "TypeView", "typed_batch_from_sample"]

EdgeType = tuple[str, str, str]

# the batch's dict behind each attribute of a node type / relation (``batch[key].<name>``)
_NODE_SLOTS = {"x": "x", "y": "y_dict", "n_id": "n_id", "num_sampled_nodes": "num_sampled_nodes"}
_EDGE_SLOTS = {"edge_index": "edge_index", "edge_attr": "edge_attr", "e_id": "e_id",
               "num_sampled_edges": "num_sampled_edges"}


class TypeView:
    """One node type or relation of a :class:`HeteroMiniBatch`, as PyG's ``NodeStorage`` /
    ``EdgeStorage``: ``view.x``, ``view.n_id``, ``view.edge_index``... read the batch's
    dicts; setting an attribute writes it there (a name the batch does not know is kept
    beside, per type); ``keys()`` lists what PyG's storage would hold."""

    __slots__ = ("_batch", "_key")

    def __init__(self, batch: HeteroMiniBatch, key: str | EdgeType):
        object.__setattr__(self, "_batch", batch)
        object.__setattr__(self, "_key", key)

    def __getattr__(self, name: str) -> Any:
        batch = self._batch
        if name in batch._field_names(self._key):
            return batch._field(self._key, name)
        if name == "num_nodes" and isinstance(self._key, str):
            return int(self._batch.n_id[self._key].numel())
        if name == "num_edges" and not isinstance(self._key, str):
            return int(self._batch.edge_index[self._key].shape[1])
        raise AttributeError(f"{self._key!r} of the batch has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._batch._set(self._key, name, value)

    def __delattr__(self, name: str) -> None:
        self._batch._set(self._key, name, None)

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        self._batch._set(self._key, name, value)

    def __contains__(self, name: str) -> bool:
        return name in self._batch._field_names(self._key)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self else default

    def keys(self) -> list[str]:
        return self._batch._field_names(self._key)

    def __repr__(self) -> str:
        return f"TypeView({self._key!r}, keys={self.keys()})"


@dataclass
class HeteroMiniBatch:
    """A sampled typed mini-batch (typed local IDs: each node type numbers its own nodes).

    Attributes:
        n_id: ``{ntype: int64 (n_t,)}`` global IDs (in the type's own ID space) of the
            batch's nodes of each type; the seeds first in their type
            (``n_id[target_type][:batch_size]``), then each hop's new nodes. Every node
            type of the graph is present (possibly empty).
        x: ``{ntype: (n_t, D_t)}`` feature rows of ``n_id[t]``, bit for bit the data's
            (``X_t[n_id[t]]``); types without features are absent.
        y: labels of ``n_id[target_type]`` (``y[:batch_size]`` the seeds'), or None.
        batch_size: number of seeds.
        target_type: the seeds' node type (PyG's ``input_type``).
        edge_index: ``{etype: int64 (2, E_r)}`` sampled edges of each relation
            ``(src, rel, dst)``, row 0 local IDs into ``n_id[src]``, row 1 into
            ``n_id[dst]`` (PyG's convention); hop 1's edges first, then hop 2's, ...
            Every relation of the graph is present (possibly with no edges).
        e_id: ``{etype: int64 (E_r,)}`` each edge's position in the relation's input edge
            list (``data[etype].edge_index`` of a HeteroData), or its CSC slot for a store
            without an edge order; a loader's batch looks each relation up when it is first
            read (:class:`graphpipe.loaders.lazy_edge_ids.LazyEdgeIds`: a batch whose
            ``e_id`` is never read leaves the store's ``csc/edge_id`` untouched).
        num_sampled_nodes: ``{ntype: [seeds, new in hop 1, ...]}`` (PyG's, for
            ``trim_to_layer``).
        num_sampled_edges: ``{etype: [edges of hop 1, ...]}``.
        input_id: int64 ``(batch_size,)`` position of each seed in the loader's input nodes.
        y_dict: labels of every labelled type, rows of its ``n_id`` (``y`` is the target's).
        edge_attr: ``{etype: (E_r, D)}`` features of the sampled edges (columns of
            ``edge_index[etype]``) for relations that have them.
    """

    n_id: dict[str, torch.Tensor]
    x: dict[str, torch.Tensor]
    y: torch.Tensor | None
    batch_size: int
    target_type: str
    edge_index: dict[EdgeType, torch.Tensor]
    e_id: MutableMapping[EdgeType, torch.Tensor]
    num_sampled_nodes: dict[str, list[int]] = field(default_factory=dict)
    num_sampled_edges: dict[EdgeType, list[int]] = field(default_factory=dict)
    input_id: torch.Tensor | None = None
    y_dict: dict[str, torch.Tensor] = field(default_factory=dict)
    edge_attr: dict[EdgeType, torch.Tensor] = field(default_factory=dict)
    extra: dict[Any, dict[str, Any]] = field(default_factory=dict)

    # -- HeteroData's face ----------------------------------------------------------------------
    def __getitem__(self, key: str | tuple) -> TypeView:
        """``batch["paper"]`` (a node type) or ``batch["author", "writes", "paper"]`` (a
        relation; ``(src, dst)`` when one relation joins them) as a :class:`TypeView`.

        >>> import numpy as np
        >>> from graphpipe.loaders import GraphData, NeighborLoader
        >>> data = GraphData.from_dicts(
        ...     {"paper": 3, "author": 2},
        ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
        ...     x={"paper": np.eye(3, dtype=np.float32)}, y={"paper": np.array([1, 0, 1])})
        >>> batch = next(iter(NeighborLoader(data, [2], input_nodes="paper", batch_size=2, seed=0)))
        >>> batch["paper"].batch_size, batch["paper"].y.tolist(), batch["author"].n_id.tolist()
        (2, [1, 0], [0, 1])
        >>> batch = batch.to("cpu", "edge_index")          # PyG's: only the named attributes
        >>> batch["author", "writes", "paper"].edge_index.tolist(), list(batch.x_dict)
        ([[0, 1], [0, 0]], ['paper'])
        >>> batch.n_id_dict["author"].tolist(), batch.metadata()[0]
        ([0, 1], ['paper', 'author'])
        """
        if isinstance(key, str):
            if key not in self.n_id:
                raise KeyError(f"no node type {key!r} in the batch (node types: {self.node_types})")
            return TypeView(self, key)
        key = tuple(key)
        if len(key) == 2:
            found = [et for et in self.edge_index if (et[0], et[2]) == key]
            if len(found) != 1:
                raise KeyError(f"{key!r} names {len(found)} relations; give (src, rel, dst)")
            key = found[0]
        if key not in self.edge_index:
            raise KeyError(f"no relation {key!r} in the batch (relations: {self.edge_types})")
        return TypeView(self, key)

    def _field_names(self, key: str | EdgeType) -> list[str]:
        """What PyG's storage of ``key`` holds in its loader's batch, in its order."""
        if isinstance(key, str):
            names = ["x" if key in self.x else "num_nodes", *(["y"] if key in self.y_dict else []),
                     "n_id", "num_sampled_nodes"]
            if key == self.target_type:
                names += ["batch_size", *(["input_id"] if self.input_id is not None else [])]
        else:
            names = ["edge_index", *(["edge_attr"] if key in self.edge_attr else []), "e_id",
                     "num_sampled_edges"]
        return names + [n for n, v in self.extra.get(key, {}).items() if v is not None and n not in names]

    def _field(self, key: str | EdgeType, name: str) -> Any:
        """``batch[key].<name>`` for a name of :meth:`_field_names`; only that one is read
        (``batch[et].edge_index`` looks no ``e_id`` up)."""
        value = self.extra.get(key, {}).get(name)
        if value is not None:
            return value
        slots = _NODE_SLOTS if isinstance(key, str) else _EDGE_SLOTS
        if name.startswith("num_sampled_"):
            return getattr(self, slots[name]).get(key, [])
        if name in slots:
            return getattr(self, slots[name])[key]
        if name == "num_nodes":
            return int(self.n_id[key].numel())
        return getattr(self, name)  # batch_size, input_id of the target type

    def _fields(self, key: str | EdgeType) -> dict[str, Any]:
        """What PyG's storage of ``key`` holds in its loader's batch, in its order."""
        return {name: self._field(key, name) for name in self._field_names(key)}

    def _set(self, key: str | EdgeType, name: str, value: Any) -> None:
        """``batch[key].<name> = value`` (None deletes)."""
        slots = _NODE_SLOTS if isinstance(key, str) else _EDGE_SLOTS
        if name in slots:
            target = getattr(self, slots[name])
            if value is None:
                target.pop(key, None)
            else:
                target[key] = value
            if name == "y" and key == self.target_type:
                self.y = value
        elif key == self.target_type and name in ("batch_size", "input_id"):
            setattr(self, name, value)
        else:
            self.extra.setdefault(key, {})[name] = value

    def collect(self, name: str) -> dict[Any, Any]:
        """``{type or relation: its attribute name}`` over the types that have it (PyG's
        ``HeteroData.collect``; ``batch.<name>_dict`` is the same)."""
        return {key: self._field(key, name) for key in [*self.n_id, *self.edge_index]
                if name in self._field_names(key)}

    def __getattr__(self, name: str) -> Any:
        """``batch.<attr>_dict``: :meth:`collect` of ``attr`` (``n_id_dict``,
        ``num_sampled_nodes_dict``, ``e_id_dict``, ...)."""
        if name.endswith("_dict") and not name.startswith("_") and "n_id" in self.__dict__:
            return self.collect(name[:-5])
        raise AttributeError(f"'HeteroMiniBatch' object has no attribute {name!r}")

    def metadata(self) -> tuple[list[str], list[EdgeType]]:
        """``(node_types, edge_types)``, as PyG's ``HeteroData.metadata()`` (``to_hetero``)."""
        return self.node_types, self.edge_types

    @property
    def num_nodes(self) -> int:
        """Nodes of every type."""
        return sum(int(v.numel()) for v in self.n_id.values())

    @property
    def node_types(self) -> list[str]:
        return list(self.n_id)

    @property
    def edge_types(self) -> list[EdgeType]:
        return list(self.edge_index)

    @property
    def num_nodes_dict(self) -> dict[str, int]:
        return {t: int(v.numel()) for t, v in self.n_id.items()}

    @property
    def seeds(self) -> torch.Tensor:
        """int64 ``(batch_size,)`` global IDs of the seeds (of ``target_type``)."""
        return self.n_id[self.target_type][: self.batch_size]

    @property
    def x_dict(self) -> dict[str, torch.Tensor]:
        """PyG's name for :attr:`x`."""
        return self.x

    @property
    def edge_index_dict(self) -> dict[EdgeType, torch.Tensor]:
        """PyG's name for :attr:`edge_index`."""
        return self.edge_index

    @property
    def num_hops(self) -> int:
        return len(next(iter(self.num_sampled_nodes.values()), [0])) - 1

    def blocks(self) -> list[dict[EdgeType, Block]]:
        """DGL-style typed blocks, outermost (input) layer first: per layer and relation
        ``(s, r, d)`` a :class:`graphpipe.loaders.Block` whose destinations are the first
        ``num_dst`` nodes of ``d`` known before the hop and whose sources are the first
        ``num_src`` nodes of ``s`` known after it (``blocks[-1]`` ends at the seeds;
        ``edge_ids`` hold :attr:`e_id`). Built from ``edge_index`` on each call."""
        layers = []
        for h in range(self.num_hops):
            layer = {}
            for et, lo, hi, num_dst, num_src in hop_block_shapes(self.num_sampled_nodes,
                                                                 self.num_sampled_edges, h):
                src, dst = self.edge_index[et][0, lo:hi], self.edge_index[et][1, lo:hi]
                order = torch.argsort(dst, stable=True)
                indptr = torch.zeros(num_dst + 1, dtype=torch.int64, device=dst.device)
                indptr[1:] = torch.cumsum(torch.bincount(dst, minlength=num_dst), 0)
                layer[et] = Block(indptr, src[order], num_dst, num_src, self.e_id[et][lo:hi][order])
            layers.append(layer)
        return layers[::-1]

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor], names: tuple[str, ...] = ()) -> HeteroMiniBatch:
        """A copy with ``fn`` applied to every tensor, or only to the attributes ``names``
        (``"x"``, ``"edge_index"``, ...) of every type."""
        def each(name: str, d: MutableMapping) -> MutableMapping:
            moved = not names or name in names
            if isinstance(d, LazyEdgeIds):   # e_id: what is not looked up is moved at lookup
                return d.map(fn if moved else None)
            if not moved:
                return dict(d)
            return {k: fn(v) if isinstance(v, torch.Tensor) else v for k, v in d.items()}

        def one(name: str, t: torch.Tensor | None) -> torch.Tensor | None:
            return t if t is None or (names and name not in names) else fn(t)

        extra = {key: {n: one(n, v) if isinstance(v, torch.Tensor) else v for n, v in d.items()}
                 for key, d in self.extra.items()}
        return HeteroMiniBatch(
            n_id=each("n_id", self.n_id), x=each("x", self.x), y=one("y", self.y),
            batch_size=self.batch_size, target_type=self.target_type,
            edge_index=each("edge_index", self.edge_index), e_id=each("e_id", self.e_id),
            num_sampled_nodes={k: list(v) for k, v in self.num_sampled_nodes.items()},
            num_sampled_edges={k: list(v) for k, v in self.num_sampled_edges.items()},
            input_id=one("input_id", self.input_id), y_dict=each("y", self.y_dict),
            edge_attr=each("edge_attr", self.edge_attr), extra=extra)

    def to(self, device: torch.device | str, *attrs: str, non_blocking: bool = False) -> HeteroMiniBatch:
        """A copy on ``device`` (tensors already there are not copied); with ``attrs``
        (PyG's ``batch.to(device, "edge_index")``) only those attributes move."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking), attrs)

    def cpu(self) -> HeteroMiniBatch:
        return self.to("cpu")

    def pin_memory(self) -> HeteroMiniBatch:
        """A copy with every tensor in pinned host memory."""
        return self._map(lambda t: t.pin_memory())

    def to_pyg(self) -> Any:
        """This batch as the ``torch_geometric.data.HeteroData`` PyG's heterogeneous
        ``NeighborLoader`` yields: per node type ``x`` (where the data has features),
        ``y`` (labelled types), ``n_id``, ``num_sampled_nodes`` and ``num_nodes`` for types
        without ``x``; per relation ``edge_index``, ``edge_attr`` (where the data has edge
        features), ``e_id``, ``num_sampled_edges``;
        ``batch_size`` and ``input_id`` on the target type.

        >>> import numpy as np
        >>> from graphpipe.loaders import GraphData, NeighborLoader
        >>> data = GraphData.from_dicts(
        ...     {"paper": 3, "author": 2},
        ...     {("author", "writes", "paper"): (np.array([0, 1, 1]), np.array([0, 0, 2]))},
        ...     x={"paper": np.eye(3, dtype=np.float32)}, y={"paper": np.array([1, 0, 1])})
        >>> loader = NeighborLoader(data, [2], input_nodes="paper", batch_size=2, seed=0)
        >>> pyg = next(iter(loader)).to_pyg()
        >>> pyg["paper"].batch_size, pyg["paper"].n_id.tolist(), pyg["author"].n_id.tolist()
        (2, [0, 1], [0, 1])
        >>> pyg["author", "writes", "paper"].edge_index.tolist()
        [[0, 1], [0, 0]]
        """
        try:
            from torch_geometric.data import HeteroData
        except ImportError as exc:  # pragma: no cover - exercised only without PyG
            raise ImportError("HeteroMiniBatch.to_pyg() needs torch_geometric; install it with "
                              "`pip install torch-geometric`") from exc
        data = HeteroData()
        for key in [*self.n_id, *self.edge_index]:
            for name, value in self._fields(key).items():
                data[key][name] = list(value) if isinstance(value, list) else value
        return data


def typed_batch_from_sample(out: Any, x: dict[str, torch.Tensor], graph: Any, target_type: str,
                            input_id: np.ndarray) -> HeteroMiniBatch:
    """The batch of a typed sample (:class:`graphpipe.ops.sampling.HeteroSampleOutput`):
    ``x`` the rows gathered per type; labels, edge order (``e_id``) and edge features read
    from ``graph`` (a :class:`graphpipe.loaders.GraphData`); ``input_id`` int64
    ``(batch_size,)``; PyG's edge layout (row 0 into ``n_id[src]``, row 1 into ``n_id[dst]``);
    ``batch[t].batch`` each node's tree when sampled one tree per seed (PyG's ``disjoint``)."""
    y_dict = {t: torch.from_numpy(np.asarray(labels[out.n_id[t]])) for t, labels in graph.labels.items()}
    order = graph.edge_order
    return HeteroMiniBatch(
        n_id={t: torch.from_numpy(v) for t, v in out.n_id.items()}, x=x,
        y=y_dict.get(target_type), batch_size=int(input_id.shape[0]), target_type=target_type,
        edge_index={et: torch.from_numpy(out.edge_index(et)) for et in out.row},
        e_id=LazyEdgeIds(out.edge_ids, order),
        num_sampled_nodes=out.num_sampled_nodes, num_sampled_edges=out.num_sampled_edges,
        input_id=torch.from_numpy(np.ascontiguousarray(input_id, dtype=np.int64)), y_dict=y_dict,
        edge_attr={et: torch.from_numpy(np.asarray(f[out.edge_ids[et]]))
                   for et, f in graph.edge_features.items()},
        extra={t: {"batch": torch.from_numpy(b)} for t, b in (out.batch or {}).items()})
