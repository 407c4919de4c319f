"""What a training run may keep in memory, decided once from the memory this process may
use (:func:`graphpipe.memory.usable_memory`: free RAM bounded by its cgroup limit):
:func:`plan_training` returns a :class:`TrainingPlan`, and ``graphpipe train`` prints
its :meth:`TrainingPlan.describe` line.

The plan is made after the fixed costs are paid (the imports, the store opened with
``in_memory="auto"``, its topology checked, the labels read), so ``usable`` is what is
left for the run. From it:

* **features**: in memory (the store reopened with the loader's arrays read in, as
  ``in_memory="auto"`` does) when they take at most
  :data:`graphpipe.store.reader.AUTO_MEMORY_FRACTION` of what is left after
  :data:`STEP_RESERVE`, else the disk tier (topology and labels stay memory-mapped);
* **cache** (disk tier only): :data:`CACHE_SHARE` of what is left once
  :data:`STEP_RESERVE` (the training steps' own working memory) and the memory-mapped
  topology (the sampler reads it on every batch: its pages should stay cached) are set
  aside, at most the features' size;
* **prefetch**: batches prepared ahead; 1 on the disk tier (each batch in flight costs
  its rows and its sampled blocks), the loader's default 2 otherwise;
* **eval batch size**: on the disk tier at most the training batch size (a sampled
  batch of 4096 seeds gathers ~4x the rows of one of 1024, and the gather holds a few
  copies of them at once);
* **evaluation** (``"auto"``): layer-wise full-neighbour inference (``"full"``, exact)
  when its two ``(N, width)`` float32 matrices fit in :data:`FULL_INFERENCE_SHARE` of
  what is left after the reserve and the cache, else ``"sampled"`` (the training
  fanouts over each split's nodes).

**needed**: what the run cannot do without, beyond what the process holds when it plans:
:data:`STEP_MINIMUM` (the steps' runtime state), plus full inference's matrices when
``evaluation="full"`` is asked for. :meth:`TrainingPlan.require` refuses a run whose
``usable`` is below it (``graphpipe train`` calls it: one line naming the need, exit 2,
instead of the kernel's OOM kill half-way through the first epoch).

None of these change a training step's result (the tier and the cache deliver the same
rows, prefetch only overlaps); ``evaluation="auto"`` is ``"full"`` whenever that fits.

A typed store (:func:`plan_typed_training`, a :class:`TypedTrainingPlan`) is planned per
node type across types from the same budget: what is left after :data:`STEP_RESERVE`
and the relations' memory-mapped CSC arrays holds the feature tables of the smallest
types (:func:`graphpipe.loaders.typed_tier.plan_typed_tiers`, at most
:data:`graphpipe.store.reader.AUTO_MEMORY_FRACTION` of it); the other types with
features read from their disk tier, whose row caches share :data:`CACHE_SHARE` of what
is left then, in proportion to the types' bytes; featureless types cost nothing here
(their embeddings are the model's). Evaluation stays sampled (the typed trainer's).
The featureless types' learnable embeddings (``embed_dim`` wide) stay ``nn.Embedding``
s when their dense cost (the table, its gradient and Adam's two moments: 16 bytes per
value) fits :data:`EMBED_SHARE` of what is left, else they go to disk
(:class:`graphpipe.train.disk_embedding.DiskEmbedding`: rows in memory-mapped files,
sparse updates); the features' caches are sized after them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from graphpipe.memory import format_size as _size

__all__ = ["CACHE_SHARE", "EMBED_SHARE", "FULL_INFERENCE_SHARE", "STEP_MINIMUM", "STEP_RESERVE",
           "TrainingPlan", "TypedTrainingPlan", "plan_training", "plan_typed_training",
           "require_step_memory"]

STEP_RESERVE = 448 << 20
"""Bytes set aside for the training steps beyond the process's baseline: measured on
the 8.4M-node benchmark store (batch 1024, fanouts [15, 10, 5], hidden 256, 1 GB cap),
the first step adds ~250 MB that stays (Numba's and torch's runtime state), the batches
in flight and the heap glibc keeps between trims (the trainer trims every
:data:`graphpipe.train.trainer.TRIM_EVERY` batches under a cap) up to ~150 MB more."""
STEP_MINIMUM = 200 << 20
"""Bytes a training run takes beyond what the process holds when it plans, at the least.
Measured with ``memlimit.sh``: the runs took 216 MB (a 1,500-node store, batch 128) and
231 MB (200K nodes, batch 500) above their size at planning (Numba's and torch's runtime
state of the first step, the first batches), and a cap that left 206 MB was OOM-killed.
Below this floor no run measured survives; just above it a run may still be killed
(the floor errs on the side of never refusing a run that would complete)."""
CACHE_SHARE = 0.5
"""Share of the memory left after the reserve that the disk tier's CLOCK cache takes."""
EMBED_SHARE = 0.5
"""Share of the memory left after the reserve and the topology that dense embeddings may take."""
FULL_INFERENCE_SHARE = 0.5
"""Share of the memory left after the reserve and the cache that full inference may take."""


class _Needs:
    """What a plan cannot do without: ``needed`` bytes of the ``usable`` ones."""

    needed: int
    usable: int

    def require(self, what: str = "graphpipe train") -> None:
        """Raise :class:`graphpipe.memory.NotEnoughMemory` (one line naming the need, what is
        usable and the limit) when ``usable`` is below ``needed``."""
        from graphpipe.memory import require

        require(self.needed, what, usable=self.usable)


@dataclass(frozen=True)
class TrainingPlan(_Needs):
    """The memory choices of a training run (see the module docstring).

    Attributes:
        usable: bytes this process could still use when the plan was made.
        limit: the cgroup memory limit in bytes, or None without one.
        tier: ``"memory"`` or ``"disk"``: where the loader reads feature rows.
        in_memory: the arrays to open the store with in memory (``GraphStore.open``).
        cache_rows: rows of the disk tier's CLOCK cache (0 on the memory tier).
        cache_bytes: their bytes.
        prefetch: batches the training loader prepares ahead.
        evaluation: ``"full"``, ``"sampled"`` or ``"none"``.
        eval_batch_size: destinations per evaluation batch.
        full_inference_bytes: what full inference would keep in memory.
        needed: bytes the run cannot do without (see the module docstring).
    """

    usable: int
    limit: int | None
    tier: str
    in_memory: frozenset[str]
    cache_rows: int
    cache_bytes: int
    prefetch: int
    evaluation: str
    full_inference_bytes: int
    eval_batch_size: int
    needed: int = STEP_MINIMUM

    def loader_options(self) -> dict[str, Any]:
        """The training loader's keyword arguments this plan sets."""
        return {"prefetch": self.prefetch, "features": "disk" if self.tier == "disk" else True}

    def apply(self, store: Any) -> None:
        """Build ``store``'s shared disk tier with the planned cache (disk tier only), so
        the loaders the trainer builds over ``store`` use it."""
        if self.tier == "disk":
            from graphpipe.loaders.feature_tier import share_disk_tier

            share_disk_tier(store, self.cache_rows)

    def describe(self) -> str:
        """One line, e.g. ``features: disk tier, cache 120 MB; prefetch 1; evaluation:
        sampled (full inference needs 17.2 GB); usable 610 MB (cgroup limit 1.0 GB)``."""
        parts = ["features: in memory" if self.tier == "memory" else
                 f"features: disk tier, cache {_size(self.cache_bytes)}", f"prefetch {self.prefetch}"]
        evaluation = f"evaluation: {self.evaluation}"
        if self.evaluation == "sampled" and self.full_inference_bytes:
            evaluation += f" (full inference needs {_size(self.full_inference_bytes)})"
        parts.append(evaluation + f", batch {self.eval_batch_size}" if self.evaluation != "none"
                     else evaluation)
        room = f"usable {_size(self.usable)}"
        if self.limit is not None:
            room += f" (cgroup limit {_size(self.limit)})"
        return "; ".join(parts) + "; " + room


def plan_training(store: Any, model: Any, *, evaluation: str = "auto", batch_size: int = 1024,
                  eval_batch_size: int = 4096, usable: int | None = None,
                  limit: int | None = None) -> TrainingPlan:
    """The memory choices of training ``model`` on ``store`` (a GraphStore with features).

    Args:
        store: the :class:`graphpipe.store.GraphStore` the trainer will read.
        model: the model (its ``hidden``, ``heads``, ``out_dim`` size full inference).
        evaluation: ``"auto"`` (full when it fits, else sampled) or a fixed choice.
        batch_size, eval_batch_size: the training and the requested evaluation batch sizes.
        usable: bytes this process may still use (default :func:`graphpipe.memory.usable_memory`).
        limit: the cgroup limit (default :func:`graphpipe.memory.cgroup_limit`).

    A small store in plenty of memory: everything in RAM, exact evaluation:

    >>> from types import SimpleNamespace
    >>> store = SimpleNamespace(num_nodes=1000, in_memory_arrays=["node/feat"], path=".")
    >>> model = SimpleNamespace(hidden=64, out_dim=10, uses_graph=True)
    >>> plan = plan_training(store, model, usable=8 << 30, limit=None)
    >>> plan.tier, plan.evaluation, plan.prefetch, sorted(plan.in_memory)
    ('memory', 'full', 2, ['node/feat'])
    >>> plan.describe()
    'features: in memory; prefetch 2; evaluation: full, batch 4096; usable 8.0 GB'
    >>> plan_training(store, model, usable=100 << 20).require()
    Traceback (most recent call last):
    ...
    graphpipe.memory.NotEnoughMemory: graphpipe train needs about 200 MB of memory more than it holds now, but this process may use 100 MB more...
    """
    from graphpipe.memory import cgroup_limit, usable_memory

    if evaluation not in ("auto", "full", "sampled", "none"):
        raise ValueError(f"'evaluation' must be auto, full, sampled or none (got {evaluation!r})")
    if usable is None:
        usable, limit = usable_memory(), cgroup_limit() if limit is None else limit
    left = max(0, usable - STEP_RESERVE)
    tier, in_memory = _tier(store, left)
    cache_rows = cache_bytes = 0
    if tier == "disk":
        from graphpipe.loaders.feature_tier import ROW_OVERHEAD, mapped_topology_bytes

        left = max(0, left - mapped_topology_bytes(store))
        row_bytes, num_rows = _feature_rows(store)
        slot_table = 4 * num_rows  # the cache's slot of every row
        cache_rows = max(0, min(num_rows, int((CACHE_SHARE * left - slot_table) // (row_bytes + ROW_OVERHEAD))))
        cache_bytes = cache_rows * (row_bytes + ROW_OVERHEAD) + (slot_table if cache_rows else 0)
        left = max(0, left - cache_bytes)
    full_bytes = _full_inference_bytes(store, model)
    needed = STEP_MINIMUM + (full_bytes if evaluation == "full" else 0)
    if evaluation == "auto":
        evaluation = "full" if full_bytes <= FULL_INFERENCE_SHARE * left else "sampled"
    return TrainingPlan(usable=usable, limit=limit, tier=tier, in_memory=in_memory, cache_rows=cache_rows,
                        cache_bytes=cache_bytes, prefetch=1 if tier == "disk" else 2,
                        evaluation=evaluation, full_inference_bytes=full_bytes,
                        eval_batch_size=min(eval_batch_size, batch_size) if tier == "disk"
                        else eval_batch_size, needed=needed)


def require_step_memory(what: str) -> None:
    """Refuse up front (:func:`graphpipe.memory.require`) a training run that cannot take
    :data:`STEP_MINIMUM` more bytes: the modes without a full plan (typed, link, text,
    transformers, partition-parallel) call it once their store is open."""
    from graphpipe.memory import require

    require(STEP_MINIMUM, what)


@dataclass(frozen=True)
class TypedTrainingPlan(_Needs):
    """The memory choices of a typed training run (module docstring).

    Attributes:
        usable: bytes this process could still use when the plan was made.
        limit: the cgroup memory limit in bytes, or None without one.
        tiers: ``{ntype: "memory" | "disk"}`` of every type with features.
        cache_rows: ``{ntype: rows}`` of each disk type's row cache (hot set + CLOCK).
        cache_bytes: ``{ntype: bytes}`` of those caches.
        feature_bytes: ``{ntype: bytes}`` of each type's feature table.
        prefetch: batches the training loader prepares ahead (1 with a disk type).
        eval_batch_size: seeds per evaluation batch.
        embeddings: ``"memory"`` or ``"disk"``: where the featureless types' embeddings live.
        embedding_bytes: their dense cost in memory (table, gradient, Adam's moments).
        needed: bytes the run cannot do without (:data:`STEP_MINIMUM`).
    """

    usable: int
    limit: int | None
    tiers: dict[str, str]
    cache_rows: dict[str, int]
    cache_bytes: dict[str, int]
    feature_bytes: dict[str, int]
    prefetch: int
    eval_batch_size: int
    embeddings: str = "memory"
    embedding_bytes: int = 0
    needed: int = STEP_MINIMUM

    @property
    def disk_types(self) -> list[str]:
        return [t for t, tier in self.tiers.items() if tier == "disk"]

    def loader_options(self) -> dict[str, Any]:
        """The typed loaders' keyword arguments this plan sets (a tier per type)."""
        return {"prefetch": self.prefetch, "features": dict(self.tiers)}

    def apply(self, data: Any) -> None:
        """Build the disk tier of every disk type of ``data``'s store with its planned
        cache, so the loaders the trainer builds over that store use them."""
        if self.disk_types:
            from graphpipe.loaders.typed_tier import share_typed_disk_tier

            share_typed_disk_tier(data, {t: self.cache_rows[t] for t in self.disk_types})

    def describe(self) -> str:
        """One line, e.g. ``features: paper disk tier (6.0 GB, cache 310 MB), author in
        memory (12 MB); prefetch 1; usable 1.6 GB (cgroup limit 2.0 GB)``."""
        types = [f"{t} disk tier ({_size(self.feature_bytes[t])}, cache {_size(self.cache_bytes[t])})"
                 if tier == "disk" else f"{t} in memory ({_size(self.feature_bytes[t])})"
                 for t, tier in self.tiers.items()]
        room = f"usable {_size(self.usable)}"
        if self.limit is not None:
            room += f" (cgroup limit {_size(self.limit)})"
        embed = "" if not self.embedding_bytes else (
            f"embeddings {'in memory' if self.embeddings == 'memory' else 'on disk'} "
            f"({_size(self.embedding_bytes)} dense); ")
        return (f"features: {', '.join(types) or 'none'}; {embed}prefetch {self.prefetch}; "
                f"evaluation batch {self.eval_batch_size}; {room}")


def plan_typed_training(data: Any, *, batch_size: int = 1024, eval_batch_size: int = 4096,
                        usable: int | None = None, limit: int | None = None,
                        disk_capable: set[str] | None = None, embed_dim: int = 0) -> TypedTrainingPlan:
    """The memory choices of training on ``data`` (a
    :class:`graphpipe.loaders.GraphData` read from a typed store), per node type.

    Args:
        data: the typed graph the trainer reads (``data.store`` its store, or None).
        batch_size, eval_batch_size: the training and the requested evaluation batch sizes.
        usable: bytes this process may still use (default :func:`graphpipe.memory.usable_memory`).
        limit: the cgroup limit (default :func:`graphpipe.memory.cgroup_limit`).
        disk_capable: the types whose rows the disk tier may read (default: those stored
            uncompressed and memory-mapped in ``data.store``; the others stay in memory).
        embed_dim: width of the featureless types' embeddings (0: the model has none).

    Two typed tables in 300 MB: the small one stays in memory, the large one goes to
    disk with a cache (arrays given, as if memory-mapped from a store):

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> data = SimpleNamespace(store=None, features={"paper": np.zeros((400_000, 768), np.float16),
    ...                                              "author": np.zeros((1000, 16), np.float32)},
    ...                        num_nodes_dict={"paper": 400_000, "author": 1000})
    >>> plan = plan_typed_training(data, usable=STEP_RESERVE + (300 << 20), limit=None,
    ...                            disk_capable={"paper", "author"})
    >>> plan.tiers, plan.prefetch, plan.cache_rows["paper"], plan.eval_batch_size
    ({'paper': 'disk', 'author': 'memory'}, 1, 99269, 1024)
    >>> plan.describe()
    'features: paper disk tier (586 MB, cache 150 MB), author in memory (62 KB); prefetch 1; evaluation batch 1024; usable 748 MB'
    """
    from graphpipe.loaders.feature_tier import ROW_OVERHEAD, mapped_topology_bytes
    from graphpipe.loaders.typed_tier import (
        feature_bytes,
        plan_typed_tiers,
        split_cache,
        typed_tiers,
    )
    from graphpipe.memory import cgroup_limit, usable_memory
    from graphpipe.store.reader import AUTO_MEMORY_FRACTION

    if usable is None:
        usable, limit = usable_memory(), cgroup_limit() if limit is None else limit
    left = max(0, usable - STEP_RESERVE)
    if data.store is not None:
        left = max(0, left - mapped_topology_bytes(data.store))
    featureless = [t for t in data.num_nodes_dict if t not in data.features]
    embed_bytes = 16 * int(embed_dim) * sum(int(data.num_nodes_dict[t]) for t in featureless)
    embeddings = "memory" if embed_bytes <= EMBED_SHARE * left else "disk"
    left = max(0, left - (embed_bytes if embeddings == "memory" else 0))
    sizes = {t: feature_bytes(data, t) for t in data.features}
    if disk_capable is None:
        tiers = typed_tiers(data, "auto", usable=left)
    else:
        fixed = {t: "memory" for t in sizes if t not in disk_capable}
        kept = sum(sizes[t] for t in fixed)
        tiers = {**fixed, **plan_typed_tiers({t: sizes[t] for t in disk_capable},
                                             AUTO_MEMORY_FRACTION * left - kept)}
        tiers = {t: tiers[t] for t in sizes}
    left = max(0, left - sum(sizes[t] for t, tier in tiers.items() if tier == "memory"))
    disk = [t for t, tier in tiers.items() if tier == "disk"]
    rows = split_cache(data, disk, CACHE_SHARE * left)
    nbytes = {}
    for t in disk:
        x = data.features[t]
        row_bytes = sizes[t] // max(1, int(x.shape[0]))
        nbytes[t] = rows[t] * (row_bytes + ROW_OVERHEAD) + (4 * int(x.shape[0]) if rows[t] else 0)
    return TypedTrainingPlan(usable=usable, limit=limit, tiers=tiers, cache_rows=rows, cache_bytes=nbytes,
                             feature_bytes=sizes, prefetch=1 if disk else 2,
                             eval_batch_size=min(eval_batch_size, batch_size) if disk else eval_batch_size,
                             embeddings=embeddings, embedding_bytes=embed_bytes)


def _tier(store: Any, left: int) -> tuple[str, frozenset[str]]:
    """The feature tier and the arrays to hold in memory, given ``left`` bytes."""
    loaded = frozenset(store.in_memory_arrays)
    if "node/feat" in loaded:
        return "memory", loaded
    from graphpipe.store.arrays import array_nbytes, raw_chunk_files
    from graphpipe.store.reader import AUTO_MEMORY_FRACTION, LOADER_ARRAYS

    keys = frozenset(k for k in LOADER_ARRAYS if k in store.manifest["arrays"])
    if raw_chunk_files(store.path, "node/feat") is None:  # compressed: decoded into memory
        return "memory", loaded
    need = sum(array_nbytes(store.path, k) for k in keys)
    return ("memory", keys) if need <= AUTO_MEMORY_FRACTION * left else ("disk", loaded)


def _feature_rows(store: Any) -> tuple[int, int]:
    """``(bytes per row, rows)`` of the store's node features."""
    from graphpipe.store.arrays import array_nbytes

    total = array_nbytes(store.path, "node/feat")
    return max(1, total // max(1, store.num_nodes)), int(store.num_nodes)


def _full_inference_bytes(store: Any, model: Any) -> int:
    """What layer-wise full inference keeps: two ``(N, width)`` float32 matrices (the
    previous layer's outputs and the next's); one ``(N, out_dim)`` for a model without a graph."""
    out_dim = int(getattr(model, "out_dim", 0) or 0)
    if not getattr(model, "uses_graph", True):
        return 4 * store.num_nodes * out_dim
    width = max(int(getattr(model, "hidden", 0) or 0) * int(getattr(model, "heads", 1) or 1), out_dim)
    return 2 * 4 * store.num_nodes * width
