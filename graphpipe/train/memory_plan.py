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

None of these change a training step's result (the tier and the cache deliver the same
rows, prefetch only overlaps); ``evaluation="auto"`` is ``"full"`` whenever that fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CACHE_SHARE", "FULL_INFERENCE_SHARE", "STEP_RESERVE", "TrainingPlan", "plan_training"]

STEP_RESERVE = 448 << 20
"""Bytes set aside for the training steps beyond the process's baseline: measured on
the 8.4M-node benchmark store (batch 1024, fanouts [15, 10, 5], hidden 256, 1 GB cap),
the first step adds ~250 MB that stays (Numba's and torch's runtime state), the batches
in flight and the heap glibc keeps between trims (the trainer trims every
:data:`graphpipe.train.trainer.TRIM_EVERY` batches under a cap) up to ~150 MB more."""
CACHE_SHARE = 0.5
"""Share of the memory left after the reserve that the disk tier's CLOCK cache takes."""
FULL_INFERENCE_SHARE = 0.5
"""Share of the memory left after the reserve and the cache that full inference may take."""


@dataclass(frozen=True)
class TrainingPlan:
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
    if evaluation == "auto":
        evaluation = "full" if full_bytes <= FULL_INFERENCE_SHARE * left else "sampled"
    return TrainingPlan(usable=usable, limit=limit, tier=tier, in_memory=in_memory, cache_rows=cache_rows,
                        cache_bytes=cache_bytes, prefetch=1 if tier == "disk" else 2,
                        evaluation=evaluation, full_inference_bytes=full_bytes,
                        eval_batch_size=min(eval_batch_size, batch_size) if tier == "disk"
                        else eval_batch_size)


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


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit != "GB" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
