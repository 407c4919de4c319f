"""The datapipe every GraphBolt stage is: an iterable of :class:`MiniBatch` es over the
stage before it, with GraphBolt's functional forms (``datapipe.sample_neighbor(...)``,
``.fetch_feature(...)``, ``.copy_to(...)``, ``.transform(fn)``), registered by each stage's
module with :func:`functional_datapipe` (torchdata's pattern, without torchdata).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

__all__ = ["Datapipe", "Mapper", "functional_datapipe"]

_FUNCTIONAL: dict[str, type] = {}


def functional_datapipe(name: str) -> Callable[[type], type]:
    """Register a stage class as ``datapipe.<name>(...)``: ``Stage(datapipe, ...)``."""
    def register(cls: type) -> type:
        _FUNCTIONAL[name] = cls
        return cls

    return register


class Datapipe:
    """An iterable stage; ``datapipe.<name>(*args)`` appends the stage registered as
    ``name``. Subclasses implement ``__iter__``.

    >>> pipe = Mapper([1, 2, 3], lambda v: v * 10).transform(lambda v: v + 1)
    >>> list(pipe)
    [11, 21, 31]
    """

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(f"{type(self).__name__} is not iterable")

    def __len__(self) -> int:
        """Batches per epoch: the first stage's count (every stage maps one to one)."""
        return len(self.__dict__["datapipe"])

    def __getattr__(self, name: str) -> Any:
        stage = _FUNCTIONAL.get(name)
        if stage is None or name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return lambda *args, **kwargs: stage(self, *args, **kwargs)


@functional_datapipe("transform")
class Mapper(Datapipe):
    """``fn`` applied to every item of ``datapipe`` (GraphBolt's ``transform`` / ``map``)."""

    def __init__(self, datapipe: Iterable[Any], fn: Callable[[Any], Any]):
        self.datapipe, self.fn = datapipe, fn

    def __iter__(self) -> Iterator[Any]:
        return map(self.fn, self.datapipe)


functional_datapipe("map")(Mapper)
