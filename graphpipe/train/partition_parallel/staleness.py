"""Bounded staleness: reuse the last exchanged halo for at most ``S`` epochs.

A layer's halo is exchanged afresh at epoch ``t`` unless its last fresh exchange was at
an epoch ``t0`` with ``t - t0 <= S``; then the rows received at ``t0`` are used again
(no bytes move). So the halo a layer uses is never more than ``S`` epochs old; ``S = 0``
exchanges every epoch (synchronous training, the default). The decision depends only on
``t`` and ``S``, the same on every rank, so ranks stay in step.

Gradients follow PipeGCN/Sylvie's asynchronous mode: on a stale epoch the owner adds the
halo gradient received at ``t0`` (cached by :class:`StaleHalo`) to the rows it sent, as
the stale embeddings stand in for the current ones. Evaluation always exchanges afresh
and touches neither cache nor clock.
"""

from __future__ import annotations

import torch

from .exchange import HaloExchange

__all__ = ["StaleHalo", "StalenessClock"]


class StalenessClock:
    """When each layer's halo is refreshed.

    >>> clock = StalenessClock(2)
    >>> [clock.fresh(0, t) for t in range(7)]
    [True, False, False, True, False, False, True]
    >>> clock.age(0, 8), clock.max_age
    (2, 2)
    """

    def __init__(self, staleness: int):
        if isinstance(staleness, bool) or not isinstance(staleness, int) or staleness < 0:
            raise ValueError(f"'staleness' must be an integer >= 0 (got {staleness!r})")
        self.staleness = staleness
        self.last: dict[int, int] = {}
        self.max_age = 0

    def fresh(self, layer: int, epoch: int) -> bool:
        """Whether ``layer`` exchanges at ``epoch`` (records the refresh if so)."""
        last = self.last.get(layer)
        if last is None or epoch - last > self.staleness or epoch < last:
            self.last[layer] = epoch
            return True
        self.max_age = max(self.max_age, epoch - last)
        return False

    def age(self, layer: int, epoch: int) -> int:
        """Epochs since ``layer``'s halo was exchanged."""
        return epoch - self.last[layer]


class StaleHalo:
    """The halo of every layer with bounded staleness, around a :class:`HaloExchange`.

    ``halo(h, layer, epoch)`` returns ``(n_halo, D)``: fresh (exchanged, differentiable) or
    the cached rows of the layer's last exchange (their gradient: the cached one).
    """

    def __init__(self, exchange: HaloExchange, staleness: int = 0):
        self.exchange = exchange
        self.clock = StalenessClock(staleness)
        self.rows: dict[int, torch.Tensor] = {}
        self.grads: dict[int, torch.Tensor] = {}
        self.ages: list[int] = []  # age of every halo used in training (for tests / logs)

    def halo(self, h: torch.Tensor, layer: int, epoch: int) -> torch.Tensor:
        if not torch.is_grad_enabled():  # evaluation: always fresh, caches untouched
            return self.exchange.exchange(h, layer)
        if self.clock.fresh(layer, epoch):
            self.ages.append(0)
            rows = self.exchange.exchange(h, layer, on_grad=self._keeper(layer))
            self.rows[layer] = rows.detach()
            self.grads.pop(layer, None)
            return rows
        self.ages.append(self.clock.age(layer, epoch))
        return _Stale.apply(h, self.rows[layer], self.grads.get(layer))

    def _keeper(self, layer: int):
        def keep(grad: torch.Tensor) -> None:
            self.grads[layer] = grad
        return keep


class _Stale(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, rows, grad):
        ctx.grad, ctx.shape, ctx.dtype = grad, h.shape, h.dtype
        return rows.clone()

    @staticmethod
    def backward(ctx, grad_rows):
        grad = ctx.grad if ctx.grad is not None else torch.zeros(ctx.shape, dtype=ctx.dtype)
        return grad, None, None
