"""A typed batch's ``e_id`` looked up when read: :class:`LazyEdgeIds`.

A relation's ``e_id`` is each sampled CSC slot's position in the input edge list,
``edge_order[etype][slot]`` (a store's ``csc/edge_id``, one int64 per edge). PyG's
heterogeneous ``NeighborLoader`` returns ``e_id`` for every relation, so the typed batch
has it too; but a model rarely reads it, and on a store beyond RAM the lookup is one
random page of a memory-mapped ``csc/edge_id`` per sampled destination: as many page-cache
pages as sampling's ``csc/indices``, which a memory cap then takes from the feature row
cache (measured at MAG240M layout under 1 GB: 16.4 GB read for 1.5 GB of rows). Here each
relation keeps its slots and is looked up the first time it is read (then kept); a
batch whose ``e_id`` is never read never touches ``csc/edge_id``. The values are those of
the eager lookup: same dtype, same order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping

import numpy as np
import torch

__all__ = ["LazyEdgeIds"]

EdgeType = tuple[str, str, str]


class _Pending:
    """A relation's CSC slots, its edge order and the functions to apply once looked up."""

    __slots__ = ("fns", "order", "slots")

    def __init__(self, slots: np.ndarray, order: np.ndarray,
                 fns: tuple[Callable[[torch.Tensor], torch.Tensor], ...] = ()):
        self.slots, self.order, self.fns = slots, order, fns

    def resolve(self) -> torch.Tensor:
        out = torch.from_numpy(np.asarray(self.order)[self.slots])
        for fn in self.fns:
            out = fn(out)
        return out


class LazyEdgeIds(MutableMapping):
    """``{etype: int64 (E_r,)}``: the ``e_id`` of a batch's relations, each looked up in
    its relation's edge order the first time it is read (module docstring).

    Args:
        slots: ``{etype: int64 (E_r,)}`` the sampled edges' CSC slots.
        order: ``{etype: int64 (E,)}`` input edge position of every CSC slot (memory maps
            welcome); a relation without one reports its slots.

    >>> import numpy as np
    >>> order = {("a", "r", "b"): np.array([5, 3, 4])}
    >>> e_id = LazyEdgeIds({("a", "r", "b"): np.array([2, 0]), ("b", "s", "a"): np.array([1])}, order)
    >>> e_id.pending
    [('a', 'r', 'b')]
    >>> e_id[("a", "r", "b")].tolist(), e_id[("b", "s", "a")].tolist(), e_id.pending
    ([4, 5], [1], [])
    """

    def __init__(self, slots: Mapping[EdgeType, np.ndarray], order: Mapping[EdgeType, np.ndarray]):
        self._items: dict[EdgeType, torch.Tensor | _Pending] = {
            et: _Pending(s, order[et]) if et in order else torch.from_numpy(s)
            for et, s in slots.items()}

    @property
    def pending(self) -> list[EdgeType]:
        """The relations not looked up yet."""
        return [et for et, v in self._items.items() if isinstance(v, _Pending)]

    def __getitem__(self, etype: EdgeType) -> torch.Tensor:
        value = self._items[etype]
        if isinstance(value, _Pending):
            value = self._items[etype] = value.resolve()
        return value

    def __setitem__(self, etype: EdgeType, value: torch.Tensor) -> None:
        self._items[etype] = value

    def __delitem__(self, etype: EdgeType) -> None:
        del self._items[etype]

    def __contains__(self, etype: object) -> bool:   # Mapping's would look it up
        return etype in self._items

    def __iter__(self) -> Iterator[EdgeType]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"LazyEdgeIds({len(self)} relations, {len(self.pending)} not looked up)"

    def copy(self) -> LazyEdgeIds:
        """A shallow copy (what is not looked up stays so)."""
        return self.map(None)

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor] | None) -> LazyEdgeIds:
        """A copy with ``fn`` applied to every relation's ``e_id`` (now to those looked up,
        at lookup to the others): ``batch.to(device)`` moves nothing it does not read."""
        out = LazyEdgeIds({}, {})
        for et, v in self._items.items():
            if isinstance(v, _Pending):
                out._items[et] = v if fn is None else _Pending(v.slots, v.order, (*v.fns, fn))
            else:
                out._items[et] = v if fn is None else fn(v)
        return out
