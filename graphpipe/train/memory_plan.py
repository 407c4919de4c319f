"""What a training run may keep in memory, decided once from the memory this process may
use (:func:`graphpipe.memory.usable_memory`: free RAM bounded by its cgroup limit):
:func:`plan_training` returns a :class:`TrainingPlan`, and ``graphpipe train`` prints
its :meth:`TrainingPlan.describe` line.

The plan is made after the fixed costs are paid (the imports, the store opened with
``in_memory="auto"``, its topology checked, the labels read), so ``usable`` is what is
left for the run. From it:

* **features**: the loader's tier (:func:`graphpipe.loaders.feature_tier.choose_tier`):
  memory when the features fit, else the disk tier;
* **cache** (disk tier only): :data:`CACHE_SHARE` of what is left once
  :data:`STEP_RESERVE` (the training steps' own working memory) and the memory-mapped
  topology (the sampler reads it on every batch: its pages should stay cached) are set
  aside, at most the features' size;
* **prefetch**: batches prepared ahead; 1 on the disk tier (each batch in flight costs
  its rows and its sampled blocks), the loader's default 2 otherwise;
* **evaluation** (``"auto"``): layer-wise full-neighbour inference (``"full"``, exact)
  when its two ``(N, width)`` float32 matrices fit in :data:`FULL_INFERENCE_SHARE` of
  what is left after the reserve and the cache, else ``"sampled"`` (the training
  fanouts over each split's nodes).

None of these change a training step's result (the tier and the cache deliver the same
rows, prefetch only overlaps); ``evaluation="auto"`` is ``"full"`` whenever that fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

__all__ = ["CACHE_SHARE", "FULL_INFERENCE_SHARE", "STEP_RESERVE", "TrainingPlan", "plan_training"]

STEP_RESERVE = 384 << 20
"""Bytes set aside for the training steps beyond the process's baseline: measured on
the 8.4M-node benchmark store (batch 1024, fanouts [15, 10, 5], hidden 256), the first
step adds ~200 MB that stays (Numba's and torch's runtime state), and the batches in
flight plus the heap glibc keeps for reuse ~150 MB more."""
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
        cache_rows: rows of the disk tier's CLOCK cache (0 on the memory tier).
        cache_bytes: their bytes.
        prefetch: batches the training loader prepares ahead.
        evaluation: ``"full"``, ``"sampled"`` or ``"none"``.
        full_inference_bytes: what full inference would keep in memory.
    """

    usable: int
    limit: int | None
    tier: str
    cache_rows: int
    cache_bytes: int
    prefetch: int
    evaluation: str
    full_inference_bytes: int

    def loader_options(self) -> dict[str, Any]:
        """The training loader's keyword arguments this plan sets."""
        return {"prefetch": self.prefetch}

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
        parts.append(evaluation)
        room = f"usable {_size(self.usable)}"
        if self.limit is not None:
            room += f" (cgroup limit {_size(self.limit)})"
        return "; ".join(parts) + "; " + room


def plan_training(store: Any, model: Any, *, evaluation: str = "auto",
                  usable: int | None = None, limit: int | None = None) -> TrainingPlan:
    """The memory choices of training ``model`` on ``store`` (a GraphStore with features).

    Args:
        store: the :class:`graphpipe.store.GraphStore` the trainer will read.
        model: the model (its ``hidden``, ``heads``, ``out_dim`` size full inference).
        evaluation: ``"auto"`` (full when it fits, else sampled) or a fixed choice.
        usable: bytes this process may still use (default :func:`graphpipe.memory.usable_memory`).
        limit: the cgroup limit (default :func:`graphpipe.memory.cgroup_limit`).

    A small store in plenty of memory: everything in RAM, exact evaluation:

    >>> from types import SimpleNamespace
    >>> store = SimpleNamespace(num_nodes=1000, in_memory_arrays=["node/feat"], path=".")
    >>> model = SimpleNamespace(hidden=64, out_dim=10, uses_graph=True)
    >>> plan = plan_training(store, model, usable=8 << 30, limit=None)
    >>> plan.tier, plan.evaluation, plan.prefetch
    ('memory', 'full', 2)
    >>> plan.describe()
    'features: in memory; prefetch 2; evaluation: full; usable 8.0 GB'
    """
    from graphpipe.memory import cgroup_limit, usable_memory

    if evaluation not in ("auto", "full", "sampled", "none"):
        raise ValueError(f"'evaluation' must be auto, full, sampled or none (got {evaluation!r})")
    if usable is None:
        usable, limit = usable_memory(), cgroup_limit() if limit is None else limit
    tier = _tier(store)
    left = max(0, usable - STEP_RESERVE)
    cache_rows = cache_bytes = 0
    if tier == "disk":
        left = max(0, left - _mapped_topology_bytes(store))
        row_bytes, num_rows = _feature_rows(store)
        slot_table = 4 * num_rows  # the cache's slot of every row
        cache_rows = max(0, min(num_rows, int((CACHE_SHARE * left - slot_table) // row_bytes)))
        cache_bytes = cache_rows * row_bytes + (slot_table if cache_rows else 0)
        left = max(0, left - cache_bytes)
    full_bytes = _full_inference_bytes(store, model)
    if evaluation == "auto":
        evaluation = "full" if full_bytes <= FULL_INFERENCE_SHARE * left else "sampled"
    return TrainingPlan(usable=usable, limit=limit, tier=tier, cache_rows=cache_rows,
                        cache_bytes=cache_bytes, prefetch=1 if tier == "disk" else 2,
                        evaluation=evaluation, full_inference_bytes=full_bytes)


def _tier(store: Any) -> str:
    if "node/feat" in store.in_memory_arrays:
        return "memory"
    from graphpipe.loaders.feature_tier import choose_tier

    return choose_tier(SimpleNamespace(store=store), True)  # it reads only the data's store


def _feature_rows(store: Any) -> tuple[int, int]:
    """``(bytes per row, rows)`` of the store's node features."""
    from graphpipe.store.arrays import array_nbytes

    total = array_nbytes(store.path, "node/feat")
    return max(1, total // max(1, store.num_nodes)), int(store.num_nodes)


def _mapped_topology_bytes(store: Any) -> int:
    """Bytes of the CSC arrays that stay memory-mapped (not read into memory)."""
    from graphpipe.store.arrays import array_nbytes

    return sum(array_nbytes(store.path, key) for key in ("csc/indptr", "csc/indices")
               if key not in store.in_memory_arrays)


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
