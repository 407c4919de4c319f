"""A dataset format ingest reads: :class:`Format` (name, sniff, open, the options it takes).

A format names its sniffer and its reader as ``"module:function"`` so that listing the
formats (``graphpipe ingest --help``) imports no reader. Homogeneous readers return a
:class:`~graphpipe.ingest.source.DatasetSource` that the store builder streams; typed
(heterogeneous) readers still write their store themselves, so their format opens to a
:class:`TypedSource` that holds the reader and its options until a destination is known.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphpipe.ingest.errors import IngestError
from graphpipe.ingest.options import IngestOptions

ProgressFn = Callable[[str, int, int], None]
TYPED_REFUSED = ("remove_self_loops", "deduplicate", "build_csr", "compression", "sort_neighbors",
                 "random_split")
"""IngestOptions a typed format refuses (they rewrite a topology in ways typed stores do not record)."""
FLAGS = {"feature_columns": "--features", "deduplicate": "--dedup", "build_csr": "--csr",
         "sort_neighbors": "--no-sort", "split": "--split"}
"""``graphpipe ingest`` flags whose name is not the option's with dashes."""


def flag(option: str) -> str:
    """The ``graphpipe ingest`` flag of an option, for messages.

    >>> flag("split_dir"), flag("deduplicate")
    ('--split-dir', '--dedup')
    """
    return FLAGS.get(option, "--" + option.replace("_", "-"))


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
        reader: ``"module:function"``: ``function(path, **options) -> DatasetSource`` or,
            for a typed format, the function that writes its store.
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
            default = IngestOptions()
            for name in TYPED_REFUSED:
                if getattr(options, name) != getattr(default, name):
                    after = ("; split the store after the ingest: graphpipe split STORE --random "
                             "0.8,0.1,0.1 --node-type TYPE" if name == "random_split" else "")
                    raise IngestError(f"{flag(name)} is not supported for typed (heterogeneous) "
                                      f"datasets ({self.name}){after}")

    def open(self, path: str | os.PathLike, **reader_options: Any) -> Any:
        """The dataset at ``path`` as a source (options that are None are left out)."""
        given = {k: v for k, v in reader_options.items() if v is not None}
        self.check(given)
        npy = given.pop("node_features", None)
        if self.typed:
            return TypedSource(Path(path), self, given)
        if "split_dir" in given:
            from graphpipe.ingest.splitfiles import find_split_files

            given["split_files"] = find_split_files(given.pop("split_dir"))
        source = _resolve(self.reader)(path if self.name == "edgelist" else Path(path), **given)
        if npy is not None:
            from graphpipe.ingest.pipeline import attach_npy_features

            attach_npy_features(source, npy)
        return source


@dataclass
class TypedSource:
    """A typed dataset, opened: its folder, format and reader options, written by :meth:`write`."""

    path: Path
    format: Format
    reader_options: dict[str, Any]

    def write(self, dest: str | os.PathLike, options: IngestOptions | None = None,
              progress: ProgressFn | None = None) -> None:
        """Write the typed store at ``dest`` (atomically; ``dest`` is checked first)."""
        from graphpipe.store.atomic import check_destination

        options = options or IngestOptions()
        self.format.check(self.reader_options, options)
        check_destination(dest, overwrite=options.overwrite, sources=[self.path])
        _resolve(self.format.reader)(
            self.path, dest, name=options.name, overwrite=options.overwrite,
            memory_limit=options.memory_bytes(), feature_dtype=options.feature_numpy_dtype().name,
            allow_nonfinite=options.allow_nonfinite, add_reverse_edges=options.add_reverse_edges,
            progress=progress, **self.reader_options)
