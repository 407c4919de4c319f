"""A dataset format ingest reads: :class:`Format` (name, sniff, open, the options it takes).

A format names its sniffer and its reader as ``"module:function"`` so that listing the
formats (``graphpipe ingest --help``) imports no reader. Homogeneous readers return a
:class:`~graphpipe.ingest.source.DatasetSource` that the store builder streams; typed
(heterogeneous) readers a :class:`~graphpipe.ingest.source.TypedSource`; the one store
builder (:func:`graphpipe.ingest.pipeline.build_store`) writes both.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.options import IngestOptions, flag, refuse_for_typed
from graphpipe.ingest.source import TypedSource

__all__ = ["Format", "flag"]


def _resolve(target: str) -> Callable[..., Any]:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Format:
    """One dataset format.

    Attributes:
        name: what ``--format`` takes.
        summary: one line for ``graphpipe ingest --help``.
        sniffer: ``"module:function"``, ``function(path) -> bool``.
        reader: ``"module:function"``: ``function(path, **options) -> DatasetSource`` (a
            ``TypedSource`` for a typed format).
        options: the reader options it takes (``node_features``: a ``.npy`` matrix).
        typed: whether it holds several node types (a typed store).

    >>> from graphpipe.ingest.formats import get
    >>> get("npz").sniff("graph.npz"), sorted(get("npz").options)
    (True, ['block_rows', 'name', 'node_features'])
    """

    name: str
    summary: str
    sniffer: str
    reader: str
    options: frozenset = field(default_factory=frozenset)
    typed: bool = False

    def sniff(self, path: str | os.PathLike) -> bool:
        """Whether ``path`` looks like this format."""
        return bool(_resolve(self.sniffer)(Path(path)))

    def check(self, reader_options: dict[str, Any], options: IngestOptions | None = None) -> None:
        """Refuse, in one line naming the flag, an option this format does not take."""
        for name, value in reader_options.items():
            if value is not None and name not in self.options:
                takes = ", ".join(sorted(flag(option) for option in self.options)) or "none"
                raise IngestError(f"{flag(name)} does not apply to {self.name} datasets "
                                  f"(the options it takes: {takes})")
        if self.typed and options is not None:
            refuse_for_typed(options, self.name)

    def open(self, path: str | os.PathLike, **reader_options: Any) -> Any:
        """The dataset at ``path`` as a source (options that are None are left out)."""
        given = {k: v for k, v in reader_options.items() if v is not None}
        self.check(given)
        npy = given.pop("node_features", None)
        if "split_dir" in given:
            from graphpipe.ingest.splitfiles import find_split_files

            given["split_files"] = find_split_files(given.pop("split_dir"))
        source = _resolve(self.reader)(path if self.name == "edgelist" else Path(path), **given)
        if npy is not None and isinstance(source, TypedSource):
            raise IngestError(f"--node-features does not apply to typed datasets ({path}): features "
                              f"come per node type")
        if npy is not None:
            from graphpipe.ingest.pipeline import attach_npy_features

            attach_npy_features(source, npy)
        return source
