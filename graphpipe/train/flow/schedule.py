"""The Auto Scheduler's microbatch rule and the GPipe stage split (UniTG, thesis §5.4-5.5).

- :func:`microbatch_count`: ``M = 16`` for ``N < 10^4`` nodes, ``8`` for
  ``10^4 <= N < 5·10^4``, ``4`` from ``5·10^4``, and ``M <= P`` (the thesis' "M ≤ P",
  implemented as ``min(base(N), P)`` [R: the digest's reading]); ``M`` never exceeds
  ``N``. A run may name ``M`` itself (``--microbatches``).
- :func:`stage_layers`: ``L`` layers in ``P`` stages of consecutive layers, ``L/P`` each
  (the first ``L mod P`` stages one more when ``P`` does not divide ``L``).
- :func:`gpipe_bubble`: the bubble fraction of F-then-B, ``(P-1)/(M+P-1)``.

>>> microbatch_count(4000, 2), microbatch_count(4000, 32), microbatch_count(20000, 32)
(2, 16, 8)
>>> microbatch_count(100000, 8), microbatch_count(3, 8)
(4, 3)
>>> stage_layers(8, 2), stage_layers(7, 3)
([range(0, 4), range(4, 8)], [range(0, 3), range(3, 5), range(5, 7)])
>>> round(gpipe_bubble(4, 4), 3), gpipe_bubble(1, 5)
(0.429, 0.0)
"""

from __future__ import annotations

__all__ = ["gpipe_bubble", "microbatch_count", "stage_layers"]


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"'{name}' must be a positive integer (got {value!r})")
    return value


def microbatch_count(num_nodes: int, stages: int) -> int:
    """``M`` for a graph of ``num_nodes`` nodes on ``stages`` pipeline stages (module docstring)."""
    _positive("num_nodes", num_nodes)
    _positive("stages", stages)
    base = 16 if num_nodes < 10_000 else 8 if num_nodes < 50_000 else 4
    return max(1, min(base, stages, num_nodes))


def stage_layers(num_layers: int, stages: int) -> list[range]:
    """The layers of each stage: ``stages`` runs of consecutive layer indices."""
    _positive("num_layers", num_layers)
    _positive("stages", stages)
    if stages > num_layers:
        raise ValueError(f"{stages} stages need at least {stages} layers (got {num_layers})")
    big, size = num_layers % stages, num_layers // stages
    bounds = [s * size + min(s, big) for s in range(stages + 1)]
    return [range(bounds[s], bounds[s + 1]) for s in range(stages)]


def gpipe_bubble(stages: int, microbatches: int) -> float:
    """Idle share of every stage under GPipe F-then-B with equal microbatch times."""
    _positive("stages", stages)
    _positive("microbatches", microbatches)
    return (stages - 1) / (microbatches + stages - 1)
