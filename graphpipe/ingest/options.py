"""How a dataset becomes a store: :class:`IngestOptions` and the sizes they take.

The options are plain data, read by the front door (:mod:`graphpipe.ingest.api`), the
store builder (:mod:`graphpipe.ingest.pipeline`) and the typed readers alike, so none of
those has to import another for them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from graphpipe.ingest.errors import IngestError

_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20,
               "MB": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30,
               "T": 1 << 40, "TB": 1 << 40, "TIB": 1 << 40}
FEATURE_DTYPES = ("float32", "float16")


def parse_size(text: str | int | None) -> int | None:
    """``"2GB"`` → 2147483648 (binary units; ``None`` stays ``None``).

    >>> parse_size("2GB"), parse_size("512 MiB"), parse_size(1000), parse_size(None)
    (2147483648, 536870912, 1000, None)
    """
    if text is None or isinstance(text, int):
        return text
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not match or match.group(2).upper() not in _SIZE_UNITS:
        raise ValueError(f"'memory_limit' must look like 512MB or 2GB (got {text!r})")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).upper()])


INGEST_MINIMUM = 64 << 20
"""Bytes an ingest takes beyond what the process holds when it starts, at the least:
measured with ``memlimit.sh`` on a 1,500-node OGB folder, the process peaked 63 MB above
its imports (Numba's runtime, the readers' buffers); the builder itself then stays
within ``memory_limit`` (out of core)."""


def require_ingest_memory(options: IngestOptions) -> None:
    """Refuse up front (:class:`graphpipe.memory.NotEnoughMemory`, one line) an ingest this
    process cannot hold: :data:`INGEST_MINIMUM`, plus ``options.memory_limit`` when one is
    given (a builder told to use more than the process may take would be OOM-killed).

    >>> require_ingest_memory(IngestOptions(memory_limit="1MB"))
    """
    from graphpipe.memory import format_size, require

    given = parse_size(options.memory_limit)
    what = "graphpipe ingest" if given is None else \
        f"graphpipe ingest with a memory limit of {format_size(given)}"
    require(INGEST_MINIMUM + (given or 0), what)


def default_memory_limit() -> int:
    """The working-set bound used when none is given: half of the memory this process may
    use now (free RAM bounded by its cgroup limit, :func:`graphpipe.memory.usable_memory`).

    >>> default_memory_limit() > 0
    True
    """
    from graphpipe.memory import usable_memory

    return int(usable_memory() // 2)


@dataclass
class IngestOptions:
    """How a dataset becomes a store.

    Attributes:
        overwrite: replace an existing store at ``dest`` (only once the new one is complete).
        add_reverse_edges: add ``d→s`` for every ``s→d`` (OGB's ``add_inverse_edge``).
        remove_self_loops / deduplicate / sort_neighbors: topology canonicalisation.
        build_csr: also store the CSR (by source) topology.
        feature_dtype: ``"float32"`` or ``"float16"`` for ``node/feat`` and ``edge/feat``.
        compression: ``None`` (memory-mappable, default) or ``"zstd"`` for features.
        memory_limit: bytes (or ``"2GB"``) bounding the builder's working set; default: half
            of the memory available when the ingest starts.
        allow_nonfinite: keep NaN/inf features instead of refusing them.
        allow_isolated_nodes: accept a declared node count far above what the edges use
            (see :mod:`graphpipe.ingest.pipeline`); refused by default.
        clamp_float16: with ``feature_dtype="float16"``, clamp finite values beyond ±65504
            to ±65504 instead of refusing them.
        name: dataset name for the manifest (default: the source's).
        edge_ids: whether to store ``csc/edge_id`` (and ``csr/edge_id``), each slot's position
            in the input edge list: ``"auto"`` (default) stores it when the dataset has
            per-edge data in edge-list order (edge features or weights, ``edge/feat``, or
            edge timestamps), the only thing it is needed for; ``"always"``; ``"never"`` (refused when the dataset
            has edge features). The topology itself is the same either way.
        random_split: ``(train, valid, test)`` fractions (or ``"0.8,0.1,0.1"``) of a seeded
            random node split stored as the store's splits
            (:mod:`graphpipe.ingest.random_split`), or None: the source's own splits.
        seed: the random split's seed.

    >>> IngestOptions(feature_dtype="float16").memory_bytes() > 0
    True
    """

    overwrite: bool = False
    add_reverse_edges: bool = False
    remove_self_loops: bool = False
    deduplicate: bool = False
    sort_neighbors: bool = True
    build_csr: bool = False
    feature_dtype: str = "float32"
    compression: str | None = None
    memory_limit: int | str | None = None
    allow_nonfinite: bool = False
    allow_isolated_nodes: bool = False
    clamp_float16: bool = False
    name: str | None = None
    edge_ids: str = "auto"
    random_split: tuple[float, float, float] | str | None = None
    seed: int = 0

    def memory_bytes(self) -> int:
        """``memory_limit`` in bytes, or :func:`default_memory_limit` when unset."""
        limit = parse_size(self.memory_limit)
        return default_memory_limit() if limit is None else limit

    def feature_numpy_dtype(self) -> np.dtype:
        """``feature_dtype`` as a NumPy dtype; anything but float32/float16 is refused."""
        if self.feature_dtype not in FEATURE_DTYPES:
            raise ValueError(f"'feature_dtype' must be float32 or float16 (got {self.feature_dtype!r})")
        return np.dtype(self.feature_dtype)


TYPED_REFUSED = ("remove_self_loops", "deduplicate", "build_csr", "compression", "sort_neighbors",
                 "random_split")
"""IngestOptions a typed store refuses (they rewrite a topology in ways typed stores do not record)."""
FLAGS = {"feature_columns": "--features", "deduplicate": "--dedup", "build_csr": "--csr",
         "sort_neighbors": "--no-sort", "split": "--split"}
"""``graphpipe ingest`` flags whose name is not the option's with dashes."""


def flag(option: str) -> str:
    """The ``graphpipe ingest`` flag of an option, for messages.

    >>> flag("split_dir"), flag("deduplicate")
    ('--split-dir', '--dedup')
    """
    return FLAGS.get(option, "--" + option.replace("_", "-"))


def refuse_for_typed(options: IngestOptions, what: str) -> None:
    """An IngestError naming the first option of :data:`TYPED_REFUSED` that ``options``
    sets, for the typed dataset ``what`` (its format).

    >>> refuse_for_typed(IngestOptions(), "mag240m")
    >>> refuse_for_typed(IngestOptions(deduplicate=True), "mag240m")
    Traceback (most recent call last):
    ...
    graphpipe.ingest.errors.IngestError: --dedup is not supported for typed (heterogeneous) datasets (mag240m)
    """
    default = IngestOptions()
    for name in TYPED_REFUSED:
        if getattr(options, name) != getattr(default, name):
            after = ("; split the store after the ingest: graphpipe split STORE --random "
                     "0.8,0.1,0.1 --node-type TYPE" if name == "random_split" else "")
            raise IngestError(f"{flag(name)} is not supported for typed (heterogeneous) datasets ({what}){after}")
